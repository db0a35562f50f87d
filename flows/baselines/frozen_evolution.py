"""Frozen-policy harness evolution, deploying the best harness found (H_best).

The paper: a Meta-Harness-style search evolves harnesses while the policy stays fixed, and the
best harness found is deployed on the test split; no training.

Our reading: the search is our directional evolution (flows/evolve.py) with the starting policy
frozen, or a frozen pool it already produced (`pool_version`); "best" is the harness (H0 or a
pool member) with the highest success of the starting policy on the training config's
validation tasks (the re-anchor's tasks, k rollouts each), ties going to H0 and then to pool
order. The starting policy is then evaluated under H0 ("before") and under H_best ("best"), on
the evaluation split and, with `evaluate.test_seeds`, on the whole test split.

Departures: the paper's search is an open-ended coding agent; ours is the pool's evolution
(offline operators by default). The budget counts the evolution's rollouts (when its run is in
the database) plus the selection's, as search rollouts; there are no training rollouts.

Run: hs run configs/baselines/frozen_evolution.yaml
"""

from __future__ import annotations

from prefect import flow, get_run_logger
from prefect.runtime import flow_run

from configs.pipeline import PipelineConfig
from flows import artifacts
from flows.baselines.search import harness_search, search_record, searched_pool
from flows.evaluate import evaluate
from tasks.baselines import deployment_configs, rollout_budget
from tasks.pipeline import pipeline_run_id, record_results
from tasks.run_identity import init_checkpoint


@flow(
    name="frozen-evolution",
    flow_run_name="frozen-evolution-{config.name}",
    on_failure=[artifacts.failure_artifact(PipelineConfig, pipeline_run_id)],
    on_crashed=[artifacts.failure_artifact(PipelineConfig, pipeline_run_id)],
)
def frozen_evolution(config: PipelineConfig, database_url: str | None = None) -> dict:
    cfg = config
    pool_version, train_cfg = searched_pool(cfg, database_url)  # evolved now with `evolve:`, else frozen
    start = init_checkpoint(train_cfg)  # the policy stays as it starts: no training
    found = harness_search(cfg, train_cfg, start, "select", database_url)  # H0 and every pool harness
    best = found["ranked"][0]
    get_run_logger().info("H_best %s: %s", best, ", ".join(f"{n} {r:.2f}" for n, r in found["success"].items()))
    deployed = deployment_configs(cfg, train_cfg, None, found["sources"][best])
    evaluations = {label: {**evaluate(e, database_url), "harness": e.harness} for label, e in deployed.items()}
    extra = {
        "method": "frozen_evolution",
        "search": search_record(found, train_cfg),
        "budget": rollout_budget(pool_version, cfg.train.env.benchmark, list(found["runs"].values()), database_url),
    }
    record = record_results(cfg, pool_version, None, start, evaluations, database_url, flow_run.get_id(), extra)
    artifacts.publish_results(cfg.name, pipeline_run_id(cfg), record)
    return record
