"""BFCL's behaviour detectors and failure kinds (diagnosis and RQ4).

- replied_without_call: ended a turn without calling anything;
- call_error: a call failed (unknown function, bad arguments, the API's own error);
- repeated_call: the same call twice in a row;
- several_calls: put more than one call in one reply.
"""

from __future__ import annotations

from envs.base import ENV_ERROR, CallAction, ReplyAction, Verdict

# Every tag behaviour_tags can give, in the order reports list them.
TAGS = ("several_calls", "replied_without_call", "call_error", "repeated_call")


def behaviour_tags(steps, finished: bool) -> list[str]:
    tags, calls, called_this_turn, replied_empty = [], [], False, False
    for action, result in steps:
        if isinstance(action, CallAction):
            calls += [c.text() for c in action.calls]
            called_this_turn = True
            if len(action.calls) > 1 and "several_calls" not in tags:
                tags.append("several_calls")
        elif isinstance(action, ReplyAction):
            replied_empty |= not called_this_turn
            called_this_turn = False
    if replied_empty:
        tags.append("replied_without_call")
    if any(isinstance(a, CallAction) and r.error is not None for a, r in steps):
        tags.append("call_error")
    if any(a == b for a, b in zip(calls, calls[1:])):
        tags.append("repeated_call")
    return tags


def failure_kind(verdict: Verdict, end_reason: str, steps) -> str | None:
    """env_error (the environment raised; set by the rollout engine) / format_error / context_overflow;
    api_timeout (a call overran its limits); round_limit (the turns were not all done); else the first
    failed turn's check: no_call, state_mismatch, missing_results."""
    if verdict.success:
        return None
    if end_reason in (ENV_ERROR, "format_error", "context_overflow"):
        return end_reason
    if verdict.details.get("crash"):
        return "api_timeout"
    failed = [c for c in verdict.details.get("checks", []) if not c["valid"]]
    if not failed:
        return "round_limit"
    error = failed[0].get("error", "")
    return (
        "no_call"
        if error.startswith("no call")
        else "state_mismatch"
        if error.startswith("state")
        else "missing_results"
    )


def task_fields(task) -> dict[str, str]:
    return task.fields()
