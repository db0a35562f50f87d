"""Hand-written seed pools of siblings (DBBench, TextWorld, BFCL, repair), derived from H0 by single edits.

Until evolution exists (and as its round-0 baseline), these siblings let training, rescue and
the warm-start measurements run. Each one repairs one family of failures that small models
show under H0. The YAML files under harnesses/<benchmark>/ are generated from this module, so
their parent id always matches H0's content id; regenerate after editing H0:

    python -m harness_pool.seed_pool
"""

from __future__ import annotations

from harness_pool.spec import BUILTIN_DIR, Condition, HarnessSpec, HookRule, Provenance, dump_harness, load_harness


def _child(h0: HarnessSpec, name: str, edit: str, causes: list[str], **update) -> HarnessSpec:
    """A sibling of H0 by one edit, with its parent id and provenance (round 0)."""
    provenance = Provenance(edit=edit, root_causes=causes, round=0)
    return h0.model_copy(update={"name": name, "parent_ids": [h0.id], "provenance": provenance, **update})


def _format_reminder(h0: HarnessSpec, reminder: str, edit: str) -> HarnessSpec:
    """The sibling that repeats the protocol after every observation and lets a malformed reply be retried."""
    return _child(
        h0,
        "format_reminder",
        edit,
        ["format_error"],
        tool_view=h0.tool_view.model_copy(update={"on_invalid": "warn", "invalid_message": reminder}),
        hooks=[HookRule(at="after_step", effect="inject", message=reminder)],
    )


def _after_error(h0: HarnessSpec, name: str, edit: str, causes: list[str], message: str) -> HarnessSpec:
    """A sibling that injects `message` after a step the environment answered with an error."""
    hook = HookRule(at="after_step", when=Condition(last_step_error=True), effect="inject", message=message)
    return _child(h0, name, edit, causes, hooks=[hook])


FORMAT_REMINDER = (
    "Reminder: end your reply with either 'Action: Operation' and one ```sql block, "
    "or 'Action: Answer' and 'Final Answer: [...]'."
)


def seed_siblings(h0: HarnessSpec) -> list[HarnessSpec]:
    return [
        _child(
            h0,
            "schema_rows",
            "show the table's columns and first rows in the task message",
            ["unknown_column", "wrong_value_format"],
            hooks=[
                HookRule(
                    at="on_init",
                    effect="inject",
                    message="The table `{table_name}` has the columns: {headers}.\nIts first rows are:\n{sample_rows}",
                )
            ],
        ),
        _format_reminder(
            h0, FORMAT_REMINDER, "remind the action format after every observation and let a malformed reply be retried"
        ),
        _child(
            h0,
            "inspect_first",
            "guide the policy to look at the table before changing it or answering",
            ["wrong_value_format", "answered_without_query"],
            guidance="Before you write an INSERT or UPDATE, or answer, run SELECT * FROM the table with "
            "LIMIT 3 to see the exact column names and how values are written.",
        ),
        _child(
            h0,
            "query_before_answer",
            "block an answer given before any query has run",
            ["answered_without_query"],
            hooks=[
                HookRule(
                    at="before_action",
                    when=Condition(action_kind="answer", queries_at_most=0),
                    effect="block",
                    message="You have not run any query yet. Query the table first, then answer.",
                )
            ],
        ),
        _child(
            h0,
            "lenient_answer",
            "accept a scalar final answer and retry malformed replies once warned",
            ["format_error", "answer_not_list"],
            tool_view=h0.tool_view.model_copy(update={"on_invalid": "warn", "accept_scalar_answer": True}),
        ),
    ]


SEED_POOL = ["schema_rows", "format_reminder", "inspect_first", "query_before_answer", "lenient_answer"]

TEXTWORLD_FORMAT_REMINDER = "Reminder: end your reply with one line 'Action: <command>', e.g. 'Action: go north'."


def textworld_seed_siblings(h0: HarnessSpec) -> list[HarnessSpec]:
    """TextWorld siblings, each aimed at one failure family of small models in text games."""

    return [
        _format_reminder(
            h0,
            TEXTWORLD_FORMAT_REMINDER,
            "remind the command format after every observation and let a malformed reply be retried",
        ),
        _child(
            h0,
            "goal_reminder",
            "repeat the goal after every observation",
            ["round_limit", "repeated_command"],
            hooks=[HookRule(at="after_step", effect="inject", message="Your goal: {goal}")],
        ),
        _child(
            h0,
            "look_first",
            "guide the policy to look and examine before acting, and to use the exact object names it saw",
            ["inadmissible_command", "stuck_invalid"],
            guidance="Start with 'look'. Use object and exit names exactly as the game writes them; if the game "
            "does not understand a command, look again instead of repeating it.",
        ),
        _child(
            h0,
            "unstick",
            "after a command the game refused, tell the policy to try a different one",
            ["stuck_invalid", "repeated_command"],
            hooks=[
                HookRule(
                    at="after_step",
                    when=Condition(last_step_error=True),
                    effect="inject",
                    message="The game did not accept that command. Try a different command, using the names "
                    "of things you can see.",
                )
            ],
        ),
        _child(
            h0,
            "json_tools",
            "the function-calling view: one JSON call act(command) per reply",
            ["format_error"],
            prompts=h0.prompts.model_copy(
                update={
                    "system": h0.prompts.system.split("In each reply")[0]
                    + 'In each reply, think briefly, then end with one JSON function call:\n{{"name": "act", '
                    '"arguments": {{"command": "go north"}}}}\nAny reply without such a call ends the game.'
                }
            ),
            tool_view=h0.tool_view.model_copy(update={"protocol": "textworld_json_v1"}),
        ),
    ]


