"""Prefect tasks of the evaluation flow: register the run, run one rollout group, score.

Each rollout group is one Prefect task whose result persists (cache key: its inputs and the
task's source), so retrying a failed flow run, or starting the same command again, skips the
groups that already finished. Its rows are written with deterministic ids, so a group that
does run again replaces its rows instead of duplicating them. A cached result carries the rows
its task wrote (tasks/records.py), and the flow writes them into the current database, so the
results cache and the database never disagree: a new or deleted database is refilled without
running the model.
"""

from __future__ import annotations

from pathlib import Path

from prefect import task
from prefect.cache_policies import INPUTS, TASK_SOURCE
from sqlalchemy import func, select

from analysis.metrics import summarise
from configs.schema import EvalConfig, RunnerConfig
from db import store
from db.engine import database_url as default_url
from db.engine import mask_url, session_scope
from db.ids import run_id, stable_id
from db.models import BenchTask as BenchTaskRow
from db.models import Evaluation, RolloutGroup, RouterDecision, Trajectory
from harness_pool.spec import load_harness
from rl.policy import Sampling
from rl.rollout import RolloutSpec, run_rollouts
from tasks import faults, tracking
from tasks.records import (
    GroupRecord,
    build_group,
    check_run_harnesses,
    ensure_group,
    policy_weights,
    record_bench_tasks,
    record_harnesses,
    start_run,
)
from tasks.resources import bench_task, bench_tasks, env_factory, get_engine, get_policy


def run_id_for(cfg: EvalConfig) -> str:
    """Same config, same run: starting the same command again resumes it."""
    return run_id("eval", cfg)


def result_storage(cfg: EvalConfig) -> Path:
    """A local folder Prefect resolves to file-system result storage (no saved block needed)."""
    path = Path(cfg.results_dir).expanduser().resolve()
    path.mkdir(parents=True, exist_ok=True)
    return path


@task(name="register-run")
def register_run(cfg: EvalConfig, database_url: str | None, prefect_flow_run_id: str | None) -> dict:
    """Record the run, the harness and the benchmark tasks; returns the ids the flow needs."""
    harness = load_harness(cfg.harness, cfg.env.benchmark)
    tasks = bench_tasks(cfg.env, cfg.split, cfg.limit, cfg.tiers, cfg.every)
    if cfg.task_ids is not None:
        wanted = set(cfg.task_ids)
        tasks = [t for t in bench_tasks(cfg.env, cfg.split) if t.id in wanted]
        missing = sorted(wanted - {t.id for t in tasks})
        if missing:
            raise LookupError(
                f"benchmark tasks {missing} are not in split {cfg.split}: ids look like "
                f"{cfg.env.benchmark}/{cfg.split}/0007"
            )
    run_id = run_id_for(cfg)
    config = {**cfg.model_dump(mode="json"), "weights": policy_weights(cfg.policy)}  # hashed outside the transaction
    with session_scope(get_engine(database_url)) as session:
        harnesses = [harness, *pool_harnesses(cfg)]
        check_run_harnesses(session, run_id, harnesses)
        start_run(session, run_id, "eval", cfg.name, config, prefect_flow_run_id)
        record_harnesses(session, harnesses)
        record_bench_tasks(session, tasks)
        choices = rank1_choices(session, cfg, run_id, harness, tasks) if cfg.routing == "rank1" else {}
    return {
        "run_id": run_id,
        "harness_id": harness.id,
        "bench_task_ids": [t.id for t in tasks],
        "choices": {t.id: choices.get(t.id, harness.id) for t in tasks},
    }


def pool_harnesses(cfg: EvalConfig) -> list:
    from harness_pool.pool_store import resolve_pool

    return resolve_pool(cfg.pool, cfg.env.benchmark)


