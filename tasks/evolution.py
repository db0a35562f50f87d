"""Prefect tasks of the evolution flow: run a harness on tasks (diagnose / validate), freeze the
pool. Proposing children and judging them: tasks/evolution_candidates.py.

`run_harness` is the costly unit (every rollout of one harness on a task set, batched together);
its result persists with a cache key of its inputs and source, so a retried or restarted run
skips every diagnosis and candidate validation that already finished. Its rows land in the
trajectory database (role 'diagnose' or 'validate', step = round) with deterministic ids.
"""

from __future__ import annotations

import random
from pathlib import Path

from prefect import task
from prefect.cache_policies import INPUTS, TASK_SOURCE
from sqlalchemy import delete

from configs.schema import EvolveConfig, PolicyConfig
from db import store
from db.engine import session_scope
from db.ids import run_id, stable_id
from db.models import Pool
from envs.base import ENV_ERROR
from harness_pool.diagnosis import root_cause
from harness_pool.pool_store import freeze_pool, version_with_dvc
from harness_pool.spec import HarnessSpec, load_harness
from rl.policy import Sampling
from rl.rollout import RolloutResult, RolloutSpec, run_rollouts
from tasks import tracking
from tasks.records import (
    GroupRecord,
    build_group,
    ensure_group,
    record_bench_tasks,
    record_harnesses,
    start_run,
    trajectory_id,
)
from tasks.resources import bench_task, bench_tasks, env_factory, get_engine, get_policy
from tasks.run_identity import warm_start_config
from tasks.sft import checkpoint_name


def evolve_run_id(cfg: EvolveConfig) -> str:
    return run_id("evolve", cfg)


def policy_config(cfg: EvolveConfig) -> PolicyConfig:
    """The frozen policy: the warm-start checkpoint when warm_start is set."""
    sft_cfg = warm_start_config(cfg)
    return cfg.policy if sft_cfg is None else cfg.policy.model_copy(update={"model": checkpoint_name(sft_cfg)})


def diagnosis_task_ids(cfg: EvolveConfig) -> list[str]:
    pool = [t.id for t in bench_tasks(cfg.env, "train", tiers=cfg.tiers)]
    return sorted(random.Random(cfg.seed).sample(pool, min(cfg.diagnose.n_tasks, len(pool))))


@task(name="register-evolution")
def register_evolution(cfg: EvolveConfig, database_url: str | None, prefect_flow_run_id: str | None) -> dict:
    h0 = load_harness(cfg.harness, cfg.env.benchmark)
    task_ids = diagnosis_task_ids(cfg)
    the_tasks = [bench_task(cfg.env, i) for i in task_ids]
    run_id = evolve_run_id(cfg)
    with session_scope(get_engine(database_url)) as session:
        config = {**cfg.model_dump(mode="json"), "policy_model": policy_config(cfg).model}
        start_run(session, run_id, "evolve", cfg.name, config, prefect_flow_run_id)
        record_harnesses(session, [h0])
        record_bench_tasks(session, the_tasks)
    return {"run_id": run_id, "h0": h0.model_dump(mode="json"), "task_ids": task_ids}


# -- facts for diagnosis ---------------------------------------------------------------------
def rule_cause(result: RolloutResult, the_task) -> str | None:
    """The rule root cause of one rollout, by its benchmark's diagnosis rules; None for an env_error
    episode (its environment raised: nothing a harness edit could fix, so no cluster is built on it)."""
    if result.end_reason == ENV_ERROR:
        return None
    return root_cause(result, the_task)


