"""Repository repair's reply parsers: how a policy's reply becomes a call of one repair function.

`repair_text_v1` is the repository-repair protocol: one line "Action: <function> <arguments>",
with list_files [folder], read_file <path> [<start>-<end>], search <text>, run_tests [test ids],
submit, or replace <path> followed by two fenced blocks, the exact old text then the new text.
The first Action line decides; an unknown function -> invalid "unknown_function"; missing or
malformed arguments (no path, a bad line range, fewer than two blocks) -> "bad_arguments".

`repair_json_v1` is its function-calling view: one JSON call {"name": f, "arguments": {...}} with
the same six functions and their argument names (path, start, end, text, old, new, tests), found
by envs.replies.first_call (the first object with a "name" key).
"""

from __future__ import annotations

import re
from collections.abc import Callable

from envs.base import CallAction, ToolCall
from envs.replies import COMMAND_LINE, ParsedAction, arguments, first_call

_REPAIR_FUNCTIONS = ("list_files", "read_file", "search", "replace", "run_tests", "submit")
_RANGE = re.compile(r"^(\d+)(?:\s*-\s*(\d+))?$")
_FENCE = re.compile(r"```[^\n]*\n(.*?)```", re.DOTALL)


def _repair_call(name: str, kwargs: dict) -> ParsedAction:
    return ParsedAction("call", CallAction((ToolCall(name, (), kwargs),)))


def parse_repair_text(text: str) -> ParsedAction:
    match = COMMAND_LINE.search(text or "")
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
    call = first_call(text or "")
    if call is None:
        return ParsedAction("invalid", error="no_function_call")
    if call.get("name") not in _REPAIR_FUNCTIONS:
        return ParsedAction("invalid", error="unknown_function")
    args = arguments(call)
    if args is None:
        return ParsedAction("invalid", error="bad_arguments")
    return _repair_call(call["name"], args)


# protocol -> parser(text, accept_scalar_answer); repair has no final answer, so the flag is unused
PROTOCOLS: dict[str, Callable[[str, bool], ParsedAction]] = {
    "repair_text_v1": lambda text, _scalar: parse_repair_text(text),
    "repair_json_v1": lambda text, _scalar: parse_repair_json(text),
}
