"""The training modes, one registry entry each: how a mode forms an update's groups and what it needs.

A `TrainingMode` says what its first groups are, what replaces a dead group (None: nothing),
what the update needs for it (the router, the bandit's arm, the replay buffer, the mixture),
its budget factor and its config checks. Everything that behaves per mode asks the registry
instead of comparing names: tasks/rollout_groups.py (the router, the arm, the replay),
configs/schema.py (TrainConfig.mode, its checks, max_update_rollouts and so configs/budget.py),
cli/preflight.py (the mixture's harnesses), `hs train --help` and analysis/runs.py (which runs
have a router).

Adding a mode is one entry: `register_mode(TrainingMode(name=..., help=..., first_groups=...))`,
built from the planners of rl/group_planning.py or new ones of the same signature. Its name is
what configs, run ids and database rows record, so a registered name never changes meaning.

Pure: no model, database or Prefect here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from harness_pool.router import Router
from harness_pool.spec import HarnessSpec
from rl.group_planning import (
    PlannedGroup,
    bandit_groups,
    h0_groups,
    h0_rescue,
    mixture_groups,
    sibling_rescue,
    span_groups,
)
from rl.modes import Mode

# (bench_tasks, h0, mixture, k, arm, pool) -> each task's first group
FirstPlanner = Callable[[list, HarnessSpec, list[HarnessSpec], int, HarnessSpec | None, list[HarnessSpec]], list]
# (dead_tasks, h0, pool, router, k) -> the groups that replace the dead ones
RescuePlanner = Callable[[list, HarnessSpec, list[HarnessSpec], Router | None, int], list]


def no_check(cfg: Any) -> None:
    """A mode with no config checks of its own."""


def needs_field(name: str, what: str) -> Callable[[Any], None]:
    """A config check: the TrainConfig field `name` must be non-empty ('mode M needs `what`')."""

    def check(cfg: Any) -> None:
        if not getattr(cfg, name):
            raise ValueError(f"mode {cfg.mode} needs {what}")

    return check


@dataclass(frozen=True)
class TrainingMode:
    name: str  # what configs (train.mode), run ids and database rows record
    help: str  # one line, for `hs train --help` and TrainConfig.mode's description
    first_groups: FirstPlanner
    rescue: RescuePlanner | None = None  # what replaces a dead group; None: dead groups stay
    needs_router: bool = False  # its rescue ranks siblings with the router (tasks/routing.py build_router)
    needs_bandit: bool = False  # its first groups run under the arm UCB1 chose (rl/bandit.py)
    needs_replay: bool = False  # each update also trains on groups replayed from earlier ones (rl/replay.py)
    needs_mixture: bool = False  # its first groups use the `mixture` harnesses
    budget_factor: int | None = None  # the most one update spends, in batch_tasks x K; None: 2 with a rescue, else 1
    check: Callable[[Any], None] = no_check  # raises ValueError (one line) on a TrainConfig it cannot run

    def __post_init__(self) -> None:
        if self.budget_factor is None:
            object.__setattr__(self, "budget_factor", 2 if self.rescue else 1)


MODES: dict[str, TrainingMode] = {}


def register_mode(mode: TrainingMode) -> TrainingMode:
    if mode.name in MODES:
        raise ValueError(f"training mode '{mode.name}' is already registered")
    MODES[mode.name] = mode
    return mode


def unregister_mode(name: str) -> None:
    """Drop a registered mode (tests register toy modes and remove them again)."""
    MODES.pop(name, None)


def training_mode(name: str) -> TrainingMode:
    try:
        return MODES[name]
    except KeyError:
        raise ValueError(f"unknown training mode '{name}': use one of {', '.join(MODES)}") from None


def modes_help() -> str:
    """Every registered mode with its one-line help."""
    return "; ".join(f"{m.name}: {m.help}" for m in MODES.values())


def first_groups(
    mode: str,
    bench_tasks: list,
    h0: HarnessSpec,
    mixture: list[HarnessSpec],
    k: int,
    arm: HarnessSpec | None = None,
    pool: list[HarnessSpec] = (),
) -> list[PlannedGroup]:
    """Each task's first group, by the mode's planner."""
    return training_mode(mode).first_groups(bench_tasks, h0, mixture, k, arm, pool)


def rescue_groups(
    mode: str, dead_tasks: list, h0: HarnessSpec, pool: list[HarnessSpec], router: Router | None, k: int
) -> list[PlannedGroup]:
    """Replacement groups for the tasks whose first group had no success, by the mode's rescue
    planner (none in a mode without one)."""
    rescue = training_mode(mode).rescue
    return rescue(dead_tasks, h0, pool, router, k) if rescue and dead_tasks else []


_POOL = "a pool of harnesses besides H0 (pool: [schema_rows, ...])"

BUILT_IN_MODES = (
    TrainingMode(
        Mode.HARNESS_S.value,
        "a dead H0 group is replaced by the router's top K siblings (the method)",
        h0_groups,
        rescue=sibling_rescue,
        needs_router=True,
        check=needs_field("pool", "a non-empty pool of sibling harnesses (pool: [schema_rows, ...])"),
    ),
    TrainingMode(Mode.GRPO.value, "K rollouts under H0, no rescue", h0_groups),
    TrainingMode(Mode.H0_RESCUE.value, "a dead H0 group is replaced by K fresh H0 rollouts", h0_groups, h0_rescue),
    TrainingMode(
        Mode.FIXED_MIXTURE.value,
        "every group's K rollouts spread round robin over 'mixture', no rescue",
        mixture_groups,
        needs_mixture=True,
        check=needs_field("mixture", "a non-empty mixture list of harness names"),
    ),
    TrainingMode(
        Mode.HARNESS_BANDIT.value,
        "every group of an update under one harness of H0 + pool, chosen by UCB1 (rl/bandit.py), no rescue",
        bandit_groups,
        needs_bandit=True,
        check=needs_field("pool", _POOL),
    ),
    TrainingMode(
        Mode.HARNESSX.value,
        "every group spread over H0 + pool, plus groups replayed from earlier updates (rl/replay.py), no rescue",
        span_groups,
        needs_replay=True,
        check=needs_field("pool", _POOL),
    ),
)
for _built_in in BUILT_IN_MODES:
    register_mode(_built_in)
