"""Diagnosis: one root cause per failed trajectory, then clusters of causes backed by >= 2 tasks.

Rules read only trajectory facts (what the agent did and saw, plus the task's type and label
for answer checks), most specific first:
  context_overflow; format_error / answer_not_list (the reply broke the action protocol);
  answered_without_query; the last failed query's error kind: unquoted_name (a table name
  with spaces or symbols written bare), unknown_table, unknown_column, sql_syntax,
  sql_other_error; at the round limit: repeated_query or round_limit; after an answer:
  no_mutation / wrong_mutation (INSERT/UPDATE tasks), wrong_answer_shape / wrong_value.
An LLM diagnoser (harness_pool/llm.py) may replace the rule's cause when one is configured.
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass, field

CAUSES: dict[str, str] = {
    "context_overflow": "the conversation outgrew the model's context",
    "format_error": "a reply broke the action protocol (no 'Action:' line, no SQL block, no final answer)",
    "answer_not_list": "the final answer was not a list",
    "answered_without_query": "answered without running any query",
    "unquoted_name": "a table or column name with spaces or symbols was written without backticks",
    "unknown_table": "queried a table that does not exist",
    "unknown_column": "used a column that does not exist",
    "sql_syntax": "the SQL did not parse",
    "sql_other_error": "the SQL failed for another reason",
    "repeated_query": "ran the same query again and again until the round limit",
    "round_limit": "ran out of rounds before answering",
    "no_mutation": "answered an INSERT/UPDATE request without changing the table",
    "wrong_mutation": "changed the table, but not into the expected state",
    "wrong_answer_shape": "answered with a different number of values than asked",
    "wrong_value": "answered with the right number of values but wrong ones",
}

# Related causes: an editor's candidate targets 2-3 causes of one family.
FAMILIES: dict[str, tuple[str, ...]] = {
    "protocol": ("format_error", "answer_not_list", "context_overflow"),
    "schema": ("unquoted_name", "unknown_table", "unknown_column"),
    "sql": ("sql_syntax", "sql_other_error", "repeated_query"),
    "process": ("answered_without_query", "round_limit", "no_mutation"),
    "answer": ("wrong_answer_shape", "wrong_value", "wrong_mutation"),
}
FAMILY_OF = {cause: family for family, causes in FAMILIES.items() for cause in causes}


def causes_for(benchmark: str) -> dict[str, str]:
    """cause -> one-line explanation, for a benchmark's diagnosis rules."""
    from harness_pool.operators import rules_module

    rules = rules_module(benchmark)
    return rules.CAUSES if rules else CAUSES


_MUTATING = re.compile(r"^\s*(insert|update|replace|delete)\b", re.IGNORECASE)
_PLAIN_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass(frozen=True)
class SqlStep:
    sql: str
    observation: str
    error: bool


@dataclass(frozen=True)
class Facts:
    """What a failed trajectory shows, independent of how it is stored."""

    trajectory_id: str
    bench_task_id: str
    task_type: str
    label: list
    table_name: str
    end_reason: str
    parse_errors: tuple[str, ...] = ()
    sql_steps: tuple[SqlStep, ...] = ()
    answer: list | None = None
    success: bool = False


@dataclass
class Cluster:
    cause: str
    bench_task_ids: list[str] = field(default_factory=list)
    trajectory_ids: list[str] = field(default_factory=list)

    @property
    def support(self) -> int:
        return len(self.bench_task_ids)


def _error_kind(step: SqlStep, table_name: str) -> str:
    text = step.observation.lower()
    if not _PLAIN_NAME.match(table_name) and _bare(step.sql, table_name):
        return "unquoted_name"
    if "no such table" in text or "doesn't exist" in text:
        return "unknown_table"
    if "no such column" in text or "unknown column" in text:
        return "unknown_column"
    if "syntax" in text or "incomplete input" in text or "unrecognized token" in text:
        return "sql_syntax"
    return "sql_other_error"


def _bare(sql: str, name: str) -> bool:
    """`name` appears in `sql` without backticks or quotes right around it."""
    for match in re.finditer(re.escape(name), sql, re.IGNORECASE):
        before = sql[match.start() - 1] if match.start() else " "
        after = sql[match.end()] if match.end() < len(sql) else " "
        if before not in "`\"'[" or after not in "`\"']":
            return True
    return False


def root_cause(f: Facts) -> str | None:
    """The single root cause of a failed trajectory (None for a success)."""
    if f.success:
        return None
    if f.end_reason == "context_overflow":
        return "context_overflow"
    if f.end_reason == "format_error" or (f.end_reason == "round_limit" and len(f.parse_errors) > len(f.sql_steps)):
        return "answer_not_list" if f.parse_errors and f.parse_errors[-1] == "answer_not_list" else "format_error"
    if f.answer is not None and not f.sql_steps:
        return "answered_without_query"
    failed = [s for s in f.sql_steps if s.error]
    if failed and (f.answer is None or f.sql_steps[-1].error):
        return _error_kind(failed[-1], f.table_name)
    if f.answer is None:
        sqls = [" ".join(s.sql.lower().split()) for s in f.sql_steps]
        return "repeated_query" if len(set(sqls)) < len(sqls) else "round_limit"
    if f.task_type in ("INSERT", "UPDATE"):
        changed = any(_MUTATING.match(s.sql) and not s.error for s in f.sql_steps)
        return "wrong_mutation" if changed else "no_mutation"
    if len(f.answer) != len(f.label):
        return "wrong_answer_shape"
    return "wrong_value"


def cluster_causes(causes: dict[str, tuple[str, str]], min_support: int = 2) -> list[Cluster]:
    """Clusters from {trajectory id: (bench task id, cause)}: those backed by at least
    `min_support` distinct tasks, largest first (ties by cause name)."""
    by_cause: dict[str, Cluster] = defaultdict(lambda: Cluster(cause=""))
    for traj_id, (task_id, cause) in sorted(causes.items()):
        c = by_cause[cause]
        c.cause = cause
        c.trajectory_ids.append(traj_id)
        if task_id not in c.bench_task_ids:
            c.bench_task_ids.append(task_id)
    kept = [c for c in by_cause.values() if c.support >= min_support]
    return sorted(kept, key=lambda c: (-c.support, c.cause))
