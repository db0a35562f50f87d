"""Diagnosis causes and offline operators of the toy benchmark."""

from __future__ import annotations

from harness_pool.edits import recovery_edit, skill_edit

CAUSES = {
    "format_error": "a reply had no 'Action: <command>' line",
    "wrong_command": "typed a command other than 'say <word>'",
    "wrong_word": "said a word other than the task's",
}
FAMILIES = {"protocol": ("format_error", "wrong_command"), "answer": ("wrong_word",)}
FORMAT_REMINDER = "Reminder: end your reply with one line 'Action: say <word>'."
OPERATORS = {
    "format_error": [[recovery_edit(FORMAT_REMINDER)], [skill_edit("protocol", FORMAT_REMINDER)],
                     [{"op": "set_tool_view", "on_invalid": "warn", "invalid_message": FORMAT_REMINDER}]],
    "wrong_command": [[skill_edit("say", "The only command is: say <word>.")], [recovery_edit(FORMAT_REMINDER)]],
    "wrong_word": [[skill_edit("backwards", "A word written backwards must be said forwards.")],
                   [skill_edit("copy", "Say the secret word exactly, letter by letter.")]],
}  # fmt: skip


def root_cause(result, task=None) -> str | None:
    if result.verdict.success:
        return None
    if result.end_reason == "format_error" or not any(t.action_kind == "command" for t in result.turns):
        return "format_error"
    if result.verdict.details.get("said") is None:
        return "wrong_command"
    return "wrong_word"
