"""A pipeline's planned rollouts on the pool it actually runs with, held to its `budget:` caps
before any rollout is spent (configs/budget.py holds the counting)."""

from __future__ import annotations

from configs.budget import check_budget, planned_rollouts
from configs.pipeline import PipelineConfig
from configs.schema import TrainConfig
from tasks.baselines import candidate_sources


def planned(cfg: PipelineConfig, train_cfg: TrainConfig) -> dict[str, int]:
    """The plan with H0 and the training config's distinct pool harnesses as the harnesses searched."""
    return planned_rollouts(cfg, len(candidate_sources(train_cfg)))


def hold_to_budget(cfg: PipelineConfig, train_cfg: TrainConfig) -> dict[str, int]:
    """The plan, or a one-line ConfigError when it can exceed a cap."""
    plan = planned(cfg, train_cfg)
    check_budget(cfg, plan)
    return plan
