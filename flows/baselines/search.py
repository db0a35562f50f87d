"""The harness search every search baseline starts from: one policy under H0 and every pool
harness on the training config's validation tasks (the re-anchor's tasks and k), one seed."""

from __future__ import annotations

from configs.pipeline import PipelineConfig
from configs.schema import TrainConfig
from flows.evaluate import evaluate
from harness_pool.selection import ranked_harnesses
from tasks.baselines import selection_configs


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
