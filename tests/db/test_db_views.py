"""The analysis views of migration 0007 give hand-computed answers on SQLite and PostgreSQL.

One small database is built from ORM rows; every view is read with plain SQL and compared row
by row with values worked out by hand (floats with pytest.approx, and checked to be floats on
both backends, not Decimal).
"""

from __future__ import annotations

import pytest
from alembic import command
from sqlalchemy import inspect, text

from analysis.metrics import pass_avg
from db.engine import alembic_config, current_revision, make_engine, session_scope, upgrade
from db.models import (
    BenchTask,
    Evaluation,
    Harness,
    RolloutGroup,
    RouterDecision,
    Run,
    TrainStep,
    Trajectory,
)

VIEWS = {
    "eval_task_outcomes",
    "eval_scores",
    "train_signals",
    "reanchor_success",
    "sibling_edges",
    "behaviour_frequencies",
    "rank1_shares",
}

H0, S1, S2, UNKNOWN = "hid0", "hid1", "hid2", "hidf"
HARNESS_NAMES = {H0: "h0", S1: "schema_rows", S2: "careful"}
T0, T1, T2 = "dbbench/dev/0000", "dbbench/dev/0001", "dbbench/dev/0002"
TASK_TYPES = {T0: "counting", T1: "counting", T2: "aggregation"}

# (run, seed) -> bench task -> outcome of each of its rollouts (role 'eval').
EVAL_OUTCOMES = {
    ("e1", 0): {T0: [1, 1, 0], T1: [0, 0, 0], T2: [1, 0, 0]},
    ("e1", 1): {T0: [1, 1, 1], T1: [0, 1, 0], T2: [0, 0, 0]},
    ("e2", 0): {T0: [0, 0, 0], T1: [0, 0, 0], T2: [1, 1, 1]},
    ("e2", 1): {T0: [1, 0, 1]},
}

# Behaviour tags of run b1's trajectories (one training group): a duplicate tag, a non-string
# element, an empty list, JSON null and an object (neither is a list of tags).
B1_TAGS = [
    ["repeated_query", "inspected_table"],
    ["repeated_query", "repeated_query"],
    ["gave_up", 7],
    [],
    None,
    {"note": "gave_up"},
]

# (run, step, harness) -> success rate at a re-anchor (routing 'reanchor').
REANCHORS = {
    ("t1", 0, H0): 0.5,
    ("t1", 0, S1): 0.625,
    ("t1", 0, S2): 0.25,
    ("t1", 4, H0): 0.75,
    ("t1", 4, S1): 0.625,
    ("t1", 4, S2): 1.0,
    ("t2", 0, H0): 0.5,
    ("t2", 0, S1): 0.75,
    ("t3", 2, H0): 0.25,
    ("t3", 2, S1): 0.5,
}
REANCHOR_SIZE = {"t1": (8, 1), "t2": (4, 2), "t3": (4, 1)}  # run -> (n_bench_tasks, k)


def _group(run_id, seed, task_id, role, outcomes, tags=None, step=0):
    group_id = f"g-{run_id}-{seed}-{role}-{task_id}"
    return RolloutGroup(
        id=group_id,
        run_id=run_id,
        step=step,
        bench_task_id=task_id,
        harness_id=H0,
        seed=seed,
        k=len(outcomes),
        role=role,
        checkpoint="ckpt-0",
        n_success=sum(outcomes),
        trajectories=[
            Trajectory(
                id=f"{group_id}-{i}",
                run_id=run_id,
                bench_task_id=task_id,
                harness_id=H0,
                sample_index=i,
                checkpoint="ckpt-0",
                reward=float(ok),
                success=bool(ok),
                finish_reason="answer",
                behaviour_tags=tags[i] if tags is not None else [],
            )
            for i, ok in enumerate(outcomes)
        ],
    )


