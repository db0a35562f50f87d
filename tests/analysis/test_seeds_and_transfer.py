"""Training seeds as the unit of replication in `hs report`: a method's runs that differ only in
train.seed are pooled, with hand-worked per-seed and pooled differences; one seed each is the
RQ1 paired bootstrap. Then transfer on the rescued tasks, worked out by hand."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from analysis import comparisons, transfer
from analysis.report import build_report, readings
from analysis.runs import resolve_methods, seed_groups
from db.engine import make_engine, session_scope, upgrade
from db.ids import stable_id
from db.models import BenchTask, Harness, RolloutGroup, Run, Trajectory

_spec = importlib.util.spec_from_file_location("handbuilt_db", Path(__file__).with_name("handbuilt_db.py"))
handbuilt = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(handbuilt)

approx = pytest.approx
TASKS = ["s1", "s2", "s3", "s4"]
# test-split outcomes, k = 1, one evaluation seed: Avg@1 = Pass@1 = 100 x the mean
TEST_AFTER = {
    ("harness_s", 0): [1, 1, 0, 0],  # 50
    ("harness_s", 1): [1, 0, 1, 0],  # 50
    ("grpo", 0): [1, 0, 0, 0],  # 25
    ("grpo", 1): [0, 0, 0, 0],  # 0
}
TEST_BEFORE = [0, 0, 0, 1]  # 25: the warm start, evaluated by the main run


def _evaluation(session, run_id: str, outcomes: list[int] | dict[str, int]) -> None:
    session.add(Run(id=run_id, kind="eval", name=run_id, config={}))
    session.flush()
    for task, ok in outcomes.items() if isinstance(outcomes, dict) else zip(TASKS, outcomes):
        gid = stable_id(run_id, task)
        trajectory = Trajectory(
            id=stable_id(gid, 0),
            run_id=run_id,
            bench_task_id=task,
            harness_id=stable_id("harness", "h0"),
            sample_index=0,
            checkpoint="c",
            reward=float(ok),
            success=bool(ok),
        )
        session.add(
            RolloutGroup(
                id=gid,
                run_id=run_id,
                bench_task_id=task,
                harness_id=stable_id("harness", "h0"),
                k=1,
                role="eval",
                checkpoint="c",
                n_success=ok,
                trajectories=[trajectory],
            )
        )


def _pipeline(session, mode: str, seed: int, name: str | None = None) -> None:
    name = name or f"{mode}-seed{seed}"
    evaluations = {"test-after": {"run_id": f"ev-{name}"}}
    _evaluation(session, f"ev-{name}", TEST_AFTER[(mode, seed)])
    if (mode, seed) == ("harness_s", 0):
        evaluations["test-before"] = {"run_id": "ev-before"}
        _evaluation(session, "ev-before", TEST_BEFORE)
    train = {
        "mode": mode,
        "harness": "h0",
        "seed": seed,
        **({"router": {"kind": "adaptive"}} if mode != "grpo" else {}),
    }
    session.add(
        Run(
            id=f"pipe-{name}",
            kind="pipeline",
            name=name,
            status="completed",
            config={"train": train},
            results={"train_run_id": None, "evaluations": evaluations},
        )
    )


@pytest.fixture
def session(db_url):
    upgrade(db_url)
    engine = make_engine(db_url)
    with session_scope(engine) as s:
        s.add(Harness(id=stable_id("harness", "h0"), name="h0", benchmark="dbbench", spec={}))
        for i, task in enumerate(TASKS):
            s.add(
                BenchTask(id=task, benchmark="dbbench", split="standard", index=i, task_type="select", description=task)
            )
        for mode in ("harness_s", "grpo"):
            for seed in (0, 1):
                _pipeline(s, mode, seed)
    with session_scope(engine) as s:
        yield s
    engine.dispose()


def test_runs_of_one_method_with_distinct_seeds_are_one_group_labelled_by_seed(session):
    methods = resolve_methods(session, "harness_s-seed0", ["harness_s-seed1", "grpo-seed0", "grpo-seed1"])
    assert [m.label for m in methods] == [
        "harness_s (adaptive) seed 0",
        "harness_s (adaptive) seed 1",
        "grpo seed 0",
        "grpo seed 1",
    ]
    groups = seed_groups(methods)
    assert list(groups) == ["harness_s (adaptive)", "grpo"]
    assert [m.seed for m in groups["grpo"]] == [0, 1]


def test_two_runs_with_the_same_seed_are_not_replicates(session):
    _pipeline(session, "grpo", 0, name="grpo-again")
    session.flush()
    methods = resolve_methods(session, "harness_s-seed0", ["grpo-seed0", "grpo-again"])
    assert [m.label for m in methods][1:] == ["grpo [grpo-seed0]", "grpo [grpo-again]"]
    assert len(seed_groups(methods)) == 3


def test_pooled_and_per_seed_differences_are_worked_out_by_hand(session):
    methods = resolve_methods(session, "harness_s-seed0", ["harness_s-seed1", "grpo-seed0", "grpo-seed1"])
    rows = {r["comparison"]: r for r in comparisons.seed_differences(session, methods, "test-").to_dict("records")}
    main = rows["harness_s (adaptive) - grpo (H0)"]
    # means over seeds: harness_s (50 + 50) / 2 = 50, grpo (25 + 0) / 2 = 12.5 -> +37.5
    assert (main["seeds_a"], main["seeds_b"], main["n_tasks"]) == (2, 2, 4)
    assert main["avg_diff"] == approx(37.5) and main["pass_diff"] == approx(37.5)
    assert main["avg_low"] <= 37.5 <= main["avg_high"]
    # seed 0: 50 - 25; seed 1: 50 - 0
    assert main["per_seed_avg"].startswith("seed 0: +25.00 [") and "; seed 1: +50.00 [" in main["per_seed_avg"]
    # between-seed spread: sd(50, 50) = 0, sd(25, 0) = 25 / sqrt(2)
    assert main["spread_a"] == approx(0.0) and main["spread_b"] == approx(25 / 2**0.5)
    base = rows["grpo - base policy (H0)"]  # the warm start's one evaluation against each seed: 25 - 25, 0 - 25
    assert base["avg_diff"] == approx(-12.5) and (base["seeds_a"], base["seeds_b"]) == (2, 1)
    assert base["per_seed_avg"].startswith("seed 0: +0.00 [") and "seed 1: -25.00 [" in base["per_seed_avg"]


def test_one_seed_each_is_the_rq1_paired_bootstrap(db_url):
    upgrade(db_url)
    engine = make_engine(db_url)
    with session_scope(engine) as s:
        handbuilt.build(s)
    with session_scope(engine) as s:
        report = build_report(s, "pipe-hs", ["compare-grpo"])
    engine.dispose()
    seeds = report.tables["seeds"].set_index("comparison")
    rq1 = report.tables["rq1_differences"].set_index("comparison")
    label = "harness_s (adaptive) - grpo (H0)"
    for column in ("avg_diff", "avg_low", "avg_high", "pass_diff", "pass_low", "pass_high"):
        assert seeds.loc[label, column] == approx(rq1.loc[label, column])
    assert (seeds.loc[label, "seeds_a"], seeds.loc[label, "seeds_b"]) == (1, 1)
    assert "1 vs 1 seeds" in readings(report)["seeds"]


# Transfer: the training runs' first H0 groups (and rescues) on training tasks t1..t4, seed 0.
# t1: dead at update 0, rescued (2 successes); t2: dead, rescue without success; t3: alive;
# t4: dead, no rescue group. t1 again at update 2 with successes: only the first group counts.
TRAIN_GROUPS = [(0, "h0", "t1", 0), (0, "rescue", "t1", 2), (0, "h0", "t2", 0), (0, "rescue", "t2", 0)]
TRAIN_GROUPS += [(1, "h0", "t3", 3), (1, "h0", "t4", 0), (2, "h0", "t1", 5)]
DRAWN = {  # trained-tasks evaluations (k = 1): Avg@1 = 100 x the outcome
    "hs-after": {"t1": 1, "t2": 0, "t3": 1, "t4": 1},
    "warm": {"t1": 0, "t2": 0, "t3": 1, "t4": 0},
    "grpo-after": {"t1": 0, "t2": 0, "t3": 1, "t4": 0},
}


def _transfer_runs(session) -> None:
    for i, task in enumerate(("t1", "t2", "t3", "t4")):
        session.add(
            BenchTask(id=task, benchmark="dbbench", split="train", index=i, task_type="select", description=task)
        )
    for name, outcomes in DRAWN.items():
        _evaluation(session, f"ev-{name}", outcomes)
    for mode, evaluations in (
        ("harness_s", {"trained-tasks-after": "ev-hs-after", "trained-tasks-before": "ev-warm"}),
        ("grpo", {"trained-tasks-after": "ev-grpo-after"}),
    ):
        train = {"mode": mode, "harness": "h0", "seed": 0}
        session.add(Run(id=f"train-{mode}", kind="train", name=f"train-{mode}", config=train))
        session.add(
            Run(
                id=f"pipe-t-{mode}",
                kind="pipeline",
                name=f"transfer-{mode}",
                status="completed",
                config={"train": train},
                results={
                    "train_run_id": f"train-{mode}",
                    "evaluations": {k: {"run_id": v} for k, v in evaluations.items()},
                },
            )
        )
    session.flush()
    for step, role, task, successes in TRAIN_GROUPS:
        session.add(
            RolloutGroup(
                id=stable_id("train", step, role, task),
                run_id="train-harness_s",
                step=step,
                bench_task_id=task,
                k=8,
                role=role,
                checkpoint="c",
                n_success=successes,
            )
        )


def test_task_categories_come_from_each_tasks_first_h0_group_and_its_rescue(session):
    _transfer_runs(session)
    session.flush()
    assert transfer.task_categories(session, "train-harness_s") == {
        "t1": "rescued",
        "t2": "dead, not rescued",
        "t3": "alive",
        "t4": "dead, not rescued",
    }


def test_transfer_on_rescued_tasks_against_grpo_and_the_warm_start_is_worked_out_by_hand(session):
    _transfer_runs(session)
    session.flush()
    methods = resolve_methods(session, "transfer-harness_s", ["transfer-grpo"])
    rows = {(r["category"], r["comparison"]): r for r in transfer.transfer_table(session, methods).to_dict("records")}
    rescued = rows[("rescued", "harness_s - grpo")]  # t1: 100 - 0
    assert (rescued["n_tasks"], rescued["seeds"], rescued["diff"]) == (1, 1, approx(100.0))
    assert rows[("rescued", "harness_s - warm start")]["diff"] == approx(100.0)
    assert rows[("rescued", "grpo - warm start")]["diff"] == approx(0.0)
    control = rows[("dead, not rescued", "harness_s - warm start")]  # t2 0 - 0, t4 100 - 0
    assert (control["n_tasks"], control["a_avg"], control["b_avg"], control["diff"]) == (2, 50.0, 0.0, approx(50.0))
    assert control["verdict"] == "within noise"  # two tasks: the exact sign-flip p is 0.5 or more
    assert rows[("alive", "harness_s - grpo")]["diff"] == approx(0.0)
    categories = [r["category"] for r in transfer.transfer_table(session, methods).to_dict("records")]
    assert categories == sorted(categories, key=transfer.CATEGORIES.index)  # rescued first, then the control


def test_the_explorer_lists_a_pipelines_training_tasks_by_category_with_their_success(db_url):
    from starlette.testclient import TestClient

    from ui.app import create_app

    upgrade(db_url)
    engine = make_engine(db_url)
    with session_scope(engine) as s:
        s.add(Harness(id=stable_id("harness", "h0"), name="h0", benchmark="dbbench", spec={}))
        _transfer_runs(s)
    engine.dispose()
    page = TestClient(create_app(db_url)).get("/runs/pipe-t-harness_s")
    assert page.status_code == 200
    table = page.text[page.text.index('<table id="drawn">') :]
    rows = table[: table.index("</table>")].split("<tr class=")[1:]
    assert [r.split("<td>")[1].split("</td>")[0] for r in rows] == ["t1", "t2", "t4", "t3"]  # rescued first
    assert "<td>rescued</td><td>0.000</td><td>1.000</td>" in rows[0]
    assert "drawn" not in TestClient(create_app(db_url)).get("/runs/pipe-t-grpo").text.split("<h2>Results")[0]
