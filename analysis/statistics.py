"""Intervals and tests that say whether a difference is beyond noise (pure functions, numpy only).

- Paired comparisons over the same bench tasks: :func:`paired_bootstrap` (percentile interval
  of the mean per-task difference, seeded resamples of tasks), :func:`sign_flip_test` (paired
  permutation test: exact over all sign patterns for up to 16 tasks, else seeded Monte Carlo),
  :func:`mcnemar` (exact McNemar test for paired binary outcomes, e.g. Pass@k with one seed).
- Proportions over groups or tasks: :func:`wilson` (score interval for one proportion),
  :func:`two_proportions` (difference of two independent proportions with Newcombe's interval,
  built from the two Wilson intervals, and the pooled two-proportion z test).
- Training seeds as replication: :func:`seeded_paired_bootstrap` resamples both levels, the
  training runs (seeds) of each method and the tasks they share, so its interval holds the
  between-seed variance as well as the tasks'; :func:`compare_seeds` adds the per-seed
  differences and each method's between-seed spread. With one seed per method it is
  :func:`paired_bootstrap`.
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


def _seed_matrix(runs, name: str) -> np.ndarray:
    m = np.asarray(runs, dtype=float)
    if m.ndim != 2 or m.shape[0] == 0 or m.shape[1] == 0:
        raise ValueError(f"{name}: one row of per-task scores per training seed, at least one seed and one task")
    return m


def seeded_paired_bootstrap(a, b, resamples: int = RESAMPLES, seed: int = SEED, level: float = 0.95) -> Interval:
    """Mean over tasks of (a's mean over its seeds - b's mean over its seeds), with a two-level
    percentile interval: each resample draws the tasks with replacement (the same tasks for both
    methods: they are paired) and, independently, each method's seeds with replacement.

    ``a`` [seeds_a, tasks] and ``b`` [seeds_b, tasks]: per-task scores of each training run, the
    columns the same tasks in the same order. The task draws come first from the same generator
    as :func:`paired_bootstrap`, so with one seed per method the interval is that function's."""
    x, y = _seed_matrix(a, "seeded_paired_bootstrap a"), _seed_matrix(b, "seeded_paired_bootstrap b")
    if x.shape[1] != y.shape[1]:
        raise ValueError("seeded_paired_bootstrap: both methods must score the same tasks (equal columns)")
    n_tasks = x.shape[1]
    rng = np.random.default_rng(seed)
    tasks = rng.integers(0, n_tasks, size=(resamples, n_tasks))
    seeds_a = rng.integers(0, x.shape[0], size=(resamples, x.shape[0]))
    seeds_b = rng.integers(0, y.shape[0], size=(resamples, y.shape[0]))
    rows = np.arange(resamples)[:, None]
    # per resample: for each drawn seed, its mean over the drawn tasks; then the mean over drawn seeds
    per_seed_a = x[:, tasks].mean(axis=2).T  # [resamples, seeds_a]: every seed on this resample's tasks
    per_seed_b = y[:, tasks].mean(axis=2).T
    means = per_seed_a[rows, seeds_a].mean(axis=1) - per_seed_b[rows, seeds_b].mean(axis=1)
    tail = (1 - level) / 2
    low, high = np.quantile(means, [tail, 1 - tail])
    return Interval(float((x.mean(axis=0) - y.mean(axis=0)).mean()), float(low), float(high))


@dataclass(frozen=True)
class SeedComparison:
    pooled: Interval  # two-level bootstrap over seeds and tasks
    per_seed: tuple[Interval, ...]  # seed i of a against seed i of b (paired over tasks), as many as both have
    spread_a: float  # standard deviation of a's per-seed mean scores (0 with one seed)
    spread_b: float
    seeds_a: int
    seeds_b: int


def compare_seeds(a, b, resamples: int = RESAMPLES, seed: int = SEED, level: float = 0.95) -> SeedComparison:
    """Everything a seed-aware comparison shows: the pooled difference with its two-level
    interval, the per-seed differences (seed i against seed i), and each method's between-seed
    spread (sample standard deviation of its seeds' mean scores)."""
    x, y = _seed_matrix(a, "compare_seeds a"), _seed_matrix(b, "compare_seeds b")
    pooled = seeded_paired_bootstrap(x, y, resamples, seed, level)
    per_seed = tuple(paired_bootstrap(x[i], y[i], resamples, seed, level) for i in range(min(len(x), len(y))))

    def spread(m: np.ndarray) -> float:
        return float(m.mean(axis=1).std(ddof=1)) if len(m) > 1 else 0.0

    return SeedComparison(pooled, per_seed, spread(x), spread(y), len(x), len(y))


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
    "SeedComparison",
    "compare_seeds",
    "mcnemar",
    "paired_bootstrap",
    "seeded_paired_bootstrap",
    "sign_flip_test",
    "two_proportions",
    "verdict",
    "wilson",
]
