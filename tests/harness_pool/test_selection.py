"""Greedy parent selection against brute force."""

from __future__ import annotations

import math
import random

from harness_pool.selection import best_cover, coverage, greedy_cover


def test_greedy_is_within_the_one_minus_one_over_e_bound_on_random_cases():
    rng = random.Random(0)
    ratios = []
    for _ in range(300):
        n_sets, universe, budget = rng.randint(2, 7), rng.randint(3, 12), rng.randint(1, 4)
        solved = [set(rng.sample(range(universe), rng.randint(0, universe))) for _ in range(n_sets)]
        greedy = coverage(solved, greedy_cover(solved, budget))
        optimum, _ = best_cover(solved, budget)
        assert greedy >= (1 - 1 / math.e) * optimum
        assert greedy <= optimum
        ratios.append(greedy / optimum if optimum else 1.0)
    assert min(ratios) < 1.0 or sum(r == 1.0 for r in ratios) == len(ratios)


def test_greedy_is_exact_for_one_parent_and_for_disjoint_sets():
    solved = [{1, 2}, {3, 4, 5}, {6}, set()]
    assert greedy_cover(solved, 1) == [1] and best_cover(solved, 1) == (3, (1,))
    assert coverage(solved, greedy_cover(solved, 3)) == best_cover(solved, 3)[0] == 6
    assert greedy_cover(solved, 4) == [1, 0, 2]  # stops when nothing new is covered: the empty set is not taken


def test_ties_go_to_the_earlier_candidate_and_greedy_can_miss_the_optimum():
    assert greedy_cover([{1, 2}, {3, 4}, {1, 2}], 1) == [0]
    # the classic trap: a big middle set first, then only one of the halves fits the budget
    solved = [{1, 2, 3, 7}, {1, 2, 3, 4, 5, 6}, {4, 5, 6, 8}]
    assert greedy_cover(solved, 2) == [1, 0]
    assert coverage(solved, [1, 0]) == 7 and best_cover(solved, 2) == (8, (0, 2))
