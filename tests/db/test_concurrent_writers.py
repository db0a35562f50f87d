"""Eight processes writing rollout groups of one run at once (Ray workers, several Prefect
workers): no row lost, none duplicated, on PostgreSQL and on SQLite."""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from sqlalchemy import func, select

from db.engine import make_engine, session_scope, upgrade
from db.models import BenchTask, Harness, RolloutGroup, Run, Trajectory, Turn

WRITERS, GROUPS_EACH, K, TURNS = 8, 6, 4, 3


_WRITER = r"""
import os
import sys
import time
from db import store
from db.engine import make_engine, session_scope
from db.models import RolloutGroup, Trajectory, Turn

url, writer, groups_each, k, turns = sys.argv[1], *map(int, sys.argv[2:6])
go = sys.argv[6]


def group(gid):
    g = RolloutGroup(id=gid, run_id="run-c", step=0, bench_task_id="t0", harness_id="h0", seed=0, k=k,
                     role="eval", checkpoint=f"writer-{writer}", n_success=0)
    for i in range(k):
        t = Trajectory(id=f"{gid}-t{i}", run_id="run-c", bench_task_id="t0", harness_id="h0", sample_index=i,
                       checkpoint="c", reward=0.0, success=False, n_turns=turns, n_policy_tokens=turns)
        t.turns = [Turn(id=f"{gid}-t{i}-{j}", index=j, context_text="c", context_ids=[1], completion_text="x",
                        completion_ids=[2], completion_logprobs=[-1.0], loss_mask=[0, 1], observation="o")
                   for j in range(turns)]
        g.trajectories.append(t)
    return g


engine = make_engine(url)
with engine.connect():
    pass
print("ready", flush=True)
while not os.path.exists(go):  # every writer starts at once
    time.sleep(0.001)
# neighbours share two groups (a retried task and its first attempt), and all write two hot ones
own = range(writer * (groups_each - 2), writer * (groups_each - 2) + groups_each)
for n in [*own, "hot0", "hot1"]:
    with session_scope(engine) as session:
        store.replace_group(session, group(f"g{n:03d}" if isinstance(n, int) else n))
engine.dispose()
"""


def _run_writers(url: str) -> None:
    upgrade(url)
    engine = make_engine(url)
    with session_scope(engine) as s:
        s.add(Run(id="run-c", kind="eval", name="c", status="running", config={}))
        s.add(Harness(id="h0", name="h0", benchmark="dbbench", spec={}))
        s.add(BenchTask(id="t0", benchmark="dbbench", split="dev", index=0, task_type="select", description="t"))
    go = Path(tempfile.mkdtemp()) / "go"
    workers = [
        subprocess.Popen(
            [sys.executable, "-c", _WRITER, url, *map(str, (w, GROUPS_EACH, K, TURNS, go))],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for w in range(WRITERS)
    ]
    for p in workers:  # all imported and connected
        assert p.stdout.readline().strip() == "ready", p.stderr.read()[-2000:]
    go.touch()
    errors = [p.communicate(timeout=300)[1] for p in workers]
    assert [p.returncode for p in workers] == [0] * WRITERS, [e.strip().splitlines()[-1:] for e in errors if e]
    expected = WRITERS * (GROUPS_EACH - 2) + 2 + 2
    with session_scope(engine) as s:
        counts = [s.scalar(select(func.count()).select_from(m)) for m in (RolloutGroup, Trajectory, Turn)]
        assert counts == [expected, expected * K, expected * K * TURNS]
        per_group = s.execute(select(Trajectory.group_id, func.count()).group_by(Trajectory.group_id)).all()
        assert {n for _, n in per_group} == {K}  # every group whole: one writer's copy, never a mix
    engine.dispose()


@pytest.mark.postgres
def test_eight_writers_on_postgresql(postgres_url):
    _run_writers(postgres_url)


def test_eight_writers_on_sqlite(tmp_path):
    _run_writers(f"sqlite:///{tmp_path / 'hs.db'}")
