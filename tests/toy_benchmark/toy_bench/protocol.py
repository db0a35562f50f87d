"""toy_text_v1: the reply ends with a line 'Action: <command>' (the first such line decides)."""

from __future__ import annotations

import re

from envs.base import CommandAction
from envs.replies import ParsedAction, invalid

_LINE = re.compile(r"^\s*action\s*:[ \t]*(.*)$", re.IGNORECASE | re.MULTILINE)


def parse_text(text: str, _accept_scalar: bool = False) -> ParsedAction:
    found = _LINE.search(text)
    if not found:
        return invalid("no_action", "no line 'Action: <command>'")
    command = found.group(1).strip()[:200]
    if not command:
        return invalid("empty_command", "the Action line holds no command")
    return ParsedAction("command", CommandAction(command))


PROTOCOLS = {"toy_text_v1": parse_text}
