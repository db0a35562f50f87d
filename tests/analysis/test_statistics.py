"""Intervals and tests against values worked out by hand (the arithmetic is in each comment)."""

import math

import pytest
from pytest import approx

from analysis.statistics import (
    Interval,
    compare_seeds,
    mcnemar,
    paired_bootstrap,
    seeded_paired_bootstrap,
    sign_flip_test,
    two_proportions,
    verdict,
    wilson,
)


def test_wilson_interval_of_8_in_10():
    # z = 1.959964; p = 0.8; denominator 1 + z^2/10 = 1.384146; centre (0.8 + 0.192073) / 1.384146 = 0.716738;
    # half-width z * sqrt(0.016 + 0.009604) / 1.384146 = 0.226648  ->  [0.490, 0.943]
    w = wilson(8, 10)
    assert (w.estimate, w.low, w.high) == approx((0.8, 0.490162, 0.943318), abs=1e-5)


def test_wilson_at_the_edges_stays_inside_0_1():
    # 0 of 10: centre = half = 0.192073 / 1.384146 = 0.138767 -> [0, 0.2775]
    w = wilson(0, 10)
    assert w.low == approx(0.0, abs=1e-12) and w.high == approx(0.277533, abs=1e-5)
    assert wilson(10, 10).high == 1.0
    with pytest.raises(ValueError, match="n > 0"):
        wilson(0, 0)
    with pytest.raises(ValueError, match="outside"):
        wilson(11, 10)


def test_newcombe_difference_of_8_in_10_and_2_in_10():
    # Wilson(8/10) = [0.490162, 0.943318], Wilson(2/10) = [0.056682, 0.509838] (mirror image).
    # low = 0.6 - sqrt(0.309838^2 + 0.309838^2) = 0.6 - 0.438177 = 0.161823
    # high = 0.6 + sqrt(0.143318^2 + 0.143318^2) = 0.6 + 0.202683 = 0.802683
    # z test: pooled 0.5, se = sqrt(0.25 * 0.2) = 0.223607, z = 2.683282, p = 0.007290
    c = two_proportions(8, 10, 2, 10)
    d = c.difference
    assert (d.estimate, d.low, d.high) == approx((0.6, 0.161823, 0.802683), abs=1e-5)
    assert c.p_value == approx(0.007290, abs=1e-5)
    assert verdict(d) == "beyond noise"
    same = two_proportions(5, 10, 5, 10)
    assert (
        same.difference.estimate == 0.0 and same.p_value == approx(1.0) and verdict(same.difference) == "within noise"
    )


def test_paired_bootstrap_of_two_tasks_is_the_three_point_distribution():
    # Differences (0, 1): a resample's mean is 0, 0.5 or 1 with probability 1/4, 1/2, 1/4, so the
    # 2.5% and 97.5% quantiles of 10,000 resamples are 0 and 1, and the estimate is 0.5.
    i = paired_bootstrap([1.0, 1.0], [1.0, 0.0])
    assert (i.estimate, i.low, i.high) == (0.5, 0.0, 1.0)
    assert verdict(i) == "within noise"  # 0 is inside [0, 1]


def test_paired_bootstrap_constant_difference_and_seeding():
    i = paired_bootstrap([0.6] * 20, [0.1] * 20)
    assert (i.estimate, i.low, i.high) == approx((0.5, 0.5, 0.5))
    a, b = [0.0, 1.0, 0.5, 1.0, 0.0, 1.0, 0.3], [0.0, 0.0, 0.5, 0.0, 0.5, 1.0, 0.0]
    assert paired_bootstrap(a, b, seed=3) == paired_bootstrap(a, b, seed=3)  # seeded: identical
    wide = paired_bootstrap(a, b)
    assert wide.low < wide.estimate < wide.high
    with pytest.raises(ValueError, match="equal-length"):
        paired_bootstrap([1.0], [1.0, 0.0])
    with pytest.raises(ValueError, match="at least one task"):
        paired_bootstrap([], [])


def test_one_seed_each_is_the_paired_bootstrap():
    a, b = [0.0, 1.0, 0.5, 1.0, 0.0, 1.0, 0.3], [0.0, 0.0, 0.5, 0.0, 0.5, 1.0, 0.0]
    one = seeded_paired_bootstrap([a], [b])
    plain = paired_bootstrap(a, b)
    assert (one.estimate, one.low, one.high) == approx((plain.estimate, plain.low, plain.high), abs=1e-12)


