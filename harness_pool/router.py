"""Routers: which K auxiliary harnesses rescue a task whose H0 group failed completely.

The contract is docs/method.md §4's `rank(task, pool, profiles) -> ranking with each voter's votes`.
This module holds the simple routers (the adaptive, profile-voting router in adaptive_router.py
builds on the same contract): a seeded random top-K, and a fixed list. A ranking longer than the pool wraps
around, so K rollouts can always be placed even when the pool has fewer than K siblings.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Protocol

from harness_pool.spec import HarnessSpec


@dataclass(frozen=True)
class Ranking:
    """Harness ids best first, plus each voter's own ranking (for the decision record) and, for
    each voter that was skipped (it raised or timed out), why."""

    harness_ids: list[str]
    votes: dict[str, list[str]] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)

    def top(self, k: int) -> list[str]:
        """The first k ids, cycling through the ranking when k exceeds its length."""
        if not self.harness_ids:
            raise ValueError("empty ranking: the pool has no auxiliary harness to route to")
        return [self.harness_ids[i % len(self.harness_ids)] for i in range(k)]


class Router(Protocol):
    name: str

    def rank(self, bench_task: object, pool: list[HarnessSpec], profiles: dict | None = None) -> Ranking:
        """Rank the auxiliary harnesses of `pool` (H0 excluded by the caller) for one task."""


class RandomRouter:
    """Uniformly random order, seeded by (seed, task id): reproducible across re-runs."""

    name = "random"

    def __init__(self, seed: int = 0):
        self.seed = seed

    def rank(self, bench_task, pool, profiles=None) -> Ranking:
        ids = sorted(h.id for h in pool)
        random.Random(f"{self.seed}:{getattr(bench_task, 'id', bench_task)}").shuffle(ids)
        return Ranking(ids, {self.name: list(ids)})


class FixedRouter:
    """Always the same order, given by harness names (e.g. a hand-picked list)."""

    name = "fixed"

    def __init__(self, names: list[str]):
        if not names:
            raise ValueError("a fixed router needs at least one harness name")
        self.names = names

    def rank(self, bench_task, pool, profiles=None) -> Ranking:
        by_name = {h.name: h.id for h in pool}
        missing = [n for n in self.names if n not in by_name]
        if missing:
            raise ValueError(f"fixed router names {missing} are not in the pool {sorted(by_name)}")
        ids = [by_name[n] for n in self.names]
        return Ranking(ids, {self.name: list(ids)})
