"""Tool views: how a policy's reply text becomes an environment action.

`dbbench_text_v1` is DBBench's text protocol: a turn either runs SQL ("Action: Operation" then a
```sql block) or answers ("Action: Answer" then "Final Answer: [...]"). Our parsing rules:
- the first "Action:" line decides the kind (case-insensitive); none -> invalid;
- an operation runs the first fenced block after it (several blocks: the first; an empty or
  missing block is invalid);
- an answer must be a list literal (JSON or Python syntax); a scalar is invalid unless the
  harness sets accept_scalar_answer, which wraps it as a one-element list.

`dbbench_json_v1` is a function-calling view of the same two actions: the reply holds one JSON
object {"name": ..., "arguments": {...}}, bare or inside a ```json block, calling
execute_sql(sql) or submit_answer(answer). Our parsing rules:
- JSON is decoded from every "{" in reading order (so surrounding prose and fences do not
  matter); the first object that has a "name" key is the call and decides, later ones are
  ignored; an object nested in a wrapper (e.g. {"function": {"name": ...}}) counts, since its
  brace is scanned too; no such object -> invalid "no_function_call";
- a name other than the two functions -> invalid "unknown_function";
- "arguments" must be an object, or a string holding one (as some chat APIs encode it);
  anything else -> invalid "bad_arguments";
- execute_sql needs a non-empty string "sql" (else invalid "empty_sql");
- submit_answer needs an "answer" key (else invalid "missing_answer"); a JSON list is the
  answer; any other value is invalid "answer_not_list" unless accept_scalar_answer, which
  wraps it as a one-element list, as in the text view.

`textworld_text_v1` is TextWorld's text protocol: the reply ends with one line
"Action: <command>" (e.g. "Action: take key from box"). Our parsing rules: the first line that
starts with "Action:" (case-insensitive) holds the command; surrounding quotes and backticks
and a trailing full stop are dropped; no such line -> invalid "no_action", an empty command ->
invalid "empty_command".

`textworld_json_v1` is its function-calling view: one JSON call {"name": "act", "arguments":
{"command": ...}}, found as in dbbench_json_v1 (first object with a "name" key; an unknown name
-> "unknown_function", no non-empty string command -> "empty_command").

`bfcl_text_v1` is the multi-turn function-calling protocol in text: "Action: call" followed by the
calls in Python call syntax (in a ```python block or bare), e.g. [cd(folder='docs'), ls()]; or
"Action: reply" followed by a message to the user, which ends the agent's turn. Calls are parsed
with `ast` and literal arguments only (envs/bfcl/calls.py), never evaluated; unparseable calls ->
invalid "bad_call"; no Action line -> invalid "no_action".

`repair_text_v1` is the repository-repair protocol: one line "Action: <function> <arguments>",
with list_files [folder], read_file <path> [<start>-<end>], search <text>, run_tests [test ids],
submit, or replace <path> followed by two fenced blocks, the exact old text then the new text.
The first Action line decides; an unknown function -> invalid "unknown_function"; missing or
malformed arguments (no path, a bad line range, fewer than two blocks) -> "bad_arguments".

`repair_json_v1` is its function-calling view: one JSON call {"name": f, "arguments": {...}} with
the same six functions and their argument names (path, start, end, text, old, new, tests), found
as in dbbench_json_v1.

`bfcl_json_v1` is its JSON view: one or more objects {"name": f, "arguments": {...}} in reading
order (nested objects are skipped, not read as calls); the name "reply" with {"text": ...} is the
reply that ends the turn. No call -> invalid "no_function_call"; arguments that are not an object ->
"bad_arguments"; a function or argument name that is not an identifier -> "bad_call" (the API process
runs the call's text, so `{"folder='x') #": 1}` would run a different call than the one recorded).

Every view, before anything recurses over a reply: a reply over MAX_REPLY_CHARS -> invalid
"reply_too_long"; a lone surrogate in the reply -> "bad_text"; a final answer or call argument over
the literal bounds of envs/literals.py (nested deeper than 20, an integer over 1,000 digits, more
than 10,000 values or 100,000 characters) -> "bad_literal". These set `detail`, one line saying what
was wrong, which the rollout shows the policy after the harness's invalid_message.
"""

from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass

from envs.base import Action, AnswerAction, CallAction, CommandAction, ReplyAction, SqlAction, ToolCall
from envs.literals import MAX_CHARS, LiteralLimit, bounded_int, check_literal, has_surrogate, literals_problem

