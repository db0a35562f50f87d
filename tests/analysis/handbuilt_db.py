"""A hand-built trajectory database whose report numbers are known (worked out in the comments).

Methods: the main pipeline 'pipe-hs' (harness_s, adaptive router), the baseline pipeline
'pipe-grpo' and the bare training run 'train-fp' (harness_s, fixed_profiles router).
Harnesses h0, sib_a, sib_b; dev tasks d1 (select) and d2 (update); validation tasks v1..v4.
"""

from __future__ import annotations

from db.ids import stable_id
from db.models import BenchTask, Evaluation, Harness, RolloutGroup, RouterDecision, Run, TrainStep, Trajectory

H = {name: stable_id("harness", name) for name in ("h0", "sib_a", "sib_b", "terse")}
T, F = True, False

# Evaluation runs: seed -> task -> outcomes (k = 3).
EVALS = {
    # seed 0: Pass 50, Avg 16.667; seed 1: Pass 0, Avg 0 -> Pass 25 ± 25, Avg 8.333 ± 8.333
    "ev-before": {0: {"d1": [F, F, F], "d2": [T, F, F]}, 1: {"d1": [F, F, F], "d2": [F, F, F]}},
    # seed 0: Pass 100, Avg 50; seed 1: Pass 50, Avg 16.667 -> Pass 75 ± 25, Avg 33.333 ± 16.667
    "ev-after": {0: {"d1": [T, T, F], "d2": [T, F, F]}, 1: {"d1": [T, F, F], "d2": [F, F, F]}},
    # one seed: Pass 50, Avg 50 (d1 under sib_a, d2 under h0)
    "ev-r1": {0: {"d1": [T, T, T], "d2": [F, F, F]}},
    # one seed: Pass 0, Avg 0 (both tasks under sib_a)
    "ev-r1b": {0: {"d1": [F, F, F], "d2": [F, F, F]}},
    # Pass 50 ± 0, Avg 25 ± 8.333
    "ev-grpo": {0: {"d1": [F, F, F], "d2": [T, T, F]}, 1: {"d1": [F, F, F], "d2": [T, F, F]}},
    # Pass 0 ± 0
    "ev-terse": {0: {"d1": [F, F, F], "d2": [F, F, F]}, 1: {"d1": [F, F, F], "d2": [F, F, F]}},
}
RANK1 = {"ev-r1": {"d1": "sib_a", "d2": "h0"}, "ev-r1b": {"d1": "sib_a", "d2": "sib_a"}}


def tags_for(run: str, n: int) -> list[str]:
    """Behaviour tags of the n-th trajectory (0..11) of an evaluation run.

    ev-before: answered_without_query on 6 of 12 (0.5), inspected_first on 3 (0.25);
    ev-after: inspected_first on 9 of 12 (0.75), rechecked_mutation on 2 (1/6);
    ev-grpo: repeated_query on 4 of 12 (1/3)."""
    tags = []
    if run == "ev-before":
        tags += ["answered_without_query"] if n < 6 else []
        tags += ["inspected_first"] if n >= 9 else []
    if run == "ev-after":
        tags += ["inspected_first"] if n < 9 else []
        tags += ["rechecked_mutation"] if n in (0, 1) else []
    if run == "ev-grpo":
        tags += ["repeated_query"] if n < 4 else []
    return tags


# Training runs: per update {valid, eff, first, rescues, rescue_success, rollouts}; None = key not recorded.
STEPS = {
    # valid mean 0.5, eff 0.4, first 0.25, rescues 7 with 2 successful (2/7), rollouts 76;
    # stages 0-1: 3 rescues, 1/3; 2-3: 4 rescues, 1/4
    "train-hs": [
        (0.5, 0.4, 0.25, 2, 0.5, 20),
        (1.0, 0.6, 0.5, 1, 0.0, 16),
        (0.0, 0.2, 0.0, 4, 0.25, 28),
        (0.5, 0.4, 0.25, 0, None, 12),
    ],
    # stages 0-1: 4 rescues, 0.5; 2-3: 2 rescues, 0.0
    "train-fp": [
        (0.5, 0.5, 0.0, 2, 0.5, 20),
        (0.5, 0.5, 0.0, 2, 0.5, 20),
        (0.5, 0.5, 0.0, 2, 0.0, 20),
        (0.5, 0.5, 0.0, 0, 0.0, 12),
    ],
    # valid mean 0.25, no rescues, rollouts 48
    "train-grpo": [
        (0.5, 0.5, 0.5, 0, 0.0, 12),
        (0.0, 0.0, 0.0, 0, 0.0, 12),
        (0.0, 0.0, 0.0, 0, 0.0, 12),
        (0.5, 0.5, 0.5, 0, 0.0, 12),
    ],
}
# Re-anchor validation: run -> step -> harness -> solved validation tasks (4 tasks, k = 1).
# train-hs success: h0 0.25/0.5/0.75, sib_a 0.5/0.5/0.25, sib_b 0/0.25/0.25
# edges: sib_a +0.25, 0, -0.5; sib_b -0.25, -0.25, -0.5
REANCHORS = {
    "train-hs": {
        0: {"h0": ["v1"], "sib_a": ["v1", "v2"], "sib_b": []},
        2: {"h0": ["v1", "v2"], "sib_a": ["v2", "v3"], "sib_b": ["v3"]},
        4: {"h0": ["v1", "v2", "v3"], "sib_a": ["v4"], "sib_b": ["v1"]},
    },
    "train-fp": {0: {"h0": ["v1"]}, 2: {"h0": ["v1"]}, 4: {"h0": ["v1"]}},
    "train-grpo": {0: {"h0": ["v1"]}, 2: {"h0": ["v1"]}, 4: {"h0": ["v1", "v2"]}},
}


