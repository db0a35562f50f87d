"""A hand-written seed pool of DBBench siblings, derived from H0 by single edits.

Until evolution exists (and as its round-0 baseline), these siblings let training, rescue and
the warm-start measurements run. Each one repairs one family of failures that small models
show under H0. The YAML files under harnesses/dbbench/ are generated from this module, so
their parent id always matches H0's content id; regenerate after editing H0:

    python -m harness_pool.seed_pool
"""

from __future__ import annotations

from harness_pool.spec import BUILTIN_DIR, Condition, HarnessSpec, HookRule, Provenance, dump_harness, load_harness

FORMAT_REMINDER = (
    "Reminder: end your reply with either 'Action: Operation' and one ```sql block, "
    "or 'Action: Answer' and 'Final Answer: [...]'."
)


def seed_siblings(h0: HarnessSpec) -> list[HarnessSpec]:
    def child(name: str, edit: str, causes: list[str], **update) -> HarnessSpec:
        return h0.model_copy(
            update={
                "name": name,
                "parent_ids": [h0.id],
                "provenance": Provenance(edit=edit, root_causes=causes, round=0),
                **update,
            }
        )

    return [
        child(
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
        child(
            "format_reminder",
            "remind the action format after every observation and let a malformed reply be retried",
            ["format_error"],
            tool_view=h0.tool_view.model_copy(update={"on_invalid": "warn", "invalid_message": FORMAT_REMINDER}),
            hooks=[HookRule(at="after_step", effect="inject", message=FORMAT_REMINDER)],
        ),
        child(
            "inspect_first",
            "guide the policy to look at the table before changing it or answering",
            ["wrong_value_format", "answered_without_query"],
            guidance="Before you write an INSERT or UPDATE, or answer, run SELECT * FROM the table with "
            "LIMIT 3 to see the exact column names and how values are written.",
        ),
        child(
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
        child(
            "lenient_answer",
            "accept a scalar final answer and retry malformed replies once warned",
            ["format_error", "answer_not_list"],
            tool_view=h0.tool_view.model_copy(update={"on_invalid": "warn", "accept_scalar_answer": True}),
        ),
    ]


SEED_POOL = ["schema_rows", "format_reminder", "inspect_first", "query_before_answer", "lenient_answer"]


def write_seed_pool() -> list[str]:
    h0 = load_harness("h0")
    paths = []
    for spec in seed_siblings(h0):
        paths.append(str(dump_harness(spec, BUILTIN_DIR / "dbbench" / f"{spec.name}.yaml")))
    return paths


if __name__ == "__main__":
    for path in write_seed_pool():
        print(path)
