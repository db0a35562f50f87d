"""The results cache and the trajectory database never disagree (the evaluation flow).

A user evaluates on SQLite, then points the same checkout at another database, deletes the
database file, or deletes the results cache, and runs the same command: the current database
must then hold the same rows as after a clean run, and only a lost cache may cost model time.
"""

from __future__ import annotations

import shutil

import pytest
from sqlalchemy import select

from configs.schema import EvalConfig
from db.engine import make_engine, session_scope
from db.models import Evaluation, RolloutGroup, Trajectory, Turn


def every_id(url: str) -> dict:
    """The primary keys of every table: two databases filled by the same work hold the same ids."""
    from db.models import Base

    engine = make_engine(url)
    try:
        with engine.connect() as c:
            return {
                t.name: sorted(tuple(r) for r in c.execute(select(*t.primary_key.columns)))
                for t in Base.metadata.sorted_tables
            }
    finally:
        engine.dispose()


def _rows(url: str) -> dict:
    """Ids of every group, trajectory and turn, and the evaluation's metrics."""
    engine = make_engine(url)
    try:
        with session_scope(engine) as s:
            return {
                "groups": sorted(s.scalars(select(RolloutGroup.id))),
                "trajectories": sorted(s.scalars(select(Trajectory.id))),
                "turns": sorted(s.scalars(select(Turn.id))),
                "metrics": [e.metrics["overall"] for e in s.scalars(select(Evaluation))],
            }
    finally:
        engine.dispose()