def _evaluation(run_id, harness_id, routing, metrics, n_tasks=8, k=1):
    return Evaluation(
        id=f"ev-{run_id}-{routing}-{metrics.get('step')}-{harness_id}",
        run_id=run_id,
        benchmark="dbbench",
        split="dev",
        harness_id=harness_id,
        routing=routing,
        k=k,
        n_seeds=1,
        n_bench_tasks=n_tasks,
        metrics=metrics,
    )


def _decision(run_id, task_id, chosen, purpose="rank1"):
    return RouterDecision(
        id=f"d-{run_id}-{purpose}-{task_id}",
        run_id=run_id,
        step=0,
        bench_task_id=task_id,
        purpose=purpose,
        router=purpose,
        ranking=list(chosen),
        chosen=list(chosen),
        votes={},
    )


@pytest.fixture
def research_db(engine):
    with session_scope(engine) as session:
        configs = {
            "e1": ("eval", {"k": 3}),
            "e2": ("eval", {"k": 3}),
            "t1": ("train", {"harness": "h0"}),
            "t2": ("train", {}),  # no 'harness': the base is h0
            "t3": ("train", {"harness": "schema_rows"}),
            "b1": ("train", {}),
        }
        for run_id, (kind, config) in configs.items():
            session.add(Run(id=run_id, kind=kind, name=run_id, config=config))
        for harness_id, name in HARNESS_NAMES.items():
            session.add(Harness(id=harness_id, name=name, benchmark="dbbench"))
        for index, (task_id, task_type) in enumerate(TASK_TYPES.items()):
            session.add(
                BenchTask(
                    id=task_id,
                    benchmark="dbbench",
                    split="dev",
                    index=index,
                    task_type=task_type,
                    description=f"task {index}",
                )
            )
        session.flush()

        for (run_id, seed), by_task in EVAL_OUTCOMES.items():
            for task_id, outcomes in by_task.items():
                tags = [["inspected_table"] if ok else [] for ok in outcomes] if run_id == "e2" else None
                session.add(_group(run_id, seed, task_id, "eval", outcomes, tags))
        # A training group of an eval run: it would make T1 solved at e1/seed 0 if it counted.
        session.add(_group("e1", 0, T1, "train", [1, 1, 1], step=1))
        session.add(_group("b1", 0, T0, "train", [0] * len(B1_TAGS), B1_TAGS, step=1))

        full = {
            "train/reward_mean": 0.25,
            "train/valid_group_ratio": 0.5,
            "train/effective_token_ratio": 0.75,
            "train/first_group_success": 0.125,
            "rollout/rescues_triggered": 3,
            "rollout/rescue_success": 0.5,
            "rollout/rollouts_spent": 48,
            "time/rollout_s": 12.5,
        }
        partial = {
            "train/reward_mean": 0.5,
            "train/valid_group_ratio": 0.625,
            "train/effective_token_ratio": 0.875,
            "train/first_group_success": "n/a",  # not a number: NULL
            "rollout/rescues_triggered": 0,
            "rollout/rollouts_spent": 40,
            # no 'rollout/rescue_success': NULL
        }
        for run_id, step, mode, metrics in [
            ("t1", 1, "harness_s", full),
            ("t1", 2, "harness_s", partial),
            ("t2", 1, "grpo", {}),
        ]:
            session.add(TrainStep(id=f"ts-{run_id}-{step}", run_id=run_id, step=step, mode=mode, metrics=metrics))

        for (run_id, step, harness_id), rate in REANCHORS.items():
            n_tasks, k = REANCHOR_SIZE[run_id]
            stored_step = float(step) if run_id == "t3" else step  # 2.0 still reads as step 2
            metrics = {"step": stored_step, "success_rate": rate, "solved": []}
            session.add(_evaluation(run_id, harness_id, "reanchor", metrics, n_tasks, k))
        # Not a re-anchor: left out of reanchor_success and sibling_edges.
        session.add(_evaluation("e1", H0, "h0", {"step": 0, "success_rate": 0.9}))

        for task_id, chosen in [
            (T0, [S1, H0]),
            (T1, [H0]),
            (T2, [S1, S2]),
            ("dbbench/dev/0003", [UNKNOWN]),  # a harness id not in harnesses
            ("dbbench/dev/0004", []),  # chose nothing: counts in the denominator only
        ]:
            session.add(_decision("e1", task_id, chosen))
        session.add(_decision("e2", T0, [H0]))
        session.add(_decision("t1", T0, [S2], purpose="rescue"))
    return engine


