"""Render time of every explorer page (ui/) over a database of at least 100,000 trajectories.

Fills a fresh database through the ORM (a training run of `--updates` updates x `--tasks` tasks,
each task a first group of K under H0 and, when dead, a rescue group of K; one turn per
trajectory with tokens), then times each page through the ASGI app (median of `--repeat` requests,
after one warm-up). SQLite by default; `--database-url postgresql+psycopg://...` for PostgreSQL
(the database must exist and be empty). Target: every page under 500 ms.

    .venv/bin/python benchmarks/ui_render.py [--database-url URL] [--updates 250] [--tasks 50] [--k 8]
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sqlalchemy import select  # noqa: E402
from starlette.testclient import TestClient  # noqa: E402

from db.engine import make_engine, session_scope, upgrade  # noqa: E402
from db.models import BenchTask, Harness, RolloutGroup, RouterDecision, Run, TrainStep, Trajectory, Turn  # noqa: E402
from ui.app import create_app  # noqa: E402

RUN = "bench-harness_s-000000000000"
HARNESSES = ["h0", "schema_rows", "format_reminder", "inspect_first", "lenient_answer"]


def fill(url: str, updates: int, tasks: int, k: int) -> int:
    upgrade(url)
    rng = random.Random(0)
    engine = make_engine(url)
    with session_scope(engine) as s:
        config = {"mode": "harness_s", "env": {"benchmark": "dbbench"}, "policy": {"model": "none"}}
        s.add(Run(id=RUN, kind="train", name="bench", status="completed", config=config))
        s.add_all(Harness(id=f"id-{h}", name=h, benchmark="dbbench", spec={"name": h}) for h in HARNESSES)
        s.add_all(
            BenchTask(id=f"dbbench/train/{i:04d}", benchmark="dbbench", split="train", index=i, task_type="count",
                      tier="easy", description=f"task {i}")
            for i in range(400)
        )  # fmt: skip
    n = 0
    for step in range(updates):
        with session_scope(engine) as s:
            for t in range(tasks):
                task = f"dbbench/train/{rng.randrange(400):04d}"
                ok = [rng.random() < 0.3 for _ in range(k)]
                roles = [("h0", "id-h0", ok)]
                if not any(ok):
                    roles.append(("rescue", None, [rng.random() < 0.3 for _ in range(k)]))
                    chosen = [f"id-{h}" for h in HARNESSES[1:]]
                    decision = {"purpose": "rescue", "router": "adaptive", "ranking": chosen, "chosen": chosen}
                    s.add(RouterDecision(id=f"d-{step}-{t}", run_id=RUN, step=step, bench_task_id=task, **decision))
                for role, harness, successes in roles:
                    gid = f"g-{step}-{t}-{role}"
                    s.add(RolloutGroup(id=gid, run_id=RUN, step=step, bench_task_id=task, harness_id=harness, k=k,
                                       role=role, checkpoint="c", n_success=sum(successes)))  # fmt: skip
                    for i, success in enumerate(successes):
                        tid = f"{gid}-{i}"
                        s.add(Trajectory(id=tid, group_id=gid, run_id=RUN, bench_task_id=task,
                                         harness_id=harness or f"id-{HARNESSES[1 + i % 4]}", sample_index=i,
                                         checkpoint="c", reward=float(success), success=success,
                                         failure_kind=None if success else "wrong_value", n_turns=1))  # fmt: skip
                        s.add(Turn(id=f"{tid}-0", trajectory_id=tid, index=0, context_text="prompt " * 50,
                                   completion_text=f"Action: Operation\nSELECT COUNT(*) FROM t{step}",
                                   completion_ids=list(range(40)), completion_logprobs=[-0.5] * 40,
                                   loss_mask=[1] * 40, action_kind="sql", observation="[(3,)]"))  # fmt: skip
                        n += 1
            s.add(TrainStep(id=f"ts-{step}", run_id=RUN, step=step, mode="harness_s",
                            metrics={"train/valid_group_ratio": rng.random(), "train/loss": rng.random()}))  # fmt: skip
        if step % 25 == 0:
            print(f"  filled {n:,} trajectories", flush=True)
    return n


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database-url", default=None)
    parser.add_argument("--updates", type=int, default=250)
    parser.add_argument("--tasks", type=int, default=50)
    parser.add_argument("--k", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    url = args.database_url or f"sqlite:///{tempfile.mkdtemp()}/ui-bench.db"
    started = time.perf_counter()
    n = fill(url, args.updates, args.tasks, args.k)
    print(f"{n:,} trajectories in {time.perf_counter() - started:.0f} s ({url.split('://')[0]})")
    client = TestClient(create_app(url))
    middle = args.updates // 2
    with session_scope(make_engine(url)) as s:
        rescue = s.scalars(
            select(RolloutGroup.id).where(RolloutGroup.role == "rescue").order_by(RolloutGroup.step)
        ).first()
    dead = (rescue or "").replace("-rescue", "-h0")
    pages = {
        "runs": "/",
        "training run": f"/runs/{RUN}",
        "update": f"/runs/{RUN}/updates/{middle}",
        "group": f"/groups/g-{middle}-0-h0",
        "trajectory (token view)": f"/trajectories/g-{middle}-0-h0-0",
        "compare dead and rescue": f"/compare?a={dead}&b={rescue}",
        "search by failure kind": "/search?failure_kind=wrong_value&page=3",
        "search by text": f"/search?text=FROM%20t{middle}",
        "harnesses": "/harnesses",
    }
    print(f"{'page':<26} {'median ms':>10} {'max ms':>8}  status")
    for name, path in pages.items():
        client.get(path)
        times, status = [], 0
        for _ in range(args.repeat):
            t = time.perf_counter()
            status = client.get(path).status_code
            times.append(1000 * (time.perf_counter() - t))
        print(f"{name:<26} {statistics.median(times):>10.1f} {max(times):>8.1f}  {status}")


if __name__ == "__main__":
    main()
