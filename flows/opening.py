"""The opening every flow shares (issue 49): build the warm start, register the run, claim it.

A flow that records a run starts with `open_run`: the warm-start checkpoint its config names is
built on first use (the `sft` subflow) or, once it exists, recorded in the current database;
then its register-* task writes the run row (and the harnesses and benchmark tasks it refers
to), and the row is stamped with this process as its owner (flows/ownership.py). The warm start's
own flow (flows/sft.py) opens with the last two steps alone (`register_and_claim`), since the
warm start is what it builds. A baseline flow (flows/baselines/) registers its run only when it
records its results; its opening is `open_baseline`: its plan held to the `budget:` caps, then
the warm start.
"""

from __future__ import annotations

from collections.abc import Callable

from configs.pipeline import PipelineConfig
from configs.schema import TrainConfig
from flows.ownership import register_and_claim
from flows.sft import ensure_warm_start
from tasks.budget import hold_to_budget
from tasks.phase_times import timed
from tasks.run_identity import warm_start_config


def build_warm_start(cfg, database_url: str | None) -> None:
    """The warm start `cfg.warm_start` names: built on first use, reused afterwards."""
    with timed("warm start"):
        ensure_warm_start(warm_start_config(cfg), database_url)


def open_run(cfg, register: Callable, database_url: str | None, *, warm_start: bool):
    """A flow's opening: its warm start (when `warm_start`: the config names one), its run row
    written by `register` (a register-* task) and claimed by this process. Returns what
    `register` returns (the run id, or the run's document or context)."""
    if warm_start:
        build_warm_start(cfg, database_url)
    return register_and_claim(cfg, register, database_url)


def open_baseline(cfg: PipelineConfig, train_cfg: TrainConfig, database_url: str | None) -> None:
    """A baseline's opening once its training settings are known: its planned rollouts held to
    the `budget:` caps (a plan over one stops before the first rollout), then its warm start."""
    hold_to_budget(cfg, train_cfg)
    build_warm_start(train_cfg, database_url)
