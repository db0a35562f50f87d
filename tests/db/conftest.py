"""Fixtures for the database tests: an engine on a migrated database (db_url, from tests/conftest.py)
and sample rows."""

from __future__ import annotations

from collections.abc import Iterator
from types import SimpleNamespace

import pytest
from sqlalchemy import Engine

from db.engine import make_engine, upgrade
from db.ids import stable_id
from db.models import BenchTask, Harness, RolloutGroup, Run, Trajectory, Turn


@pytest.fixture
def engine(db_url) -> Iterator[Engine]:
    """An engine on a database migrated to head."""
    upgrade(db_url)
    engine = make_engine(db_url)
    yield engine
    engine.dispose()


RUN_ID = stable_id("run", "eval-smoke")
TASK_ID = "dbbench/dev/0007"
HARNESS_IDS = ("a" * 64, "b" * 64)


def add_parents(session) -> None:
    """A run, two harnesses and one bench task for groups to point at."""
    session.add(Run(id=RUN_ID, kind="eval", name="eval-smoke", config={"k": 2}))
    for i, harness_id in enumerate(HARNESS_IDS):
        session.add(
            Harness(
                id=harness_id,
                name=f"h{i}",
                benchmark="dbbench",
                parent_ids=[] if i == 0 else [HARNESS_IDS[0]],
                spec={"prompt": f"p{i}"},
            )
        )
    session.add(
        BenchTask(
            id=TASK_ID,
            benchmark="dbbench",
            split="dev",
            index=7,
            task_type="counting",
            tier=None,
            description="How many rows?",
            record={"label": ["3"]},
        )
    )
    session.flush()


def build_group(version: str = "v1", n_trajectories: int = 2, n_turns: int = 2) -> RolloutGroup:
    """A transient group with deterministic ids; ``version`` changes the values, not the ids."""
    group_id = stable_id(RUN_ID, 0, TASK_ID, "eval", 0)
    trajectories = []
    for sample in range(n_trajectories):
        trajectory_id = stable_id(group_id, sample)
        turns = [
            Turn(
                id=stable_id(trajectory_id, t),
                index=t,
                context_text=f"obs {version} {t}",
                context_ids=[1, 2, 3],
                completion_text=f"Action: Operation {version}",
                completion_ids=[4, 5],
                completion_logprobs=[-0.5, -0.25],
                loss_mask=[0, 0, 0, 1, 1],
                action_kind="sql",
                action={"sql": "SELECT 1"},
                observation="[(1,)]",
                hook_events=[{"hook": "after_step", "version": version}],
                seconds_generate=0.1,
                seconds_env=0.01,
            )
            for t in range(n_turns)
        ]
        trajectories.append(
            Trajectory(
                id=trajectory_id,
                harness_id=HARNESS_IDS[sample % 2],
                sample_index=sample,
                checkpoint="ckpt-0",
                reward=1.0 if (sample == 0 and version == "v1") else 0.0,
                success=sample == 0 and version == "v1",
                failure_kind=None if sample == 0 else "wrong_answer",
                finish_reason="answer",
                answer=["3"] if sample == 0 else None,
                n_turns=n_turns,
                n_policy_tokens=2 * n_turns,
                behaviour_tags=["inspected_table", version],
                seconds_total=1.5,
                seconds_generate=1.0,
                seconds_env=0.5,
                details={"version": version},
                turns=turns,
            )
        )
    return RolloutGroup(
        id=group_id,
        run_id=RUN_ID,
        step=0,
        bench_task_id=TASK_ID,
        harness_id=None,
        seed=0,
        k=n_trajectories,
        role="eval",
        checkpoint="ckpt-0",
        n_success=sum(t.success for t in trajectories),
        trajectories=trajectories,
    )


@pytest.fixture
def sample() -> SimpleNamespace:
    """Sample rows: ``add_parents(session)``, ``build_group(version)`` and their ids."""
    return SimpleNamespace(
        run_id=RUN_ID,
        task_id=TASK_ID,
        harness_ids=HARNESS_IDS,
        add_parents=add_parents,
        build_group=build_group,
    )