@task(
    name="run-harness",
    cache_policy=(INPUTS - "cfg" - "database_url") + TASK_SOURCE,
    persist_result=True,
    retries=1,
    task_run_name="{role}-r{round}-{harness[name]}",
)
def run_harness(
    cfg: EvolveConfig,
    run_id: str,
    harness: dict,
    task_ids: list[str],
    role: str,
    round: int,
    k: int,
    database_url: str | None,
) -> dict:
    """k rollouts of `harness` on every task (all batched), stored as one group per task, with a
    rule root cause for every failed rollout (or the LLM diagnoser's for up to
    editor.max_diagnosis_calls of them in this harness run, recorded with its token use in the
    trajectory's details). Returns {task id: {successes, causes, trajectory_ids}}."""
    spec = HarnessSpec.model_validate(harness)
    the_tasks = [bench_task(cfg.env, i) for i in task_ids]
    specs = [RolloutSpec(t, spec, i) for t in the_tasks for i in range(k)]
    s = cfg.sampling
    sampling = Sampling(s.temperature, s.top_p, s.max_new_tokens, seed=int(stable_id(cfg.seed, round, role)[:8], 16))
    results = run_rollouts(get_policy(policy_config(cfg)), specs, env_factory(cfg.env), sampling, cfg.env.max_rounds)
    ids = [trajectory_id(run_id, round, rs.bench_task.id, r, cfg.seed, role) for rs, r in zip(specs, results)]
    causes = [rule_cause(r, rs.bench_task) for rs, r in zip(specs, results)]
    notes = [{}] * len(results)
    if cfg.editor.uses_api and cfg.editor.llm_diagnosis:  # one cap for the whole harness run
        from tasks.llm_editing import llm_causes

        causes, notes = llm_causes(cfg, results, causes)
    out, records = {}, []
    with session_scope(get_engine(database_url)) as session:
        record_harnesses(session, [spec])
        for n, t in enumerate(the_tasks):
            group = slice(n * k, (n + 1) * k)
            res = results[group]
            records.append(
                GroupRecord(
                    run_id=run_id,
                    step=round,
                    bench_task_id=t.id,
                    harness_id=spec.id,
                    seed=cfg.seed,
                    role=role,
                    checkpoint=policy_config(cfg).model,
                    results=res,
                    extra_details=notes[group] if any(notes[group]) else None,
                )
            )
            store.replace_group(session, build_group(records[-1]))
            out[t.id] = {
                "successes": [r.verdict.success for r in res],
                "causes": causes[group],
                "trajectory_ids": ids[group],
            }
    return {"harness_id": spec.id, "name": spec.name, "tasks": out, "records": records}


def record_harness_run(harness: dict, result: dict, database_url: str | None) -> int:
    """Make sure the current database holds what a (possibly cached) `run_harness` wrote: the
    harness and its groups. Returns how many groups were written (0 when all were there)."""
    with session_scope(get_engine(database_url)) as session:
        record_harnesses(session, [HarnessSpec.model_validate(harness)])
        return sum(ensure_group(session, record) for record in result["records"])


# -- the frozen pool -------------------------------------------------------------------------------
@task(name="freeze-pool")
def freeze(cfg: EvolveConfig, run_id: str, h0: dict, siblings: list[dict], database_url: str | None) -> dict:
    base = HarnessSpec.model_validate(h0)
    specs = [HarnessSpec.model_validate(s) for s in siblings]
    version = cfg.pool.version or run_id
    root = Path(cfg.pool.root)
    manifest = freeze_pool(base, specs, cfg.env.benchmark, version, root, created_by=run_id)
    folder = root / cfg.env.benchmark / version
    tag = version_with_dvc(folder, f"pool-{cfg.env.benchmark}-{version}") if cfg.pool.dvc else None
    with session_scope(get_engine(database_url)) as session:
        # the folder is the truth: a row left by a deleted folder of the same version gives way
        session.execute(
            delete(Pool).where(
                Pool.benchmark == cfg.env.benchmark, Pool.version == version, Pool.id != manifest.pool_id
            )
        )
        session.merge(
            Pool(
                id=manifest.pool_id,
                benchmark=cfg.env.benchmark,
                version=version,
                base_harness_id=base.id,
                path=str(folder.resolve()),
                members=[m.model_dump(mode="json") for m in manifest.members],
                run_id=run_id,
                dvc_tag=tag,
            )
        )
        store.finish_run(session, run_id, "completed")
    tracking.log_summary(
        run_id, cfg.wandb, cfg.model_dump(mode="json"), {"evolve/pool_size": len(manifest.members)}, cfg.rounds + 1
    )
    return {
        "version": version,
        "path": str(folder),
        "pool_id": manifest.pool_id,
        "size": len(manifest.members),
        "dvc_tag": tag,
    }
