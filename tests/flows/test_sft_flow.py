"""The warm-start flow end to end: demonstrations -> training -> registry + database; reused on re-run."""

from __future__ import annotations

import pytest
import torch

from configs.schema import SftConfig
from db.engine import make_engine, session_scope
from db.models import Checkpoint, Run
from rl.precision import cpu_has_fast_bf16, resolve_dtype


@pytest.mark.slow
def test_sft_flow_registers_a_checkpoint_that_eval_can_load(tmp_path, train_dir, prefect_api, smol_policy, monkeypatch):
    from flows.sft import sft
    from rl.checkpoints import checkpoint_path, read_meta
    from rl.model_store import resolve_model

    monkeypatch.setenv("HS_CHECKPOINT_DIR", str(tmp_path / "ckpt"))
    url = f"sqlite:///{tmp_path / 'hs.db'}"
    cfg = SftConfig(
        name="sfttest",
        n_tasks=10,
        steps=2,
        batch_size=2,
        heldout_fraction=0.2,
        results_dir=str(tmp_path / "results"),
        lr=3e-4,
    )
    result = sft(cfg, database_url=url)
    name = result["checkpoint"]
    assert result["demonstrations"] == 10 and result["failed_replays"] == []
    assert resolve_model(name) == checkpoint_path(name)
    meta = read_meta(name)
    assert meta["n_train"] == 8 and meta["n_heldout"] == 2 and len(meta["train_losses"]) == 2
    with session_scope(make_engine(url)) as s:
        ckpt = s.get(Checkpoint, name)
        assert ckpt.kind == "sft" and ckpt.parent_id == "smollm2-135m" and ckpt.step == 2
        assert ckpt.provenance["config"]["n_tasks"] == 10
        # 'auto' resolves per machine under one checkpoint name: what it resolved to is recorded
        precision = ckpt.provenance["precision"]
        assert precision["compute"] == resolve_dtype("auto", "cpu") and precision["device"] == "cpu"
        assert precision["fast_bf16"] == cpu_has_fast_bf16() and precision["cpu"]
        assert s.get(Run, ckpt.run_id).status == "completed"
    weights = checkpoint_path(name) / "model.safetensors"
    stamp = weights.stat().st_mtime_ns
    again = sft(cfg, database_url=url)  # same config: the checkpoint is reused, not retrained
    assert again["checkpoint"] == name and weights.stat().st_mtime_ns == stamp

    # a warm start on disk and a new database (switched, or the old one deleted): its rows come back
    from flows.sft import ensure_warm_start

    other = f"sqlite:///{tmp_path / 'other.db'}"
    ensure_warm_start(cfg, other)
    assert weights.stat().st_mtime_ns == stamp  # not retrained
    with session_scope(make_engine(url)) as s, session_scope(make_engine(other)) as o:
        mine, theirs = s.get(Checkpoint, name), o.get(Checkpoint, name)
        assert (theirs.run_id, theirs.kind, theirs.step, theirs.metrics, theirs.provenance) == (
            mine.run_id,
            mine.kind,
            mine.step,
            mine.metrics,
            mine.provenance,
        )
        assert o.get(Run, theirs.run_id).status == "completed"

    # the whole flow, not only the warm-start check: a switched database, then a deleted results
    # cache; the checkpoint is never retrained and each database holds the rows of a clean run
    import shutil

    def checkpoint_rows(database):
        with session_scope(make_engine(database)) as s:
            row = s.get(Checkpoint, name)
            return row.run_id, row.kind, row.step, row.metrics, s.get(Run, row.run_id).status

    switched = f"sqlite:///{tmp_path / 'switched.db'}"
    assert sft(cfg, database_url=switched)["checkpoint"] == name
    shutil.rmtree(tmp_path / "results")
    assert sft(cfg, database_url=url)["demonstrations"] == 10  # the demonstrations are replayed again
    assert weights.stat().st_mtime_ns == stamp
    assert checkpoint_rows(switched) == checkpoint_rows(url)


@pytest.mark.slow
def test_lora_warm_start_saves_merged_weights(tmp_path, train_dir, prefect_api, smol_policy, monkeypatch):
    from safetensors import safe_open

    from flows.sft import sft
    from rl.checkpoints import checkpoint_path

    monkeypatch.setenv("HS_CHECKPOINT_DIR", str(tmp_path / "ckpt"))
    cfg = SftConfig(
        name="sftlora",
        n_tasks=4,
        steps=2,
        batch_size=2,
        heldout_fraction=0.25,
        lora=True,
        lora_rank=4,
        lr=1e-3,
        results_dir=str(tmp_path / "results"),
    )
    result = sft(cfg, database_url=f"sqlite:///{tmp_path / 'hs.db'}")
    assert result["heldout_loss_after"] < result["heldout_loss_before"]
    with safe_open(str(checkpoint_path(result["checkpoint"]) / "model.safetensors"), "pt") as fh:
        keys = list(fh.keys())
        assert keys and not any("lora" in k for k in keys)  # adapters merged into plain weights
        name = next(k for k in keys if k.endswith("q_proj.weight"))
        merged = fh.get_tensor(name)
    base = dict(smol_policy.model.named_parameters())[name]
    assert not torch.equal(merged, base.detach())  # the merge changed the projections