def test_seeds_that_disagree_widen_the_interval_the_tasks_alone_would_give():
    # Two tasks where a beats b by exactly 0.5 on every task in both of a's seeds: the seeds agree,
    # so the interval is the point 0.5. Then a's two seeds disagree (+1 and 0 on every task): the
    # pooled difference is still 0.5, but a resample that draws seed 2 twice has difference 0 and
    # one that draws seed 1 twice has 1, each with probability 1/4: the interval is [0, 1].
    b = [[0.0, 0.0]]
    agree = seeded_paired_bootstrap([[0.5, 0.5], [0.5, 0.5]], b)
    assert (agree.estimate, agree.low, agree.high) == approx((0.5, 0.5, 0.5))
    disagree = seeded_paired_bootstrap([[1.0, 1.0], [0.0, 0.0]], b)
    assert (disagree.estimate, disagree.low, disagree.high) == approx((0.5, 0.0, 1.0))
    tasks_only = paired_bootstrap([0.5, 0.5], [0.0, 0.0])  # the seeds' mean scores, seed variance lost
    assert tasks_only.low == tasks_only.high == approx(0.5)


def test_compare_seeds_reports_per_seed_differences_and_spreads():
    a = [[1.0, 1.0, 0.0], [0.0, 1.0, 0.0], [1.0, 1.0, 1.0]]  # seed means 2/3, 1/3, 1
    b = [[0.0, 1.0, 0.0], [0.0, 1.0, 0.0]]  # seed means 1/3, 1/3
    c = compare_seeds(a, b)
    assert (c.seeds_a, c.seeds_b) == (3, 2)
    assert [i.estimate for i in c.per_seed] == approx([1 / 3, 0.0])  # seed 1 vs 1, seed 2 vs 2
    assert c.spread_a == approx(1 / 3) and c.spread_b == 0.0  # sample sd of (2/3, 1/3, 1) is 1/3
    assert c.pooled.estimate == approx(2 / 3 - 1 / 3)
    assert c.pooled.low <= c.pooled.estimate <= c.pooled.high
    with pytest.raises(ValueError, match="same tasks"):
        seeded_paired_bootstrap([[1.0, 0.0]], [[1.0]])
    with pytest.raises(ValueError, match="one row of per-task scores per training seed"):
        seeded_paired_bootstrap([1.0, 0.0], [[1.0, 0.0]])


def test_sign_flip_test_exact_values():
    # Three tasks, all +1: of the 8 sign patterns, |sum| >= 3 only for (+,+,+) and (-,-,-): p = 2/8.
    assert sign_flip_test([1, 1, 1], [0, 0, 0]) == approx(0.25)
    # (+2, -1): |sum| of the patterns: 1, 3, 3, 1 -> |sum| >= 1 always: p = 1.
    assert sign_flip_test([2, 0], [0, 1]) == approx(1.0)
    # Ties carry no sign and are dropped; no difference at all gives p = 1.
    assert sign_flip_test([1, 0, 0], [0, 0, 0]) == approx(1.0)  # one task: both signs reach |1|
    assert sign_flip_test([0.5, 0.5], [0.5, 0.5]) == 1.0
    # Ten tasks all +1: exact p = 2 / 1024.
    assert sign_flip_test([1] * 10, [0] * 10) == approx(2 / 1024)


def test_sign_flip_monte_carlo_above_16_tasks():
    # 30 tasks all +1: the true p is 2 / 2^30; Monte Carlo with the observed pattern counted gives 1 / 10,001.
    assert sign_flip_test([1] * 30, [0] * 30) == approx(1 / 10_001)


def test_mcnemar_exact():
    # 5 tasks only A solves, none only B: p = 2 * (1/2)^5 = 0.0625.
    assert mcnemar([1] * 5 + [1, 0], [0] * 5 + [1, 0]) == approx(0.0625)
    # 3 vs 1 discordant: p = 2 * (C(4,0) + C(4,1)) / 16 = 2 * 5 / 16 = 0.625.
    assert mcnemar([1, 1, 1, 0], [0, 0, 0, 1]) == approx(0.625)
    assert mcnemar([1, 0], [1, 0]) == 1.0


def test_interval_words():
    assert str(Interval(0.1, -0.05, 0.25)) == "+0.100 [-0.050, +0.250]"
    assert verdict(Interval(0.1, 0.01, 0.2)) == "beyond noise"
    assert verdict(Interval(-0.1, -0.2, -0.01)) == "beyond noise"
    assert verdict(Interval(0.0, 0.0, 0.2)) == "within noise"
    assert not math.isnan(wilson(3, 7).low)


def test_a_paired_verdict_needs_the_test_to_agree():
    # Two tasks that both drop by 1: every resample's mean is -1, so the interval is [-1, -1], but
    # the exact sign-flip p is 2/4 = 0.5: a handful of tasks is not evidence.
    a, b = [0.0, 0.0], [1.0, 1.0]
    interval = paired_bootstrap(a, b)
    assert (interval.low, interval.high) == (-1.0, -1.0) and interval.excludes(0.0)
    assert verdict(interval, sign_flip_test(a, b)) == "within noise"
    many = [0.0] * 12, [1.0] * 12  # p = 2 / 4096
    assert verdict(paired_bootstrap(*many), sign_flip_test(*many)) == "beyond noise"
