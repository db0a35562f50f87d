"""Prefect tasks of the evolution flow: run a harness on tasks (diagnose / validate), propose
children, judge candidates, freeze the pool.

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
from db.ids import stable_id
from db.models import EvolutionCandidate, Pool
from envs.base import ENV_ERROR
from harness_pool.bundles import control_tasks
from harness_pool.diagnosis import Facts, SqlStep, cluster_causes, root_cause
from harness_pool.operators import VARIANTS, family_of, offline_patch, rules_module, target_groups
from harness_pool.patch import apply_patch
from harness_pool.pool_store import freeze_pool, version_with_dvc
from harness_pool.spec import HarnessError, HarnessSpec, load_harness
from rl.policy import Sampling
from rl.rollout import RolloutResult, RolloutSpec, run_rollouts
from tasks import tracking
from tasks.records import (
    build_group,
    ensure_group,
    group_record,
    record_bench_tasks,
    record_harnesses,
    start_run,
    trajectory_id,
)
from tasks.resources import bench_task, bench_tasks, env_factory, get_engine, get_policy
from tasks.sft import checkpoint_name
from tasks.training import warm_start_config


def evolve_run_id(cfg: EvolveConfig) -> str:
    return f"{cfg.name}-{stable_id('evolve', cfg.identity())[:12]}"


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
def rule_cause(result: RolloutResult, the_task, trajectory_id: str) -> str | None:
    """The rule root cause of one rollout, by its benchmark's diagnosis rules; None for an env_error
    episode (its environment raised: nothing a harness edit could fix, so no cluster is built on it)."""
    if result.end_reason == ENV_ERROR:
        return None
    rules = rules_module(getattr(the_task, "benchmark", "dbbench"))
    return rules.root_cause(result) if rules else root_cause(facts_of(result, the_task, trajectory_id))


def facts_of(result: RolloutResult, the_task, trajectory_id: str) -> Facts:
    steps, parse_errors = [], []
    for t in result.turns:
        if t.action_kind == "sql" and t.action:
            steps.append(
                SqlStep(t.action.get("sql", ""), t.observation or "", (t.observation or "").startswith("Error"))
            )
        elif t.action_kind == "invalid" and t.parse_error:
            parse_errors.append(t.parse_error)
    return Facts(
        trajectory_id=trajectory_id,
        bench_task_id=the_task.id,
        task_type=the_task.task_type,
        label=list(the_task.label or []),
        table_name=the_task.table_name,
        end_reason=result.end_reason,
        parse_errors=tuple(parse_errors),
        sql_steps=tuple(steps),
        answer=result.answer,
        success=result.verdict.success,
    )


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
    causes = [rule_cause(r, rs.bench_task, tid) for rs, r, tid in zip(specs, results, ids)]
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
                group_record(
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
            store.replace_group(session, build_group(**records[-1]))
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


# -- editing -----------------------------------------------------------------------------------
def _clusters(run: dict, min_support: int):
    causes = {
        tid: (task_id, cause)
        for task_id, r in run["tasks"].items()
        for tid, cause in zip(r["trajectory_ids"], r["causes"])
        if cause
    }
    return cluster_causes(causes, min_support)


@task(
    name="propose-children",
    cache_policy=(INPUTS - "cfg" - "database_url") + TASK_SOURCE,
    persist_result=True,
    task_run_name="edit-r{round}-{parent[name]}",
)
def propose_children(
    cfg: EvolveConfig,
    run_id: str,
    round: int,
    parent: dict,
    diagnosis: dict,
    known_ids: list[str],
    database_url: str | None,
) -> list[dict]:
    """The editor's candidates for one parent, each with its validation tasks: the targeted
    failures plus controls (tasks the parent solved in every diagnosis rollout, see
    harness_pool.bundles.control_tasks). The flow records the rejected patches with their reason (record_rejected),
    whether this result is fresh or cached. (Prefect's cache key covers
    this function's source only: change this docstring when a helper's rule changes.)"""
    spec = HarnessSpec.model_validate(parent)
    groups = target_groups(_clusters(diagnosis, cfg.diagnose.min_support), benchmark=cfg.env.benchmark)
    solved = control_tasks(diagnosis["tasks"], f"{cfg.seed}-{spec.id}")
    out, seen = [], set(known_ids)
    for i in range(cfg.children_per_parent if groups else 0):
        # variants rotate with the round: a parent kept for another round gets new children
        target, variant = groups[i % len(groups)], (i // len(groups) + round - 1) % VARIANTS
        causes = [c.cause for c in target]
        name = f"{_family(causes, cfg.env.benchmark)}-r{round}-{spec.id[:6]}-v{variant}"
        child, error, info = _edit(cfg, spec, target, variant, name, round, diagnosis, database_url)
        if child is not None and child.id in seen:
            child, error = None, "duplicate of a harness already in the pool or a parent"
        failed = sorted(
            t
            for t, r in diagnosis["tasks"].items()
            if not any(r["successes"]) and any(c in causes for c in r["causes"])
        )
        budget = cfg.validation.max_tasks - min(cfg.validation.n_controls, len(solved))
        controls = sorted(solved[: cfg.validation.n_controls])
        candidate = {
            "id": stable_id("candidate", run_id, round, spec.id, name),
            "name": name,
            "parent_id": spec.id,
            "root_causes": causes,
            "targeted": failed[:budget],
            "controls": controls,
            "harness_id": child.id if child else None,
            "spec": child.model_dump(mode="json") if child else None,
            "error": error,
            "editor": info,
        }
        if child is not None:
            seen.add(child.id)
        out.append(candidate)
    return out


def record_rejected(cfg: EvolveConfig, run_id: str, round: int, proposed: list[dict], database_url: str | None) -> None:
    """Record the rejected patches among `propose_children`'s candidates (idempotent: the flow
    calls it after every call, cached or not, so the current database always has them)."""
    with session_scope(get_engine(database_url)) as session:
        for c in proposed:
            if c["spec"] is None:
                session.merge(
                    EvolutionCandidate(
                        id=c["id"],
                        run_id=run_id,
                        round=round,
                        parent_id=c["parent_id"],
                        harness_id=None,
                        name=c["name"],
                        editor=cfg.editor.kind,
                        root_causes=c["root_causes"],
                        status="rejected",
                        details={"error": c["error"], "editor": c["editor"]},
                    )
                )


def _family(causes: list[str], benchmark: str) -> str:
    return family_of(benchmark).get(causes[0], causes[0])


def _edit(
    cfg: EvolveConfig,
    parent: HarnessSpec,
    target,
    variant: int,
    name: str,
    round: int,
    diagnosis: dict,
    database_url: str | None,
):
    """(child or None, error or None, editor info) from the configured editor."""
    if cfg.editor.kind == "offline":
        try:
            patch = offline_patch(target, variant, name, parent.benchmark)
            return apply_patch(parent, patch, round), None, {"kind": "offline"}
        except HarnessError as exc:
            return None, str(exc), {"kind": "offline"}
    if cfg.editor.kind == "trained":
        from tasks.engineer_editing import engineer_child

        return engineer_child(cfg, parent, target, name, round, diagnosis, database_url)
    from tasks.llm_editing import llm_child

    return llm_child(cfg, parent, target, name, round, diagnosis, database_url)


# -- judging -------------------------------------------------------------------------------------
def judge(candidate: dict, run: dict, min_fixed: int, max_broken: int) -> dict:
    """fixed = targeted failures the child solved; broken = controls it no longer solves."""
    solved = sorted(t for t, r in run["tasks"].items() if any(r["successes"]))
    fixed = sorted(set(candidate["targeted"]) & set(solved))
    broken = sorted(set(candidate["controls"]) - set(solved))
    valid = len(fixed) >= min_fixed and len(broken) <= max_broken
    return {"fixed": fixed, "broken": broken, "solved": solved, "valid": valid}


@task(name="record-candidates", task_run_name="judge-r{round}")
def record_candidates(
    cfg: EvolveConfig, run_id: str, round: int, judged: list[dict], selected: list[str], database_url: str | None
) -> None:
    with session_scope(get_engine(database_url)) as session:
        for c in judged:
            session.merge(
                EvolutionCandidate(
                    id=c["id"],
                    run_id=run_id,
                    round=round,
                    parent_id=c["parent_id"],
                    harness_id=c["harness_id"],
                    name=c["name"],
                    editor=cfg.editor.kind,
                    root_causes=c["root_causes"],
                    status="valid" if c["valid"] else "invalid",
                    selected=c["harness_id"] in selected,
                    fixed=c["fixed"],
                    broken=c["broken"],
                    solved=c["solved"],
                    validation_tasks=sorted(set(c["targeted"]) | set(c["controls"])),
                    details={"editor": c["editor"], "targeted": c["targeted"], "controls": c["controls"]},
                )
            )
    valid = [c for c in judged if c["valid"]]
    tracking.log_metrics(
        run_id,
        cfg.wandb,
        cfg.model_dump(mode="json"),
        {
            "evolve/candidates": len(judged),
            "evolve/valid": len(valid),
            "evolve/selected": len(selected),
            "evolve/fixed_per_valid": sum(len(c["fixed"]) for c in valid) / max(len(valid), 1),
            "evolve/broken_per_valid": sum(len(c["broken"]) for c in valid) / max(len(valid), 1),
        },
        round,
    )


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
