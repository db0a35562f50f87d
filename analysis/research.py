"""The research questions of docs/method.md §5 as DataFrames, read from the database's analysis views
(migration 0007), so every number here is also one plain SQL query away.

Each function takes a session and the compared Methods (analysis/runs.py) and returns a
DataFrame with one row per table row of the report. Shares are fractions in [0, 1] except
Pass@k / Avg@k, which are percent as in the paper. Std is the population std over seeds.
"""

from __future__ import annotations

import json
from collections import Counter
from statistics import fmean, pstdev

import pandas as pd
from sqlalchemy import text
from sqlalchemy.orm import Session

from analysis.runs import Method
from analysis.statistics import Interval, paired_bootstrap, sign_flip_test, two_proportions, verdict, wilson
from analysis.training import rescue_by_stage
from envs.registry import behaviours

SIGNALS = (
    "valid_group_ratio",
    "effective_token_ratio",
    "first_group_success",
    "rescues_triggered",
    "rescue_success",
    "rollouts_spent",
)


def _rows(session: Session, sql: str, **params) -> list[dict]:
    return [dict(r) for r in session.execute(text(sql), params).mappings()]


def scores(session: Session, run_id: str | None) -> dict | None:
    """Pass@k / Avg@k of one evaluation run: mean and std over its seeds (None: no such run)."""
    if run_id is None:
        return None
    rows = _rows(session, "SELECT seed, n_tasks, pass_at_k, avg_at_k FROM eval_scores WHERE run_id = :r", r=run_id)
    if not rows:
        return None
    passes, avgs = [r["pass_at_k"] for r in rows], [r["avg_at_k"] for r in rows]
    return {
        "pass_mean": fmean(passes),
        "pass_std": pstdev(passes),
        "avg_mean": fmean(avgs),
        "avg_std": pstdev(avgs),
        "seeds": len(rows),
        "n_tasks": rows[0]["n_tasks"],
    }


def _score_row(method: str, routing: str, run_id: str | None, session: Session) -> dict | None:
    s = scores(session, run_id)
    return None if s is None else {"method": method, "routing": routing, **s, "run_id": run_id}


def rq1_main_table(session: Session, methods: list[Method], prefix: str = "") -> pd.DataFrame:
    """Pass@k / Avg@k under H0, under Rank-1 and, for a baseline that deploys a harness, under its
    H_best: the starting policy, then every method after training. prefix 'test-' reads the
    test-split evaluations (test-before, test-after, test-rank1, test-best) instead."""
    main = methods[0]
    rows = [
        _score_row("base policy", "H0", main.eval_run(f"{prefix}before"), session),
        _score_row("base policy", "Rank-1", main.eval_run(f"{prefix}rank1-before"), session),
    ]
    for m in methods:
        rows += [
            _score_row(m.label, "H0", m.eval_run(f"{prefix}after"), session),
            _score_row(m.label, "Rank-1", m.eval_run(f"{prefix}rank1"), session),
            _score_row(m.label, "H_best", m.eval_run(f"{prefix}best"), session),
        ]
    return pd.DataFrame(
        [r for r in rows if r],
        columns=["method", "routing", "pass_mean", "pass_std", "avg_mean", "avg_std", "seeds", "n_tasks", "run_id"],
    )


def _signals(session: Session, train_run_id: str) -> list[dict]:
    return _rows(session, "SELECT * FROM train_signals WHERE run_id = :r ORDER BY step", r=train_run_id)


SIGNAL_TABLE = [
    "method",
    "updates",
    "valid_group_ratio",
    "valid_low",
    "valid_high",
    "effective_token_ratio",
    "first_group_success",
    "rescues",
    "rescue_success",
    "rescue_low",
    "rescue_high",
    "rollouts_spent",
    "groups",
    "valid_groups",
    "effective_groups",
    "rescued",
]


def _wilson_bounds(prefix: str, hits: float | None, trials: float | None) -> dict:
    """{prefix_low, prefix_high}: the 95% Wilson interval of hits / trials (None without trials)."""
    if not trials or hits is None:
        return {f"{prefix}_low": None, f"{prefix}_high": None}
    w = wilson(min(hits, trials), trials)
    return {f"{prefix}_low": w.low, f"{prefix}_high": w.high}


