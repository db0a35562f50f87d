"""Rollout groups fanned out as Ray tasks (prefect-ray's RayTaskRunner) on a local 2-CPU Ray."""

from __future__ import annotations

import os

import pytest
from sqlalchemy import func, select

from configs.schema import EvalConfig
from db.engine import make_engine, session_scope
from db.models import RolloutGroup, Trajectory


@pytest.mark.slow
def test_evaluation_groups_run_as_ray_tasks_in_other_processes(tmp_path, data_dir, prefect_api):
    from flows.evaluate import evaluate

    cfg = EvalConfig.model_validate(
        {
            "name": "ray",
            "split": "dev",
            "limit": 2,
            "k": 1,
            "seeds": 1,
            "group_concurrency": 2,
            "sampling": {"max_new_tokens": 8},
            "env": {"max_rounds": 1},
            "results_dir": str(tmp_path / "results"),
            "runner": {"kind": "ray", "num_cpus": 2},
        }
    )
    url = f"sqlite:///{tmp_path / 'hs.db'}"
    try:
        result = evaluate(cfg, database_url=url)
    finally:
        import ray

        ray.shutdown()
    pids = {w.rsplit(":", 1)[1] for w in result["workers"]}
    assert pids and str(os.getpid()) not in pids  # every group ran in a Ray worker process
    with session_scope(make_engine(url)) as s:
        assert s.scalar(select(func.count()).select_from(RolloutGroup)) == 2
        assert s.scalar(select(func.count()).select_from(Trajectory)) == 2
    assert result["overall"]["n_tasks"] == 2
