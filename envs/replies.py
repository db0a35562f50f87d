"""What every benchmark's reply parsers share: the parsed action they return and the helpers that find
a JSON function call in a reply.

A benchmark's parsers live in envs/<name>/protocol.py, whose PROTOCOLS maps each protocol name to a
parser(text, accept_scalar_answer) -> ParsedAction; harness_pool/tool_view.py guards every reply
before it reaches one (length, surrogates, literal bounds).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from envs.base import Action
from envs.literals import LiteralLimit, bounded_int, literals_problem

MAX_REPLY_CHARS = 200_000  # far above any reply a policy samples (8,192 tokens at most); bounds all parsing
MAX_JSON_STARTS = 256  # braces a JSON view tries to decode from, per reply

# a line "Action: <rest>" (any case; list markers or a quote sign before it are allowed)
COMMAND_LINE = re.compile(r"^[ \t>*]*action\s*:[ \t]*(.*)$", re.IGNORECASE | re.MULTILINE)


@dataclass(frozen=True)
class ParsedAction:
    kind: str  # "sql", "answer", "command", "call", "reply" or "invalid"
    action: Action | None = None
    error: str | None = None  # why the reply is invalid (a short code)
    detail: str | None = None  # for a broken bound: one line saying what was wrong (shown to the policy)


def invalid(error: str, detail: str) -> ParsedAction:
    return ParsedAction("invalid", error=error, detail=detail)


DECODER = json.JSONDecoder(parse_int=bounded_int)


def first_call(text: str) -> dict | None:
    """The first decodable JSON object (by position of its opening brace) with a "name" key.

    Decoding from each brace rather than matching braces with a regex copes with nesting,
    braces inside strings and prose around the call; at most MAX_JSON_STARTS braces are tried, which
    bounds the quadratic worst case of a hostile reply (a decode, or its error, costs up to the
    reply's length)."""
    start, tries = text.find("{"), 0
    while start != -1 and tries < MAX_JSON_STARTS:
        tries += 1
        try:
            value, _ = DECODER.raw_decode(text, start)
        except (ValueError, RecursionError):
            value = None
        if isinstance(value, dict) and "name" in value:
            return value
        start = text.find("{", start + 1)
    return None


def all_calls(text: str, limit: int) -> list[dict]:
    """Every top-level JSON object with a "name" key, in reading order (nested ones are skipped); as
    in first_call, at most MAX_JSON_STARTS braces are tried, and no more than `limit` calls kept."""
    calls, start, tries = [], text.find("{"), 0
    while start != -1 and tries < MAX_JSON_STARTS and len(calls) < limit:
        tries += 1
        try:
            value, end = DECODER.raw_decode(text, start)
        except (ValueError, RecursionError):
            start = text.find("{", start + 1)
            continue
        if isinstance(value, dict) and "name" in value:
            calls.append(value)
            start = text.find("{", end)
        else:
            start = text.find("{", start + 1)
    return calls


def decode_json(raw: str) -> tuple[object, bool]:
    try:
        return DECODER.decode(raw), True
    except (ValueError, RecursionError):
        return None, False


def arguments(call: dict) -> dict | None:
    """A call's "arguments": an object, or a string holding one (as some chat APIs encode it); else None.
    LiteralLimit when its names and values are over the literal bounds."""
    args = call.get("arguments", {})
    if isinstance(args, str):
        args, ok = decode_json(args)
    if not isinstance(args, dict):
        return None
    problem = literals_problem([*args, *args.values()])
    if problem is not None:
        raise LiteralLimit(f"the arguments are not allowed: {problem}")
    return args