@pytest.mark.slow
@pytest.mark.parametrize("target", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_switching_or_losing_the_database_refills_it_from_the_cache(
    target, tmp_path, data_dir, prefect_api, smol_policy, monkeypatch, request
):
    import tasks.evaluation as te
    from flows.evaluate import evaluate

    real, executed = te.run_rollouts, []

    def counting(policy, specs, *args, **kwargs):
        executed.append(specs[0].bench_task.id)
        return real(policy, specs, *args, **kwargs)

    monkeypatch.setattr(te, "run_rollouts", counting)
    first_url = f"sqlite:///{tmp_path / 'first.db'}"
    monkeypatch.setenv("HS_DATABASE_URL", first_url)  # as the README says: the command itself is unchanged
    cfg = EvalConfig(
        name="cachedb",
        split="dev",
        limit=2,
        k=2,
        seeds=1,
        results_dir=str(tmp_path / "results"),
        sampling={"max_new_tokens": 8},
        env={"max_rounds": 1},
    )
    clean = evaluate(cfg)
    expected = _rows(first_url)
    assert len(expected["groups"]) == 2 and len(expected["trajectories"]) == 4 and len(executed) == 2

    # 1. the same command against another, empty database: rows from the cache, no model call
    other_url = request.getfixturevalue(f"{target}_url") if target == "postgres" else f"sqlite:///{tmp_path / 'b.db'}"
    monkeypatch.setenv("HS_DATABASE_URL", other_url)
    executed.clear()
    switched = evaluate(cfg)
    assert executed == [] and switched["rewritten_from_cache"] == 2
    assert _rows(other_url) == expected and switched["overall"] == clean["overall"]

    if target == "postgres":
        return  # deleting a file and the cache: the SQLite run covers them
    # 2. the database deleted, the cache kept: the same, again without the model
    monkeypatch.setenv("HS_DATABASE_URL", first_url)
    (tmp_path / "first.db").unlink()
    refilled = evaluate(cfg)
    assert executed == [] and refilled["rewritten_from_cache"] == 2 and _rows(first_url) == expected

    # 3. the cache deleted, the database kept: the groups run again and replace their rows
    shutil.rmtree(tmp_path / "results")
    rerun = evaluate(cfg)
    assert len(executed) == 2  # the only case that costs model time
    assert rerun["rewritten_from_cache"] == 0
    after = _rows(first_url)
    assert {k: after[k] for k in ("groups", "trajectories")} == {k: expected[k] for k in ("groups", "trajectories")}


def test_scoring_a_run_without_its_groups_says_what_is_missing(tmp_path):
    from db import store
    from tasks.evaluation import score_evaluation
    from tasks.resources import get_engine

    url = f"sqlite:///{tmp_path / 'hs.db'}"
    with session_scope(get_engine(url)) as s:
        store.upsert_run(s, id="eval-empty", kind="eval", name="empty", status="running", config={})
    cfg = EvalConfig(name="empty", split="dev", limit=1, results_dir=str(tmp_path / "results"))
    with pytest.raises(
        LookupError,
        match=r"run eval-empty has 0 of 3 rollout groups in sqlite:///.*hs\.db: start "
        r"the same command again",
    ):
        score_evaluation.fn(cfg, "eval-empty", "h0", url, expected_groups=3)


@pytest.mark.slow
def test_evolution_in_a_new_or_lost_database_is_refilled_from_the_cache(tmp_path, train_dir, prefect_api, monkeypatch):
    """Evolution with a scripted policy (tests/flows/test_evolve_flow.py): the rows of the
    diagnosis and validation runs and the rejected candidates reach every database."""
    from db.models import EvolutionCandidate, Harness, Pool
    from flows.evolve import evolve
    from tasks import evolution
    from tasks.resources import bench_task
    from tests.flows.test_evolve_flow import ScalarAnswers, evolve_cfg

    cfg = evolve_cfg(tmp_path, rounds=1)
    tasks = [bench_task(cfg.env, i) for i in evolution.diagnosis_task_ids(cfg)]
    calls = []
    scripted = ScalarAnswers({t.description: str(t.label[0]) for t in tasks if not t.is_mutation and len(t.label) == 1})

    def policy(_):
        calls.append(1)
        return scripted

    monkeypatch.setattr(evolution, "get_policy", policy)

    def rows(url):
        engine = make_engine(url)
        try:
            with session_scope(engine) as s:
                return {
                    m.__name__: sorted(s.scalars(select(m.id)))
                    for m in (RolloutGroup, Trajectory, Turn, EvolutionCandidate, Harness, Pool)
                }
        finally:
            engine.dispose()

    first_url = f"sqlite:///{tmp_path / 'first.db'}"
    clean = evolve(cfg, database_url=first_url)
    expected = rows(first_url)
    assert expected["RolloutGroup"] and expected["EvolutionCandidate"] and calls
    calls.clear()
    other_url = f"sqlite:///{tmp_path / 'other.db'}"
    assert evolve(cfg, database_url=other_url)["pool_id"] == clean["pool_id"] and calls == []
    assert rows(other_url) == expected
    (tmp_path / "first.db").unlink()
    evolve(cfg, database_url=first_url)
    assert rows(first_url) == expected and calls == []
    shutil.rmtree(tmp_path / "results")  # the cache lost, the database kept: evolution runs again, same rows
    assert evolve(cfg, database_url=first_url)["pool_id"] == clean["pool_id"] and calls
    assert rows(first_url) == expected


@pytest.mark.slow
def test_a_finished_training_run_in_a_new_or_lost_database_is_refilled_from_its_state(
    tmp_path, train_dir, prefect_api, monkeypatch
):
    """A tiny real training run (tests/flows/test_train_flow.py's config), then the same command on a
    new database and on a deleted one: every row comes back from the step files, no rollout runs."""
    from db.models import Checkpoint, ProfileVersion, RouterDecision, TrainStep
    from flows.train import train
    from tasks import reanchor, rollout_groups
    from tests.flows.test_train_flow import tiny_cfg

    monkeypatch.setenv("HS_CHECKPOINT_DIR", str(tmp_path / "ckpt"))
    real, rollouts = reanchor.run_rollouts, []

    def counting(*args, **kwargs):
        rollouts.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(reanchor, "run_rollouts", counting)  # re-anchors
    monkeypatch.setattr(rollout_groups, "run_rollouts", counting)  # an update's groups
    cfg = tiny_cfg(tmp_path, updates=1, reanchor_every=1, checkpoint_every=1)

    def rows(url):
        engine = make_engine(url)
        try:
            with session_scope(engine) as s:
                out = {
                    m.__name__: sorted(s.scalars(select(m.id)))
                    for m in (
                        RolloutGroup,
                        Trajectory,
                        Turn,
                        TrainStep,
                        Evaluation,
                        ProfileVersion,
                        RouterDecision,
                        Checkpoint,
                    )
                }
                out["metrics"] = [r.metrics for r in s.scalars(select(TrainStep).order_by(TrainStep.step))]
                return out
        finally:
            engine.dispose()

    first_url = f"sqlite:///{tmp_path / 'first.db'}"
    clean = train(cfg, database_url=first_url)
    expected = rows(first_url)
    assert len(expected["TrainStep"]) == 1 and len(expected["Checkpoint"]) == 1 and rollouts
    assert len(expected["Evaluation"]) == 2 * 3  # 2 re-anchors x (H0 + 2 siblings)
    rollouts.clear()
    other_url = f"sqlite:///{tmp_path / 'other.db'}"
    again = train(cfg, database_url=other_url)
    assert rollouts == [] and rows(other_url) == expected and again["history"] == clean["history"]
    (tmp_path / "first.db").unlink()
    train(cfg, database_url=first_url)
    assert rollouts == [] and rows(first_url) == expected
    # training keeps no Prefect results; its persisted results are the state directory. Lost, the
    # run trains again from the same seeds and replaces its rows: the same ids, nothing duplicated
    assert not (tmp_path / "results").exists()
    shutil.rmtree(tmp_path / "runs")
    train(cfg, database_url=first_url)
    after = rows(first_url)
    assert rollouts and {k: v for k, v in after.items() if k != "metrics"} == {
        k: v for k, v in expected.items() if k != "metrics"
    }
