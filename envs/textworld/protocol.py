"""TextWorld's reply parsers: how a policy's reply becomes a game command.

`textworld_text_v1` is TextWorld's text protocol: the reply ends with one line
"Action: <command>" (e.g. "Action: take key from box"). Our parsing rules: the first line that
starts with "Action:" (case-insensitive) holds the command; surrounding quotes and backticks
and a trailing full stop are dropped; no such line -> invalid "no_action", an empty command ->
invalid "empty_command".

`textworld_json_v1` is its function-calling view: one JSON call {"name": "act", "arguments":
{"command": ...}}, found by envs.replies.first_call (first object with a "name" key; an unknown name
-> "unknown_function", no non-empty string command -> "empty_command").
"""

from __future__ import annotations

from collections.abc import Callable

from envs.base import CommandAction
from envs.replies import COMMAND_LINE, ParsedAction, arguments, first_call


def _command(raw: str) -> ParsedAction:
    command = " ".join(raw.strip().strip("`'\". ").split())
    if not command:
        return ParsedAction("invalid", error="empty_command")
    return ParsedAction("command", CommandAction(command))


def parse_textworld_text(text: str) -> ParsedAction:
    match = COMMAND_LINE.search(text or "")
    if match is None:
        return ParsedAction("invalid", error="no_action")
    return _command(match.group(1))


def parse_textworld_json(text: str) -> ParsedAction:
    call = first_call(text or "")
    if call is None:
        return ParsedAction("invalid", error="no_function_call")
    if call.get("name") != "act":
        return ParsedAction("invalid", error="unknown_function")
    args = arguments(call)
    if args is None:
        return ParsedAction("invalid", error="bad_arguments")
    command = args.get("command")
    if not isinstance(command, str):
        return ParsedAction("invalid", error="empty_command")
    return _command(command)


# protocol -> parser(text, accept_scalar_answer); TextWorld has no final answer, so the flag is unused
PROTOCOLS: dict[str, Callable[[str, bool], ParsedAction]] = {
    "textworld_text_v1": lambda text, _scalar: parse_textworld_text(text),
    "textworld_json_v1": lambda text, _scalar: parse_textworld_json(text),
}
