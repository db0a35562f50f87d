"""Round trips and idempotent writes through db.store, on SQLite and PostgreSQL."""

from datetime import timezone

import pytest
from sqlalchemy import delete, select

from db.engine import session_scope
from db.models import (
    BenchTask,
    Evaluation,
    Harness,
    RolloutGroup,
    Run,
    Trajectory,
    Turn,
)
from db.store import (
    MAX_STORED_OBSERVATION_CHARS,
    bounded_observation,
    count_rows,
    finish_run,
    get_trajectory,
    list_trajectories,
    record_evaluation,
    replace_group,
    upsert_bench_tasks,
    upsert_harness,
    upsert_run,
)


@pytest.fixture
def stored(engine, sample):
    """A database holding the sample parents and one group (2 trajectories x 2 turns)."""
    with session_scope(engine) as session:
        sample.add_parents(session)
        replace_group(session, sample.build_group("v1"))
    return engine


def test_round_trip(stored, sample):
    with session_scope(stored) as session:
        assert count_rows(session) == {
            "runs": 1,
            "harnesses": 2,
            "bench_tasks": 1,
            "rollout_groups": 1,
            "trajectories": 2,
            "turns": 4,
            "evaluations": 0,
        }
        group = session.scalars(select(RolloutGroup)).one()
        assert (group.run_id, group.bench_task_id, group.harness_id) == (
            sample.run_id,
            sample.task_id,
            None,
        )
        assert group.n_success == 1 and group.k == 2
        first, second = group.trajectories
        assert [first.sample_index, second.sample_index] == [0, 1]
        assert first.run_id == sample.run_id and first.bench_task_id == sample.task_id
        assert first.harness.name == "h0" and second.harness.parent_ids == [sample.harness_ids[0]]
        assert first.success is True and first.reward == 1.0 and first.answer == ["3"]
        assert second.answer is None and second.failure_kind == "wrong_answer"
        assert first.behaviour_tags == ["inspected_table", "v1"]
        turn = first.turns[1]
        assert turn.index == 1 and turn.context_ids == [1, 2, 3]
        assert turn.completion_logprobs == [-0.5, -0.25] and turn.loss_mask == [0, 0, 0, 1, 1]
        assert turn.action == {"sql": "SELECT 1"} and turn.hook_events[0]["hook"] == "after_step"
        assert first.created_at.tzinfo is not None
        assert first.created_at.utcoffset() == timezone.utc.utcoffset(None)
        assert group.bench_task.record == {"label": ["3"]}


def test_replace_group_replaces_rows(stored, sample):
    old_turn_ids = set()
    with session_scope(stored) as session:
        old_turn_ids = set(session.scalars(select(Turn.id)))
        # Load the old group into this session: replace_group must not clash with it.
        loaded = session.get(RolloutGroup, sample.build_group().id)
        assert len(loaded.trajectories) == 2
        replace_group(session, sample.build_group("v2", n_turns=3))
    with session_scope(stored) as session:
        counts = count_rows(session, [RolloutGroup, Trajectory, Turn])
        assert counts == {"rollout_groups": 1, "trajectories": 2, "turns": 6}
        trajectories = list_trajectories(session, run_id=sample.run_id)
        assert {t.details["version"] for t in trajectories} == {"v2"}
        assert all(t.success is False for t in trajectories)
        turns = session.scalars(select(Turn)).all()
        assert {t.context_text.split()[1] for t in turns} == {"v2"}
        # Turn ids are deterministic: 4 reused with new values, 2 new, none of v1 left.
        assert len(old_turn_ids & {t.id for t in turns}) == 4
    with session_scope(stored) as session:  # and a second replace in a fresh session
        replace_group(session, sample.build_group("v3"))
    with session_scope(stored) as session:
        assert count_rows(session, [Trajectory, Turn]) == {"trajectories": 2, "turns": 4}
        assert {t.details["version"] for t in list_trajectories(session)} == {"v3"}


