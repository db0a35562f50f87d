"""TextWorld's diagnosis rules and offline edit operators (DBBench's are diagnosis.py / operators.py).

Root causes, most specific first, read from what the trajectory shows:
  context_overflow; format_error (a reply without an "Action:" line or a valid call);
  lost (the game ended without the win); at the round limit: stuck_invalid (the last commands
  were refused by the game), repeated_command (the same command again and again), no_progress
  (commands accepted but never reaching the goal).
"""

from __future__ import annotations

from harness_pool.edits import recovery_edit, skill_edit

CAUSES: dict[str, str] = {
    "context_overflow": "the conversation outgrew the model's context",
    "format_error": "a reply broke the command protocol (no 'Action: <command>' line)",
    "lost": "a command ended the game without reaching the goal",
    "stuck_invalid": "kept typing commands the game did not accept",
    "repeated_command": "typed the same command again and again",
    "no_progress": "the commands were accepted, but the goal was not reached in time",
}

FAMILIES: dict[str, tuple[str, ...]] = {
    "protocol": ("format_error", "context_overflow"),
    "grounding": ("stuck_invalid", "repeated_command"),
    "planning": ("no_progress", "lost"),
}

FORMAT_REMINDER = "Reminder: end every reply with one line 'Action: <command>', e.g. 'Action: open chest'."


def root_cause(result, task=None) -> str | None:
    """The single root cause of a failed TextWorld rollout (a rl.rollout.RolloutResult); None for a success."""
    if result.verdict.success:
        return None
    if result.end_reason in ("context_overflow", "format_error"):
        return result.end_reason
    if result.verdict.details.get("lost"):
        return "lost"
    commands = [(t.action or {}).get("command", "") for t in result.turns if t.action_kind == "command"]
    parse_errors = [t for t in result.turns if t.action_kind == "invalid"]
    if len(parse_errors) > len(commands):
        return "format_error"
    if result.failure_kind == "stuck_invalid":
        return "stuck_invalid"
    lowered = [" ".join(c.lower().split()) for c in commands]
    if len(lowered) >= 3 and max(lowered.count(c) for c in lowered) * 2 > len(lowered):
        return "repeated_command"  # one command makes up more than half of them
    return "no_progress"


_UNSTICK = """def hook(ctx, nb):
    if ctx["last_error"] and ctx["round"] >= 2:
        return {"inject": "That did not work. Do not type it again; look, then use the exact names you see."}
    return None
"""

# cause -> variants; each variant is a list of edit dicts (harness_pool/patch.py formats)
OPERATORS: dict[str, list[list[dict]]] = {
    "format_error": [
        [{"op": "set_tool_view", "on_invalid": "warn", "invalid_message": FORMAT_REMINDER}],
        [recovery_edit(FORMAT_REMINDER)],
        [skill_edit("protocol", "Every reply ends with exactly one line: 'Action: <command>'.")],
    ],
    "context_overflow": [
        [{"op": "set_context", "max_observation_chars": 400}],
        [{"op": "set_context", "history_window": 4}],
        [{"op": "set_context", "max_observation_chars": 300, "history_window": 6}],
    ],
    "lost": [
        [skill_edit("careful", "Before a command that uses up or destroys something, check the goal asks for it.")],
        [{"op": "set_guidance", "text": "Do only what the goal asks; do not eat, drop or break anything else."}],
        [{"op": "add_hint", "at": "on_init", "message": "Your goal: {goal}. Do nothing the goal does not ask for."}],
    ],
    "stuck_invalid": [
        [
            recovery_edit(
                "The game did not accept that command. Use the exact names of things and exits in the last "
                "description, or type 'look'.",
                last_step_error=True,
            )
        ],
        [
            skill_edit(
                "names", "Use object and exit names exactly as the game writes them: 'take red apple', not 'get it'."
            )
        ],
        [{"op": "add_code_hook", "hook": {"at": "after_step", "name": "unstick", "source": _UNSTICK}}],
    ],
    "repeated_command": [
        [skill_edit("no_repeat", "A command that did nothing will do nothing again: try a different one.")],
        [
            recovery_edit(
                "You already tried that. Try a different command that gets you closer to the goal.", round_at_least=3
            )
        ],
        [recovery_edit("Your goal: {goal}")],
    ],
    "no_progress": [
        [recovery_edit("Your goal: {goal}")],
        [
            skill_edit(
                "plan",
                "Split the goal into steps (go to the room, open the container, take, put) and do them in order.",
            )
        ],
        [{"op": "set_guidance", "text": "If the item is not in this room, go through an exit to look for it."}],
    ],
}
