"""TextWorld's behaviour detectors and failure kinds (diagnosis and RQ4).

Commands are compared lower-cased with whitespace collapsed:
- looked_first: the first command only observes (look, examine, inventory);
- repeated_command: the same command typed twice in a row (an agent stuck in a loop);
- inadmissible_command: a command the game did not offer at that moment (a wrong verb, a
  missing object, a blocked exit);
- explored: moved between rooms (a "go ..." command that the game accepted).
"""

from __future__ import annotations

from envs.base import CommandAction, Verdict

_OBSERVE = ("look", "examine", "inventory", "inv", "x ")


def _commands(steps) -> list[tuple[str, bool]]:
    """(normalised command, accepted) per command step."""
    return [
        (" ".join(action.command.lower().split()), result.error is None)
        for action, result in steps
        if isinstance(action, CommandAction)
    ]


# Every tag behaviour_tags can give, in the order reports list them.
TAGS = ("looked_first", "explored", "repeated_command", "inadmissible_command")


def behaviour_tags(steps, finished: bool) -> list[str]:
    commands = _commands(steps)
    tags = []
    if commands and commands[0][0].startswith(_OBSERVE):
        tags.append("looked_first")
    if any(a[0] == b[0] for a, b in zip(commands, commands[1:])):
        tags.append("repeated_command")
    if any(not accepted for _, accepted in commands):
        tags.append("inadmissible_command")
    if any(command.startswith("go ") and accepted for command, accepted in commands):
        tags.append("explored")
    return tags


def failure_kind(verdict: Verdict, end_reason: str, steps) -> str | None:
    """format_error / context_overflow first; then lost (the game ended without the win);
    then, out of rounds, stuck_invalid when the last command was not admissible, else round_limit."""
    if verdict.success:
        return None
    if end_reason in ("format_error", "context_overflow"):
        return end_reason
    if verdict.details.get("lost"):
        return "lost"
    commands = _commands(steps)
    if commands and not commands[-1][1]:
        return "stuck_invalid"
    return "round_limit"