@pytest.mark.filterwarnings("error")
def test_replace_group_in_one_session_via_relationships(engine, sample):
    """Parents given as objects, old rows loaded in the same session: no clash, no warning."""
    with session_scope(engine) as session:
        sample.add_parents(session)
        run = session.get(Run, sample.run_id)
        task = session.get(BenchTask, sample.task_id)
        for version in ("v1", "v2"):
            list_trajectories(session)  # old trajectories now sit in the identity map
            group = sample.build_group(version)
            group.run_id, group.bench_task_id = None, None
            group.run, group.bench_task = run, task
            replace_group(session, group)
        assert [g.trajectories[0].details["version"] for g in run.groups] == ["v2"]
        assert count_rows(session, [Trajectory, Turn]) == {"trajectories": 2, "turns": 4}
        with pytest.raises(ValueError, match="needs a new RolloutGroup"):
            replace_group(session, run.groups[0])


def test_replace_group_stores_a_bounded_observation(engine, sample):
    """An agent can make one observation ~1 MB; ``turns`` keeps a prefix and says what was cut."""
    huge = "[(" + "x" * 1_000_000 + ",)]"
    group = sample.build_group("v1")
    first, second = group.trajectories[0].turns
    first.observation, second.observation = huge, None
    with session_scope(engine) as session:
        sample.add_parents(session)
        replace_group(session, group)
    with session_scope(engine) as session:
        stored = {
            t.index: t.observation
            for t in session.scalars(select(Turn).where(Turn.trajectory_id == group.trajectories[0].id))
        }
        untouched = session.scalars(
            select(Turn.observation).where(Turn.trajectory_id == group.trajectories[1].id)
        ).all()
    assert stored[1] is None and untouched == ["[(1,)]", "[(1,)]"]
    cut = len(huge) - MAX_STORED_OBSERVATION_CHARS
    assert (
        stored[0]
        == huge[:MAX_STORED_OBSERVATION_CHARS] + f"\n[observation cut for storage: {cut:,} more characters not stored]"
    )
    assert len(stored[0]) < MAX_STORED_OBSERVATION_CHARS + 100
    assert bounded_observation("y" * MAX_STORED_OBSERVATION_CHARS) == "y" * MAX_STORED_OBSERVATION_CHARS


def test_replace_group_checks_token_alignment(stored, sample):
    group = sample.build_group("bad")
    group.trajectories[0].turns[0].loss_mask = [0, 1]
    with pytest.raises(ValueError, match="loss_mask has 2 entries"):
        with session_scope(stored) as session:
            replace_group(session, group)


def test_deleting_a_run_cascades(stored, sample):
    with session_scope(stored) as session:
        record_evaluation(session, _evaluation(sample, {"pass@3": 0.5}))
    with session_scope(stored) as session:
        session.delete(session.get(Run, sample.run_id))
    with session_scope(stored) as session:
        counts = count_rows(session)
        assert counts["runs"] == counts["rollout_groups"] == counts["evaluations"] == 0
        assert counts["trajectories"] == counts["turns"] == 0
        assert counts["harnesses"] == 2 and counts["bench_tasks"] == 1


def test_sql_delete_of_a_run_cascades_in_the_database(stored, sample):
    with session_scope(stored) as session:
        session.execute(delete(Run).where(Run.id == sample.run_id))
    with session_scope(stored) as session:
        assert count_rows(session, [RolloutGroup, Trajectory, Turn]) == {
            "rollout_groups": 0,
            "trajectories": 0,
            "turns": 0,
        }


def test_get_trajectory_by_id_and_prefix(stored, sample):
    with session_scope(stored) as session:
        full_id = list_trajectories(session, success=True)[0].id
        assert get_trajectory(session, full_id).id == full_id
        found = get_trajectory(session, full_id[:8])
        assert found.id == full_id and [t.index for t in found.turns] == [0, 1]
        with pytest.raises(LookupError, match="at least 6"):
            get_trajectory(session, full_id[:4])
        with pytest.raises(LookupError, match="no trajectory id starts with"):
            get_trajectory(session, "zzzzzzzz")