TEXTWORLD_SEED_POOL = ["format_reminder", "goal_reminder", "look_first", "unstick", "json_tools"]


def bfcl_seed_siblings(h0: HarnessSpec) -> list[HarnessSpec]:
    """BFCL siblings, each aimed at one failure family of small models with function calling."""
    from envs.bfcl.rules import FORMAT_REMINDER as BFCL_FORMAT_REMINDER

    return [
        _format_reminder(
            h0, BFCL_FORMAT_REMINDER, "remind the protocol after every observation and let a malformed reply be retried"
        ),
        _child(
            h0,
            "act_first",
            "guide the policy to serve a request with calls before replying",
            ["no_call", "missing_results"],
            guidance="Serve every request by calling the functions it needs, including ones that display "
            "results, before you reply. Reply without calls only when no listed function can serve it.",
        ),
        _after_error(
            h0,
            "fix_errors",
            "after a failed call, tell the policy to read the error and call again",
            ["call_error", "unknown_function"],
            "A call failed. Read its error, use only listed functions with their documented arguments, and call again.",
        ),
        _child(
            h0,
            "json_tools",
            "the JSON function-calling view: calls as JSON objects, reply(text) ends the turn",
            ["format_error"],
            prompts=h0.prompts.model_copy(
                update={
                    "system": h0.prompts.system.replace(
                        "To call functions, end your reply with:\nAction: call\n```python\n"
                        "[function_name(argument='value'), other_function(number=3)]\n```",
                        'To call functions, end your reply with JSON calls:\n[{{"name": "function_name", '
                        '"arguments": {{"argument": "value"}}}}]',
                    ).replace(
                        "end with:\nAction: reply\nfollowed by a short message to the user.",
                        'end with:\n{{"name": "reply", "arguments": {{"text": "a short message to the user"}}}}',
                    )
                }
            ),
            tool_view=h0.tool_view.model_copy(update={"protocol": "bfcl_json_v1"}),
        ),
    ]


BFCL_SEED_POOL = ["format_reminder", "act_first", "fix_errors", "json_tools"]


def repair_seed_siblings(h0: HarnessSpec) -> list[HarnessSpec]:
    """Repair siblings, each aimed at one failure family of small models editing code."""
    from envs.repair.rules import FORMAT_REMINDER as REPAIR_FORMAT_REMINDER

    return [
        _format_reminder(
            h0,
            REPAIR_FORMAT_REMINDER,
            "remind the protocol after every observation and let a malformed reply be retried",
        ),
        _child(
            h0,
            "read_first",
            "guide the policy to read the failing test and the code before it edits",
            ["edit_refused", "wrong_edit"],
            guidance="First read the failing test, then read_file the function it calls. Copy the lines you "
            "change exactly, with their indentation and without line numbers, into the first block of replace.",
        ),
        _child(
            h0,
            "test_after_edit",
            "after a successful replace, tell the policy to run the tests before submitting",
            ["wrong_edit", "broke_other_tests"],
            hooks=[
                HookRule(
                    at="after_step",
                    when=Condition(observation_matches="^Replaced 1 occurrence"),
                    effect="inject",
                    message="You changed the code. Run the tests now (Action: run_tests) before you submit.",
                )
            ],
        ),
        _after_error(
            h0,
            "fix_errors",
            "after a refused action, tell the policy how to make it valid",
            ["edit_refused"],
            "That action was refused. Use paths from list_files, and for replace copy the old lines exactly from "
            "read_file.",
        ),
        _child(
            h0,
            "json_tools",
            "the JSON function-calling view: one call as a JSON object per reply",
            ["format_error"],
            prompts=h0.prompts.model_copy(
                update={
                    "system": h0.prompts.system.split("You can use these actions")[0]
                    + 'Each reply ends with one JSON call {{"name": ..., "arguments": {{...}}}} of these '
                    "functions:\nlist_files(path), read_file(path, start, end), search(text), "
                    "replace(path, old, new), run_tests(), submit().\nRead the code before you change it, run "
                    "the tests after a change, and submit when the tests pass. A reply without a JSON call ends "
                    "the episode."
                }
            ),
            tool_view=h0.tool_view.model_copy(update={"protocol": "repair_json_v1"}),
        ),
    ]


REPAIR_SEED_POOL = ["format_reminder", "read_first", "test_after_edit", "fix_errors", "json_tools"]
_SEEDS = {
    "dbbench": seed_siblings,
    "textworld": textworld_seed_siblings,
    "bfcl": bfcl_seed_siblings,
    "repair": repair_seed_siblings,
}


def write_seed_pool() -> list[str]:
    paths = []
    for benchmark, siblings in _SEEDS.items():
        for spec in siblings(load_harness("h0", benchmark)):
            paths.append(str(dump_harness(spec, BUILTIN_DIR / benchmark / f"{spec.name}.yaml")))
    return paths


if __name__ == "__main__":
    for path in write_seed_pool():
        print(path)
