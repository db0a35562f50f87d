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
