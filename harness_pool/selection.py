"""Parent selection: greedy maximum coverage of validation tasks (docs/method.md §2 step 4).

Each candidate H has V(H), the validation tasks it solves. Choose up to B candidates whose
union |V(H1) ∪ ... ∪ V(HB)| is as large as possible. Greedy (take the candidate adding the most
new tasks; ties go to the earlier candidate; stop when nothing new is added) is within
(1 - 1/e) of the best choice; `best_cover` is the exact brute force, for tests and small pools.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from itertools import combinations


def greedy_cover(solved: Sequence[set[Hashable]], budget: int) -> list[int]:
    """Indices of up to `budget` sets, in the order greedy picks them."""
    chosen: list[int] = []
    covered: set[Hashable] = set()
    while len(chosen) < budget:
        gains = [(len(s - covered), -i) for i, s in enumerate(solved) if i not in chosen]
        if not gains or max(gains)[0] == 0:
            break
        best = -max(gains)[1]
        chosen.append(best)
        covered |= solved[best]
    return chosen


def coverage(solved: Sequence[set[Hashable]], chosen: Sequence[int]) -> int:
    return len(set().union(*(solved[i] for i in chosen))) if chosen else 0


def best_cover(solved: Sequence[set[Hashable]], budget: int) -> tuple[int, tuple[int, ...]]:
    """The largest coverage over all choices of at most `budget` sets (exponential; small inputs)."""
    best: tuple[int, tuple[int, ...]] = (0, ())
    for size in range(1, min(budget, len(solved)) + 1):
        for combo in combinations(range(len(solved)), size):
            value = coverage(solved, combo)
            if value > best[0]:
                best = (value, combo)
    return best


def ranked_harnesses(success: dict[str, float], order: Sequence[str]) -> list[str]:
    """Harness names by validation success, highest first; ties keep the order given (H0 first,
    then pool order). Frozen-policy evolution deploys the first (H_best)."""
    if not order:
        raise ValueError("no harness to choose from")
    position = {name: i for i, name in enumerate(order)}
    return sorted(order, key=lambda name: (-success.get(name, 0.0), position[name]))
