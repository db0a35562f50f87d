"""The whole method (Algorithm 1) as one pipeline: pool -> training with re-anchoring -> evaluation.

Phases, each a subflow with its own persisted tasks (so a re-run skips finished work):
  0. the generated training split (built when missing);
  1. evolve a pool and freeze it (`evolve:`), or reuse a frozen version (`pool_version:`);
  2. train with GRPO + harness rescue from that pool (re-anchoring every reanchor_every updates);
  3. evaluate under H0 the starting weights ("before") and the trained weights ("after"), the
     trained weights with Rank-1 routing over the pool, and under harnesses outside the pool
     (RQ6), each over `evaluate.seeds` seeds; with `evaluate.trained_tasks_k`, the starting and
     trained weights under H0 on the training tasks the run drew (transfer on the rescued tasks);
  4. one results table, stored as the pipeline's run row.
The phases are functions, so `hs stage` (the DVC stages, cli/stages.py) runs the same ones.

Departures from the paper: at CPU scale the policy is SmolLM2-135M after a supervised warm
start; `hs quickstart` reuses the committed pool v1 instead of evolving, and evaluates on a
dev subsample with one seed so that it fits in 20 minutes on 2 cores.

Run: hs run configs/pipeline_dbbench_smol.yaml      (tiny: hs quickstart)
"""

from __future__ import annotations

from prefect import flow, get_run_logger
from prefect.runtime import flow_run

from configs.pipeline import PipelineConfig
from flows import artifacts
from flows.evaluate import evaluate
from flows.evolve import evolve
from flows.train import train
from rl.memory import allocator_in_use
from tasks import phase_times
from tasks.budget import hold_to_budget
from tasks.pipeline import (
    ensure_training_split,
    evaluation_configs,
    pipeline_run_id,
    record_results,
    trained_task_ids,
    training_config,
)


def evolve_pool(cfg: PipelineConfig, database_url: str | None, track_with_dvc: bool = True) -> dict:
    """Phase 1 with `evolve:`: evolve a pool and freeze it (DVC stages version the folder themselves)."""
    evolve_cfg = cfg.evolve
    if not track_with_dvc:
        evolve_cfg = evolve_cfg.model_copy(update={"pool": evolve_cfg.pool.model_copy(update={"dvc": False})})
    return evolve(evolve_cfg, database_url)


def train_policy(cfg: PipelineConfig, pool_version: str | None, database_url: str | None) -> dict:
    """Phase 2: GRPO with harness rescue from the pool, re-anchoring on schedule."""
    return train(training_config(cfg, pool_version), database_url)


def evaluate_policy(cfg: PipelineConfig, pool_version: str | None, trained: dict, database_url: str | None) -> dict:
    """Phase 3: every evaluation label (before, after, Rank-1, outside harnesses) -> its result."""
    train_cfg = training_config(cfg, pool_version)
    drawn = trained_task_ids(trained["run_id"], database_url) if cfg.evaluate.trained_tasks_k else []
    configs = evaluation_configs(cfg, train_cfg, trained["run_id"], trained["checkpoint"], drawn or None)
    return {label: {**evaluate(e, database_url), "harness": e.harness} for label, e in configs.items()}


@flow(
    name="pipeline",
    flow_run_name="pipeline-{config.name}",
    on_failure=[artifacts.failure_artifact(PipelineConfig, pipeline_run_id)],
    on_crashed=[artifacts.failure_artifact(PipelineConfig, pipeline_run_id)],
)
def pipeline(config: PipelineConfig, database_url: str | None = None) -> dict:
    cfg = config
    logger = get_run_logger()
    phase_times.reset()  # wall time by phase of this invocation, stored with the results
    ensure_training_split(cfg.train.env)
    pool_version = cfg.pool_name()
    if cfg.evolve is not None:
        with phase_times.timed("pool"):
            pool_version = evolve_pool(cfg, database_url)["version"]
    logger.info("pool %s", pool_version or f"from the train config: {cfg.train.pool}")
    hold_to_budget(cfg, training_config(cfg, pool_version))  # a plan over a `budget:` cap stops here
    trained = train_policy(cfg, pool_version, database_url)
    with phase_times.timed("evaluations"):
        evaluations = evaluate_policy(cfg, pool_version, trained, database_url)
    for label, result in evaluations.items():
        logger.info(
            "%s: Pass@%d %.2f / Avg@%d %.2f",
            label,
            cfg.evaluate.k,
            result["overall"]["pass"]["mean"],
            cfg.evaluate.k,
            result["overall"]["avg"]["mean"],
        )
    results = record_results(
        cfg, pool_version, trained["run_id"], trained["checkpoint"], evaluations, database_url, flow_run.get_id(),
        extra={
            "phase_seconds": phase_times.snapshot(), "phase_peak_gib": phase_times.peaks(),
            "allocator": allocator_in_use(),
        },
    )  # fmt: skip
    artifacts.publish_results(cfg.name, pipeline_run_id(cfg), results)  # the results table, the intervals
    return results
