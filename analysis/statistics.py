"""Intervals and tests that say whether a difference is beyond noise (pure functions, numpy only).

- Paired comparisons over the same bench tasks: :func:`paired_bootstrap` (percentile interval
  of the mean per-task difference, seeded resamples of tasks), :func:`sign_flip_test` (paired
  permutation test: exact over all sign patterns for up to 16 tasks, else seeded Monte Carlo),
  :func:`mcnemar` (exact McNemar test for paired binary outcomes, e.g. Pass@k with one seed).
- Proportions over groups or tasks: :func:`wilson` (score interval for one proportion),
  :func:`two_proportions` (difference of two independent proportions with Newcombe's interval,
  built from the two Wilson intervals, and the pooled two-proportion z test).
- :func:`verdict` turns an interval of a difference (and, for paired comparisons, its test's
  p-value) into the words the report uses.

Every interval is two-sided at ``level`` (0.95 by default). The bootstrap treats tasks as the
unit of resampling: a method's per-task score already averages its seeds and rollouts, so the
interval reflects which tasks were drawn, the main source of variance on small splits.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np

RESAMPLES = 10_000
SEED = 0
EXACT_SIGN_FLIPS_UP_TO = 16  # 2^16 sign patterns: exact and cheap


@dataclass(frozen=True)
class Interval:
    estimate: float
    low: float
    high: float

    def excludes(self, value: float = 0.0) -> bool:
        return not (self.low <= value <= self.high)

    def __str__(self) -> str:
        return f"{self.estimate:+.3f} [{self.low:+.3f}, {self.high:+.3f}]"


def _z(level: float) -> float:
    return NormalDist().inv_cdf(0.5 + level / 2)


def wilson(successes: float, n: float, level: float = 0.95) -> Interval:
    """Wilson score interval of a proportion (successes may be fractional, e.g. ratio x groups)."""
    if n <= 0:
        raise ValueError("wilson needs at least one observation (n > 0)")
    if not 0 <= successes <= n:
        raise ValueError(f"wilson: successes {successes} outside [0, {n}]")
    z = _z(level)
    p = successes / n
    denominator = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denominator
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denominator
    return Interval(p, max(0.0, centre - half), min(1.0, centre + half))


@dataclass(frozen=True)
class ProportionComparison:
    difference: Interval  # p1 - p2 with Newcombe's interval
    p_value: float  # pooled two-proportion z test, two-sided


def two_proportions(s1: float, n1: float, s2: float, n2: float, level: float = 0.95) -> ProportionComparison:
    """p1 - p2 for two independent samples: Newcombe's hybrid score interval and the z test."""
    a, b = wilson(s1, n1, level), wilson(s2, n2, level)
    d = a.estimate - b.estimate
    low = d - math.sqrt((a.estimate - a.low) ** 2 + (b.high - b.estimate) ** 2)
    high = d + math.sqrt((a.high - a.estimate) ** 2 + (b.estimate - b.low) ** 2)
    pooled = (s1 + s2) / (n1 + n2)
    se = math.sqrt(pooled * (1 - pooled) * (1 / n1 + 1 / n2))
    p_value = 1.0 if se == 0 else 2 * (1 - NormalDist().cdf(abs(d) / se))
    return ProportionComparison(Interval(d, max(-1.0, low), min(1.0, high)), min(1.0, p_value))


def _paired(a, b) -> np.ndarray:
    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if x.shape != y.shape or x.ndim != 1:
        raise ValueError("paired statistics need two equal-length sequences of per-task scores")
    if x.size == 0:
        raise ValueError("paired statistics need at least one task scored by both methods")
    return x - y


def paired_bootstrap(a, b, resamples: int = RESAMPLES, seed: int = SEED, level: float = 0.95) -> Interval:
    """Mean of a - b over tasks, with the percentile interval of that mean over ``resamples``
    resamples of the tasks (with replacement, numpy's default generator seeded by ``seed``)."""
    d = _paired(a, b)
    rng = np.random.default_rng(seed)
    means = d[rng.integers(0, d.size, size=(resamples, d.size))].mean(axis=1)
    tail = (1 - level) / 2
    low, high = np.quantile(means, [tail, 1 - tail])
    return Interval(float(d.mean()), float(low), float(high))


def sign_flip_test(a, b, resamples: int = RESAMPLES, seed: int = SEED) -> float:
    """Two-sided p-value of the paired permutation test: under no difference, each task's
    difference is as likely to have either sign. Exact for up to 16 tasks with a non-zero
    difference; seeded Monte Carlo (with the observed pattern counted) above that."""
    d = _paired(a, b)
    d = d[d != 0]
    if d.size == 0:
        return 1.0
    observed = abs(d.sum()) - 1e-12
    if d.size <= EXACT_SIGN_FLIPS_UP_TO:
        signs = np.array(list(itertools.product((1.0, -1.0), repeat=d.size)))
        return float(np.mean(np.abs(signs @ d) >= observed))
    rng = np.random.default_rng(seed)
    signs = rng.choice((1.0, -1.0), size=(resamples, d.size))
    return float((np.sum(np.abs(signs @ d) >= observed) + 1) / (resamples + 1))


def mcnemar(a, b) -> float:
    """Exact two-sided McNemar p-value for paired binary outcomes (a[i], b[i] in {0, 1})."""
    x, y = np.asarray(a, dtype=bool), np.asarray(b, dtype=bool)
    if x.shape != y.shape:
        raise ValueError("mcnemar needs two equal-length sequences of paired outcomes")
    only_a, only_b = int(np.sum(x & ~y)), int(np.sum(~x & y))
    n = only_a + only_b
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, i) for i in range(min(only_a, only_b) + 1)) / 2**n
    return min(1.0, 2 * tail)


def verdict(interval: Interval, p_value: float | None = None, alpha: float = 0.05, null: float = 0.0) -> str:
    """'beyond noise' when the interval of a difference excludes ``null`` and, where a test's
    ``p_value`` is given, the test agrees (p < alpha); else 'within noise'. The percentile bootstrap
    is over-confident on a handful of tasks (2 tasks that both drop give an interval excluding 0,
    while the exact sign-flip test gives p = 0.5), so paired comparisons pass both."""
    beyond = interval.excludes(null) and (p_value is None or p_value < alpha)
    return "beyond noise" if beyond else "within noise"


__all__ = [
    "Interval",
    "ProportionComparison",
    "mcnemar",
    "paired_bootstrap",
    "sign_flip_test",
    "two_proportions",
    "verdict",
    "wilson",
]
