"""Re-running a failed flow run in place (infra/rerun.py) with the real model and a real Prefect API:
a fault injected into one rollout group fails the run; the re-run executes only that group."""

from __future__ import annotations

import json

import pytest
from sqlalchemy import func, select

from configs.schema import EvalConfig
from db.engine import make_engine, session_scope
from db.models import RolloutGroup, Run, Trajectory


def tiny_eval(tmp_path) -> EvalConfig:
    return EvalConfig.model_validate(
        {
            "name": "rerun",
            "split": "dev",
            "limit": 3,
            "k": 1,
            "seeds": 1,
            "group_concurrency": 1,
            "sampling": {"max_new_tokens": 8},
            "env": {"max_rounds": 1},
            "results_dir": str(tmp_path / "results"),
        }
    )


@pytest.mark.slow
def test_rerun_of_a_failed_flow_run_executes_only_the_failed_group(tmp_path, data_dir, prefect_api, monkeypatch):
    from prefect import get_client

    from flows.evaluate import evaluate
    from infra.rerun import rerun_flow_run
    from tasks.faults import executions

    plan = tmp_path / "faults.json"
    bad = "dbbench/dev/0001:seed0"
    plan.write_text(json.dumps({bad: 2}))  # the task's own retry fails too, so the flow run fails
    monkeypatch.setenv("HS_FAULTS", str(plan))
    url = f"sqlite:///{tmp_path / 'hs.db'}"
    cfg = tiny_eval(tmp_path)

    state = evaluate(cfg, database_url=url, return_state=True)
    assert state.is_failed()
    flow_run_id = str(state.state_details.flow_run_id)
    first = executions(plan)
    assert sorted(first) == sorted(["dbbench/dev/0000:seed0", bad, bad, "dbbench/dev/0002:seed0"])
    with session_scope(make_engine(url)) as s:
        run_id = s.scalars(select(Run.id).where(Run.kind == "eval")).one()
        assert s.get(Run, run_id).status == "failed"
        assert s.scalar(select(func.count()).select_from(Trajectory)) == 2  # the two good groups are kept

    result = rerun_flow_run(flow_run_id)
    assert result["where"] == "here" and result["state"] == "COMPLETED"
    assert executions(plan)[len(first) :] == [bad]  # the finished groups were not executed again
    with get_client(sync_client=True) as client:  # the same flow run, now completed
        assert client.read_flow_run(state.state_details.flow_run_id).state.is_completed()
    with session_scope(make_engine(url)) as s:
        assert s.get(Run, run_id).status == "completed"
        groups = s.scalars(select(RolloutGroup).where(RolloutGroup.run_id == run_id)).all()
        assert sorted(g.bench_task_id for g in groups) == ["dbbench/dev/0000", "dbbench/dev/0001", "dbbench/dev/0002"]
        assert s.scalar(select(func.count()).select_from(Trajectory)) == 3  # no row duplicated

    with pytest.raises(LookupError, match="COMPLETED; only a failed"):
        rerun_flow_run(flow_run_id)
    with pytest.raises(LookupError, match="no flow run"):
        rerun_flow_run("00000000-0000-0000-0000-000000000000")