def _rows(engine, sql):
    with engine.connect() as connection:
        return [tuple(row) for row in connection.execute(text(sql))]


def _assert_rows(actual, expected):
    """Row by row; floats approximately and as Python floats, everything else exactly."""
    assert len(actual) == len(expected), actual
    for got, want in zip(actual, expected):
        assert len(got) == len(want), got
        for value, wanted in zip(got, want):
            if isinstance(wanted, float):
                assert type(value) is float, (got, want)
                assert value == pytest.approx(wanted), (got, want)
            elif isinstance(wanted, int):
                assert type(value) is int, (got, want)
                assert value == wanted, (got, want)
            else:
                assert value == wanted, (got, want)


def test_eval_task_outcomes(research_db):
    actual = _rows(
        research_db,
        "SELECT run_id, seed, bench_task_id, task_type, rollouts, successes, solved "
        "FROM eval_task_outcomes ORDER BY run_id, seed, bench_task_id",
    )
    _assert_rows(
        actual,
        [
            ("e1", 0, T0, "counting", 3, 2, 1),
            ("e1", 0, T1, "counting", 3, 0, 0),  # the solved training group is not counted
            ("e1", 0, T2, "aggregation", 3, 1, 1),
            ("e1", 1, T0, "counting", 3, 3, 1),
            ("e1", 1, T1, "counting", 3, 1, 1),
            ("e1", 1, T2, "aggregation", 3, 0, 0),
            ("e2", 0, T0, "counting", 3, 0, 0),
            ("e2", 0, T1, "counting", 3, 0, 0),
            ("e2", 0, T2, "aggregation", 3, 3, 1),
            ("e2", 1, T0, "counting", 3, 2, 1),
        ],
    )


def test_eval_scores(research_db):
    actual = _rows(
        research_db,
        "SELECT run_id, seed, n_tasks, pass_at_k, avg_at_k FROM eval_scores ORDER BY run_id, seed",
    )
    _assert_rows(
        actual,
        [
            ("e1", 0, 3, 200 / 3, 100 / 3),
            ("e1", 1, 3, 200 / 3, 400 / 9),
            ("e2", 0, 3, 100 / 3, 100 / 3),
            ("e2", 1, 1, 100.0, 200 / 3),
        ],
    )
    # The same numbers as the Python scorer (analysis.metrics) on the same outcomes.
    for run_id, seed, _, pass_at_k, avg_at_k in actual:
        by_task = {t: [bool(o) for o in v] for t, v in EVAL_OUTCOMES[(run_id, seed)].items()}
        assert (pass_at_k, avg_at_k) == pytest.approx(pass_avg(by_task))


def test_train_signals(research_db):
    actual = _rows(
        research_db,
        "SELECT run_id, step, mode, reward_mean, valid_group_ratio, effective_token_ratio, "
        "first_group_success, rescues_triggered, rescue_success, rollouts_spent "
        "FROM train_signals ORDER BY run_id, step",
    )
    _assert_rows(
        actual,
        [
            ("t1", 1, "harness_s", 0.25, 0.5, 0.75, 0.125, 3.0, 0.5, 48.0),
            ("t1", 2, "harness_s", 0.5, 0.625, 0.875, None, 0.0, None, 40.0),
            ("t2", 1, "grpo", None, None, None, None, None, None, None),
        ],
    )


