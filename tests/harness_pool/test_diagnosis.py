"""Root causes from trajectory facts, clusters, and the offline editor's operators."""

from __future__ import annotations

import pytest

from envs.dbbench.rules import CAUSES, OPERATORS, Facts, SqlStep
from envs.dbbench.rules import cause_of_facts as root_cause
from harness_pool.diagnosis import Cluster, cluster_causes
from harness_pool.operators import offline_patch, target_groups
from harness_pool.patch import apply_patch
from harness_pool.runtime import HarnessRuntime
from harness_pool.spec import load_harness


def facts(**kw) -> Facts:
    base = dict(
        trajectory_id="t",
        bench_task_id="x",
        task_type="counting",
        label=["3"],
        table_name="Sales",
        end_reason="answered",
    )
    return Facts(**{**base, **kw})


def ok(sql: str, obs: str = "[(3,)]") -> SqlStep:
    return SqlStep(sql, obs, False)


def err(sql: str, obs: str) -> SqlStep:
    return SqlStep(sql, obs, True)


@pytest.mark.parametrize(
    "f, cause",
    [
        (facts(end_reason="context_overflow"), "context_overflow"),
        (facts(end_reason="format_error", parse_errors=("no_action",)), "format_error"),
        (facts(end_reason="format_error", parse_errors=("answer_not_list",)), "answer_not_list"),
        (facts(end_reason="round_limit", parse_errors=("no_action",) * 3, sql_steps=(ok("SELECT 1"),)), "format_error"),
        (facts(answer=["3"]), "answered_without_query"),
        (
            facts(
                table_name="Sales 2021",
                end_reason="round_limit",
                sql_steps=(err("SELECT * FROM Sales 2021", 'Error: near "2021": syntax error'),),
            ),
            "unquoted_name",
        ),
        (
            facts(end_reason="round_limit", sql_steps=(err("SELECT * FROM sale", "Error: no such table: sale"),)),
            "unknown_table",
        ),
        (
            facts(end_reason="round_limit", sql_steps=(err("SELECT x FROM `Sales`", "Error: no such column: x"),)),
            "unknown_column",
        ),
        (
            facts(end_reason="round_limit", sql_steps=(err("SELEC 1", 'Error: near "SELEC": syntax error'),)),
            "sql_syntax",
        ),
        (facts(end_reason="round_limit", sql_steps=(err("SELECT 1/0", "Error: division by zero"),)), "sql_other_error"),
        (facts(end_reason="round_limit", sql_steps=(ok("SELECT 1"), ok("select  1"))), "repeated_query"),
        (facts(end_reason="round_limit", sql_steps=(ok("SELECT 1"), ok("SELECT 2"))), "round_limit"),
        (facts(task_type="INSERT", answer=[], sql_steps=(ok("SELECT * FROM `Sales`"),)), "no_mutation"),
        (
            facts(task_type="INSERT", answer=[], sql_steps=(ok("INSERT INTO `Sales` VALUES (1)", "[]"),)),
            "wrong_mutation",
        ),
        (facts(answer=["3", "4"], sql_steps=(ok("SELECT 1"),)), "wrong_answer_shape"),
        (facts(answer=["4"], sql_steps=(ok("SELECT 1"),)), "wrong_value"),
        (facts(success=True, answer=["3"], sql_steps=(ok("SELECT 1"),)), None),
    ],
)
def test_rules_give_the_most_specific_root_cause(f, cause):
    assert root_cause(f) == cause
    assert cause is None or cause in CAUSES


def test_a_failed_query_followed_by_a_good_one_and_an_answer_is_judged_by_the_answer():
    f = facts(answer=["4"], sql_steps=(err("SELEC 1", "Error: syntax error"), ok("SELECT 1")))
    assert root_cause(f) == "wrong_value"


def test_clusters_keep_causes_backed_by_two_tasks():
    causes = {
        "t1": ("a", "sql_syntax"),
        "t2": ("a", "sql_syntax"),
        "t3": ("b", "unknown_column"),
        "t4": ("c", "unknown_column"),
        "t5": ("d", "wrong_value"),
        "t6": ("e", "unknown_column"),
    }
    clusters = cluster_causes(causes, min_support=2)
    assert [(c.cause, c.support) for c in clusters] == [("unknown_column", 3)]
    assert clusters[0].trajectory_ids == ["t3", "t4", "t6"]
    assert [c.cause for c in cluster_causes(causes, min_support=1)] == ["unknown_column", "sql_syntax", "wrong_value"]


def test_every_operator_variant_applies_to_h0_and_variants_differ():
    h0 = load_harness("h0")
    ids = set()
    for cause, variants in OPERATORS.items():
        for v in range(len(variants)):
            child = apply_patch(h0, offline_patch([Cluster(cause, ["a", "b"])], v, f"{cause}-{v}", "dbbench"), round=1)
            HarnessRuntime(child, {"table_name": "T", "headers": "a"}).opening_messages()
            ids.add(child.id)
    assert len(ids) == sum(len(v) for v in OPERATORS.values())


def test_candidates_target_two_or_three_related_causes():
    clusters = [
        Cluster("unknown_column", list("abcd")),
        Cluster("sql_syntax", list("ab")),
        Cluster("unquoted_name", list("xy")),
        Cluster("wrong_value", list("pqr")),
        Cluster("unknown_table", list("mn")),
        Cluster("repeated_query", list("st")),
    ]
    groups = target_groups(clusters, "dbbench")
    assert [[c.cause for c in g] for g in groups] == [
        ["unknown_column", "unknown_table", "unquoted_name"],
        ["repeated_query", "sql_syntax"],
        ["wrong_value"],
    ]
    patch = offline_patch(groups[0], 1, "schema-v1", "dbbench")
    assert patch.root_causes == ["unknown_column", "unknown_table", "unquoted_name"]
    assert [e.op for e in patch.edits] == ["add_recovery_rule", "add_recovery_rule", "add_code_hook"]


def test_offline_code_hooks_block_a_repeat_and_quote_a_table_name():
    h0 = load_harness("h0")
    child = apply_patch(
        h0,
        offline_patch([Cluster("repeated_query", ["a", "b"]), Cluster("unquoted_name", ["a", "b"])], 0, "c", "dbbench"),
    )
    child = apply_patch(child, offline_patch([Cluster("unknown_table", ["a", "b"])], 2, "d", "dbbench"))
    rt = HarnessRuntime(child, {"table_name": "Sales 2021", "headers": "a"})
    rt.opening_messages()
    blocked, rewrite, _ = rt.check_action("sql", "SELECT * FROM Sales 2021")
    assert blocked is None and rewrite == "SELECT * FROM `Sales 2021`"
    rt.record_step("sql", "[]", False, "SELECT * FROM `Sales 2021`")
    blocked, _, _ = rt.check_action("sql", "select *  from `Sales 2021`")
    assert blocked and "already ran this exact query" in blocked
