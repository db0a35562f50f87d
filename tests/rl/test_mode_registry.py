"""The training-mode registry: adding a mode is one entry. A toy mode registered here is accepted
by TrainConfig, planned by first_groups / rescue_groups, priced by its budget factor and planned
by the update's rollout-group tasks, with no model loaded."""

import pytest

from configs.schema import ConfigError, TrainConfig, load_config
from harness_pool.spec import load_harness
from rl.group_planning import PlannedGroup, h0_groups
from rl.modes import Mode, Role
from rl.rollout import RolloutSpec
from rl.training_modes import (
    MODES,
    TrainingMode,
    first_groups,
    modes_help,
    register_mode,
    rescue_groups,
    training_mode,
    unregister_mode,
)


class T:
    def __init__(self, i):
        self.id = f"dbbench/train/{i:04d}"


def _two_more_h0_groups(dead_tasks, h0, pool, router, k):
    """A dead group gets two more tries under H0: 2K fresh rollouts (sample indices K..3K-1)."""
    return [PlannedGroup(t, Role.H0_RESCUE, [RolloutSpec(t, h0, k + i) for i in range(2 * k)]) for t in dead_tasks]


def _k_at_most_16(cfg):
    if cfg.k > 16:
        raise ValueError("mode h0_twice needs k <= 16 (three groups of K per task)")


@pytest.fixture
def h0_twice():
    mode = register_mode(
        TrainingMode(
            "h0_twice",
            "a dead H0 group gets 2K fresh H0 rollouts",
            h0_groups,
            rescue=_two_more_h0_groups,
            budget_factor=3,
            check=_k_at_most_16,
        )
    )
    yield mode
    unregister_mode(mode.name)


def test_a_registered_mode_is_accepted_planned_and_priced(h0_twice):
    assert training_mode("h0_twice") is h0_twice and "h0_twice: a dead H0 group gets 2K" in modes_help()
    cfg = load_config(TrainConfig, None, {"mode": "h0_twice", "batch_tasks": 2, "k": 4})
    assert cfg.mode == "h0_twice" and cfg.max_update_rollouts() == 2 * 4 * 3
    with pytest.raises(ConfigError, match=r"rollout_budget 20 is below one update's most expensive outcome \(24"):
        load_config(TrainConfig, None, {"mode": "h0_twice", "batch_tasks": 2, "k": 4, "rollout_budget": 20})
    with pytest.raises(ConfigError, match="mode h0_twice needs k <= 16"):
        load_config(TrainConfig, None, {"mode": "h0_twice", "k": 32})
    h0 = load_harness("h0")
    (first,) = first_groups("h0_twice", [T(1)], h0, [], 4)
    assert first.role == Role.H0 and first.harness_id == h0.id and len(first.specs) == 4
    (again,) = rescue_groups("h0_twice", [T(1)], h0, [], None, 4)
    assert again.role == Role.H0_RESCUE and [s.sample_index for s in again.specs] == list(range(4, 12))
    assert rescue_groups("h0_twice", [], h0, [], None, 4) == []


def test_the_rollout_group_tasks_plan_a_registered_mode(h0_twice, monkeypatch):
    """The Prefect tasks ask the mode (no bandit, router or replay here: no database), so only
    the rollouts are stubbed."""
    from tasks import rollout_groups

    def plans_only(cfg, run_id, plans, step, phase, router_version=None, bandit=None):
        return rollout_groups.Sampled([rollout_groups.Group(p, []) for p in plans], 0.0, router_version, bandit)

    monkeypatch.setattr(rollout_groups, "_sample", plans_only)
    monkeypatch.setattr(rollout_groups, "bench_task", lambda env, task_id: T(int(task_id)))
    from tasks.run_identity import RunContext, harness_sets

    cfg = load_config(TrainConfig, None, {"mode": "h0_twice", "k": 2})
    run = RunContext("toy-run", *harness_sets(cfg), train_task_ids=["1", "2"], val_task_ids=[])
    first = rollout_groups.sample_first_groups.fn(cfg, run, 0, ["1", "2"])
    assert [(g.plan.role, g.plan.harness_id, len(g.plan.specs)) for g in first.groups] == [
        (Role.H0, load_harness("h0").id, 2)
    ] * 2
    dead = rollout_groups.dead_groups(first)  # no rollouts ran: no success
    rescue = rollout_groups.sample_rescue_groups.fn(cfg, run, 0, dead, None)
    assert [(g.bench_task_id, g.plan.role, len(g.plan.specs)) for g in rescue.groups] == [
        ("dbbench/train/0001", Role.H0_RESCUE, 4),
        ("dbbench/train/0002", Role.H0_RESCUE, 4),
    ]
    assert rescue.router_version is None and rollout_groups.replay_groups.fn(cfg, "toy-run", 0, None) == []


def test_unknown_or_duplicate_mode_is_a_one_line_error(h0_twice):
    known = ", ".join(MODES)
    with pytest.raises(ValueError, match=f"^unknown training mode 'ppo': use one of {known}$"):
        training_mode("ppo")
    with pytest.raises(ConfigError) as err:
        load_config(TrainConfig, None, {"mode": "ppo"})
    assert "unknown training mode 'ppo': use one of harness_s, grpo" in str(err.value)
    assert "\n" not in str(err.value)
    with pytest.raises(ValueError, match="already registered"):
        register_mode(h0_twice)


def test_built_in_modes_keep_their_names_and_are_listed():
    from typer.testing import CliRunner

    from cli.main import app

    assert list(MODES)[: len(Mode)] == list(Mode)  # configs, run ids and database rows record these names
    assert type(load_config(TrainConfig, None, {"mode": "grpo"}).mode) is str
    described = TrainConfig.model_fields["mode"].description
    assert all(f"{m}: {MODES[m].help}" in described for m in Mode)
    shown = CliRunner().invoke(app, ["train", "--help"]).output
    assert all(f"{m}:" in shown for m in Mode)
