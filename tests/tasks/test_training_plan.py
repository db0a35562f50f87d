"""Training plans: run identity, data order, validation split, W&B offline files."""

from __future__ import annotations

import pytest

from configs.schema import TrainConfig
from tasks.run_identity import TrainingError, batch_for_step, init_checkpoint, task_sets, train_run_id


def test_run_id_ignores_the_update_budget_but_not_the_method():
    a = TrainConfig(updates=20)
    assert train_run_id(a) == train_run_id(TrainConfig(updates=40))
    assert train_run_id(a) != train_run_id(TrainConfig(mode="grpo"))
    assert train_run_id(a) != train_run_id(TrainConfig(k=4))


def test_data_order_is_seeded_complete_per_epoch_and_stable():
    ids = [f"t{i}" for i in range(10)]
    epoch = [t for step in range(5) for t in batch_for_step(ids, seed=0, batch=2, step=step)]
    assert sorted(epoch) == sorted(ids)  # every task once per epoch
    assert batch_for_step(ids, 0, 2, 7) == batch_for_step(list(ids), 0, 2, 7)  # resume = same order
    assert epoch != [t for step in range(5) for t in batch_for_step(ids, seed=1, batch=2, step=step)]
    with pytest.raises(TrainingError, match="build-train"):
        batch_for_step([], 0, 2, 0)


def test_validation_tasks_never_overlap_training_tasks(train_dir):
    cfg = TrainConfig(tiers=["easy"], validation={"split": "train", "n_tasks": 5})
    train, val = task_sets(cfg)
    assert len(val) == 5 and not {t.id for t in train} & {t.id for t in val}
    dev = TrainConfig(validation={"split": "dev", "n_tasks": 3}, n_tasks=7)
    train, val = task_sets(dev)
    assert len(train) == 7 and [t.split for t in val] == ["dev"] * 3


def test_warm_start_names_the_sft_checkpoint():
    from configs.schema import SftConfig, load_config
    from tasks.sft import checkpoint_name

    cfg = TrainConfig(warm_start="configs/sft_dbbench_smol.yaml", init="ignored")
    expected = checkpoint_name(load_config(SftConfig, "configs/sft_dbbench_smol.yaml"))
    assert init_checkpoint(cfg) == expected and expected.startswith("sft-dbbench-smol-")
    assert init_checkpoint(TrainConfig(init="my-ckpt")) == "my-ckpt"


def test_wandb_offline_writes_a_local_run(tmp_path, monkeypatch):
    from tasks import tracking

    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("HS_HOME", str(tmp_path))
    monkeypatch.setenv("WANDB_SILENT", "true")
    tracking.log_metrics("run-abc", "offline", {"mode": "grpo"}, {"train/valid_group_ratio": 0.5, "note": "x"}, step=0)
    tracking.log_metrics("run-abc", "offline", {}, {"train/valid_group_ratio": 0.75}, step=1)
    tracking.finish("run-abc")
    files = list((tmp_path / "wandb").rglob("run-run-abc.wandb"))
    assert files and files[0].stat().st_size > 0


def test_wandb_disabled_writes_nothing(tmp_path, monkeypatch):
    from tasks import tracking

    monkeypatch.setenv("WANDB_MODE", "disabled")
    monkeypatch.setenv("HS_HOME", str(tmp_path))
    tracking.log_metrics("run-x", "offline", {}, {"a": 1.0}, step=0)
    assert not (tmp_path / "wandb").exists()
