"""BFCL's reply parsers: how a policy's reply becomes function calls or a reply to the user.

`bfcl_text_v1` is the multi-turn function-calling protocol in text: "Action: call" followed by the
calls in Python call syntax (in a ```python block or bare), e.g. [cd(folder='docs'), ls()]; or
"Action: reply" followed by a message to the user, which ends the agent's turn. Calls are parsed
with `ast` and literal arguments only (envs/bfcl/calls.py), never evaluated; unparseable calls ->
invalid "bad_call"; no Action line -> invalid "no_action".

`bfcl_json_v1` is its JSON view: one or more objects {"name": f, "arguments": {...}} in reading
order (nested objects are skipped, not read as calls); the name "reply" with {"text": ...} is the
reply that ends the turn. No call -> invalid "no_function_call"; arguments that are not an object ->
"bad_arguments"; a function or argument name that is not an identifier -> "bad_call" (the API process
runs the call's text, so `{"folder='x') #": 1}` would run a different call than the one recorded).
"""

from __future__ import annotations

import re
from collections.abc import Callable

from envs.base import CallAction, ReplyAction, ToolCall
from envs.bfcl.calls import MAX_CALLS, CallError, CallLimit, check_call, parse_calls
from envs.replies import ParsedAction, all_calls, arguments, invalid

_BFCL_ACTION = re.compile(r"action\s*:\s*(call|reply)\b", re.IGNORECASE)
_CODE_BLOCK = re.compile(r"```[ \t]*(?:python|py|tool_code)?[ \t]*\n?(.*?)```", re.IGNORECASE | re.DOTALL)


def parse_bfcl_text(text: str) -> ParsedAction:
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
        return invalid("bad_literal", str(exc))
    except CallError:
        return ParsedAction("invalid", error="bad_call")
    return ParsedAction("call", CallAction(tuple(calls)))


def parse_bfcl_json(text: str) -> ParsedAction:
    calls = all_calls(text or "", MAX_CALLS + 1)
    if not calls:
        return ParsedAction("invalid", error="no_function_call")
    if len(calls) > MAX_CALLS:
        return invalid("bad_call", f"more than {MAX_CALLS} calls in one reply")
    out = []
    for call in calls:
        args = arguments(call)
        if args is None or not isinstance(call["name"], str):
            return ParsedAction("invalid", error="bad_arguments")
        if call["name"] == "reply":
            return ParsedAction("reply", ReplyAction(str(args.get("text", ""))))
        try:
            check_call(ToolCall(call["name"], (), args))
        except CallLimit as exc:
            return invalid("bad_literal", str(exc))
        except CallError as exc:
            return invalid("bad_call", str(exc))
        out.append(ToolCall(call["name"], (), args))
    return ParsedAction("call", CallAction(tuple(out)))


# protocol -> parser(text, accept_scalar_answer); BFCL has no final answer, so the flag is unused
PROTOCOLS: dict[str, Callable[[str, bool], ParsedAction]] = {
    "bfcl_text_v1": lambda text, _scalar: parse_bfcl_text(text),
    "bfcl_json_v1": lambda text, _scalar: parse_bfcl_json(text),
}