def rq2_signals(session: Session, methods: list[Method]) -> pd.DataFrame:
    """Per training run: mean valid-group and effective-token ratios, H0 first-group success, rescues, the share
    of rescue groups with a success, and rollouts spent (also as a share of GRPO's when GRPO is compared)."""
    rows = []
    for m in methods:
        steps = [s for run in m.train_run_ids for s in _signals(session, run)]  # every segment's updates
        if not steps:
            continue

        def mean(key: str) -> float | None:
            values = [s[key] for s in steps if s[key] is not None]
            return fmean(values) if values else None

        triggered = sum(s["rescues_triggered"] or 0.0 for s in steps)
        rescued = sum((s["rescue_success"] or 0.0) * (s["rescues_triggered"] or 0.0) for s in steps)
        groups = m.batch_tasks * len(steps) if m.batch_tasks else None

        def count(key: str) -> float | None:  # groups the signal held, from each update's ratio
            return sum((s[key] or 0.0) * m.batch_tasks for s in steps) if groups else None

        valid, effective = count("valid_group_ratio"), count("effective_token_ratio")
        rows.append(
            {
                "method": m.label,
                "updates": len(steps),
                "valid_group_ratio": mean("valid_group_ratio"),
                **_wilson_bounds("valid", valid, groups),
                "effective_token_ratio": mean("effective_token_ratio"),
                "first_group_success": mean("first_group_success"),
                "rescues": round(triggered),
                "rescue_success": rescued / triggered if triggered else None,
                **_wilson_bounds("rescue", rescued, triggered),
                "rollouts_spent": sum(s["rollouts_spent"] or 0.0 for s in steps),
                "groups": groups,
                "valid_groups": round(valid) if valid is not None else None,
                "effective_groups": effective,
                "rescued": round(rescued),
            }
        )
    df = pd.DataFrame(rows, columns=SIGNAL_TABLE)
    grpo = df.loc[df["method"] == "grpo", "rollouts_spent"]
    df["rollouts_vs_grpo"] = df["rollouts_spent"] / float(grpo.iloc[0]) if len(grpo) and grpo.iloc[0] else None
    return df


def _reanchors(session: Session, train_run_id: str) -> list[dict]:
    return _rows(
        session,
        "SELECT step, harness_id, harness_name, success_rate, n_tasks FROM reanchor_success "
        "WHERE run_id = :r ORDER BY step, harness_name",
        r=train_run_id,
    )


def rq2_validation(session: Session, methods: list[Method]) -> pd.DataFrame:
    """H0 validation success at every re-anchor (checkpoint) of each training run, long format."""
    rows = [
        {"method": m.label, "step": r["step"], "h0_success": r["success_rate"]}
        for m in methods
        if m.train_run_id
        for r in _reanchors(session, m.train_run_id)
        if r["harness_name"] == m.base_harness
    ]
    return pd.DataFrame(rows, columns=["method", "step", "h0_success"])


def rq3_rescue_by_stage(session: Session, methods: list[Method]) -> pd.DataFrame:
    """For every harness-rescue run (router variant): rescues and rescue success per training stage (the span of
    updates between two re-anchors, one profile version each)."""
    rows = []
    for m in methods:
        if m.mode != "harness_s" or not m.train_run_id:
            continue
        steps = [
            {
                "step": s["step"],
                "rollout/rescues_triggered": s["rescues_triggered"] or 0.0,
                "rollout/rescue_success": s["rescue_success"] or 0.0,
            }
            for s in _signals(session, m.train_run_id)
        ]
        reanchor_steps = sorted({r["step"] for r in _reanchors(session, m.train_run_id)})
        last = max((s["step"] for s in steps), default=0)
        for start, stage in rescue_by_stage(steps, reanchor_steps).items():
            end = min([a - 1 for a in reanchor_steps if a > start] + [last])
            rescues = round(stage["rescues"])
            rescued = round((stage["rescue_success"] or 0.0) * rescues)
            rows.append(
                {
                    "router": m.router,
                    "method": m.label,
                    "stage": f"{start}-{end}",
                    "first_update": start,
                    "rescues": rescues,
                    "rescued": rescued,
                    "rescue_success": stage["rescue_success"],
                    **_wilson_bounds("rescue", rescued, rescues),
                }
            )
    return pd.DataFrame(rows, columns=RESCUE_STAGE_TABLE)


RESCUE_STAGE_TABLE = [
    "router",
    "method",
    "stage",
    "first_update",
    "rescues",
    "rescued",
    "rescue_success",
    "rescue_low",
    "rescue_high",
]