MAX_REPLY_CHARS = 200_000  # far above any reply a policy samples (8,192 tokens at most); bounds all parsing
MAX_JSON_STARTS = 256  # braces a JSON view tries to decode from, per reply

_ACTION = re.compile(r"action\s*:\s*(operation|answer)", re.IGNORECASE)
_SQL_BLOCK = re.compile(r"```[ \t]*(?:sql|mysql|sqlite)?[ \t]*\n?(.*?)```", re.IGNORECASE | re.DOTALL)
_FINAL = re.compile(r"final\s+answer\s*:\s*(.*)", re.IGNORECASE | re.DOTALL)


@dataclass(frozen=True)
class ParsedAction:
    kind: str  # "sql", "answer", "command", "call", "reply" or "invalid"
    action: Action | None = None
    error: str | None = None  # why the reply is invalid (a short code)
    detail: str | None = None  # for the bounds above: one line saying what was wrong (shown to the policy)


def _invalid(error: str, detail: str) -> ParsedAction:
    return ParsedAction("invalid", error=error, detail=detail)


def parse_dbbench_text(text: str, accept_scalar_answer: bool = False) -> ParsedAction:
    match = _ACTION.search(text or "")
    if match is None:
        return ParsedAction("invalid", error="no_action")
    rest = text[match.end() :]
    if match.group(1).lower() == "operation":
        block = _SQL_BLOCK.search(rest)
        if block is None:
            return ParsedAction("invalid", error="no_sql_block")
        sql = block.group(1).strip()
        if not sql:
            return ParsedAction("invalid", error="empty_sql")
        return ParsedAction("sql", SqlAction(sql))
    final = _FINAL.search(rest)
    if final is None:
        return ParsedAction("invalid", error="no_final_answer")
    return _parse_answer(final.group(1).strip(), accept_scalar_answer)


def _parse_answer(raw: str, accept_scalar: bool) -> ParsedAction:
    if len(raw) > MAX_CHARS:
        return _invalid("bad_literal", f"the final answer is longer than {MAX_CHARS:,} characters")
    value, ok = _literal(raw)
    if not ok and raw.startswith("["):
        end = raw.rfind("]")
        value, ok = _literal(raw[: end + 1]) if end > 0 else (None, False)
    if not ok:
        first_line = raw.splitlines()[0].strip() if raw else ""
        if accept_scalar and first_line:
            return ParsedAction("answer", AnswerAction([first_line]))
        return ParsedAction("invalid", error="unparseable_answer")
    check_literal(value, "the final answer")
    if isinstance(value, (list, tuple)):
        return ParsedAction("answer", AnswerAction(list(value)))
    if accept_scalar:
        return ParsedAction("answer", AnswerAction([value]))
    return ParsedAction("invalid", error="answer_not_list")


def _literal(raw: str) -> tuple[object, bool]:
    """The value of a JSON or Python literal; LiteralLimit for a JSON integer over the digit bound
    (Python's own parser refuses one over 4,300 digits as a syntax error)."""
    for loader in (_DECODER.decode, ast.literal_eval):
        try:
            return loader(raw), True
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            continue
    return None, False


def parse_dbbench_json(text: str, accept_scalar_answer: bool = False) -> ParsedAction:
    call = _first_call(text or "")
    if call is None:
        return ParsedAction("invalid", error="no_function_call")
    name, args = call.get("name"), _arguments(call)
    if name not in ("execute_sql", "submit_answer"):
        return ParsedAction("invalid", error="unknown_function")
    if args is None:
        return ParsedAction("invalid", error="bad_arguments")
    if name == "execute_sql":
        sql = args.get("sql")
        if not isinstance(sql, str) or not sql.strip():
            return ParsedAction("invalid", error="empty_sql")
        return ParsedAction("sql", SqlAction(sql.strip()))
    if "answer" not in args:
        return ParsedAction("invalid", error="missing_answer")
    value = args["answer"]
    if isinstance(value, list):
        return ParsedAction("answer", AnswerAction(value))
    if accept_scalar_answer:
        return ParsedAction("answer", AnswerAction([value]))
    return ParsedAction("invalid", error="answer_not_list")


_DECODER = json.JSONDecoder(parse_int=bounded_int)


