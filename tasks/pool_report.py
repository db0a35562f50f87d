"""Prefect tasks of the pool report: pick report tasks, run every pool harness on them, summarise.

H0 runs k x (number of siblings) rollouts per task and every sibling k, so the siblings' oracle
union can be compared with H0 resampled at the same rollout count. The harness runs reuse the
evolution's persisted `run_harness` task (role 'report'), so a restarted report skips finished
harnesses and every trajectory lands in the database.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

from prefect import task
from sqlalchemy import select

from analysis.pool import pool_report
from configs.schema import EvolveConfig, PoolReportConfig
from db import store
from db.engine import session_scope
from db.ids import run_id
from db.models import Pool, Run
from harness_pool.pool_store import load_pool
from tasks.evolution import diagnosis_task_ids, policy_config
from tasks.records import record_bench_tasks, start_run
from tasks.resources import bench_task, bench_tasks, get_engine


def report_run_id(cfg: PoolReportConfig) -> str:
    return run_id("pool-report", cfg, tag=cfg.version, digits=10)


def _evolution_tasks(session, created_by: str | None) -> list[str]:
    """The diagnosis tasks of the evolution run that built the pool (kept out of the report)."""
    run = session.get(Run, created_by) if created_by else None
    if run is None or run.kind != "evolve":
        return []
    config = {k: v for k, v in run.config.items() if k != "policy_model"}
    return diagnosis_task_ids(EvolveConfig.model_validate(config))


@task(name="register-pool-report")
def register_pool_report(cfg: PoolReportConfig, database_url: str | None, prefect_flow_run_id: str | None) -> dict:
    manifest, base, siblings = load_pool(cfg.version, cfg.env.benchmark, Path(cfg.pool_root))
    run_id = report_run_id(cfg)
    with session_scope(get_engine(database_url)) as session:
        excluded = set(cfg.exclude_task_ids) | set(_evolution_tasks(session, manifest.created_by))
        candidates = [t.id for t in bench_tasks(cfg.env, "train", tiers=cfg.tiers) if t.id not in excluded]
        task_ids = sorted(random.Random(cfg.seed).sample(candidates, min(cfg.n_tasks, len(candidates))))
        config = {**cfg.model_dump(mode="json"), "policy_model": policy_config(cfg).model, "pool_id": manifest.pool_id}
        start_run(session, run_id, "pool_report", cfg.name, config, prefect_flow_run_id)
        the_tasks = [bench_task(cfg.env, i) for i in task_ids]
        record_bench_tasks(session, the_tasks)
    return {
        "run_id": run_id,
        "task_ids": task_ids,
        "base": base.model_dump(mode="json"),
        "siblings": [s.model_dump(mode="json") for s in siblings],
        "excluded": len(excluded),
    }


@task(name="summarise-pool")
def summarise_pool(
    cfg: PoolReportConfig, run_id: str, h0_run: dict, sibling_runs: list[dict], database_url: str | None
) -> dict:
    h0 = {t: r["successes"] for t, r in h0_run["tasks"].items()}
    siblings = {r["name"]: {t: x["successes"] for t, x in r["tasks"].items()} for r in sibling_runs}
    report = {
        "version": cfg.version,
        "run_id": run_id,
        "policy": policy_config(cfg).model,
        **pool_report(h0, siblings, cfg.k),
    }
    out = Path(cfg.report_dir) / report_file_name(cfg)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=1))
    with session_scope(get_engine(database_url)) as session:
        pool = session.scalars(
            select(Pool).where(Pool.benchmark == cfg.env.benchmark, Pool.version == cfg.version)
        ).first()
        if pool is not None:  # the pool row keeps its latest report
            pool.members = [{**m, "report": report["locality"].get(m["name"])} for m in pool.members]
        store.finish_run(session, run_id, "completed").results = report  # `hs report --pool-report` reads it
    return {**report, "path": str(out)}


def report_file_name(cfg: PoolReportConfig) -> str:
    """pool-<benchmark>-<version>.json; a named report (--set name=...) gets its own file, so reports
    of the same pool under several policies sit side by side."""
    default = PoolReportConfig.model_fields["name"].default
    suffix = "" if cfg.name == default else f"-{cfg.name}"
    return f"pool-{cfg.env.benchmark}-{cfg.version}{suffix}.json"
