"""Is a difference beyond noise? The report's comparisons, each with a 95% interval (analysis/statistics.py).

- :func:`task_scores`: an evaluation run's per-task Pass@k and Avg@k (percent), averaged over its
  seeds: the unit the paired tests resample.
- :func:`evaluation_differences`: paired differences between evaluation runs on the tasks both
  ran: every method against the starting policy and against the main method, Rank-1 against H0,
  harnesses outside the pool against H0; a baseline that evaluated its own starting weights also
  against those (same machine, same weights) and those against the main run's base policy (do the
  two machines' starting policies agree?) (paired bootstrap interval, sign-flip p-value).
- :func:`seed_differences`: the same comparisons between methods with training seeds as the unit
  of replication: each method's runs that differ only in their training seed are pooled, the
  interval resamples seeds and tasks (a two-level bootstrap), and the per-seed differences and the
  between-seed spread are shown beside it (one seed each: the paired bootstrap above).
- :func:`signal_differences`: the main method's valid-group ratio, effective-token ratio and
  rescue success against each other training run (Newcombe interval, z-test p-value), from the
  group counts in the RQ2 table.

The interval, not the std over seeds, decides the verdict: "beyond noise" when the 95% interval
of the difference excludes 0 (for paired comparisons, also p < 0.05 in the sign-flip test).
"""

from __future__ import annotations

from collections import defaultdict
from statistics import fmean

import numpy as np
import pandas as pd
from sqlalchemy import text
from sqlalchemy.orm import Session

from analysis.runs import Method, seed_groups
from analysis.statistics import compare_seeds, paired_bootstrap, sign_flip_test, two_proportions, verdict

DIFFERENCE_COLUMNS = [
    "comparison",
    "n_tasks",
    "pass_diff",
    "pass_low",
    "pass_high",
    "pass_p",
    "avg_diff",
    "avg_low",
    "avg_high",
    "avg_p",
    "verdict",
]


def task_scores(session: Session, run_id: str | None) -> dict[str, tuple[float, float]]:
    """bench task -> (Pass@k, Avg@k) in percent, each the mean over the run's seeds."""
    if run_id is None:
        return {}
    by_task: dict[str, list[tuple[float, float]]] = defaultdict(list)
    rows = session.execute(
        text("SELECT bench_task_id, rollouts, successes, solved FROM eval_task_outcomes WHERE run_id = :r"),
        {"r": run_id},
    ).mappings()
    for r in rows:
        avg = r["successes"] / r["rollouts"] if r["rollouts"] else 0.0
        by_task[r["bench_task_id"]].append((100.0 * r["solved"], 100.0 * avg))
    return {t: (fmean(p for p, _ in v), fmean(a for _, a in v)) for t, v in by_task.items()}


def paired_difference(label: str, a: dict, b: dict) -> dict | None:
    """a - b over the tasks both scored: Pass@k and Avg@k points with 95% intervals and p-values."""
    shared = sorted(a.keys() & b.keys())
    if not shared:
        return None
    row: dict = {"comparison": label, "n_tasks": len(shared)}
    words = []
    for i, metric in enumerate(("pass", "avg")):
        x, y = [a[t][i] for t in shared], [b[t][i] for t in shared]
        interval, p_value = paired_bootstrap(x, y), sign_flip_test(x, y)
        words.append(verdict(interval, p_value))
        row |= {
            f"{metric}_diff": interval.estimate,
            f"{metric}_low": interval.low,
            f"{metric}_high": interval.high,
            f"{metric}_p": p_value,
        }
    row["verdict"] = "beyond noise" if "beyond noise" in words else "within noise"  # either metric
    return row


