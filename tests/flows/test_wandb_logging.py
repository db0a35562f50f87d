"""Every flow logs its config and namespaced metrics to W&B; here offline, read back from the run file."""

from __future__ import annotations

import pytest

from configs.schema import EvalConfig


@pytest.mark.slow
def test_evaluation_logs_config_and_eval_metrics_offline(tmp_path, data_dir, prefect_api, monkeypatch):
    from flows.evaluate import evaluate

    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("HS_HOME", str(tmp_path / "hs"))
    cfg = EvalConfig.model_validate(
        {
            "name": "wb",
            "split": "dev",
            "limit": 1,
            "k": 1,
            "seeds": 1,
            "sampling": {"max_new_tokens": 8},
            "env": {"max_rounds": 1},
            "results_dir": str(tmp_path / "results"),
        }
    )
    result = evaluate(cfg, database_url=f"sqlite:///{tmp_path / 'hs.db'}")
    runs = list((tmp_path / "hs" / "wandb" / "wandb").glob(f"offline-run-*-{result['run_id']}"))
    assert len(runs) == 1, list((tmp_path / "hs").rglob("*"))[:20]
    data = next(runs[0].glob("run-*.wandb")).read_bytes()
    for key in (b"eval/pass_at_k", b"eval/avg_at_k", b"eval/n_tasks", b"max_new_tokens"):  # metrics and config
        assert key in data
    assert b"train/" not in data  # namespaced: an evaluation logs eval/ only
