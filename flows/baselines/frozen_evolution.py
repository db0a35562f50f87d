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

Run: hs run configs/baselines/frozen_evolution_dbbench_smol.yaml
"""

from __future__ import annotations

from prefect import flow, get_run_logger
from prefect.runtime import flow_run

from configs.pipeline import PipelineConfig
from flows.evaluate import evaluate
from flows.pipeline import evolve_pool
from flows.sft import ensure_warm_start
from harness_pool.selection import best_harness
from tasks.baselines import deployment_configs, search_rollouts, selection_configs
from tasks.pipeline import ensure_training_split, record_results, training_config
from tasks.training import init_checkpoint, warm_start_config


@flow(name="frozen-evolution", flow_run_name="frozen-evolution-{config.name}")
def frozen_evolution(config: PipelineConfig, database_url: str | None = None) -> dict:
    cfg = config
    ensure_training_split(cfg.train.env)
    pool_version = cfg.pool_name()
    if cfg.evolve is not None:  # the search, with the starting policy frozen
        pool_version = evolve_pool(cfg, database_url)["version"]
    train_cfg = training_config(cfg, pool_version)
    ensure_warm_start(warm_start_config(train_cfg), database_url)
    start = init_checkpoint(train_cfg)  # the policy stays as it starts: no training
    choices = selection_configs(cfg, train_cfg)  # H0 and every pool harness, on the same validation tasks
    selection = {name: evaluate(e, database_url) for name, e in choices.items()}
    success = {name: e["overall"]["avg"]["mean"] / 100 for name, e in selection.items()}
    best = best_harness(success, list(selection))
    get_run_logger().info("H_best %s: %s", best, ", ".join(f"{n} {r:.2f}" for n, r in success.items()))
    deployed = deployment_configs(cfg, train_cfg, start, choices[best].harness)
    evaluations = {label: {**evaluate(e, database_url), "harness": e.harness} for label, e in deployed.items()}
    spent = search_rollouts(
        pool_version, cfg.train.env.benchmark, [e["run_id"] for e in selection.values()], database_url
    )
    extra = {
        "method": "frozen_evolution",
        "search": {
            "best": best,
            "validation_success": success,
            "n_tasks": train_cfg.validation.n_tasks,
            "k": train_cfg.validation.k,
            "selection_runs": {name: e["run_id"] for name, e in selection.items()},
        },
        "budget": {**spent, "training_rollouts": 0},
    }
    return record_results(cfg, pool_version, None, start, evaluations, database_url, flow_run.get_id(), extra)
