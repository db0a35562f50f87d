"""Locality and complementarity of a harness pool, from paired runs on the same tasks (docs/method.md §5).

Input: for every harness, each task's rollout successes; every sibling ran k rollouts per task
and H0 ran N * k (N siblings), so H0 can be compared both at the siblings' k and at the whole
pool's rollout count.
- locality, per sibling: tasks it fixes (solved within k, H0 not within its first k) and breaks
  (H0 solved within its first k, the sibling not);
- complementarity: the oracle union (tasks any sibling solved) vs the best single sibling vs
  H0 resampled at the same total rollout count (N * k);
- pairwise repair overlap: Jaccard index of two siblings' fixed sets.
"""

from __future__ import annotations

from itertools import combinations


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
        },
        "overlap": overlap,
    }


def _jaccard(a: set, b: set) -> float | None:
    return len(a & b) / len(a | b) if a | b else None
