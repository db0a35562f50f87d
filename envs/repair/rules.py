"""Repository repair's diagnosis rules and offline edit operators (DBBench's are diagnosis.py / operators.py).

Root causes, most specific first, read from what the trajectory shows:
  context_overflow; format_error (a reply without a valid "Action:" line); edit_refused (every
  replace was refused: the old text was not found exactly, or not once); no_edit (never changed
  the code); tests_error (the judged test run timed out or crashed); broke_other_tests (the failing
  tests pass but others broke); wrong_edit (edited, tests still fail).
"""

from __future__ import annotations

from harness_pool.edits import recovery_edit, skill_edit

CAUSES: dict[str, str] = {
    "context_overflow": "the conversation outgrew the model's context",
    "format_error": "a reply broke the protocol (no valid 'Action:' line, or replace without two blocks)",
    "edit_refused": "every replace was refused: the old lines were not copied exactly from the file",
    "no_edit": "submitted or ran out of rounds without changing the code",
    "tests_error": "the edited code made the test run hang or crash",
    "broke_other_tests": "the failing tests pass, but the change broke other tests",
    "wrong_edit": "changed the code, but the failing tests still fail",
}

FAMILIES: dict[str, tuple[str, ...]] = {
    "protocol": ("format_error", "context_overflow"),
    "editing": ("edit_refused", "no_edit"),
    "fix": ("wrong_edit", "broke_other_tests", "tests_error"),
}

FORMAT_REMINDER = (
    "Reminder: end every reply with one 'Action:' line, e.g. 'Action: read_file path 10-40', "
    "'Action: run_tests' or 'Action: submit'; after 'Action: replace path' put two code blocks (old, then new)."
)


def root_cause(result, task=None) -> str | None:
    """The single root cause of a failed repair rollout (a rl.rollout.RolloutResult); None for a success."""
    if result.verdict.success:
        return None
    if result.end_reason in ("context_overflow", "format_error"):
        return result.end_reason
    replaces = [t for t in result.turns if t.action_kind == "call" and "replace" in str(t.action or {})]
    if replaces and not result.verdict.details.get("edited"):
        return "edit_refused"
    kind = result.failure_kind
    if kind == "not_fixed":
        return "wrong_edit"
    return kind if kind in CAUSES else "no_edit"


_TEST_AFTER_EDIT = """def hook(ctx, nb):
    if "Replaced 1 occurrence" in ctx["last_observation"]:
        return {"inject": "You changed the code. Run the tests now (Action: run_tests) before you submit."}
    return None
"""

# cause -> variants; each variant is a list of edit dicts (harness_pool/patch.py formats)
OPERATORS: dict[str, list[list[dict]]] = {
    "format_error": [
        [{"op": "set_tool_view", "on_invalid": "warn", "invalid_message": FORMAT_REMINDER}],
        [recovery_edit(FORMAT_REMINDER)],
        [skill_edit("protocol", "Every reply ends with exactly one 'Action:' line; replace needs two code blocks.")],
    ],
    "context_overflow": [
        [{"op": "set_context", "max_observation_chars": 1500}],
        [{"op": "set_context", "history_window": 6}],
        [{"op": "set_context", "max_observation_chars": 1200, "history_window": 8}],
    ],
    "edit_refused": [
        [
            recovery_edit(
                "The replace was refused. Read the lines again with read_file and copy them exactly, with their "
                "indentation but without the line numbers, into the first block.",
                last_step_error=True,
            )
        ],
        [skill_edit("exact_old", "The first block of replace is copied character for character from the file.")],
        [{"op": "set_guidance", "text": "Replace as few whole lines as possible, copied exactly from read_file."}],
    ],
    "no_edit": [
        [skill_edit("edit_then_submit", "Only submit after a replace that changed the code and a test run.")],
        [{"op": "set_guidance", "text": "Read the failing test, find the function it calls, and fix that code."}],
        [recovery_edit("The failing tests: {failing_tests}. Find the code they call and fix it.", round_at_least=4)],
    ],
    "tests_error": [
        [skill_edit("no_loops", "A change must not add loops or large allocations: fix the one wrong expression.")],
        [recovery_edit("The test run did not finish. Undo your last change and fix the bug with a smaller one.")],
        [{"op": "set_guidance", "text": "Fix the bug by changing one expression; never add a loop."}],
    ],
    "broke_other_tests": [
        [skill_edit("smallest_fix", "Change the one wrong expression only; other tests rely on the rest.")],
        [{"op": "add_code_hook", "hook": {"at": "after_step", "name": "test_after_edit", "source": _TEST_AFTER_EDIT}}],
        [recovery_edit("Other tests broke: undo the change and make a smaller one.", observation_matches="FAILED")],
    ],
    "wrong_edit": [
        [{"op": "add_code_hook", "hook": {"at": "after_step", "name": "test_after_edit", "source": _TEST_AFTER_EDIT}}],
        [
            skill_edit(
                "read_test",
                "Read the failing test's assertion: it says what the code should return; compare it with the code.",
            )
        ],
        [recovery_edit("The failing tests: {failing_tests}. Check what they expect before the next change.")],
    ],
}
