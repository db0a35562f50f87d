"""Offline editor: parameterised edit operators keyed to root causes, so evolution runs with no API.

Every cause has a few operator variants, each a different mechanism (a skill, a hint, a guard or
recovery rule, a code hook, a tool-view or memory change). A candidate targets 2-3 related causes
(one family of harness_pool/diagnosis.py, best supported first) and takes variant v of each
cause's operators, so variants 0, 1, 2 of the same target give distinct children. Everything is
deterministic: the same parent, clusters and variant give the same patch.
"""

from __future__ import annotations

from harness_pool.diagnosis import FAMILY_OF, Cluster
from harness_pool.patch import HarnessPatch, parse_patch

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


def skill_edit(name: str, text: str) -> dict:
    return {"op": "add_skill", "name": name, "text": text}


def recovery_edit(message: str, **when) -> dict:
    return {"op": "add_recovery_rule", "when": when, "message": message}


def _code(at: str, name: str, source: str) -> dict:
    return {"op": "add_code_hook", "hook": {"at": at, "name": name, "source": source}}


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
        [_code("before_action", "quote_table", _QUOTE_TABLE)],
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
        [_code("before_action", "quote_table", _QUOTE_TABLE)],
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
        [_code("before_action", "block_repeat", _BLOCK_REPEAT)],
        [{"op": "set_memory", "query_log": 5}],
        [skill_edit("no_repeat", "Never run the same query twice: its result will not change. Answer from it.")],
    ],
    "round_limit": [
        [recovery_edit("You are running out of turns: answer now from what you have seen.", round_at_least=2)],
        [_code("after_step", "last_chance", _LAST_CHANCE)],
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


VARIANTS = 3  # operator variants per cause


# Benchmarks whose diagnosis rules and operators live in a module of their own (DBBench's are here).
RULE_MODULES = {
    "textworld": "harness_pool.textworld_rules",
    "bfcl": "harness_pool.bfcl_rules",
    "repair": "harness_pool.repair_rules",
}


def rules_module(benchmark: str):
    """The module with CAUSES, FAMILIES, OPERATORS and root_cause of a benchmark; None for DBBench."""
    from importlib import import_module

    return import_module(RULE_MODULES[benchmark]) if benchmark in RULE_MODULES else None


def operators_for(benchmark: str) -> dict[str, list[list[dict]]]:
    """The offline operators of a benchmark: cause -> variants."""
    rules = rules_module(benchmark)
    return rules.OPERATORS if rules else OPERATORS


def family_of(benchmark: str) -> dict[str, str]:
    """cause -> family name, for a benchmark's causes."""
    rules = rules_module(benchmark)
    if rules is None:
        return FAMILY_OF
    return {cause: family for family, causes in rules.FAMILIES.items() for cause in causes}


def target_groups(clusters: list[Cluster], max_causes: int = 3, benchmark: str = "dbbench") -> list[list[Cluster]]:
    """Related clusters grouped by family (up to `max_causes` each), best supported family first."""
    families: dict[str, list[Cluster]] = {}
    operators, family = operators_for(benchmark), family_of(benchmark)
    for c in clusters:
        if c.cause in operators:
            families.setdefault(family.get(c.cause, c.cause), []).append(c)
    groups = [sorted(cs, key=lambda c: (-c.support, c.cause))[:max_causes] for cs in families.values()]
    return sorted(groups, key=lambda g: (-sum(c.support for c in g), g[0].cause))


def offline_patch(target: list[Cluster], variant: int, name: str, benchmark: str = "dbbench") -> HarnessPatch:
    """Variant `variant` of the operators for every targeted cause, as one patch."""
    edits, seen = [], set()
    operators = operators_for(benchmark)
    for c in target:
        options = operators[c.cause]
        for edit in options[variant % len(options)]:
            key = repr(edit)
            if key not in seen:  # two causes may share an operator (e.g. the table-quoting hook)
                seen.add(key)
                edits.append(edit)
    causes = [c.cause for c in target]
    return parse_patch(
        {
            "name": name,
            "description": f"offline operators v{variant} for {', '.join(causes)}",
            "root_causes": causes,
            "edits": edits,
        }
    )
