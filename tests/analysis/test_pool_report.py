"""Locality, complementarity and overlap from a hand-built paired run."""

from __future__ import annotations

import pytest

from analysis.pool import pool_report


def test_fixed_broken_union_and_overlap_by_hand():
    # 4 tasks; siblings ran k=1, H0 ran 2 * 1 rollouts per task
    h0 = {"a": [True, False], "b": [False, False], "c": [False, True], "d": [False, False]}
    siblings = {
        "s1": {"a": [False], "b": [True], "c": [False], "d": [False]},
        "s2": {"a": [True], "b": [True], "c": [True], "d": [False]},
    }
    r = pool_report(h0, siblings, k=1)
    # H0 at k=1 solves only a; at 2 rollouts also c
    edge = r["locality"]["s1"].pop("edge")
    assert r["locality"]["s1"] == {"solved": 1, "fixed": 1, "broken": 1, "fixed_tasks": ["b"], "broken_tasks": ["a"]}
    # s1 vs H0 at k: per task (-1, +1, 0, 0): mean 0; sign flips of (-1, +1) give |sum| >= 0 always: p = 1
    assert edge["difference"] == 0.0 and edge["verdict"] == "within noise"
    assert edge["interval"][0] < 0 < edge["interval"][1]
    assert r["locality"]["s2"]["fixed_tasks"] == ["b", "c"] and r["locality"]["s2"]["broken"] == 0
    c = r["complementarity"]
    assert c["h0_at_k"] == 0.25 and c["h0_at_equal_rollouts"] == 0.5 and c["equal_rollouts"] == 2
    assert c["best_single"] == 0.75 and c["best_single_name"] == "s2" and c["oracle_union"] == 0.75
    assert r["overlap"] == {"s1|s2": pytest.approx(1 / 2)}
    # oracle {a, b, c} vs H0 at 2 rollouts {a, c}: per task (0, +1, 0, 0) -> +0.25, within noise (p = 1)
    o = c["oracle_vs_h0_at_equal_rollouts"]
    assert o["difference"] == 0.25 and o["verdict"] == "within noise"
    assert c["oracle_vs_best_single"]["difference"] == 0.0
    # Wilson(1 of 4) for H0 at k: centre (0.25 + 0.480182) / 1.960365 = 0.372474, half 0.326886
    assert c["intervals"]["h0_at_k"] == pytest.approx([0.045587, 0.699358], abs=1e-5)


def test_no_fixes_give_no_overlap_value():
    h0 = {"a": [True, True]}
    r = pool_report(h0, {"s1": {"a": [True]}, "s2": {"a": [True]}}, k=1)
    assert r["overlap"] == {"s1|s2": None} and r["complementarity"]["oracle_union"] == 1.0


def _two_policies():
    """The same pool and tasks under two policies: s1 helps under the first, s2 under the second."""
    h0 = {"a": [False, False], "b": [True, False], "c": [False, False], "d": [True, True]}
    first = pool_report(
        h0,
        {
            "s1": {"a": [True], "b": [True], "c": [True], "d": [True]},
            "s2": {"a": [False], "b": [True], "c": [False], "d": [False]},
        },
        k=1,
    )
    h0_later = {"a": [True, True], "b": [True, True], "c": [False, False], "d": [False, True]}
    second = pool_report(
        h0_later,
        {
            "s1": {"a": [False], "b": [True], "c": [False], "d": [False]},
            "s2": {"a": [True], "b": [True], "c": [True], "d": [True]},
        },
        k=1,
    )
    return [("warm start", first), ("trained", second)]


def test_phenomena_tables_side_by_side_by_hand():
    from analysis.pool import phenomena_tables

    t = phenomena_tables(_two_policies())
    loc = {(r["policy"], r["sibling"]): r for r in t["pool_locality"].to_dict("records")}
    # warm start: H0 at k=1 solves b, d; s1 solves all 4 -> fixes a, c, breaks nothing: edge +0.5
    assert (loc["warm start", "s1"]["fixed"], loc["warm start", "s1"]["broken"]) == (2, 0)
    assert loc["warm start", "s1"]["edge"] == 0.5 and loc["warm start", "s1"]["n_tasks"] == 4
    # s2 solves only b: breaks d -> edge -0.25; trained: H0 at k solves a, b; s2 solves all: fixes c, d
    assert loc["warm start", "s2"]["edge"] == -0.25 and loc["trained", "s2"]["edge"] == 0.5
    assert loc["trained", "s1"]["edge"] == -0.25  # breaks a
    c = {r["policy"]: r for r in t["pool_complementarity"].to_dict("records")}
    assert c["warm start"]["oracle_union"] == 1.0 and c["warm start"]["best_single_name"] == "s1"
    assert c["trained"]["h0_at_equal_rollouts"] == 0.75 and c["trained"]["rollouts"] == 2
    assert c["trained"]["union_vs_h0_low"] <= 0.25 <= c["trained"]["union_vs_h0_high"]
    moving = t["pool_non_stationarity"].set_index("sibling")
    assert list(moving.columns) == ["warm start", "trained"]  # the order given
    assert moving.loc["s1", "warm start"].startswith("+0.500 [") and moving.loc["s1", "trained"].startswith("-0.250 [")


def test_no_pool_reports_give_empty_tables():
    from analysis.pool import phenomena_tables

    assert all(df.empty for df in phenomena_tables([]).values())
