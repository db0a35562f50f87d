"""Which rollouts form each task's group in one update, per training mode (docs/method.md §3, §5).

- harness_s: K rollouts under H0; a group with no success is "dead" and is replaced by a rescue
  group: the router ranks the auxiliary harnesses for the task and the top K each run once,
  from the same initial task state (each rollout gets its own fresh environment).
- grpo: K rollouts under H0, no rescue (dead groups stay and teach nothing).
- h0_rescue: a dead group is replaced by K fresh rollouts under H0: the same rollout budget as
  harness_s with no harness diversity.
- fixed_mixture: every group's K rollouts are spread round robin over a fixed harness list.
- harness_bandit: every group of the update runs under the one harness the bandit chose for it
  (rl/bandit.py), no rescue.
- harnessx: every group's K rollouts are spread over H0 and the pool, the round robin carried
  on from one task's group to the next so every harness gets its share; no rescue (the update
  adds groups replayed from earlier updates, rl/replay.py).

Pure planning: no model, database or Prefect here. Rescue rollouts use sample indices K..2K-1
so their ids never collide with the first group's.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from harness_pool.router import Router
from harness_pool.spec import HarnessSpec
from rl.modes import Mode, Role
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


def _mode(mode: str) -> Mode:
    try:
        return Mode(mode)
    except ValueError:
        raise ValueError(f"unknown training mode '{mode}': use one of {', '.join(Mode)}") from None


def first_groups(
    mode: str,
    bench_tasks: list,
    h0: HarnessSpec,
    mixture: list[HarnessSpec],
    k: int,
    arm: HarnessSpec | None = None,
    pool: list[HarnessSpec] = (),
) -> list[PlannedGroup]:
    """Each task's first group: K rollouts under H0, spread over the mixture (fixed_mixture) or over
    H0 + pool (harnessx), or under the update's bandit arm (harness_bandit)."""
    if _mode(mode) is Mode.HARNESSX:
        span = list({h.id: h for h in [h0, *pool]}.values())
        return [
            PlannedGroup(t, Role.SPAN, [RolloutSpec(t, span[(j * k + i) % len(span)], i) for i in range(k)])
            for j, t in enumerate(bench_tasks)
        ]
    if _mode(mode) is Mode.HARNESS_BANDIT:
        if arm is None:
            raise ValueError("mode harness_bandit needs the update's arm (the harness the bandit chose)")
        return [PlannedGroup(t, Role.BANDIT, [RolloutSpec(t, arm, i) for i in range(k)]) for t in bench_tasks]
    if _mode(mode) is Mode.FIXED_MIXTURE:
        if not mixture:
            raise ValueError("mode fixed_mixture needs at least one harness in the mixture")
        return [
            PlannedGroup(t, Role.MIXTURE, [RolloutSpec(t, mixture[i % len(mixture)], i) for i in range(k)])
            for t in bench_tasks
        ]
    return [PlannedGroup(t, Role.H0, [RolloutSpec(t, h0, i) for i in range(k)]) for t in bench_tasks]


def _no_rescue(dead_tasks, h0, pool, router, k) -> list[PlannedGroup]:
    return []


def _h0_rescue(dead_tasks, h0, pool, router, k) -> list[PlannedGroup]:
    return [PlannedGroup(t, Role.H0_RESCUE, [RolloutSpec(t, h0, k + i) for i in range(k)]) for t in dead_tasks]


def _sibling_rescue(dead_tasks, h0, pool, router: Router | None, k) -> list[PlannedGroup]:
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


RESCUE_PLANNERS: dict[Mode, Callable[..., list[PlannedGroup]]] = {
    Mode.HARNESS_S: _sibling_rescue,
    Mode.GRPO: _no_rescue,
    Mode.H0_RESCUE: _h0_rescue,
    Mode.FIXED_MIXTURE: _no_rescue,
    Mode.HARNESS_BANDIT: _no_rescue,
    Mode.HARNESSX: _no_rescue,
}


def rescue_groups(
    mode: str, dead_tasks: list, h0: HarnessSpec, pool: list[HarnessSpec], router: Router | None, k: int
) -> list[PlannedGroup]:
    """Replacement groups for the tasks whose first group had no success, by the mode's planner."""
    planner = RESCUE_PLANNERS[_mode(mode)]
    return planner(dead_tasks, h0, pool, router, k) if dead_tasks else []


def is_dead(successes: list[bool]) -> bool:
    return not any(successes)