def evaluation_differences(session: Session, methods: list[Method], prefix: str = "") -> pd.DataFrame:
    """One row per comparison of two evaluation runs of the compared methods (see the module doc);
    prefix 'test-' compares the test-split evaluations."""
    main = methods[0]
    cache: dict[str, dict] = {}

    def scores(run_id: str | None) -> dict:
        if run_id is None:
            return {}
        if run_id not in cache:
            cache[run_id] = task_scores(session, run_id)
        return cache[run_id]

    def run(m: Method, label: str) -> dict:
        return scores(m.eval_run(prefix + label))

    def deployed(m: Method) -> tuple[str, dict]:
        where, label = deployed_label(m, prefix)
        return where, run(m, label)

    before = run(main, "before")
    pairs: list[tuple[str, dict, dict]] = []
    for m in methods:
        where, result = deployed(m)
        pairs.append((f"{m.label} - base policy ({where})", result, before))
    for m in methods[1:]:
        where, result = deployed(m)
        pairs.append((f"{main.label} - {m.label} ({where})", deployed(main)[1], result))
    for m in methods:
        if m.eval_run(prefix + "after") and m.eval_run(prefix + "best"):  # a method deployed both ways
            pairs.append((f"{m.label}: H_best - H0", run(m, "best"), run(m, "after")))
    for m in methods[1:]:  # a baseline that evaluated its own starting weights (perhaps on another machine)
        if m.eval_run(prefix + "before"):
            where, result = deployed(m)
            pairs.append((f"{m.label} - its own starting policy ({where})", result, run(m, "before")))
            pairs.append((f"{m.label}'s starting policy - base policy (H0)", run(m, "before"), before))
    pairs.append(("Rank-1 - H0, trained", run(main, "rank1"), run(main, "after")))
    pairs.append(("Rank-1 - H0, base policy", run(main, "rank1-before"), before))
    for label in sorted(x for x in main.evaluations if x.startswith(prefix + "outside-")):
        harness = label.removeprefix(prefix + "outside-")
        pairs.append((f"{harness} - H0, trained", scores(main.eval_run(label)), run(main, "after")))
    rows = [row for label, a, b in pairs if (row := paired_difference(label, a, b)) is not None]
    return pd.DataFrame(rows, columns=DIFFERENCE_COLUMNS)


def deployed_label(m: Method, prefix: str = "") -> tuple[str, str]:
    """(where, evaluation label) of a method's result: trained weights under H0, else under H_best."""
    return ("H0", "after") if m.eval_run(prefix + "after") else ("H_best", "best")


SEED_COLUMNS = [
    "comparison",
    "seeds_a",
    "seeds_b",
    "n_tasks",
    "avg_diff",
    "avg_low",
    "avg_high",
    "pass_diff",
    "pass_low",
    "pass_high",
    "per_seed_avg",
    "spread_a",
    "spread_b",
    "verdict",
]


def seed_differences(session: Session, methods: list[Method], prefix: str = "") -> pd.DataFrame:
    """The main method's group of seeds against every other group, and every group against the
    base policy (H0), over the tasks every run of both sides scored. avg/pass: the pooled difference
    (mean over seeds of the mean over tasks) with its two-level 95% interval; per_seed_avg: seed S of
    one side against seed S of the other (paired over tasks), for the seeds both have; spread: the
    standard deviation of a side's per-seed Avg@k (0 with one seed). Beyond noise, as in RQ1: the
    interval excludes 0 and the sign-flip test over tasks (on the means over seeds) gives p < 0.05,
    for either metric."""
    groups = seed_groups(methods)
    main, *others = list(groups)
    cache: dict[str, dict] = {}

    def scores(m: Method) -> dict[str, tuple[float, float]]:
        run_id = m.eval_run(prefix + deployed_label(m, prefix)[1])
        if run_id and run_id not in cache:
            cache[run_id] = task_scores(session, run_id)
        return cache.get(run_id, {}) if run_id else {}

    def side(runs: list[Method]) -> tuple[list, list[dict]]:
        scored = [(m.seed, scores(m)) for m in runs]
        scored = [(s, sc) for s, sc in scored if sc]
        return [s for s, _ in scored], [sc for _, sc in scored]

    before = methods[0].eval_run(prefix + "before")
    base = ([None], [task_scores(session, before)]) if before else ([], [])
    pairs = [(f"{main} - {g} ({_where(groups[main], prefix)})", side(groups[main]), side(groups[g])) for g in others]
    pairs += [(f"{g} - base policy ({_where(runs, prefix)})", side(runs), base) for g, runs in groups.items()]
    rows = [row for label, a, b in pairs if (row := _seed_row(label, a, b)) is not None]
    return pd.DataFrame(rows, columns=SEED_COLUMNS)


