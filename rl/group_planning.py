"""The shapes an update's groups can take: the planners the training modes are built from
(rl/training_modes.py says which mode uses which; docs/method.md §3, §5).

First groups, one per task (each a planner of (bench_tasks, h0, mixture, k, arm, pool)):
- h0_groups: K rollouts under H0.
- mixture_groups: the K rollouts spread round robin over a fixed harness list (the mixture).
- bandit_groups: every group under the one harness the bandit chose for the update (rl/bandit.py).
- span_groups: the K rollouts spread over H0 and the pool, the round robin carried on from one
  task's group to the next so every harness gets its share.

Rescue groups, one per dead task (each a planner of (dead_tasks, h0, pool, router, k)):
- sibling_rescue: the router ranks the auxiliary harnesses for the task and the top K each run
  once, from the same initial task state (each rollout gets its own fresh environment).
- h0_rescue: K fresh rollouts under H0: the same rollout budget with no harness diversity.

Pure planning: no model, database or Prefect here. Rescue rollouts use sample indices K..2K-1
so their ids never collide with the first group's.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from harness_pool.router import Router
from harness_pool.spec import HarnessSpec
from rl.modes import Role
from rl.rollout import RolloutSpec


@dataclass
class PlannedGroup:
    bench_task: object
    role: Role
    specs: list[RolloutSpec]
    votes: dict[str, list[str]] = field(default_factory=dict)  # the router's decision record: each voter's ranking
    ranking: list[str] = field(default_factory=list)  # the combined ranking (rescue groups)
    errors: dict[str, str] = field(default_factory=dict)  # voters skipped, with why

    @property
    def harness_id(self) -> str | None:
        """The group's single harness, or None when its rollouts use several."""
        ids = {s.harness.id for s in self.specs}
        return ids.pop() if len(ids) == 1 else None


def h0_groups(bench_tasks, h0: HarnessSpec, mixture, k: int, arm=None, pool=()) -> list[PlannedGroup]:
    return [PlannedGroup(t, Role.H0, [RolloutSpec(t, h0, i) for i in range(k)]) for t in bench_tasks]


def mixture_groups(bench_tasks, h0, mixture: list[HarnessSpec], k: int, arm=None, pool=()) -> list[PlannedGroup]:
    if not mixture:
        raise ValueError("mode fixed_mixture needs at least one harness in the mixture")
    return [
        PlannedGroup(t, Role.MIXTURE, [RolloutSpec(t, mixture[i % len(mixture)], i) for i in range(k)])
        for t in bench_tasks
    ]


def bandit_groups(bench_tasks, h0, mixture, k: int, arm: HarnessSpec | None = None, pool=()) -> list[PlannedGroup]:
    if arm is None:
        raise ValueError("mode harness_bandit needs the update's arm (the harness the bandit chose)")
    return [PlannedGroup(t, Role.BANDIT, [RolloutSpec(t, arm, i) for i in range(k)]) for t in bench_tasks]


def span_groups(
    bench_tasks, h0: HarnessSpec, mixture, k: int, arm=None, pool: list[HarnessSpec] = ()
) -> list[PlannedGroup]:
    span = list({h.id: h for h in [h0, *pool]}.values())
    return [
        PlannedGroup(t, Role.SPAN, [RolloutSpec(t, span[(j * k + i) % len(span)], i) for i in range(k)])
        for j, t in enumerate(bench_tasks)
    ]


def h0_rescue(dead_tasks, h0: HarnessSpec, pool, router, k: int) -> list[PlannedGroup]:
    return [PlannedGroup(t, Role.H0_RESCUE, [RolloutSpec(t, h0, k + i) for i in range(k)]) for t in dead_tasks]


def sibling_rescue(
    dead_tasks, h0: HarnessSpec, pool: list[HarnessSpec], router: Router | None, k: int
) -> list[PlannedGroup]:
    siblings = [h for h in pool if h.id != h0.id]
    if not siblings:
        raise ValueError("mode harness_s needs at least one auxiliary harness in the pool besides H0")
    if router is None:
        raise ValueError("mode harness_s needs a router")
    by_id = {h.id: h for h in siblings}
    groups = []
    for t in dead_tasks:
        ranking = router.rank(t, siblings)
        chosen = ranking.top(k)
        groups.append(
            PlannedGroup(
                t,
                Role.RESCUE,
                [RolloutSpec(t, by_id[hid], k + i) for i, hid in enumerate(chosen)],
                votes=ranking.votes,
                ranking=list(ranking.harness_ids),
                errors=dict(ranking.errors),
            )
        )
    return groups


def is_dead(successes: list[bool]) -> bool:
    return not any(successes)
