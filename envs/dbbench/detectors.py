"""DBBench's template placeholders, behaviour detectors and failure kinds (docs/method.md §5, RQ4)."""

from __future__ import annotations

from envs.base import ENV_ERROR, SqlAction, Verdict

_MUTATIONS = ("insert", "update", "delete", "replace")


def task_fields(task: object) -> dict[str, str]:
    """Template placeholders a harness may use, taken from a DBBench task."""
    columns = getattr(task, "columns", None) or []
    rows = getattr(task, "rows", None) or []
    return {
        "sample_rows": str([tuple(r) for r in rows[:3]]),
        "instruction": str(getattr(task, "instruction", "")),
        "description": str(getattr(task, "description", "")),
        "add_description": str(getattr(task, "add_description", "")),
        "table_name": str(getattr(task, "table_name", "")),
        "headers": ", ".join(str(c) for c in columns),
    }


def _queries(steps) -> list[str]:
    return [action.sql for action, _ in steps if isinstance(action, SqlAction)]


# Every tag behaviour_tags can give, in the order reports list them.
TAGS = ("inspected_first", "repeated_query", "answered_without_query", "rechecked_mutation")


def behaviour_tags(steps, answered: bool) -> list[str]:
    """Cheap detectors over the executed SQL.

    Queries are compared lower-cased with whitespace collapsed, so the tags measure what the
    policy did, not how it spaced it:
    - answered_without_query: answered with no SQL run at all (a guess from the request text);
    - repeated_query: ran an identical query more than once;
    - inspected_first: the first query only reads (SELECT/DESCRIBE/SHOW/PRAGMA), i.e. it looked
      at the table before writing;
    - rechecked_mutation: a query that changes the table (INSERT/UPDATE/DELETE/REPLACE) is
      followed later by a SELECT, i.e. it verified its own write.
    """
    queries = _queries(steps)
    tags = []
    lowered = [" ".join(q.lower().split()) for q in queries]
    if answered and not queries:
        tags.append("answered_without_query")
    if len(set(lowered)) < len(lowered):
        tags.append("repeated_query")
    if lowered and lowered[0].startswith(("select", "describe", "show", "pragma")):
        tags.append("inspected_first")
    first_write = next((i for i, q in enumerate(lowered) if q.startswith(_MUTATIONS)), None)
    if first_write is not None and any(q.startswith("select") for q in lowered[first_write + 1 :]):
        tags.append("rechecked_mutation")
    return tags


def failure_kind(verdict: Verdict, end_reason: str, steps) -> str | None:
    """One failure kind per unsuccessful episode, most specific first (env_error: the environment
    raised, set by the rollout engine)."""
    if verdict.success:
        return None
    if end_reason in (ENV_ERROR, "format_error", "context_overflow", "round_limit"):
        return end_reason
    sql_steps = [result for action, result in steps if isinstance(action, SqlAction)]
    return "sql_error" if sql_steps and sql_steps[-1].error is not None else "wrong_answer"