def test_get_trajectory_ambiguous_prefix(stored, sample):
    group = sample.build_group("v1")
    group.trajectories[0].id = "abcdef01" + "0" * 24
    group.trajectories[1].id = "abcdef02" + "0" * 24
    for trajectory in group.trajectories:
        for turn in trajectory.turns:
            turn.id = f"{trajectory.id[:8]}-{turn.index}"
    with session_scope(stored) as session:
        replace_group(session, group)
    with session_scope(stored) as session:
        with pytest.raises(LookupError, match="ambiguous.*abcdef01.*abcdef02"):
            get_trajectory(session, "abcdef")
        assert get_trajectory(session, "abcdef02").sample_index == 1
        with pytest.raises(LookupError, match="no trajectory id starts with"):
            get_trajectory(session, "abcde_01")  # "_" is matched literally, not as a wildcard


def test_list_trajectories_filters(stored, sample):
    with session_scope(stored) as session:
        assert len(list_trajectories(session)) == 2
        assert len(list_trajectories(session, success=False)) == 1
        assert len(list_trajectories(session, bench_task_id=sample.task_id, limit=1)) == 1
        assert list_trajectories(session, run_id="other") == []
        assert len(list_trajectories(session, harness_id=sample.harness_ids[1])) == 1


def test_upserts_update_in_place(engine, sample):
    with session_scope(engine) as session:
        upsert_run(session, id="r", kind="train", name="first", config={"lr": 1})
        upsert_harness(session, "h" * 64, "h0", "dbbench", [], {"a": 1})
        upsert_bench_tasks(session, [_task(i, "old") for i in range(3)])
    with session_scope(engine) as session:
        upsert_run(session, id="r", name="second")
        upsert_harness(session, "h" * 64, "H0", "dbbench", ["p"], {"a": 2})
        assert upsert_bench_tasks(session, [_task(i, "new") for i in range(2, 5)]) == 3
        finish_run(session, "r", "completed")
    with session_scope(engine) as session:
        run = session.get(Run, "r")
        assert (run.name, run.kind, run.config, run.status) == ("second", "train", {"lr": 1}, "completed")
        assert run.finished_at is not None and run.finished_at.tzinfo is not None
        assert run.finished_at >= run.created_at
        harness = session.get(Harness, "h" * 64)
        assert (harness.name, harness.parent_ids, harness.spec) == ("H0", ["p"], {"a": 2})
        descriptions = {t.id: t.description for t in session.scalars(select(BenchTask))}
        assert len(descriptions) == 5 and descriptions["dbbench/dev/0002"] == "new"
        assert descriptions["dbbench/dev/0000"] == "old"
        with pytest.raises(ValueError, match="not one of"):
            finish_run(session, "r", "done")
        with pytest.raises(LookupError):
            finish_run(session, "missing", "failed")


def test_record_evaluation_replaces_by_id(stored, sample):
    with session_scope(stored) as session:
        record_evaluation(session, _evaluation(sample, {"pass@3": 0.5}))
    with session_scope(stored) as session:
        record_evaluation(session, _evaluation(sample, {"pass@3": 0.75}))
    with session_scope(stored) as session:
        evaluations = session.scalars(select(Evaluation)).all()
        assert len(evaluations) == 1 and evaluations[0].metrics == {"pass@3": 0.75}
        assert evaluations[0].routing == "h0"


def _evaluation(sample, metrics):
    return Evaluation(
        id="eval-1",
        run_id=sample.run_id,
        benchmark="dbbench",
        split="dev",
        harness_id=sample.harness_ids[0],
        k=3,
        n_seeds=1,
        n_bench_tasks=1,
        metrics=metrics,
    )


def _task(index, description):
    return {
        "id": f"dbbench/dev/{index:04d}",
        "benchmark": "dbbench",
        "split": "dev",
        "index": index,
        "task_type": "counting",
        "tier": None,
        "description": description,
        "record": {"i": index},
    }
