"""DBBench's diagnosis rules and offline edit operators (registered by envs/dbbench/benchmark.py).

Rules read only trajectory facts (what the agent did and saw, plus the task's type and label
for answer checks), most specific first:
  context_overflow; format_error / answer_not_list (the reply broke the action protocol);
  answered_without_query; the last failed query's error kind: unquoted_name (a table name
  with spaces or symbols written bare), unknown_table, unknown_column, sql_syntax,
  sql_other_error; at the round limit: repeated_query or round_limit; after an answer:
  no_mutation / wrong_mutation (INSERT/UPDATE tasks), wrong_answer_shape / wrong_value.
Every cause has a few operator variants (harness_pool/operators.py picks them), each a different
mechanism: a skill, a hint, a guard or recovery rule, a code hook, a tool-view or memory change.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from harness_pool.edits import code_hook_edit, recovery_edit, skill_edit

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

FORMAT_REMINDER = (
    "Reminder: end every reply with either 'Action: Operation' and one ```sql block, "
    "or 'Action: Answer' and 'Final Answer: [...]' (a list)."
)

_BLOCK_REPEAT = """def hook(ctx, nb):
    sql = " ".join((ctx["action_sql"] or "").lower().split())
    if sql and sql in [" ".join(q.lower().split()) for q in ctx["sql_history"]]:
        return {"block": "You already ran this exact query; its result is above. Answer, or run a different query."}
    return None
"""

_QUOTE_TABLE = """def hook(ctx, nb):
    sql = ctx["action_sql"] or ""
    name = ctx["table_name"]
    if not name or "`" + name + "`" in sql:
        return None
    for word in ("FROM ", "INTO ", "UPDATE ", "from ", "into ", "update "):
        if word + name in sql:
            return {"rewrite": sql.replace(word + name, word + "`" + name + "`")}
    return None
"""

_LAST_CHANCE = """def hook(ctx, nb):
    if ctx["round"] >= 2 and ctx["queries"] >= 1 and not ctx["last_error"]:
        return {"inject": "If the result above answers the request, answer now with Action: Answer."}
    return None
