"""Planned rollouts per method (configs/budget.py), checked against the committed comparison's
configs: the budgets their comments state are the ones the code plans, and the train-mode plans
match what the evidence-scale runs spent (reports/dbbench-main: harness_s 1,648 training and
1,200 re-anchor rollouts, grpo 1,280 and 120)."""

from __future__ import annotations

import pytest

from configs.budget import describe, planned_rollouts
from configs.pipeline import PipelineConfig
from configs.schema import load_config
from harness_pool.pool_store import resolve_pool
from harness_pool.spec import load_harness


def plan(path: str) -> dict[str, int]:
    cfg = load_config(PipelineConfig, path)
    pool = [f"pool:{cfg.pool_version}"] if cfg.pool_version else cfg.train.pool  # harnessx: the pool it starts with
    n = len({load_harness(cfg.train.harness).id} | {h.id for h in resolve_pool(pool)})
    return planned_rollouts(cfg, n)


@pytest.mark.parametrize(
    "path, expected",
    [
        ("configs/main/harness_s.yaml", (0, 1280, 2560, 1200)),  # spent 1,648: within the range
        ("configs/main/grpo.yaml", (0, 1280, 1280, 120)),
        ("configs/main/h0_rescue.yaml", (0, 1280, 2560, 120)),  # spent 1,672
        ("configs/baselines/harness_bandit.yaml", (0, 1280, 1280, 1200)),
        ("configs/baselines/harnessx.yaml", (0, 1280, 1280, 1200)),
        ("configs/baselines/frozen_evolution.yaml", (400, 0, 0, 0)),
        ("configs/baselines/whale.yaml", (1600, 1632, 1632, 0)),
        ("configs/baselines/harness_forge.yaml", (480, 1632, 1632, 0)),
        ("configs/baselines/harnessx_coupled.yaml", (544, 1280, 1280, 1600)),
    ],
)
def test_committed_configs_plan_the_budgets_they_state(path, expected):
    got = plan(path)
    assert (got["search"], got["training_min"], got["training_max"], got["validation"]) == expected


def test_the_plan_reads_as_one_line():
    assert describe(plan("configs/main/harness_s.yaml")) == (
        "planned rollouts: search 0, training 1,280-2,560, validation 1,200"
    )
