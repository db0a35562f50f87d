"""The harness search every search baseline starts from: one policy under H0 and every pool
harness on the training config's validation tasks (the re-anchor's tasks and k), one seed."""

from __future__ import annotations

from configs.pipeline import PipelineConfig
from configs.schema import TrainConfig
from flows.evaluate import evaluate
from flows.opening import open_baseline
from flows.pipeline import evolve_pool
from harness_pool.selection import ranked_harnesses
from tasks.baselines import selection_configs
from tasks.pipeline import ensure_training_split, training_config


def searched_pool(cfg: PipelineConfig, database_url: str | None) -> tuple[str | None, TrainConfig]:
    """What every search baseline starts from: the training split, the pool (evolved now with the
    starting policy when `evolve:` is set, else the frozen one named), the training phase's
    settings on that pool (its planned rollouts within the caps), and the warm start built.
    Returns (pool version, training config)."""
    ensure_training_split(cfg.train.env)
    pool_version = cfg.pool_name()
    if cfg.evolve is not None:
        pool_version = evolve_pool(cfg, database_url)["version"]
    train_cfg = training_config(cfg, pool_version)
    open_baseline(cfg, train_cfg, database_url)  # a plan over a `budget:` cap stops here; the warm start
    return pool_version, train_cfg


def harness_search(
    cfg: PipelineConfig, train_cfg: TrainConfig, policy: str | None, label: str, database_url: str | None
) -> dict:
    """{'ranked': names by validation success (ties: H0, then pool order), 'success', 'sources'
    (name -> what loads the harness), 'runs' (name -> evaluation run id)}. Cached per evaluation."""
    choices = selection_configs(cfg, train_cfg, policy, label)
    runs = {name: evaluate(e, database_url) for name, e in choices.items()}
    success = {name: e["overall"]["avg"]["mean"] / 100 for name, e in runs.items()}
    return {
        "ranked": ranked_harnesses(success, list(choices)),
        "success": success,
        "sources": {name: e.harness for name, e in choices.items()},
        "runs": {name: e["run_id"] for name, e in runs.items()},
    }


def search_record(found: dict, train_cfg: TrainConfig) -> dict:
    """What a results document keeps of the search that chose the deployed harness."""
    return {
        "best": found["ranked"][0],
        "validation_success": found["success"],
        "n_tasks": train_cfg.validation.n_tasks,
        "k": train_cfg.validation.k,
        "selection_runs": found["runs"],
    }