def _where(runs: list[Method], prefix: str) -> str:
    return "/".join(sorted({deployed_label(m, prefix)[0] for m in runs}))


def _seed_row(label: str, a: tuple[list, list[dict]], b: tuple[list, list[dict]]) -> dict | None:
    (seeds_a, runs_a), (seeds_b, runs_b) = a, b
    if not runs_a or not runs_b:
        return None
    tasks = sorted(set.intersection(*(set(r) for r in runs_a + runs_b)))
    if not tasks:
        return None

    def matrix(runs: list[dict], i: int) -> np.ndarray:
        return np.array([[r[t][i] for t in tasks] for r in runs])

    # seed S of a against seed S of b; against a side of one run (the base policy), every seed of a
    by_seed = dict(zip(seeds_b, runs_b))
    partner = {s: runs_b[0] if len(runs_b) == 1 else by_seed.get(s) for s in seeds_a}
    row: dict = {"comparison": label, "seeds_a": len(runs_a), "seeds_b": len(runs_b), "n_tasks": len(tasks)}
    words = []
    for i, metric in ((1, "avg"), (0, "pass")):
        x, y = matrix(runs_a, i), matrix(runs_b, i)
        c = compare_seeds(x, y)
        p_value = sign_flip_test(x.mean(axis=0), y.mean(axis=0))  # over tasks, on the means over seeds
        words.append(verdict(c.pooled, p_value))
        row |= {f"{metric}_diff": c.pooled.estimate, f"{metric}_low": c.pooled.low, f"{metric}_high": c.pooled.high}
    per_seed = []
    for s, run in zip(seeds_a, runs_a):
        if partner[s] is not None:
            d = paired_bootstrap([run[t][1] for t in tasks], [partner[s][t][1] for t in tasks])
            per_seed.append(f"seed {s}: {d.estimate:+.2f} [{d.low:+.2f}, {d.high:+.2f}]")
    row["per_seed_avg"] = "; ".join(per_seed) or "-"
    row |= {"spread_a": c.spread_a, "spread_b": c.spread_b}
    row["verdict"] = "beyond noise" if "beyond noise" in words else "within noise"  # either metric, as RQ1
    return row


SIGNAL_COUNTS = {  # signal -> (successes column, trials column) of the RQ2 table
    "valid_group_ratio": ("valid_groups", "groups"),
    "effective_token_ratio": ("effective_groups", "groups"),
    "rescue_success": ("rescued", "rescues"),
}


def signal_differences(signals: pd.DataFrame) -> pd.DataFrame:
    """The main (first) training run's signals minus each other run's, as proportions over groups."""
    columns = ["signal", "comparison", "difference", "low", "high", "p", "verdict"]
    if len(signals) < 2:
        return pd.DataFrame(columns=columns)
    main = signals.iloc[0]
    rows = []
    for _, other in signals.iloc[1:].iterrows():
        for signal, (hits, trials) in SIGNAL_COUNTS.items():
            if not (main[trials] and other[trials]) or pd.isna(main[hits]) or pd.isna(other[hits]):
                continue
            c = two_proportions(main[hits], main[trials], other[hits], other[trials])
            rows.append(
                {
                    "signal": signal,
                    "comparison": f"{main['method']} - {other['method']}",
                    "difference": c.difference.estimate,
                    "low": c.difference.low,
                    "high": c.difference.high,
                    "p": c.p_value,
                    "verdict": verdict(c.difference),
                }
            )
    return pd.DataFrame(rows, columns=columns)