def rank1_choices(session, cfg: EvalConfig, run_id: str, h0, tasks) -> dict[str, str]:
    """Rank-1 inference: per task the router's single top harness, H0 competing; every choice is
    stored as a RouterDecision (purpose 'rank1') with each voter's ranking."""
    from harness_pool.adaptive_router import AdaptiveRouter, EmbeddingVoter, StatisticsVoter, rank1_ranking
    from tasks.routing import load_profiles

    newest = cfg.profiles_version is None
    version, profiles = load_profiles(
        session, cfg.profiles_run, 10**9 if newest else cfg.profiles_version, first_only=False
    )
    if not profiles or (not newest and version != cfg.profiles_version):
        at = "" if newest else f" at re-anchor step {cfg.profiles_version}"
        raise LookupError(
            f"run {cfg.profiles_run} has no behaviour profiles{at}: pass a training run id "
            "(`hs report training` lists them) and one of its re-anchor steps"
        )
    success = {hid: p.success_rate for hid, p in profiles.items()}
    success[h0.id] = sum(p.h0_success_rate for p in profiles.values()) / len(profiles)
    voters = [StatisticsVoter() if v == "statistics" else EmbeddingVoter() for v in cfg.router_voters]
    router = AdaptiveRouter(voters, profiles, success, name="rank1")
    pool = pool_harnesses(cfg)
    out = {}
    for t in tasks:
        ranking = rank1_ranking(t, h0, pool, router)
        out[t.id] = ranking.top(1)[0]
        session.merge(
            RouterDecision(
                id=stable_id("decision", run_id, 0, t.id, "rank1"),
                run_id=run_id,
                step=0,
                bench_task_id=t.id,
                purpose="rank1",
                router="rank1",
                profile_version=version,
                ranking=list(ranking.harness_ids),
                chosen=[out[t.id]],
                votes={"voters": dict(ranking.votes), "errors": dict(ranking.errors)},
            )
        )
    return out


@task(
    name="rollout-group",
    cache_policy=(INPUTS - "cfg" - "database_url") + TASK_SOURCE,
    persist_result=True,
    retries=1,
    task_run_name="group-{bench_task_id}-seed{seed}",
)
def rollout_group(
    cfg: EvalConfig, run_id: str, harness_id: str, bench_task_id: str, seed: int, database_url: str | None
) -> dict:
    """K rollouts of one benchmark task under the configured harness; rows replace any earlier copy.

    Cache key: run id (derived from every config field that changes an outcome), harness
    content id, benchmark task, seed and this function's source; not the database: a cached
    result carries its rows (`record`), which the flow writes into whichever database is current.
    """
    faults.guard(f"{bench_task_id}:seed{seed}")
    by_id = {h.id: h for h in [load_harness(cfg.harness, cfg.env.benchmark), *pool_harnesses(cfg)]}
    harness = by_id.get(harness_id)
    if harness is None:
        raise RuntimeError(f"harness {harness_id[:12]} changed on disk during run {run_id}; start a new run")
    the_task = bench_task(cfg.env, bench_task_id)
    policy = get_policy(cfg.policy)
    s = cfg.sampling
    specs = [RolloutSpec(the_task, harness, i) for i in range(cfg.k)]
    sampling = Sampling(s.temperature, s.top_p, s.max_new_tokens, seed=_group_seed(seed, bench_task_id))
    results = run_rollouts(policy, specs, env_factory(cfg.env), sampling, max_rounds=cfg.env.max_rounds)
    record = GroupRecord(
        run_id=run_id,
        step=0,
        bench_task_id=bench_task_id,
        harness_id=harness.id,
        seed=seed,
        role="eval",
        checkpoint=cfg.checkpoint,
        results=results,
    )
    group = build_group(record)
    with session_scope(get_engine(database_url)) as session:
        store.replace_group(session, group)
    return {
        "group_id": group.id,
        "successes": [r.verdict.success for r in results],
        "worker": worker_name(),
        "record": record,
    }


def record_group(summary: dict, database_url: str | None) -> bool:
    """Make sure the current database holds the group a (possibly cached) task result describes.

    Called by the flow for every finished group: a result served from the cache never ran its
    writes, and the database may be another one than the one it wrote to. True if rows were written.
    """
    with session_scope(get_engine(database_url)) as session:
        return ensure_group(session, summary["record"])


def worker_name() -> str:
    """host:pid of the process that ran a group (shows where a Ray task runner placed it)."""
    import os
    import socket

    return f"{socket.gethostname()}:{os.getpid()}"


EPISODES_IN_FLIGHT = 64  # rows of one decode engine (rl/decode.py DecodeEngine.max_rows; torch-free here)


