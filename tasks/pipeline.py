"""Prefect tasks and helpers of the end-to-end pipeline: training data, phase configs, results.

The pipeline calls the phase flows (evolve, train, evaluate) as subflows; this module turns
the one PipelineConfig into each phase's config and the phases' results into one table.
"""

from __future__ import annotations

from prefect import task
from sqlalchemy import text

from analysis.comparisons import paired_difference, task_scores
from analysis.statistics import wilson
from analysis.training import summarise_training
from configs.pipeline import PipelineConfig
from configs.schema import EnvConfig, EvalConfig, PolicyConfig, TrainConfig
from db import store
from db.engine import session_scope
from db.ids import run_id
from envs.registry import benchmark
from tasks import tracking
from tasks.resources import get_engine
from tasks.run_identity import init_checkpoint


@task(name="training-data")
def ensure_training_split(env: EnvConfig) -> str:
    """Where the benchmark's training split is, generated first when it is generated and missing
    (`Benchmark.prepare_training_split`); a benchmark whose splits ship ready has nothing to do."""
    prepare = benchmark(env.benchmark).prepare_training_split
    return prepare(env) if prepare else f"{env.benchmark} train split (ships with the benchmark)"


def pipeline_run_id(cfg: PipelineConfig) -> str:
    return run_id("pipeline", cfg)


def training_config(cfg: PipelineConfig, pool_version: str | None) -> TrainConfig:
    """The train phase as configured, named after the pipeline, on the pipeline's pool, held to
    the pipeline's training rollout cap (budget.training_rollouts) when it sets one."""
    update: dict = {"name": f"{cfg.name}-train"}
    if cfg.budget.training_rollouts is not None:
        update["rollout_budget"] = cfg.budget.training_rollouts
    if pool_version is not None:
        update["pool"] = [f"pool:{pool_version}"]
    return TrainConfig.model_validate({**cfg.train.model_dump(), **update})


def eval_config(cfg: PipelineConfig, train_cfg: TrainConfig, label: str, checkpoint: str, **extra) -> EvalConfig:
    """One evaluation of the pipeline: its evaluate settings, the training phase's sampling and
    environment (so the numbers compare with what the policy saw while it learned), H0 unless
    `extra` says otherwise."""
    ev = cfg.evaluate
    return EvalConfig.model_validate(
        {
            "split": ev.split,
            "k": ev.k,
            "seeds": ev.seeds,
            "limit": ev.limit,
            "every": ev.every,
            "group_concurrency": ev.group_concurrency,
            "sampling": train_cfg.sampling.model_dump(),
            "env": train_cfg.env.model_dump(),
            "results_dir": train_cfg.results_dir,
            "wandb": train_cfg.wandb,
            "name": f"{cfg.name}-{label}",
            "checkpoint": checkpoint,
            "policy": PolicyConfig(model=checkpoint, device=_device(train_cfg)).model_dump(),
            "harness": train_cfg.harness,
            **extra,
        }
    )


TEST_SPLIT = {"split": "standard", "every": 1, "limit": None}  # the whole test split


def evaluation_configs(
    cfg: PipelineConfig,
    train_cfg: TrainConfig,
    train_run_id: str,
    trained_checkpoint: str,
    trained_tasks: list[str] | None = None,
) -> dict[str, EvalConfig]:
    """label -> evaluation: before (start weights, H0), after (H0), rank1 (after), rank1-before (start weights,
    first re-anchor's profiles), outside harnesses (after); with test_seeds, test-before, test-after and
    test-rank1 on the whole test split; with trained_tasks_k and the training run's tasks
    (:func:`trained_task_ids`), trained-tasks-before and trained-tasks-after on those tasks."""
    ev = cfg.evaluate

    def one(label: str, checkpoint: str, **extra) -> EvalConfig:
        return eval_config(cfg, train_cfg, label, checkpoint, **extra)

    out: dict[str, EvalConfig] = {}
    if ev.before:
        out["before"] = one("before", init_checkpoint(train_cfg))
    out["after"] = one("after", trained_checkpoint)
    if ev.rank1 and train_cfg.pool:
        out["rank1"] = one(
            "rank1", trained_checkpoint, routing="rank1", pool=list(train_cfg.pool), profiles_run=train_run_id
        )
    if ev.rank1_before and train_cfg.pool:
        out["rank1-before"] = one(
            "rank1-before",
            init_checkpoint(train_cfg),
            routing="rank1",
            pool=list(train_cfg.pool),
            profiles_run=train_run_id,
            profiles_version=0,
        )
    for harness in ev.outside:
        out[f"outside-{_label(harness)}"] = one(f"outside-{_label(harness)}", trained_checkpoint, harness=harness)
    if ev.test_seeds:  # the whole test split, same weights and routing as the dev counterpart
        test = {**TEST_SPLIT, "seeds": ev.test_seeds}
        for label in ("before", "after", "rank1"):
            if label in out:
                extra = {k: v for k, v in out[label].model_dump().items() if k in ("routing", "pool", "profiles_run")}
                out[f"test-{label}"] = one(f"test-{label}", out[label].checkpoint, **extra, **test)
    if ev.trained_tasks_k and trained_tasks is not None:  # transfer on the tasks training drew (H0, fresh seeds)
        drawn = {"split": "train", "every": 1, "limit": None, "task_ids": trained_tasks, "k": ev.trained_tasks_k}
        weights = {"before": init_checkpoint(train_cfg)} if ev.before else {}  # else the main run's (same tasks)
        for label, checkpoint in {**weights, "after": trained_checkpoint}.items():
            out[f"trained-tasks-{label}"] = one(f"trained-tasks-{label}", checkpoint, seeds=1, **drawn)
    return out


