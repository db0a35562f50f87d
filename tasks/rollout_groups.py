"""Prefect tasks for one update's rollout groups (flows/train.py, Algorithm 1 lines 4-9).

sample_first_groups: each task's first group, by the training mode (rl/training_modes.py);
dead_groups: the groups with no success, which carry no GRPO signal;
sample_rescue_groups: replacement groups for the dead ones, by the training mode;
record_groups: every group to the database; the groups the update trains on;
replay_groups: earlier groups drawn from the replay buffer where the mode needs it (harnessx;
read back from the rows).

What a mode needs (the bandit's arm, the router, the replay buffer) is asked of its registry
entry, never of its name.

Groups go from task to task in memory. The database is the record, and the resume source
(db/journal.py), but the update does not read its rows back from it.
"""

from __future__ import annotations

import time

from prefect import task
from prefect.cache_policies import NO_CACHE

from configs.schema import TrainConfig
from db import store
from db.engine import session_scope
from rl.bandit import choose_arm, step_rewards
from rl.group_planning import PlannedGroup, is_dead
from rl.modes import TRAIN_ROLES, Role
from rl.replay import buffer_groups, draw
from rl.rollout import RolloutResult, run_rollouts
from rl.training_modes import first_groups, rescue_groups, training_mode
from tasks.records import GroupRecord, build_group
from tasks.resources import bench_task, env_factory, get_engine
from tasks.routing import build_router, record_decisions
from tasks.run_identity import RunContext, step_sampling
from tasks.train_handle import get_handle


class Group:
    """One task's group in an update: its plan (task, role, harness per rollout), its rollouts
    and, once stored, its row id. A plain class, not a dataclass, so that Prefect does not walk
    every token list when the flow hands groups from task to task."""

    def __init__(self, plan: PlannedGroup, results: list[RolloutResult]):
        self.plan, self.results, self.group_id = plan, results, ""

    @property
    def bench_task_id(self) -> str:
        return self.plan.bench_task.id

    @property
    def successes(self) -> list[bool]:
        return [r.verdict.success for r in self.results]

    @property
    def rewards(self) -> list[float]:
        return [r.verdict.reward for r in self.results]

    @property
    def turn_lists(self) -> list[list]:
        return [r.turns for r in self.results]

    def summary(self, trained: bool) -> dict:
        """What the step's record (train_steps.details, the journal) keeps of the group."""
        return {
            "group_id": self.group_id,
            "bench_task_id": self.bench_task_id,
            "role": self.plan.role,
            "harness_ids": [r.harness_id for r in self.results],
            "successes": self.successes,
            "rewards": self.rewards,
            "policy_tokens": [r.n_policy_tokens for r in self.results],
            "votes": self.plan.votes,
            "trained": trained,
        }


class ReplayedGroup:
    """A group of an earlier update, read back from the database to be trained on again
    (harnessx's replay buffer): its row id, rewards and each rollout's turns."""

    def __init__(self, group_id: str, rewards: list[float], turn_lists: list[list]):
        self.group_id, self.rewards, self.turn_lists = group_id, rewards, turn_lists


class Sampled:
    """Groups sampled together, the wall time it took, the router's profile version (rescue) and
    the bandit's decision (harness_bandit's first groups)."""

    def __init__(
        self, groups: list[Group], seconds: float, router_version: int | None = None, bandit: dict | None = None
    ):
        self.groups, self.seconds, self.router_version, self.bandit = groups, seconds, router_version, bandit


class StepGroups:
    """An update's groups once stored: the first groups, the rescues, and the ones it trains on
    (each task's first group, or the rescue group that replaced it)."""

    def __init__(self, first: Sampled, rescue: Sampled):
        self.first, self.rescue = first, rescue
        by_task = {g.bench_task_id: g for g in [*first.groups, *rescue.groups]}  # a rescue comes later: it wins
        self.trained = list(by_task.values())

    @property
    def rollouts_spent(self) -> int:
        return sum(len(g.results) for g in [*self.first.groups, *self.rescue.groups])

    @property
    def seconds(self) -> float:
        return self.first.seconds + self.rescue.seconds

    def summaries(self) -> list[dict]:
        trained = {id(g) for g in self.trained}
        return [g.summary(id(g) in trained) for g in [*self.first.groups, *self.rescue.groups]]


def _sample(
    cfg: TrainConfig,
    run_id: str,
    plans: list[PlannedGroup],
    step: int,
    phase: int,
    router_version: int | None = None,
    bandit: dict | None = None,
) -> Sampled:
    """All planned groups' rollouts in one batch."""
    started = time.perf_counter()
    specs = [spec for plan in plans for spec in plan.specs]
    results = (
        run_rollouts(
            get_handle(cfg, run_id).policy,
            specs,
            env_factory(cfg.env),
            step_sampling(cfg, step, phase),
            cfg.env.max_rounds,
        )
        if specs
        else []
    )
    groups, at = [], 0
    for plan in plans:
        groups.append(Group(plan, results[at : at + len(plan.specs)]))
        at += len(plan.specs)
    return Sampled(groups, time.perf_counter() - started, router_version, bandit)