def rq3_reanchoring_ablation(stages: pd.DataFrame) -> pd.DataFrame:
    """Adaptive (re-anchored profiles) vs fixed_profiles (first profiles kept) per stage; empty unless both ran.
    Several training seeds of one router pool their rescues (counts summed; `*_runs` says how many runs):
    the Newcombe interval then treats rescues as independent and leaves out the between-seed variance."""
    routers = ["adaptive", "fixed_profiles"]
    columns = ["stage", *routers, "adaptive_runs", "fixed_profiles_runs", "difference", "low", "high", "verdict"]
    both = stages[stages["router"].isin(routers)]
    if set(both["router"]) != set(routers):
        return pd.DataFrame(columns=columns)
    pooled = both.groupby(["stage", "router"]).agg(
        rescues=("rescues", "sum"), rescued=("rescued", "sum"), runs=("method", "size")
    )
    rows = []
    for stage, part in pooled.groupby(level="stage", sort=True):
        by = part.droplevel("stage")
        row: dict = {"stage": stage}
        for router in routers:
            if router in by.index:
                rescues, rescued = by.loc[router, "rescues"], by.loc[router, "rescued"]
                row[router] = rescued / rescues if rescues else None
                row[f"{router}_runs"] = int(by.loc[router, "runs"])
        if all(r in by.index and by.loc[r, "rescues"] for r in routers):
            c = two_proportions(
                by.loc["adaptive", "rescued"],
                by.loc["adaptive", "rescues"],
                by.loc["fixed_profiles", "rescued"],
                by.loc["fixed_profiles", "rescues"],
            )
            row |= {
                "difference": c.difference.estimate,
                "low": c.difference.low,
                "high": c.difference.high,
                "verdict": verdict(c.difference),
            }
        rows.append(row)
    return pd.DataFrame(rows, columns=columns)


def _behaviours_of(session: Session, run_id: str) -> tuple[str, ...]:
    """The behaviour tags of the run's benchmark (its detectors' TAGS)."""
    first = _rows(
        session,
        "SELECT b.benchmark FROM trajectories t JOIN bench_tasks b ON b.id = t.bench_task_id WHERE t.run_id = :r "
        "LIMIT 1",
        r=run_id,
    )
    return behaviours(first[0]["benchmark"]) if first else ()


def _behaviour_shares(session: Session, run_id: str) -> dict[str, float]:
    shares = {
        r["tag"]: r["share"]
        for r in _rows(session, "SELECT tag, share FROM behaviour_frequencies WHERE run_id = :r", r=run_id)
    }
    return {tag: shares.get(tag, 0.0) for tag in _behaviours_of(session, run_id)}


def rq4_policies(methods: list[Method]) -> list[tuple[str, str]]:
    """(policy label, H0 evaluation run id): the base policy, GRPO and the main method, where evaluated."""
    main = methods[0]
    grpo = next((m for m in methods if m.mode == "grpo"), None)
    pairs = [
        ("base policy", main.eval_run("before")),
        ("grpo", grpo.eval_run("after") if grpo else None),
        (main.label, main.eval_run("after")),
    ]
    return list(dict((label, run_id) for label, run_id in pairs if run_id).items())  # main may be the grpo run


def rq4_behaviours(session: Session, methods: list[Method]) -> pd.DataFrame:
    """Share of H0 evaluation trajectories showing each of the benchmark's behaviours, per policy."""
    rows = [
        {"behaviour": tag, "policy": label, "share": share}
        for label, run_id in rq4_policies(methods)
        for tag, share in _behaviour_shares(session, run_id).items()
    ]
    return pd.DataFrame(rows, columns=["behaviour", "policy", "share"])


def _behaviour_counts(session: Session, run_id: str) -> tuple[dict[str, int], int]:
    """(tag -> trajectories showing it, all trajectories) of an evaluation run, as the view counts them."""
    tagged = {
        r["tag"]: int(r["n_tagged"])
        for r in _rows(session, "SELECT tag, n_tagged FROM behaviour_frequencies WHERE run_id = :r", r=run_id)
    }
    total = _rows(session, "SELECT COUNT(*) AS n FROM trajectories WHERE run_id = :r", r=run_id)[0]["n"]
    return {tag: tagged.get(tag, 0) for tag in _behaviours_of(session, run_id)}, int(total)