def trained_task_ids(train_run_id: str, database_url: str | None) -> list[str]:
    """The benchmark tasks a training run drew: those of its first H0 groups (role 'h0'), sorted."""
    with session_scope(get_engine(database_url)) as session:
        rows = session.execute(
            text("SELECT DISTINCT bench_task_id FROM rollout_groups WHERE run_id = :r AND role = 'h0'"),
            {"r": train_run_id},
        )
        return sorted(r[0] for r in rows)


DIFFERENCES = {  # label of the paired comparison -> (evaluation label, evaluation label it is compared with)
    "after - before (H0)": ("after", "before"),
    "Rank-1 - H0 (after)": ("rank1", "after"),
    "test: after - before (H0)": ("test-after", "test-before"),
    "H_best - H0 (before)": ("best", "before"),  # baselines that deploy a harness (flows/baselines/)
    "test: H_best - H0 (before)": ("test-best", "test-before"),
}


def _differences(session, run_ids: dict[str, str]) -> dict[str, dict]:
    """Paired differences on the same tasks, with 95% intervals (analysis/comparisons.py)."""
    out = {}
    for label, (a, b) in DIFFERENCES.items():
        if a in run_ids and b in run_ids:
            row = paired_difference(label, task_scores(session, run_ids[a]), task_scores(session, run_ids[b]))
            if row is not None:
                out[label] = row
    return out


def _device(train_cfg: TrainConfig) -> str:
    return train_cfg.trainer.device if train_cfg.trainer.device.startswith("cuda") else "cpu"


def _label(harness: str) -> str:
    return harness.rsplit("/", 1)[-1].removesuffix(".yaml")


@task(name="pipeline-results")
def record_results(
    cfg: PipelineConfig,
    pool_version: str | None,
    train_run_id: str | None,
    checkpoint: str,
    evaluations: dict[str, dict],
    database_url: str | None,
    prefect_flow_run_id: str | None,
    extra: dict | None = None,
) -> dict:
    """One results document: each evaluation's Pass@k / Avg@k and the training signals (none for a
    baseline that does not train), and `extra` (a baseline's method, search and budget); stored as
    the pipeline's run row (kind 'pipeline') so `hs report` and SQL can find it."""
    with session_scope(get_engine(database_url)) as session:
        results = {
            "pool_version": pool_version,
            "train_run_id": train_run_id,
            "checkpoint": checkpoint,
            "k": cfg.evaluate.k,
            "seeds": cfg.evaluate.seeds,
            "evaluations": {
                label: {
                    "run_id": e["run_id"],
                    "harness": e.get("harness"),
                    "pass": e["overall"]["pass"],
                    "avg": e["overall"]["avg"],
                    "n_tasks": e["overall"]["n_tasks"],
                }
                for label, e in evaluations.items()
            },
            **(extra or {}),
        }
        if train_run_id is not None:
            results["training"] = _training(cfg, summarise_training(*store.training_history(session, train_run_id)))
        results["differences"] = _differences(session, {label: e["run_id"] for label, e in evaluations.items()})
        store.upsert_run(
            session,
            id=pipeline_run_id(cfg),
            kind="pipeline",
            name=cfg.name,
            config=cfg.model_dump(mode="json"),
            status="completed",
            prefect_flow_run_id=prefect_flow_run_id,
            results=results,
        )
    figures = {
        f"pipeline/{label}/{m}": e[m]["mean"] for label, e in results["evaluations"].items() for m in ("pass", "avg")
    }
    figures.update(
        {f"pipeline/train/{k}": v for k, v in results.get("training", {}).items() if isinstance(v, (int, float))}
    )
    tracking.log_summary(pipeline_run_id(cfg), cfg.wandb, cfg.model_dump(mode="json"), figures)
    return results


def _training(cfg: PipelineConfig, training: dict) -> dict:
    """The training signals a results document keeps, with the valid-group ratio's Wilson interval."""
    out = {
        key: training[key]
        for key in (
            "updates",
            "valid_group_ratio",
            "effective_token_ratio",
            "rescues_triggered",
            "rescue_success",
            "rollouts_spent",
            "h0_validation",
        )
    }
    out["h0_validation"] = {str(k): v for k, v in out["h0_validation"].items()}
    groups = training["updates"] * cfg.train.batch_tasks  # one group per task of each update
    if groups:
        w = wilson(training["valid_group_ratio"] * groups, groups)
        out["valid_group_interval"] = [w.low, w.high]
    return out