def _first_call(text: str) -> dict | None:
    """The first decodable JSON object (by position of its opening brace) with a "name" key.

    Decoding from each brace rather than matching braces with a regex copes with nesting,
    braces inside strings and prose around the call; at most MAX_JSON_STARTS braces are tried, which
    bounds the quadratic worst case of a hostile reply (a decode, or its error, costs up to the
    reply's length)."""
    start, tries = text.find("{"), 0
    while start != -1 and tries < MAX_JSON_STARTS:
        tries += 1
        try:
            value, _ = _DECODER.raw_decode(text, start)
        except (ValueError, RecursionError):
            value = None
        if isinstance(value, dict) and "name" in value:
            return value
        start = text.find("{", start + 1)
    return None


def _json(raw: str) -> tuple[object, bool]:
    try:
        return _DECODER.decode(raw), True
    except (ValueError, RecursionError):
        return None, False


def _arguments(call: dict) -> dict | None:
    """A call's "arguments": an object, or a string holding one (as some chat APIs encode it); else None.
    LiteralLimit when its names and values are over the literal bounds."""
    args = call.get("arguments", {})
    if isinstance(args, str):
        args, ok = _json(args)
    if not isinstance(args, dict):
        return None
    problem = literals_problem([*args, *args.values()])
    if problem is not None:
        raise LiteralLimit(f"the arguments are not allowed: {problem}")
    return args


_COMMAND_LINE = re.compile(r"^[ \t>*]*action\s*:[ \t]*(.*)$", re.IGNORECASE | re.MULTILINE)


def _command(raw: str) -> ParsedAction:
    command = " ".join(raw.strip().strip("`'\". ").split())
    if not command:
        return ParsedAction("invalid", error="empty_command")
    return ParsedAction("command", CommandAction(command))


def parse_textworld_text(text: str) -> ParsedAction:
    match = _COMMAND_LINE.search(text or "")
    if match is None:
        return ParsedAction("invalid", error="no_action")
    return _command(match.group(1))


def parse_textworld_json(text: str) -> ParsedAction:
    call = _first_call(text or "")
    if call is None:
        return ParsedAction("invalid", error="no_function_call")
    if call.get("name") != "act":
        return ParsedAction("invalid", error="unknown_function")
    args = _arguments(call)
    if args is None:
        return ParsedAction("invalid", error="bad_arguments")
    command = args.get("command")
    if not isinstance(command, str):
        return ParsedAction("invalid", error="empty_command")
    return _command(command)


_BFCL_ACTION = re.compile(r"action\s*:\s*(call|reply)\b", re.IGNORECASE)
_CODE_BLOCK = re.compile(r"```[ \t]*(?:python|py|tool_code)?[ \t]*\n?(.*?)```", re.IGNORECASE | re.DOTALL)


def parse_bfcl_text(text: str) -> ParsedAction:
    from envs.bfcl.calls import CallError, CallLimit, parse_calls

    match = _BFCL_ACTION.search(text or "")
    if match is None:
        return ParsedAction("invalid", error="no_action")
    rest = text[match.end() :]
    if match.group(1).lower() == "reply":
        return ParsedAction("reply", ReplyAction(rest.strip()))
    block = _CODE_BLOCK.search(rest)
    try:
        calls = parse_calls(block.group(1) if block else rest)
    except CallLimit as exc:
        return _invalid("bad_literal", str(exc))
    except CallError:
        return ParsedAction("invalid", error="bad_call")
    return ParsedAction("call", CallAction(tuple(calls)))


def _all_calls(text: str, limit: int) -> list[dict]:
    """Every top-level JSON object with a "name" key, in reading order (nested ones are skipped); as
    in _first_call, at most MAX_JSON_STARTS braces are tried, and no more than `limit` calls kept."""
    calls, start, tries = [], text.find("{"), 0
    while start != -1 and tries < MAX_JSON_STARTS and len(calls) < limit:
        tries += 1
        try:
            value, end = _DECODER.raw_decode(text, start)
        except (ValueError, RecursionError):
            start = text.find("{", start + 1)
            continue
        if isinstance(value, dict) and "name" in value:
            calls.append(value)
            start = text.find("{", end)
        else:
            start = text.find("{", start + 1)
    return calls


def parse_bfcl_json(text: str) -> ParsedAction:
    from envs.bfcl.calls import MAX_CALLS, CallError, CallLimit, check_call

    calls = _all_calls(text or "", MAX_CALLS + 1)
    if not calls:
        return ParsedAction("invalid", error="no_function_call")
    if len(calls) > MAX_CALLS:
        return _invalid("bad_call", f"more than {MAX_CALLS} calls in one reply")
    out = []
    for call in calls:
        args = _arguments(call)
        if args is None or not isinstance(call["name"], str):
            return ParsedAction("invalid", error="bad_arguments")
        if call["name"] == "reply":
            return ParsedAction("reply", ReplyAction(str(args.get("text", ""))))
        try:
            check_call(ToolCall(call["name"], (), args))
        except CallLimit as exc:
            return _invalid("bad_literal", str(exc))
        except CallError as exc:
            return _invalid("bad_call", str(exc))
        out.append(ToolCall(call["name"], (), args))
    return ParsedAction("call", CallAction(tuple(out)))