def rq4_behaviour_differences(session: Session, methods: list[Method]) -> pd.DataFrame:
    """The trained policy's share of H0 evaluation trajectories with each behaviour minus the base
    policy's (and GRPO's, where compared): Newcombe's 95% interval and the z test, with trajectories as
    independent draws (an approximation: one task's rollouts resemble each other, so the interval is
    somewhat too narrow)."""
    columns = ["behaviour", "comparison", "main", "other", "difference", "low", "high", "p", "verdict"]
    policies = dict(rq4_policies(methods))
    main = methods[0].label
    if main not in policies:
        return pd.DataFrame(columns=columns)
    mine, n_mine = _behaviour_counts(session, policies[main])
    rows = []
    for other in (p for p in policies if p != main):
        theirs, n_theirs = _behaviour_counts(session, policies[other])
        if not (n_mine and n_theirs):
            continue
        for tag in (t for t in mine if t in theirs):
            c = two_proportions(mine[tag], n_mine, theirs[tag], n_theirs)
            rows.append(
                {
                    "behaviour": tag,
                    "comparison": f"{main} - {other}",
                    "main": mine[tag] / n_mine,
                    "other": theirs[tag] / n_theirs,
                    "difference": c.difference.estimate,
                    "low": c.difference.low,
                    "high": c.difference.high,
                    "p": c.p_value,
                    "verdict": verdict(c.difference, c.p_value),
                }
            )
    return pd.DataFrame(rows, columns=columns)


def _outcomes(session: Session, run_id: str) -> dict[str, dict]:
    """bench task -> {task_type, rollouts, successes} summed over seeds."""
    out: dict[str, dict] = {}
    for r in _rows(
        session,
        "SELECT bench_task_id, task_type, rollouts, successes FROM eval_task_outcomes WHERE run_id = :r",
        r=run_id,
    ):
        o = out.setdefault(r["bench_task_id"], {"task_type": r["task_type"], "rollouts": 0, "successes": 0})
        o["rollouts"] += r["rollouts"]
        o["successes"] += r["successes"]
    return out


def _tags(session: Session, run_id: str, task_id: str) -> str:
    rows = _rows(
        session,
        "SELECT t.behaviour_tags AS tags FROM trajectories t JOIN rollout_groups g ON "
        "g.id = t.group_id WHERE t.run_id = :r AND t.bench_task_id = :t AND g.role = 'eval'",
        r=run_id,
        t=task_id,
    )
    counts = Counter(tag for row in rows for tag in _doc(row["tags"], []))
    return ", ".join(f"{tag} x{n}" for tag, n in sorted(counts.items())) or "none"


def _doc(value, empty):
    """A JSON column read through text(): already decoded (PostgreSQL JSONB) or a string (SQLite)."""
    if isinstance(value, str):
        return json.loads(value)
    return empty if value is None else value


def rq4_transfers(session: Session, methods: list[Method], limit: int = 5) -> pd.DataFrame:
    """Unseen (evaluation-split) tasks the starting policy never solved under H0 and the trained one did,
    with the behaviours each showed there: what moved into the policy, seen on single instances."""
    main = methods[0]
    before_id, after_id = main.eval_run("before"), main.eval_run("after")
    columns = ["bench_task_id", "task_type", "before", "after", "before_behaviours", "after_behaviours"]
    if not (before_id and after_id):
        return pd.DataFrame(columns=columns)
    before, after = _outcomes(session, before_id), _outcomes(session, after_id)
    gained = sorted(
        (t for t, o in after.items() if o["successes"] and t in before and not before[t]["successes"]),
        key=lambda t: (-after[t]["successes"], t),
    )[:limit]
    rows = [
        {
            "bench_task_id": t,
            "task_type": after[t]["task_type"],
            "before": f"{before[t]['successes']}/{before[t]['rollouts']}",
            "after": f"{after[t]['successes']}/{after[t]['rollouts']}",
            "before_behaviours": _tags(session, before_id, t),
            "after_behaviours": _tags(session, after_id, t),
        }
        for t in gained
    ]
    return pd.DataFrame(rows, columns=columns)


