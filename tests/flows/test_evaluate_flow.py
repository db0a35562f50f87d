"""The evaluation flow end to end on 2 DBBench tasks with the real SmolLM2 under a Prefect test API."""

from __future__ import annotations

import pytest
from sqlalchemy import func, select

from configs.schema import EvalConfig
from db.engine import make_engine, session_scope
from db.models import Evaluation, RolloutGroup, Run, Trajectory, Turn


@pytest.mark.slow
def test_eval_flow_stores_everything_and_resumes_without_duplicates(tmp_path, data_dir, prefect_api, smol_policy):
    from flows.evaluate import evaluate

    url = f"sqlite:///{tmp_path / 'hs.db'}"
    cfg = EvalConfig(
        name="flowtest",
        split="dev",
        limit=2,
        k=2,
        seeds=2,
        results_dir=str(tmp_path / "results"),
        sampling={"max_new_tokens": 24},
        env={"max_rounds": 2},
    )
    result = evaluate(cfg, database_url=url)
    assert result["overall"]["n_tasks"] == 2 and set(result["per_seed"]) == {0, 1}
    assert 0.0 <= result["overall"]["avg"]["mean"] <= result["overall"]["pass"]["mean"] <= 100.0

    engine = make_engine(url)

    def counts():
        with session_scope(engine) as s:
            return tuple(
                s.scalar(select(func.count()).select_from(m)) for m in (RolloutGroup, Trajectory, Turn, Evaluation)
            )

    first = counts()
    assert first[:2] == (4, 8) and first[2] >= 8 and first[3] == 1
    with session_scope(engine) as s:
        from rl.checkpoints import weights_digest
        from rl.model_store import resolve_model

        weights = s.scalars(select(Run)).one().config["weights"]  # what it evaluated, beside the name
        assert len(weights) == 64 and weights == weights_digest(resolve_model("smollm2-135m"))
        turn = s.scalars(select(Turn)).first()
        assert sum(turn.loss_mask) == len(turn.completion_ids) > 0
        assert len(turn.completion_logprobs) == len(turn.completion_ids)
        trajectories = s.scalars(select(Trajectory)).all()
        assert {t.failure_kind for t in trajectories if not t.success} <= {
            "format_error",
            "round_limit",
            "wrong_answer",
            "sql_error",
            "context_overflow",
        }

    # Same config again: every group is served from persisted results, nothing is duplicated.
    again = evaluate(cfg, database_url=url)
    assert counts() == first
    assert again["overall"] == result["overall"]

    # A group whose cached result is gone runs again and replaces its rows, not duplicating them.
    for path in (tmp_path / "results").iterdir():
        path.unlink()
    evaluate(cfg, database_url=url)
    assert counts() == first


@pytest.mark.slow
def test_failed_flow_run_is_marked_and_a_rerun_executes_only_the_unfinished_group(
    tmp_path, data_dir, prefect_api, smol_policy, monkeypatch
):
    import tasks.evaluation as te
    from db.models import Run
    from flows.evaluate import evaluate

    url = f"sqlite:///{tmp_path / 'hs.db'}"
    cfg = EvalConfig(
        name="faulttest",
        split="dev",
        limit=3,
        k=1,
        seeds=1,
        results_dir=str(tmp_path / "results"),
        sampling={"max_new_tokens": 8},
        env={"max_rounds": 1},
    )
    real = te.run_rollouts
    executed: list[str] = []

    def counting(policy, specs, *args, **kwargs):
        task_id = specs[0].bench_task.id
        executed.append(task_id)
        if task_id == "dbbench/dev/0001" and fail:
            raise RuntimeError("injected fault")
        return real(policy, specs, *args, **kwargs)

    monkeypatch.setattr(te, "run_rollouts", counting)
    fail = True
    with pytest.raises(RuntimeError, match="injected fault"):
        evaluate(cfg, database_url=url)
    engine = make_engine(url)
    with session_scope(engine) as s:
        assert s.scalars(select(Run.status)).one() == "failed"
        assert s.scalar(select(func.count()).select_from(RolloutGroup)) == 2
    assert executed.count("dbbench/dev/0001") == 2  # the task's own retry, then the flow failed

    fail, executed[:] = False, []
    result = evaluate(cfg, database_url=url)
    assert executed == ["dbbench/dev/0001"]  # finished groups came from persisted results
    assert result["overall"]["n_tasks"] == 3
    with session_scope(engine) as s:
        assert s.scalars(select(Run.status)).one() == "completed"
        assert s.scalar(select(func.count()).select_from(RolloutGroup)) == 3