_REPAIR_FUNCTIONS = ("list_files", "read_file", "search", "replace", "run_tests", "submit")
_RANGE = re.compile(r"^(\d+)(?:\s*-\s*(\d+))?$")
_FENCE = re.compile(r"```[^\n]*\n(.*?)```", re.DOTALL)


def _repair_call(name: str, kwargs: dict) -> ParsedAction:
    return ParsedAction("call", CallAction((ToolCall(name, (), kwargs),)))


def parse_repair_text(text: str) -> ParsedAction:
    match = _COMMAND_LINE.search(text or "")
    if match is None:
        return ParsedAction("invalid", error="no_action")
    words = match.group(1).strip().strip("`").split(maxsplit=1)
    if not words:
        return ParsedAction("invalid", error="unknown_function")
    name, rest = words[0].lower().rstrip(":"), (words[1].strip() if len(words) > 1 else "")
    if name not in _REPAIR_FUNCTIONS:
        return ParsedAction("invalid", error="unknown_function")
    if name == "submit":
        return _repair_call(name, {})
    if name == "list_files":
        return _repair_call(name, {"path": rest} if rest else {})
    if name == "run_tests":
        return _repair_call(name, {"tests": rest.split()} if rest else {})
    if name == "search":
        return _repair_call(name, {"text": rest}) if rest else ParsedAction("invalid", error="bad_arguments")
    parts = rest.split()
    if not parts:
        return ParsedAction("invalid", error="bad_arguments")
    if name == "read_file":
        kwargs: dict = {"path": parts[0]}
        if len(parts) > 1:
            lines = _RANGE.match("".join(parts[1:]))
            if lines is None:
                return ParsedAction("invalid", error="bad_arguments")
            kwargs["start"] = int(lines.group(1))
            if lines.group(2):
                kwargs["end"] = int(lines.group(2))
        return _repair_call(name, kwargs)
    blocks = _FENCE.findall(text[match.end() :])
    if len(parts) != 1 or len(blocks) < 2:
        return ParsedAction("invalid", error="bad_arguments")
    return _repair_call(name, {"path": parts[0], "old": blocks[0], "new": blocks[1]})


def parse_repair_json(text: str) -> ParsedAction:
    call = _first_call(text or "")
    if call is None:
        return ParsedAction("invalid", error="no_function_call")
    if call.get("name") not in _REPAIR_FUNCTIONS:
        return ParsedAction("invalid", error="unknown_function")
    args = _arguments(call)
    if args is None:
        return ParsedAction("invalid", error="bad_arguments")
    return _repair_call(call["name"], args)


# protocol -> parser(text, accept_scalar_answer); a benchmark's protocols are named <benchmark>_<view>_v<n>
PARSERS = {
    "dbbench_text_v1": parse_dbbench_text,
    "dbbench_json_v1": parse_dbbench_json,
    "textworld_text_v1": lambda text, _scalar: parse_textworld_text(text),
    "textworld_json_v1": lambda text, _scalar: parse_textworld_json(text),
    "bfcl_text_v1": lambda text, _scalar: parse_bfcl_text(text),
    "bfcl_json_v1": lambda text, _scalar: parse_bfcl_json(text),
    "repair_text_v1": lambda text, _scalar: parse_repair_text(text),
    "repair_json_v1": lambda text, _scalar: parse_repair_json(text),
}


def parse_action(protocol: str, text: str, accept_scalar_answer: bool = False) -> ParsedAction:
    """The action a reply asks for, or an invalid one; never raises for any text."""
    if protocol not in PARSERS:
        raise ValueError(f"unknown tool-view protocol '{protocol}'")
    text = text or ""
    if len(text) > MAX_REPLY_CHARS:
        return _invalid("reply_too_long", f"the reply is longer than {MAX_REPLY_CHARS:,} characters")
    if has_surrogate(text):
        return _invalid("bad_text", "the reply holds a lone surrogate (text that is not valid Unicode)")
    try:
        return PARSERS[protocol](text, accept_scalar_answer)
    except LiteralLimit as exc:
        return _invalid("bad_literal", str(exc))