def groups_in_flight(cfg: EvalConfig) -> int:
    """Rollout groups run at once: `group_concurrency`, but in one process (the threads runner) no
    more than their K episodes each can fill the decode engine's rows. More episodes than rows
    only wait, each holding its keys and values outside the bounded buffer between turns (30
    training tasks at K = 8 and 16 groups: 1.2 GB of them). The groups' samples do not depend on
    it. On Ray each group has a process and an engine of its own."""
    if cfg.runner.kind == "ray":
        return cfg.group_concurrency
    return max(1, min(cfg.group_concurrency, EPISODES_IN_FLIGHT // cfg.k))


def task_runner(runner: RunnerConfig, max_workers: int):
    """The Prefect task runner for rollout groups: threads here, or Ray tasks (prefect-ray)."""
    if runner.kind == "ray":
        from prefect_ray import RayTaskRunner

        init = {"num_cpus": runner.num_cpus} if runner.num_cpus and not runner.address else {}
        return RayTaskRunner(address=runner.address, init_kwargs=init or None)
    from prefect.task_runners import ThreadPoolTaskRunner

    return ThreadPoolTaskRunner(max_workers=max_workers)


def _group_seed(seed: int, bench_task_id: str) -> int:
    return int(stable_id(seed, bench_task_id)[:8], 16)


def rank1_share(session, run_id: str) -> dict[str, float]:
    """Share of tasks each harness was Rank-1 for (RQ5: how often H0 itself wins), by name."""
    from db.models import Harness

    chosen = session.scalars(
        select(RouterDecision.chosen).where(RouterDecision.run_id == run_id, RouterDecision.purpose == "rank1")
    ).all()
    names = dict(session.execute(select(Harness.id, Harness.name)).all())
    counts: dict[str, int] = {}
    for c in chosen:
        counts[names.get(c[0], c[0])] = counts.get(names.get(c[0], c[0]), 0) + 1
    return {name: n / max(len(chosen), 1) for name, n in sorted(counts.items())}


@task(name="score-evaluation")
def score_evaluation(
    cfg: EvalConfig, run_id: str, harness_id: str, database_url: str | None, expected_groups: int | None = None
) -> dict:
    """Pass@k / Avg@k (mean, std over seeds; overall and per task type) from the stored trajectories.

    Refuses, in one line, to score a run whose database holds fewer groups than it ran.
    """
    with session_scope(get_engine(database_url)) as session:
        held = session.scalar(
            select(func.count())
            .select_from(RolloutGroup)
            .where(RolloutGroup.run_id == run_id, RolloutGroup.role == "eval")
        )
        if not held or (expected_groups is not None and held < expected_groups):
            raise LookupError(
                f"run {run_id} has {held} of {expected_groups if expected_groups is not None else 'its'} rollout "
                f"groups in {mask_url(database_url or default_url(create_home=False))}: start the same command again "
                "(finished groups are written back from the results cache without running the model)"
            )
        rows = session.execute(
            select(RolloutGroup.seed, Trajectory.bench_task_id, BenchTaskRow.task_type, Trajectory.success)
            .join(Trajectory, Trajectory.group_id == RolloutGroup.id)
            .join(BenchTaskRow, BenchTaskRow.id == Trajectory.bench_task_id)
            .where(RolloutGroup.run_id == run_id, RolloutGroup.role == "eval")
        ).all()
        outcomes = [{"seed": r[0], "bench_task_id": r[1], "task_type": r[2], "success": r[3]} for r in rows]
        metrics = summarise(outcomes)
        if cfg.routing == "rank1":
            metrics["rank1_share"] = rank1_share(session, run_id)
        evaluation = Evaluation(
            id=stable_id("evaluation", run_id, harness_id, cfg.routing),
            run_id=run_id,
            benchmark=cfg.env.benchmark,
            split=cfg.split,
            harness_id=harness_id,
            routing=cfg.routing,
            k=cfg.k,
            n_seeds=cfg.seeds,
            n_bench_tasks=metrics["overall"]["n_tasks"],
            metrics=metrics,
        )
        store.record_evaluation(session, evaluation)
        store.finish_run(session, run_id, "completed")
    overall = metrics["overall"]
    figures = {
        "eval/pass_at_k": overall["pass"]["mean"],
        "eval/pass_at_k_std": overall["pass"]["std"],
        "eval/avg_at_k": overall["avg"]["mean"],
        "eval/avg_at_k_std": overall["avg"]["std"],
        "eval/n_tasks": overall["n_tasks"],
        **{f"eval/{t}/avg_at_k": b["avg"]["mean"] for t, b in metrics["per_type"].items()},
        **{f"eval/rank1_share/{h}": v for h, v in metrics.get("rank1_share", {}).items()},
    }
    tracking.log_summary(run_id, cfg.wandb, cfg.model_dump(mode="json"), figures)
    return {"evaluation_id": evaluation.id, "run_id": run_id, **metrics}