def rq5_rank1_shares(session: Session, methods: list[Method]) -> pd.DataFrame:
    """Share of evaluation tasks on which each harness is Rank-1, before (first re-anchor's profiles, starting
    weights) and after training (newest profiles, trained weights)."""
    main = methods[0]
    rows = []
    for when, label in (("before", "rank1-before"), ("after", "rank1")):
        run_id = main.eval_run(label)
        if run_id:
            rows += [
                {
                    "harness": r["harness_name"] or r["harness_id"][:12],
                    "when": when,
                    "share": r["share"],
                    # the view's n_tasks counts the decisions that chose this harness; the run's
                    # tasks are n_tasks / share (every row of a run has the same denominator)
                    "n_tasks": round(r["n_tasks"] / r["share"]) if r["share"] else None,
                }
                for r in _rows(
                    session,
                    "SELECT harness_id, harness_name, n_tasks, share FROM rank1_shares "
                    "WHERE run_id = :r ORDER BY harness_name",
                    r=run_id,
                )
            ]
    df = pd.DataFrame(rows, columns=["harness", "when", "share", "n_tasks"])
    if df.empty:
        return pd.DataFrame(columns=["harness", "before", "after"])
    wide = df.pivot_table(index="harness", columns="when", values="share", aggfunc="first", fill_value=0.0)
    if main.base_harness not in wide.index:  # never ranked first: a row of zeros, which is the finding
        wide.loc[main.base_harness] = 0.0
    wide = wide.reindex(columns=["before", "after"], fill_value=0.0).sort_index().reset_index()
    wide.columns.name = None
    n = df.groupby("when")["n_tasks"].max()
    if {"before", "after"} <= set(n.index):  # after - before, each share over its tasks (Newcombe)
        changes = [
            two_proportions(r["after"] * n["after"], n["after"], r["before"] * n["before"], n["before"]).difference
            for _, r in wide.iterrows()
        ]
        wide["change_low"] = [c.low for c in changes]
        wide["change_high"] = [c.high for c in changes]
        wide["verdict"] = [verdict(c) for c in changes]
    return wide


def rq5_rank1_edge(session: Session, methods: list[Method]) -> pd.DataFrame:
    """Rank-1's Pass@k / Avg@k minus H0's, for the starting and the trained weights."""
    main = methods[0]
    rows = []
    for when, h0_label, r1_label in (("before", "before", "rank1-before"), ("after", "after", "rank1")):
        h0, r1 = scores(session, main.eval_run(h0_label)), scores(session, main.eval_run(r1_label))
        if h0 and r1:
            rows.append(
                {
                    "when": when,
                    "h0_pass": h0["pass_mean"],
                    "rank1_pass": r1["pass_mean"],
                    "pass_edge": r1["pass_mean"] - h0["pass_mean"],
                    "h0_avg": h0["avg_mean"],
                    "rank1_avg": r1["avg_mean"],
                    "avg_edge": r1["avg_mean"] - h0["avg_mean"],
                }
            )
    return pd.DataFrame(rows, columns=["when", "h0_pass", "rank1_pass", "pass_edge", "h0_avg", "rank1_avg", "avg_edge"])


def rq6_outside(session: Session, methods: list[Method]) -> pd.DataFrame:
    """Each method's trained policy under H0 and under every harness outside the pool it was evaluated with."""
    rows = []
    for m in methods:
        outside = sorted(label for label in m.evaluations if label.startswith("outside-"))
        if not outside:
            continue
        for label in ["after", *outside]:
            row = _score_row(
                m.label,
                m.base_harness if label == "after" else label.removeprefix("outside-"),
                m.eval_run(label),
                session,
            )
            if row:
                rows.append({**row, "in_pool": label == "after"})
    df = pd.DataFrame(
        rows,
        columns=[
            "method",
            "routing",
            "pass_mean",
            "pass_std",
            "avg_mean",
            "avg_std",
            "seeds",
            "n_tasks",
            "run_id",
            "in_pool",
        ],
    )
    return df.rename(columns={"routing": "harness"})


def _solved_by_harness(session: Session, train_run_id: str) -> dict[int, dict[str, tuple[set, int]]]:
    """step -> harness name -> (solved validation task ids, validation tasks), from the re-anchor evaluations."""
    rows = _rows(
        session,
        "SELECT e.metrics AS metrics, e.n_bench_tasks AS n, h.name AS name FROM evaluations e "
        "JOIN harnesses h ON h.id = e.harness_id WHERE e.run_id = :r AND e.routing = 'reanchor'",
        r=train_run_id,
    )
    out: dict[int, dict[str, tuple[set, int]]] = {}
    for r in rows:
        metrics = _doc(r["metrics"], {})
        out.setdefault(int(metrics["step"]), {})[r["name"]] = (set(metrics.get("solved", [])), r["n"])
    return out