@task(name="first-groups", task_run_name="first-groups-step{step}", cache_policy=NO_CACHE)
def sample_first_groups(
    cfg: TrainConfig, run: RunContext, step: int, bench_task_ids: list[str], database_url: str | None = None
) -> Sampled:
    """Each task's first group by the mode's planner: K rollouts under H0 (fixed_mixture: spread
    round robin over the mixture; a mode that needs the bandit: under the harness UCB1 picks from
    the earlier updates' rewards). The harnesses are the run's (`run`, loaded once per run)."""
    arm, decision = None, None
    if training_mode(cfg.mode).needs_bandit:
        arm, decision = _bandit_arm(cfg, run.run_id, step, [run.h0, *run.pool], database_url)
    the_tasks = [bench_task(cfg.env, i) for i in bench_task_ids]
    plans = first_groups(cfg.mode, the_tasks, run.h0, run.mixture, cfg.k, arm, run.pool)
    return _sample(cfg, run.run_id, plans, step, phase=0, bandit=decision)


def _bandit_arm(cfg: TrainConfig, run_id: str, step: int, harnesses: list, database_url: str | None):
    """The update's harness by UCB1 over the rewards of this run's earlier updates (their rows)."""
    arms = {h.id: h for h in harnesses}  # H0 first; a sibling listed twice is one arm
    with session_scope(get_engine(database_url)) as session:
        details = store.train_step_details(session, run_id, before=step)
    choice = choose_arm(list(arms), step_rewards(details), cfg.bandit_exploration)
    names = {h.id: h.name for h in arms.values()}
    decision = {
        "arm": names[choice.arm],
        "arm_id": choice.arm,
        "scores": {names[a]: s for a, s in choice.scores.items()},
        "plays": {names[a]: n for a, n in choice.plays.items()},
        "means": {names[a]: m for a, m in choice.means.items()},
    }
    return arms[choice.arm], decision


def dead_groups(sampled: Sampled) -> list[Group]:
    """Groups with no success: every advantage is 0, so they teach nothing."""
    return [g for g in sampled.groups if is_dead(g.successes)]


@task(name="rescue-groups", task_run_name="rescue-step{step}", cache_policy=NO_CACHE)
def sample_rescue_groups(
    cfg: TrainConfig, run: RunContext, step: int, dead: list[Group], database_url: str | None
) -> Sampled:
    """A replacement group per dead group, by the mode's rescue planner: harness_s, the router's top
    K siblings, one rollout each; h0_rescue, K fresh rollouts under H0; a mode without one, none."""
    router, version = None, None
    if training_mode(cfg.mode).needs_router and dead:
        with session_scope(get_engine(database_url)) as session:
            router, version = build_router(cfg, session, run.run_id, step)
    plans = rescue_groups(cfg.mode, [g.plan.bench_task for g in dead], run.h0, run.pool, router, cfg.k)
    return _sample(cfg, run.run_id, plans, step, phase=1, router_version=version)


@task(name="replay-groups", task_run_name="replay-step{step}", cache_policy=NO_CACHE)
def replay_groups(cfg: TrainConfig, run_id: str, step: int, database_url: str | None) -> list[ReplayedGroup]:
    """A mode that needs replay (harnessx): groups of earlier updates drawn from the replay buffer
    (rl/replay.py); none in every other mode."""
    if not training_mode(cfg.mode).needs_replay or not cfg.replay.per_update:
        return []
    with session_scope(get_engine(database_url)) as session:
        earlier = [d for run in cfg.replay.from_runs for d in store.train_step_details(session, run, before=10**9)]
        buffer = buffer_groups(earlier + store.train_step_details(session, run_id, before=step), cfg.replay.capacity)
        return [
            ReplayedGroup(gid, *store.group_rollouts(session, gid))
            for gid in draw(buffer, cfg.replay.per_update, cfg.seed, step)
        ]


@task(name="record-groups", task_run_name="groups-step{step}", cache_policy=NO_CACHE)
def record_groups(
    cfg: TrainConfig, run_id: str, step: int, first: Sampled, rescue: Sampled, database_url: str | None
) -> StepGroups:
    """Every group (dead ones too) and the router's decisions to the database, replacing what a
    cut-short earlier attempt at this step left."""
    label = f"{run_id}@{step}"
    with session_scope(get_engine(database_url)) as session:
        store.delete_step_groups(session, run_id, step, TRAIN_ROLES)  # a redone step leaves no stale rescue group
        for g in [*first.groups, *rescue.groups]:
            row = build_group(
                GroupRecord(run_id, step, g.bench_task_id, g.plan.harness_id, cfg.seed, g.plan.role, label, g.results)
            )
            store.replace_group(session, row)
            g.group_id = row.id
        record_decisions(
            session,
            run_id,
            step,
            cfg.router.kind,
            rescue.router_version,
            [g.plan for g in rescue.groups if g.plan.role == Role.RESCUE],
        )
    return StepGroups(first, rescue)
