"""BFCL's diagnosis rules and offline edit operators (DBBench's are diagnosis.py / operators.py).

Root causes, most specific first, read from what the trajectory shows:
  context_overflow; format_error (a reply without "Action: call" / "Action: reply", or calls that
  do not parse); api_timeout (a call overran its limits); unknown_function (a call of a function
  that does not exist); call_error (the last failing call's error otherwise); no_call (a turn that
  needed calls ended without any); state_mismatch / missing_results (the turn's check failed);
  round_limit (the turns were not all done).
"""

from __future__ import annotations

from harness_pool.edits import recovery_edit, skill_edit

CAUSES: dict[str, str] = {
    "context_overflow": "the conversation outgrew the model's context",
    "format_error": "a reply broke the protocol (no 'Action: call' or 'Action: reply', or unparseable calls)",
    "api_timeout": "a call asked for unbounded work and was stopped",
    "unknown_function": "called a function that is not listed",
    "call_error": "a call failed (wrong arguments, or the app refused it)",
    "no_call": "ended a turn without calling the functions the request needed",
    "state_mismatch": "the calls left the apps in a different state than the request asked for",
    "missing_results": "did not call the functions whose results the request needed",
    "round_limit": "ran out of rounds before serving every request",
}

FAMILIES: dict[str, tuple[str, ...]] = {
    "protocol": ("format_error", "context_overflow", "round_limit"),
    "calls": ("unknown_function", "call_error", "api_timeout"),
    "task": ("no_call", "state_mismatch", "missing_results"),
}

FORMAT_REMINDER = (
    "Reminder: end every reply with 'Action: call' and the calls in a ```python block, "
    "or with 'Action: reply' and a message to the user."
)


def root_cause(result, task=None) -> str | None:
    """The single root cause of a failed BFCL rollout (a rl.rollout.RolloutResult); None for a success."""
    if result.verdict.success:
        return None
    if result.end_reason in ("context_overflow", "format_error"):
        return result.end_reason
    if result.failure_kind == "api_timeout":
        return "api_timeout"
    observations = [t.observation or "" for t in result.turns if t.action_kind == "call"]
    errors = [line for o in observations for line in o.splitlines() if "Error during execution" in line]
    if result.failure_kind in ("round_limit", "no_call") and errors:
        return "unknown_function" if "no function named" in errors[-1] else "call_error"
    return result.failure_kind if result.failure_kind in CAUSES else "missing_results"


OPERATORS: dict[str, list[list[dict]]] = {
    "format_error": [
        [{"op": "set_tool_view", "on_invalid": "warn", "invalid_message": FORMAT_REMINDER}],
        [recovery_edit(FORMAT_REMINDER)],
        [skill_edit("protocol", "Every reply ends with 'Action: call' plus calls, or 'Action: reply' plus a message.")],
    ],
    "context_overflow": [
        [{"op": "set_context", "max_observation_chars": 600}],
        [{"op": "set_context", "history_window": 6}],
        [{"op": "set_context", "max_observation_chars": 400, "history_window": 8}],
    ],
    "round_limit": [
        [recovery_edit("When the request is done, reply to the user with 'Action: reply'.", round_at_least=4)],
        [skill_edit("finish", "Put all the calls a request needs in one list, then reply; do not repeat calls.")],
        [
            {
                "op": "set_guidance",
                "text": "Serve each request with as few replies as you can: one call list, one reply.",
            }
        ],
    ],
    "unknown_function": [
        [
            recovery_edit(
                "That function does not exist. Use only the functions listed in the system message.",
                last_step_error=True,
            )
        ],
        [skill_edit("listed_only", "Call only functions whose documents are listed, with their exact names.")],
        [{"op": "set_guidance", "text": "Before calling, find the function in the list and copy its exact name."}],
    ],
    "call_error": [
        [recovery_edit("The call failed: read the error, fix the arguments, and call again.", last_step_error=True)],
        [
            skill_edit(
                "arguments", "Give every required argument by its documented name, with a value of its documented type."
            )
        ],
        [{"op": "set_guidance", "text": "Check each argument against the function's document before calling."}],
    ],
    "api_timeout": [
        [skill_edit("small_numbers", "Keep arguments to sensible sizes; never ask for huge powers or precisions.")],
        [{"op": "set_guidance", "text": "Use the values the user gave; do not invent large numbers."}],
        [recovery_edit("Use modest argument values.", round_at_least=0)],
    ],
    "no_call": [
        [skill_edit("act_first", "Serve a request by calling the functions it needs before you reply.")],
        [{"op": "add_hint", "at": "on_init", "message": "Serve each request with function calls, then reply."}],
        [{"op": "set_guidance", "text": "Reply without calls only when no listed function can serve the request."}],
    ],
    "state_mismatch": [
        [skill_edit("exact_values", "Use the exact names and values from the request in the arguments.")],
        [{"op": "set_guidance", "text": "Check where you are (e.g. the current directory) before acting on it."}],
        [recovery_edit("Check that the last result shows the change the user asked for.", last_step_error=False)],
    ],
    "missing_results": [
        [skill_edit("show_results", "When the user asks to see something, call the function that shows it.")],
        [{"op": "set_guidance", "text": "Do every step the request names, including displaying or checking results."}],
        [{"op": "add_hint", "at": "on_init", "message": "Do each step of the request with its own call."}],
    ],
}
