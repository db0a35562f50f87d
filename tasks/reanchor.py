"""The re-anchor of the training flow (flows/train.py reanchor): the frozen policy under H0 and
every pool harness on the same validation tasks, the measurements the router's profiles are
induced from (tasks/routing.py store_profiles)."""

from __future__ import annotations

import torch
from prefect import task
from sqlalchemy import select

from configs.schema import TrainConfig
from db import store
from db.engine import session_scope
from db.ids import stable_id
from db.models import Evaluation
from rl.modes import Role
from rl.rollout import RolloutSpec, run_rollouts
from tasks.records import GroupRecord, build_group
from tasks.resources import bench_task, env_factory, get_engine
from tasks.routing import paired_records, store_profiles
from tasks.run_identity import RunContext, step_sampling
from tasks.train_handle import get_handle, run_logger


@task(name="paired-validation", task_run_name="validate-step{step}")
def paired_validation(cfg: TrainConfig, run: RunContext, step: int, database_url: str | None) -> dict:
    """Frozen policy; H0 and every pool harness (H0 alone with validation.harnesses h0) on the
    same validation tasks (k each): the run's (`run`, loaded once per run).

    Stores one group per (harness, task) with role 'reanchor' and one Evaluation per harness
    (routing 'reanchor', metrics: step, success rate, solved task ids). Already recorded for
    this step (a resumed run): read back instead of re-run."""
    run_id, h0, pool = run.run_id, run.h0, run.pool
    harnesses = list({h.id: h for h in ([h0] if cfg.validation.harnesses == "h0" else [h0, *pool])}.values())
    eval_ids = {h.id: stable_id("reanchor", run_id, step, h.id) for h in harnesses}
    with session_scope(get_engine(database_url)) as session:
        found = session.scalars(select(Evaluation).where(Evaluation.id.in_(list(eval_ids.values())))).all()
        if len(found) == len(harnesses):
            names = {h.id: h.name for h in harnesses}
            return {"step": step, "success": {names[e.harness_id]: e.metrics["success_rate"] for e in found}}
    handle = get_handle(cfg, run_id)
    the_tasks = [bench_task(cfg.env, i) for i in run.val_task_ids]
    specs = [RolloutSpec(t, h, i) for h in harnesses for t in the_tasks for i in range(cfg.validation.k)]
    every = max(1, len(specs) // 10)

    def progress(done: int, total: int) -> None:  # a re-anchor is minutes of one call: say how far it is
        if done % every == 0 or done == total:
            run_logger().info("re-anchor step %d: %d/%d validation episodes finished", step, done, total)

    with torch.no_grad():
        results = run_rollouts(
            handle.policy, specs, env_factory(cfg.env), step_sampling(cfg, step, 2), cfg.env.max_rounds, progress
        )
    success: dict[str, float] = {}
    with session_scope(get_engine(database_url)) as session:
        for h in harnesses:
            mine = [r for r in results if r.harness_id == h.id]
            for t in the_tasks:
                mine_on_task = [r for r in mine if r.bench_task_id == t.id]
                record = GroupRecord(
                    run_id, step, t.id, h.id, cfg.seed, Role.REANCHOR, f"{run_id}@{step}", mine_on_task
                )
                group = build_group(record)
                store.replace_group(session, group)
            rate = sum(r.verdict.success for r in mine) / len(mine) if mine else 0.0
            success[h.name] = rate
            store.record_evaluation(
                session,
                Evaluation(
                    id=eval_ids[h.id],
                    run_id=run_id,
                    benchmark=cfg.env.benchmark,
                    split=cfg.validation.split,
                    harness_id=h.id,
                    routing="reanchor",
                    k=cfg.validation.k,
                    n_seeds=1,
                    n_bench_tasks=len(the_tasks),
                    metrics={
                        "step": step,
                        "success_rate": rate,
                        "solved": sorted({r.bench_task_id for r in mine if r.verdict.success}),
                    },
                ),
            )
        measured_pool = [h for h in harnesses if h.id != h0.id]  # a sibling gets a profile only when measured
        profiles = store_profiles(
            session, cfg, run_id, step, h0, measured_pool, paired_records(results, {t.id: t for t in the_tasks})
        )
    return {"step": step, "success": success, "profiles": profiles}
