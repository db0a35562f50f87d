"""Planned rollouts per method (configs/budget.py), checked against the committed comparison's
configs: the budgets their comments state are the ones the code plans, and the train-mode plans
match what the evidence-scale runs spent (reports/dbbench-main: harness_s 1,648 training and
1,200 re-anchor rollouts, grpo 1,280 and 120). The caps of `budget:` refuse a plan that can
exceed them, with a one-line error naming the fix."""

from __future__ import annotations

import pytest

from configs.budget import check_budget, describe
from configs.pipeline import PipelineConfig
from configs.schema import ConfigError, load_config
from tasks.budget import hold_to_budget, planned
from tasks.pipeline import training_config

BASELINES = [
    "configs/baselines/frozen_evolution.yaml",
    "configs/baselines/harness_bandit.yaml",
    "configs/baselines/harnessx.yaml",
    "configs/baselines/whale.yaml",
    "configs/baselines/harness_forge.yaml",
    "configs/baselines/harnessx_coupled.yaml",
]


def load(path: str, sets: list[str] | None = None) -> PipelineConfig:
    return load_config(PipelineConfig, path, None, sets)


def plan(path: str, sets: list[str] | None = None) -> dict[str, int]:
    cfg = load(path, sets)
    return planned(cfg, training_config(cfg, cfg.pool_version))  # harnessx: the pool it starts with


@pytest.mark.parametrize(
    "path, expected",
    [
        ("configs/main/harness_s.yaml", (0, 1280, 2560, 1200)),  # spent 1,648: within the range
        ("configs/main/grpo.yaml", (0, 1280, 1280, 120)),
        ("configs/main/h0_rescue.yaml", (0, 1280, 2560, 120)),  # spent 1,672
        ("configs/baselines/harness_bandit.yaml", (0, 1280, 1280, 120)),  # re-anchors measure H0 only
        ("configs/baselines/harnessx.yaml", (0, 1280, 1280, 120)),
        ("configs/baselines/frozen_evolution.yaml", (400, 0, 0, 0)),
        ("configs/baselines/whale.yaml", (1200, 1632, 1632, 0)),
        ("configs/baselines/harness_forge.yaml", (480, 1632, 1632, 0)),
        # re-anchors: 2 per segment of H0 alone
        ("configs/baselines/harnessx_coupled.yaml", (544, 1280, 1280, 4 * 40)),
    ],
)
def test_committed_configs_plan_the_budgets_they_state(path, expected):
    got = plan(path)
    assert (got["search"], got["training_min"], got["training_max"], got["validation"]) == expected


@pytest.mark.parametrize("path", BASELINES)
def test_every_baseline_is_held_to_the_same_caps(path):
    cfg = load(path)
    assert (cfg.budget.search_rollouts, cfg.budget.training_rollouts) == (1200, 1648)
    hold_to_budget(cfg, training_config(cfg, cfg.pool_version))  # within them: no error
    if not cfg.baseline:  # a training mode: the training flow holds the cap too
        assert training_config(cfg, cfg.pool_version).rollout_budget == 1648


def test_the_plan_reads_as_one_line_with_its_caps():
    assert describe(plan("configs/main/harness_s.yaml")) == (
        "planned rollouts: search 0, training 1,280-2,560, validation 1,200"
    )
    cfg = load("configs/baselines/whale.yaml")
    assert describe(plan("configs/baselines/whale.yaml"), cfg).endswith("; caps: search 1,200, training 1,648")


def test_a_search_over_its_cap_is_refused_with_the_fix():
    with pytest.raises(ConfigError, match=r"budget.search_rollouts 1,200: this config plans up to 1,600 search .*rft"):
        check_budget(load("configs/baselines/whale.yaml"), plan("configs/baselines/whale.yaml", ["rft.rounds=3"]))


def test_training_over_its_cap_is_refused_but_rescue_above_it_only_at_worst_is_allowed():
    with pytest.raises(ConfigError, match=r"budget.training_rollouts 1,648: this config plans 1,664 training"):
        cfg = load("configs/baselines/harnessx.yaml", ["train.updates=26"])
        check_budget(cfg, plan("configs/baselines/harnessx.yaml", ["train.updates=26"]))
    rescue = load("configs/main/harness_s.yaml", ["budget.training_rollouts=1648"])
    check_budget(rescue, plan("configs/main/harness_s.yaml"))  # 1,280..2,560: the training flow stops at 1,648
    assert training_config(rescue, None).rollout_budget == 1648


def test_a_cap_below_one_update_is_refused_when_the_config_loads():
    with pytest.raises(ConfigError, match=r"below one update's most expensive outcome \(128 rollouts\)"):
        load("configs/main/harness_s.yaml", ["budget.training_rollouts=100"])


def test_re_anchors_that_measure_the_pool_are_counted_for_every_harness():
    measured = ["train.validation.harnesses=pool"]
    assert plan("configs/baselines/harness_bandit.yaml", measured)["validation"] == 1200  # 3 x 10 harnesses x 40
    assert plan("configs/baselines/harness_bandit.yaml")["validation"] == 120  # H0 alone


def test_h0_only_re_anchors_are_refused_where_profiles_are_read():
    with pytest.raises(ConfigError, match=r"router.kind adaptive reads the re-anchors' measurements .*harnesses: pool"):
        load("configs/main/harness_s.yaml", ["train.validation.harnesses=h0"])
    with pytest.raises(ConfigError, match=r"evaluate.rank1 routes by the profiles .*rank1: false"):
        load("configs/baselines/harnessx_coupled.yaml", ["evaluate.rank1=true"])
    random_router = ["train.validation.harnesses=h0", "train.router.kind=random"]
    load("configs/main/harness_s.yaml", [*random_router, "evaluate.rank1=false", "evaluate.rank1_before=false"])


def test_a_field_added_at_its_default_keeps_the_comparisons_run_ids():
    from tasks.run_identity import train_run_id

    def run_id(path: str, sets: list[str] | None = None) -> str:
        cfg = load(path, sets)
        return train_run_id(training_config(cfg, cfg.pool_version))

    # the ids of reports/dbbench-main's runs, recorded before validation.harnesses existed: they still resume
    assert run_id("configs/main/harness_s.yaml") == "main-harness-s-train-harness_s-7b06f7b1473a"
    assert run_id("configs/main/grpo.yaml") == "main-grpo-train-grpo-bc720cb5d7c6"
    assert run_id("configs/main/grpo.yaml", ["train.validation.harnesses=h0"]) != "main-grpo-train-grpo-bc720cb5d7c6"
