"""Repository repair's behaviour detectors and failure kinds (diagnosis and RQ4).

- read_before_edit: read the buggy file before the first replace;
- edited_before_reading: replaced text in a file it had not read;
- ran_tests_before_submit: ran the tests after its last edit and before submitting;
- edited_test_file: changed a test file (the verifier restores them, so this never helps);
- repeated_call: the same call twice in a row.
"""

from __future__ import annotations

from envs.base import CallAction, Verdict

# Every tag behaviour_tags can give, in the order reports list them.
TAGS = ("read_before_edit", "edited_before_reading", "ran_tests_before_submit", "edited_test_file", "repeated_call")


def _calls(steps) -> list[tuple[str, dict, str | None]]:
    """(function, arguments, step error) of every call, in order."""
    return [
        (call.name, dict(call.kwargs), result.error)
        for action, result in steps
        if isinstance(action, CallAction)
        for call in action.calls
    ]


def _is_test_path(path: str) -> bool:
    name = path.rsplit("/", 1)[-1]
    return name.startswith("test_") or "/tests/" in f"/{path}"


def behaviour_tags(steps, submitted: bool) -> list[str]:
    calls = _calls(steps)
    tags, read = [], set()
    edits = [(i, c) for i, c in enumerate(calls) if c[0] == "replace" and c[2] is None]
    for name, kwargs, _ in calls:
        if name == "read_file":
            read.add(str(kwargs.get("path", "")).strip())
        elif name == "replace":
            path = str(kwargs.get("path", "")).strip()
            if path not in read and "edited_before_reading" not in tags:
                tags.append("edited_before_reading")
    if edits and any(c[0] == "read_file" for c in calls[: edits[0][0]]) and "edited_before_reading" not in tags:
        tags.insert(0, "read_before_edit")
    if edits and submitted:
        last_edit = edits[-1][0]
        if any(c[0] == "run_tests" for c in calls[last_edit + 1 :]):
            tags.append("ran_tests_before_submit")
    if any(_is_test_path(str(c[1].get("path", ""))) for _, c in edits):
        tags.append("edited_test_file")
    if any(a[:2] == b[:2] for a, b in zip(calls, calls[1:])):
        tags.append("repeated_call")
    return [t for t in TAGS if t in tags]


def failure_kind(verdict: Verdict, end_reason: str, steps) -> str | None:
    """format_error / context_overflow first; then tampered (the judged run's report or its
    sentinel tests were interfered with), no_edit (submitted or ran out without a
    successful replace), tests_error (the judged run timed out or crashed), broke_other_tests
    (the failing tests pass but others broke), else not_fixed."""
    if verdict.success:
        return None
    if end_reason in ("format_error", "context_overflow"):
        return end_reason
    if verdict.details.get("tests_error") == "tests_tampered":
        return "tampered"
    if not verdict.details.get("edited"):
        return "no_edit"
    if verdict.details.get("tests_error"):
        return "tests_error"
    if verdict.details.get("fail_to_pass_passed") == verdict.details.get("fail_to_pass"):
        return "broke_other_tests"
    return "not_fixed"
