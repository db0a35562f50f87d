"""The trainable editor's bundle flow with the real policy: failures become stored, traceable bundles."""

from __future__ import annotations

import pytest
from sqlalchemy import select

from configs.schema import EditorBundlesConfig
from db.engine import make_engine, session_scope
from db.models import EditorBundle, Run, Trajectory


@pytest.mark.slow
def test_bundles_from_the_real_target_are_stored_traceable_and_resumed(tmp_path, train_dir, prefect_api):
    from flows.editor import editor_bundles

    cfg = EditorBundlesConfig(
        n_train_tasks=4,
        n_heldout_tasks=2,
        k=1,
        min_failures=2,
        max_failures=2,
        token_budget=300,
        tiers=["easy"],
        sampling={"temperature": 1.0, "top_p": 1.0, "max_new_tokens": 24},
        env={"max_rounds": 2},
        results_dir=str(tmp_path / "results"),
    )
    url = f"sqlite:///{tmp_path / 'hs.db'}"
    summary = editor_bundles(cfg, database_url=url)
    assert summary["train"]["tasks"] == 4 and summary["heldout"]["tasks"] == 2
    assert summary["train"]["bundles"], "the base policy fails most tasks: at least one training bundle"
    with session_scope(make_engine(url)) as s:
        rows = s.scalars(select(EditorBundle)).all()
        assert s.get(Run, summary["run_id"]).status == "completed"
        for row in rows:  # every failure is a stored failed trajectory of the run, on a distinct task
            trajs = [s.get(Trajectory, t) for t in row.trajectory_ids]
            assert all(t is not None and not t.success and t.run_id == summary["run_id"] for t in trajs)
            assert len({t.bench_task_id for t in trajs}) == len(trajs) == 2
            assert row.content["causes"] and set(row.content["tasks"]) == {t.bench_task_id for t in trajs}
            heldout = row.split == "heldout"
            assert all(("/dev/" in t.bench_task_id) == heldout for t in trajs)
        created = {t.id: t.created_at for t in s.scalars(select(Trajectory)).all()}
    again = editor_bundles(cfg, database_url=url)  # cached harness runs: the same bundles, nothing re-run
    assert again == summary
    with session_scope(make_engine(url)) as s:
        assert {t.id: t.created_at for t in s.scalars(select(Trajectory)).all()} == created