"""


# cause -> variants; each variant is a list of edit dicts (harness_pool/patch.py formats)
OPERATORS: dict[str, list[list[dict]]] = {
    "format_error": [
        [{"op": "set_tool_view", "on_invalid": "warn", "invalid_message": FORMAT_REMINDER}],
        [recovery_edit(FORMAT_REMINDER)],
        [
            skill_edit(
                "protocol",
                "Every reply ends with exactly one action: 'Action: Operation' followed by a ```sql "
                "block, or 'Action: Answer' followed by 'Final Answer: [...]'.",
            )
        ],
    ],
    "answer_not_list": [
        [{"op": "set_tool_view", "accept_scalar_answer": True}],
        [skill_edit("answer_list", 'The final answer is always a list, even for one value: Final Answer: ["42"].')],
        [
            {
                "op": "set_tool_view",
                "on_invalid": "warn",
                "invalid_message": 'Write the final answer as a list, e.g. Final Answer: ["42"].',
            }
        ],
    ],
    "context_overflow": [
        [{"op": "set_context", "max_observation_chars": 400}],
        [{"op": "set_context", "history_window": 3}, {"op": "set_memory", "query_log": 3}],
        [{"op": "set_context", "max_observation_chars": 300, "history_window": 4}],
    ],
    "answered_without_query": [
        [
            {
                "op": "add_guard_rule",
                "when": {"action_kind": "answer", "queries_at_most": 0},
                "message": "You have not run any query yet. Query the table first, then answer.",
            }
        ],
        [skill_edit("query_first", "Never answer from the request text alone: run a query on the table first.")],
        [{"op": "add_hint", "at": "on_init", "message": "Start by running a query on `{table_name}`."}],
    ],
    "unquoted_name": [
        [
            {
                "op": "add_hint",
                "at": "on_init",
                "message": "The table is named `{table_name}`; always write it in backticks exactly like that.",
            }
        ],
        [code_hook_edit("before_action", "quote_table", _QUOTE_TABLE)],
        [skill_edit("backticks", "Put every table and column name in backticks, e.g. SELECT `col name` FROM `table`.")],
    ],
    "unknown_table": [
        [{"op": "add_hint", "at": "on_init", "message": "The only table is `{table_name}`."}],
        [
            recovery_edit(
                "The only table is `{table_name}`; use exactly that name in backticks.",
                observation_matches="no such table|doesn't exist",
            )
        ],
        [code_hook_edit("before_action", "quote_table", _QUOTE_TABLE)],
    ],
    "unknown_column": [
        [{"op": "add_hint", "at": "on_init", "message": "The table `{table_name}` has the columns: {headers}."}],
        [
            recovery_edit(
                "The columns of `{table_name}` are exactly: {headers}. Use these names in backticks.",
                observation_matches="no such column|unknown column",
            )
        ],
        [
            {
                "op": "add_hint",
                "at": "on_init",
                "message": "Columns of `{table_name}`: {headers}. First rows: {sample_rows}",
            }
        ],
    ],
    "sql_syntax": [
        [
            recovery_edit(
                "The query did not parse. Write one statement on one line, names in backticks, text values in "
                "single quotes.",
                last_step_error=True,
            )
        ],
        [skill_edit("sql_form", "Write SQL as one statement on one line: SELECT `a` FROM `t` WHERE `b` = 'text';")],
        [
            {"op": "set_memory", "query_log": 3},
            recovery_edit("The last query failed; fix exactly the part the error names.", last_step_error=True),
        ],
    ],
    "sql_other_error": [
        [
            recovery_edit(
                "The query failed: read the error and fix exactly that part before trying again.", last_step_error=True
            )
        ],
        [skill_edit("read_errors", "When a query fails, change only what the error message points at.")],
        [{"op": "set_memory", "query_log": 3}],
    ],
    "repeated_query": [
        [code_hook_edit("before_action", "block_repeat", _BLOCK_REPEAT)],
        [{"op": "set_memory", "query_log": 5}],
        [skill_edit("no_repeat", "Never run the same query twice: its result will not change. Answer from it.")],
    ],
    "round_limit": [
        [recovery_edit("You are running out of turns: answer now from what you have seen.", round_at_least=2)],
        [code_hook_edit("after_step", "last_chance", _LAST_CHANCE)],
        [{"op": "set_guidance", "text": "Answer as soon as a query result gives what the request asks for."}],
    ],
    "no_mutation": [
        [
            skill_edit(
                "mutate",
                "For a request to add or change rows, run the INSERT or UPDATE statement first; only then "
                "answer with Final Answer: [].",
            )
        ],
        [
            {
                "op": "add_guard_rule",
                "when": {
                    "action_kind": "answer",
                    "queries_at_most": 0,
                    "instruction_matches": "insert|update|add|change|set|modify",
                },
                "message": "This request changes the table: run the INSERT or UPDATE first, then answer [].",
            }
        ],
        [
            {
                "op": "add_hint",
                "at": "on_init",
                "when": {"instruction_matches": "insert|update|add|change|set|modify"},
                "message": "This request changes the table: write the INSERT or UPDATE statement.",
            }
        ],
    ],
    "wrong_mutation": [
        [
            {
                "op": "add_hint",
                "at": "on_init",
                "message": "Columns of `{table_name}`: {headers}. Existing rows look like: {sample_rows}",
            }
        ],
        [skill_edit("match_format", "Write new values in the same format as the existing rows (look at a few first).")],
        [
            skill_edit(
                "inspect", "Before an INSERT or UPDATE, run SELECT * FROM the table LIMIT 3 to see value formats."
            )
        ],
    ],
    "wrong_answer_shape": [
        [skill_edit("shape", "Answer with exactly the values asked for, one list element per value, nothing extra.")],
        [
            recovery_edit(
                "If this result answers the request, answer with exactly these values as a list.",
                last_step_error=False,
                queries_at_least=1,
            )
        ],
        [{"op": "set_guidance", "text": "Count how many values the request asks for, and give that many."}],
    ],
    "wrong_value": [
        [{"op": "set_guidance", "text": "Copy values exactly as the database returns them into the final answer."}],
        [skill_edit("inspect", "Run SELECT * FROM the table LIMIT 3 first, to see the exact names and value formats.")],
        [
            {
                "op": "add_hint",
                "at": "on_init",
                "message": "Columns of `{table_name}`: {headers}. First rows: {sample_rows}",
            }
        ],
    ],
}


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


def cause_of_facts(f: Facts) -> str | None:
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


def facts_of(result, the_task, trajectory_id: str = "") -> Facts:
    """What a rollout (rl.rollout.RolloutResult) of a DBBench task shows."""
    steps, parse_errors = [], []
    for t in result.turns:
        if t.action_kind == "sql" and t.action:
            steps.append(
                SqlStep(t.action.get("sql", ""), t.observation or "", (t.observation or "").startswith("Error"))
            )
        elif t.action_kind == "invalid" and t.parse_error:
            parse_errors.append(t.parse_error)
    return Facts(
        trajectory_id=trajectory_id,
        bench_task_id=the_task.id,
        task_type=the_task.task_type,
        label=list(the_task.label or []),
        table_name=the_task.table_name,
        end_reason=result.end_reason,
        parse_errors=tuple(parse_errors),
        sql_steps=tuple(steps),
        answer=result.answer,
        success=result.verdict.success,
    )


def root_cause(result, task) -> str | None:
    """The single root cause of a failed DBBench rollout; None for a success."""
    return cause_of_facts(facts_of(result, task))