def test_reanchor_success(research_db):
    actual = _rows(
        research_db,
        "SELECT run_id, step, harness_id, harness_name, success_rate, n_tasks, k "
        "FROM reanchor_success ORDER BY run_id, step, harness_name",
    )
    _assert_rows(
        actual,
        [
            ("t1", 0, S2, "careful", 0.25, 8, 1),
            ("t1", 0, H0, "h0", 0.5, 8, 1),
            ("t1", 0, S1, "schema_rows", 0.625, 8, 1),
            ("t1", 4, S2, "careful", 1.0, 8, 1),
            ("t1", 4, H0, "h0", 0.75, 8, 1),
            ("t1", 4, S1, "schema_rows", 0.625, 8, 1),
            ("t2", 0, H0, "h0", 0.5, 4, 2),
            ("t2", 0, S1, "schema_rows", 0.75, 4, 2),
            ("t3", 2, H0, "h0", 0.25, 4, 1),
            ("t3", 2, S1, "schema_rows", 0.5, 4, 1),
        ],
    )


def test_sibling_edges(research_db):
    actual = _rows(
        research_db,
        "SELECT run_id, step, harness_id, harness_name, success_rate, base_success_rate, edge "
        "FROM sibling_edges ORDER BY run_id, step, harness_name",
    )
    _assert_rows(
        actual,
        [
            ("t1", 0, S2, "careful", 0.25, 0.5, -0.25),
            ("t1", 0, S1, "schema_rows", 0.625, 0.5, 0.125),
            ("t1", 4, S2, "careful", 1.0, 0.75, 0.25),
            ("t1", 4, S1, "schema_rows", 0.625, 0.75, -0.125),
            ("t2", 0, S1, "schema_rows", 0.75, 0.5, 0.25),  # config without 'harness': base h0
            ("t3", 2, H0, "h0", 0.25, 0.5, -0.25),  # base schema_rows: h0 is the sibling here
        ],
    )


def test_behaviour_frequencies(research_db):
    actual = _rows(
        research_db,
        "SELECT run_id, tag, n_tagged, n_trajectories, share FROM behaviour_frequencies ORDER BY run_id, tag",
    )
    _assert_rows(
        actual,
        [
            ("b1", "gave_up", 1, 6, 1 / 6),  # the object's value is not a tag
            ("b1", "inspected_table", 1, 6, 1 / 6),
            ("b1", "repeated_query", 2, 6, 2 / 6),  # twice in one trajectory counts once
            ("e2", "inspected_table", 5, 12, 5 / 12),  # every trajectory of the run counted
        ],
    )


def test_rank1_shares(research_db):
    actual = _rows(
        research_db,
        "SELECT run_id, harness_id, harness_name, n_tasks, share FROM rank1_shares ORDER BY run_id, harness_id",
    )
    _assert_rows(
        actual,
        [
            ("e1", H0, "h0", 1, 0.2),
            ("e1", S1, "schema_rows", 2, 0.4),
            ("e1", UNKNOWN, None, 1, 0.2),
            ("e2", H0, "h0", 1, 1.0),  # the rescue decision of t1 is not a Rank-1 choice
        ],
    )


def test_views_on_an_empty_database(engine):
    for view in sorted(VIEWS):
        assert _rows(engine, f"SELECT * FROM {view}") == []


def _view_names(engine) -> set[str]:
    if engine.dialect.name == "sqlite":
        sql = "SELECT name FROM sqlite_master WHERE type = 'view'"
    else:
        sql = "SELECT table_name FROM information_schema.views WHERE table_schema = current_schema()"
    return {name for (name,) in _rows(engine, sql)}


def test_downgrade_drops_the_views_and_upgrade_restores_them(db_url):
    upgrade(db_url)
    engine = make_engine(db_url)
    try:
        assert _view_names(engine) == VIEWS
        assert not VIEWS & set(inspect(engine).get_table_names())

        command.downgrade(alembic_config(db_url), "0006")
        assert current_revision(engine) == "0006"
        assert _view_names(engine) == set()
        assert "trajectories" in set(inspect(engine).get_table_names())

        upgrade(db_url)
        assert current_revision(engine) == "0010"
        assert _view_names(engine) == VIEWS
    finally:
        engine.dispose()
