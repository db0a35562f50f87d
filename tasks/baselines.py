"""Helpers of the baseline flows (flows/baselines/): which harnesses a search chooses among, the
evaluations that choose and that deploy, and the rollouts a search spent."""

from __future__ import annotations

from configs.pipeline import PipelineConfig
from configs.schema import EvalConfig, TrainConfig
from db import store
from db.engine import session_scope
from harness_pool.pool_store import pool_sources
from harness_pool.spec import load_harness
from tasks.pipeline import TEST_SPLIT, eval_config
from tasks.resources import get_engine
from tasks.training import init_checkpoint, task_sets


def candidate_sources(train_cfg: TrainConfig) -> dict[str, str]:
    """H0 then every pool harness, by name -> what loads it (built-in name or YAML path)."""
    bench = train_cfg.env.benchmark
    h0 = load_harness(train_cfg.harness, bench)
    out, seen = {h0.name: train_cfg.harness}, {h0.id}
    for spec, source in pool_sources(train_cfg.pool, bench):
        if spec.id not in seen:
            out[spec.name], seen = source, seen | {spec.id}
    return out


def selection_configs(cfg: PipelineConfig, train_cfg: TrainConfig) -> dict[str, EvalConfig]:
    """The starting policy under every candidate harness on the training config's validation
    tasks (the re-anchor's tasks and k), one seed: what frozen-policy search selects by."""
    _, val = task_sets(train_cfg)
    v = train_cfg.validation
    pinned = {"split": v.split, "task_ids": [t.id for t in val], "k": v.k, "seeds": 1, "every": 1, "limit": None}
    start = init_checkpoint(train_cfg)
    return {
        name: eval_config(cfg, train_cfg, f"select-{name}", start, harness=source, **pinned)
        for name, source in candidate_sources(train_cfg).items()
    }


def deployment_configs(cfg: PipelineConfig, train_cfg: TrainConfig, checkpoint: str, best: str) -> dict:
    """label -> evaluation of `checkpoint` under H0 ('before') and under H_best ('best'), with
    test-before and test-best on the whole test split when evaluate.test_seeds is set."""
    extras = {"before": {}, "best": {"harness": best}}
    if cfg.evaluate.test_seeds:
        test = {**TEST_SPLIT, "seeds": cfg.evaluate.test_seeds}
        extras |= {f"test-{label}": {**extra, **test} for label, extra in list(extras.items())}
    return {label: eval_config(cfg, train_cfg, label, checkpoint, **extra) for label, extra in extras.items()}


def search_rollouts(
    pool_version: str | None, benchmark: str, selection_runs: list[str], database_url: str | None
) -> dict:
    """A baseline's search budget: the rollouts of the evolution that froze its pool (None when
    that run is not in this database) plus those of its own harness selection."""
    with session_scope(get_engine(database_url)) as session:
        evolution_run = store.pool_run_id(session, benchmark, pool_version)
        evolution = store.rollouts_of_runs(session, [evolution_run]) if evolution_run else None
        selection = store.rollouts_of_runs(session, selection_runs)
    return {
        "search_rollouts": (evolution or 0) + selection,
        "evolution_rollouts": evolution,
        "evolution_run_id": evolution_run,
        "selection_rollouts": selection,
    }