def locality(session: Session, methods: list[Method]) -> pd.DataFrame:
    """Per sibling and re-anchor of the main run: validation tasks it solved, fixed (H0 did not) and broke
    (H0 did, it did not): repairs are local, and most siblings also break something."""
    main = methods[0]
    rows = []
    for step, by_name in sorted(_solved_by_harness(session, main.train_run_id or "").items()):
        base, n = by_name.get(main.base_harness, (set(), 0))
        for name, (solved, _) in sorted(by_name.items()):
            if name != main.base_harness:
                fixed, broken = len(solved - base), len(base - solved)
                edge, said = _count_difference(fixed, broken, n)
                rows.append(
                    {
                        "step": step,
                        "sibling": name,
                        "solved": len(solved),
                        "fixed": fixed,
                        "broken": broken,
                        "n_tasks": n,
                        "edge": edge.estimate,
                        "edge_low": edge.low,
                        "edge_high": edge.high,
                        "verdict": said,
                    }
                )
    return pd.DataFrame(
        rows,
        columns=["step", "sibling", "solved", "fixed", "broken", "n_tasks", "edge", "edge_low", "edge_high", "verdict"],
    )


def _count_difference(gained: int, lost: int, n: int) -> tuple[Interval, str]:
    """Paired success difference over n tasks where ``gained`` go 0 -> 1 and ``lost`` 1 -> 0: the
    mean of per-task differences (+1, -1, 0) with its paired bootstrap interval, and the verdict
    (interval and exact sign-flip test, which for such counts is McNemar's test)."""
    diffs = [1.0] * gained + [-1.0] * lost
    diffs += [0.0] * max(n - len(diffs), 0 if diffs else 1)  # at least one task
    zeros = [0.0] * len(diffs)
    interval = paired_bootstrap(diffs, zeros)
    return interval, verdict(interval, sign_flip_test(diffs, zeros))


def complementarity(session: Session, methods: list[Method]) -> pd.DataFrame:
    """Per re-anchor of the main run: share of validation tasks solved by H0, by the best single sibling and by
    the union of all siblings (the oracle), each with the same k per harness."""
    main = methods[0]
    rows = []
    for step, by_name in sorted(_solved_by_harness(session, main.train_run_id or "").items()):
        base, n = by_name.get(main.base_harness, (set(), 0))
        siblings = {name: s for name, (s, _) in by_name.items() if name != main.base_harness}
        if not siblings or not n:
            continue
        best = max(sorted(siblings), key=lambda name: len(siblings[name]))
        union = set().union(*siblings.values())
        gain, said = _count_difference(len(union - siblings[best]), 0, n)  # the union contains the best single
        rows.append(
            {
                "step": step,
                "n_tasks": n,
                "h0": len(base) / n,
                "best_single": len(siblings[best]) / n,
                "best_single_name": best,
                "oracle_union": len(union) / n,
                "union_gain_low": gain.low,
                "union_gain_high": gain.high,
                "verdict": said,
            }
        )
    return pd.DataFrame(
        rows,
        columns=[
            "step",
            "n_tasks",
            "h0",
            "best_single",
            "best_single_name",
            "oracle_union",
            "union_gain_low",
            "union_gain_high",
            "verdict",
        ],
    )


def non_stationarity(session: Session, methods: list[Method]) -> pd.DataFrame:
    """Each sibling's validation-success edge over H0 at every re-anchor of the main run (wide: one column per
    re-anchor step): an edge that shrinks or flips as the policy learns is what re-anchoring tracks."""
    main = methods[0]
    rows = _rows(
        session,
        "SELECT step, harness_name, edge FROM sibling_edges WHERE run_id = :r ORDER BY step",
        r=main.train_run_id or "",
    )
    if not rows:
        return pd.DataFrame(columns=["sibling"])
    wide = pd.DataFrame(rows).pivot_table(index="harness_name", columns="step", values="edge", aggfunc="first")
    wide = wide.reset_index().rename(columns={"harness_name": "sibling"})
    wide.columns = [c if isinstance(c, str) else f"step {c}" for c in wide.columns]
    return wide