def _train_config(mode: str, router: str | None) -> dict:
    # 2 tasks per update: 8 groups over the 4 updates of each training run.
    return {"mode": mode, "harness": "h0", "batch_tasks": 2, **({"router": {"kind": router}} if router else {})}


def build(session) -> None:
    for name, hid in H.items():
        session.add(Harness(id=hid, name=name, benchmark="dbbench", spec={}))
    for i, (tid, ttype) in enumerate([("d1", "select"), ("d2", "update")]):
        session.add(BenchTask(id=tid, benchmark="dbbench", split="dev", index=i, task_type=ttype, description=tid))
    for i in range(1, 5):
        session.add(
            BenchTask(id=f"v{i}", benchmark="dbbench", split="train", index=i, task_type="select", description=f"v{i}")
        )
    session.add(
        Run(
            id="pipe-hs",
            kind="pipeline",
            name="compare-hs",
            status="completed",
            config={"train": _train_config("harness_s", "adaptive")},
            results={
                "train_run_id": "train-hs",
                "evaluations": {
                    "before": {"run_id": "ev-before"},
                    "after": {"run_id": "ev-after"},
                    "rank1": {"run_id": "ev-r1"},
                    "rank1-before": {"run_id": "ev-r1b"},
                    "outside-terse": {"run_id": "ev-terse"},
                },
            },
        )
    )
    session.add(
        Run(
            id="pipe-grpo",
            kind="pipeline",
            name="compare-grpo",
            status="completed",
            config={"train": _train_config("grpo", None)},
            results={"train_run_id": "train-grpo", "evaluations": {"after": {"run_id": "ev-grpo"}}},
        )
    )
    session.add(
        Run(id="train-hs", kind="train", name="compare-hs-train", config=_train_config("harness_s", "adaptive"))
    )
    session.add(Run(id="train-grpo", kind="train", name="compare-grpo-train", config=_train_config("grpo", None)))
    session.add(
        Run(
            id="train-fp",
            kind="train",
            name="compare-fixed-profiles",
            config=_train_config("harness_s", "fixed_profiles"),
        )
    )
    for run_id, by_seed in EVALS.items():
        session.add(Run(id=run_id, kind="eval", name=run_id, config={}))
        session.flush()
        n = 0
        for seed, by_task in by_seed.items():
            for task, outcomes in by_task.items():
                harness = RANK1.get(run_id, {}).get(task, "terse" if run_id == "ev-terse" else "h0")
                gid = stable_id(run_id, seed, task)
                trajectories = []
                for i, ok in enumerate(outcomes):
                    trajectories.append(
                        Trajectory(
                            id=stable_id(gid, i),
                            run_id=run_id,
                            bench_task_id=task,
                            harness_id=H[harness],
                            sample_index=i,
                            checkpoint="c",
                            reward=float(ok),
                            success=ok,
                            behaviour_tags=tags_for(run_id, n),
                        )
                    )
                    n += 1
                session.add(
                    RolloutGroup(
                        id=gid,
                        run_id=run_id,
                        bench_task_id=task,
                        harness_id=H[harness],
                        seed=seed,
                        k=3,
                        role="eval",
                        checkpoint="c",
                        n_success=sum(outcomes),
                        trajectories=trajectories,
                    )
                )
    for run_id, choices in RANK1.items():
        for task, name in choices.items():
            session.add(
                RouterDecision(
                    id=stable_id(run_id, task),
                    run_id=run_id,
                    bench_task_id=task,
                    purpose="rank1",
                    router="rank1",
                    ranking=[H[name]],
                    chosen=[H[name]],
                )
            )
    for run_id, steps in STEPS.items():
        for step, (valid, eff, first, rescues, rescue_ok, rollouts) in enumerate(steps):
            metrics = {
                "train/valid_group_ratio": valid,
                "train/effective_token_ratio": eff,
                "train/first_group_success": first,
                "rollout/rescues_triggered": float(rescues),
                "rollout/rollouts_spent": float(rollouts),
            }
            if rescue_ok is not None:
                metrics["rollout/rescue_success"] = rescue_ok
            session.add(TrainStep(id=stable_id(run_id, step), run_id=run_id, step=step, mode="x", metrics=metrics))
        # A training group must not count as an evaluation outcome.
        session.add(
            RolloutGroup(
                id=stable_id(run_id, "g"),
                run_id=run_id,
                bench_task_id="d1",
                harness_id=H["h0"],
                k=1,
                role="h0",
                checkpoint="c",
                n_success=1,
                trajectories=[
                    Trajectory(
                        id=stable_id(run_id, "t"),
                        run_id=run_id,
                        bench_task_id="d1",
                        harness_id=H["h0"],
                        sample_index=0,
                        checkpoint="c",
                        reward=1.0,
                        success=True,
                        behaviour_tags=["repeated_query"],
                    )
                ],
            )
        )
    for run_id, by_step in REANCHORS.items():
        for step, by_harness in by_step.items():
            for name, solved in by_harness.items():
                session.add(
                    Evaluation(
                        id=stable_id(run_id, step, name),
                        run_id=run_id,
                        benchmark="dbbench",
                        split="train",
                        harness_id=H[name],
                        routing="reanchor",
                        k=1,
                        n_seeds=1,
                        n_bench_tasks=4,
                        metrics={"step": step, "success_rate": len(solved) / 4, "solved": solved},
                    )
                )
    session.flush()
