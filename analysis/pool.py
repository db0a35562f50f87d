"""Locality and complementarity of a harness pool, from paired runs on the same tasks (docs/method.md §5).

Input: for every harness, each task's rollout successes; every sibling ran k rollouts per task
and H0 ran N * k (N siblings), so H0 can be compared both at the siblings' k and at the whole
pool's rollout count.
- locality, per sibling: tasks it fixes (solved within k, H0 not within its first k) and breaks
  (H0 solved within its first k, the sibling not);
- complementarity: the oracle union (tasks any sibling solved) vs the best single sibling vs
  H0 resampled at the same total rollout count (N * k);
- pairwise repair overlap: Jaccard index of two siblings' fixed sets.

Every comparison is paired over the same tasks, with a 95% paired-bootstrap interval and the
sign-flip test's verdict (analysis/statistics.py): a sibling's edge over H0 at k, and the oracle
union against the best single sibling and against H0 at the same rollout count.
"""

from __future__ import annotations

from itertools import combinations

import pandas as pd

from analysis.statistics import paired_bootstrap, sign_flip_test, verdict, wilson


def _solved(runs: dict[str, list[bool]], k: int | None = None) -> set[str]:
    return {task for task, s in runs.items() if any(s[:k] if k else s)}


def pool_report(h0: dict[str, list[bool]], siblings: dict[str, dict[str, list[bool]]], k: int) -> dict:
    tasks = sorted(h0)
    h0_at_k = _solved(h0, k)
    solved = {name: _solved(runs) for name, runs in siblings.items()}
    fixed = {name: sorted(s - h0_at_k) for name, s in solved.items()}
    broken = {name: sorted(h0_at_k - s) for name, s in solved.items()}
    union = set().union(*solved.values()) if solved else set()
    best = max(solved, key=lambda n: (len(solved[n]), n)) if solved else None
    overlap = {f"{a}|{b}": _jaccard(set(fixed[a]), set(fixed[b])) for a, b in combinations(sorted(siblings), 2)}
    n = len(tasks) or 1
    h0_equal = _solved(h0)

    def versus(better: set[str], base: set[str]) -> dict:
        """The paired difference of two solved sets over the report's tasks, with its interval."""
        a, b = [float(t in better) for t in tasks] or [0.0], [float(t in base) for t in tasks] or [0.0]
        interval = paired_bootstrap(a, b)
        return {
            "difference": interval.estimate,
            "interval": [interval.low, interval.high],
            "verdict": verdict(interval, sign_flip_test(a, b)),
        }

    shares = {"h0_at_k": h0_at_k, "oracle_union": union, "h0_at_equal_rollouts": h0_equal}
    if best:
        shares["best_single"] = solved[best]
    return {
        "n_tasks": len(tasks),
        "k": k,
        "n_siblings": len(siblings),
        "locality": {
            name: {
                "solved": len(solved[name]),
                "fixed": len(fixed[name]),
                "broken": len(broken[name]),
                "fixed_tasks": fixed[name],
                "broken_tasks": broken[name],
                "edge": versus(solved[name], h0_at_k),
            }
            for name in sorted(siblings)
        },
        "complementarity": {
            "h0_at_k": len(h0_at_k) / n,
            "best_single": len(solved[best]) / n if best else 0.0,
            "best_single_name": best,
            "oracle_union": len(union) / n,
            "h0_at_equal_rollouts": len(_solved(h0)) / n,
            "equal_rollouts": k * len(siblings),
            "intervals": {key: list(_wilson(len(s), len(tasks))) for key, s in shares.items()},
            "oracle_vs_best_single": versus(union, solved[best] if best else set()),
            "oracle_vs_h0_at_equal_rollouts": versus(union, h0_equal),
        },
        "overlap": overlap,
    }


def _wilson(hits: int, n: int) -> tuple[float, float]:
    if not n:
        return (0.0, 1.0)
    w = wilson(hits, n)
    return (w.low, w.high)


def _jaccard(a: set, b: set) -> float | None:
    return len(a & b) / len(a | b) if a | b else None


def phenomena_tables(reports: list[tuple[str, dict]]) -> dict[str, pd.DataFrame]:
    """Pool reports of the same pool under several policies (label, report), in the order given:
    `pool_locality` (each sibling's fixed / broken tasks and edge over H0 at k, with its interval),
    `pool_complementarity` (H0 at k, best single, oracle union, H0 at the pool's rollout count, and
    the union's paired gains with intervals) and `pool_non_stationarity` (each sibling's edge over H0
    under each policy: how the pool's value moves as the policy trains)."""
    locality, complementarity = [], []
    for label, r in reports:
        for sibling, x in r["locality"].items():
            low, high = x["edge"]["interval"]
            locality.append(
                {
                    "policy": label,
                    "sibling": sibling,
                    "solved": x["solved"],
                    "fixed": x["fixed"],
                    "broken": x["broken"],
                    "n_tasks": r["n_tasks"],
                    "edge": x["edge"]["difference"],
                    "edge_low": low,
                    "edge_high": high,
                    "verdict": x["edge"]["verdict"],
                }
            )
        c = r["complementarity"]
        row = {
            "policy": label,
            "n_tasks": r["n_tasks"],
            "rollouts": c["equal_rollouts"],
            "h0_at_k": c["h0_at_k"],
            "best_single": c["best_single"],
            "best_single_name": c["best_single_name"],
            "oracle_union": c["oracle_union"],
            "h0_at_equal_rollouts": c["h0_at_equal_rollouts"],
        }
        for key, name in (
            ("oracle_vs_best_single", "union_vs_best"),
            ("oracle_vs_h0_at_equal_rollouts", "union_vs_h0"),
        ):
            row |= {
                f"{name}_low": c[key]["interval"][0],
                f"{name}_high": c[key]["interval"][1],
                f"{name}_verdict": c[key]["verdict"],
            }
        complementarity.append(row)
    loc = pd.DataFrame(locality)
    if loc.empty:
        moving = pd.DataFrame()
    else:
        cell = loc.assign(
            cell=[f"{e:+.3f} [{lo:+.2f}, {hi:+.2f}]" for e, lo, hi in zip(loc.edge, loc.edge_low, loc.edge_high)]
        )
        order = [label for label, _ in reports]
        moving = cell.pivot(index="sibling", columns="policy", values="cell")[order].reset_index()
        moving.columns.name = None
    return {
        "pool_locality": loc,
        "pool_complementarity": pd.DataFrame(complementarity),
        "pool_non_stationarity": moving,
    }
