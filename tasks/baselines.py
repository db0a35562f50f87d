"""Helpers of the baseline flows (flows/baselines/): which harnesses a search chooses among, the
evaluations that choose, collect and deploy, fine-tuning on a policy's own successes, and the
rollouts a baseline spent."""

from __future__ import annotations

from pathlib import Path

from prefect import task
from sqlalchemy import select

from configs.pipeline import PipelineConfig
from configs.schema import EvalConfig, EvolveConfig, SftConfig, TrainConfig
from db import store
from db.engine import session_scope
from db.models import Trajectory
from harness_pool.pool_store import pool_sources
from harness_pool.spec import load_harness
from rl.modes import TRAIN_ROLES, Role
from rl.sft import SftExample
from rl.train_batch import sequences_from_turns
from tasks.pipeline import TEST_SPLIT, eval_config, training_config
from tasks.resources import get_engine
from tasks.run_identity import batch_for_step, init_checkpoint, task_sets
from tasks.sft import checkpoint_name, register_checkpoint, register_sft_run, train_checkpoint, write_examples


def candidate_sources(train_cfg: TrainConfig) -> dict[str, str]:
    """H0 then every pool harness, by name -> what loads it (built-in name or YAML path)."""
    bench = train_cfg.env.benchmark
    h0 = load_harness(train_cfg.harness, bench)
    out, seen = {h0.name: train_cfg.harness}, {h0.id}
    for spec, source in pool_sources(train_cfg.pool, bench):
        if spec.id not in seen:
            out[spec.name], seen = source, seen | {spec.id}
    return out


def selection_configs(
    cfg: PipelineConfig, train_cfg: TrainConfig, checkpoint: str | None = None, label: str = "select"
) -> dict[str, EvalConfig]:
    """A policy (the starting one by default) under every candidate harness on the training
    config's validation tasks (the re-anchor's tasks and k), one seed: what a search selects by."""
    _, val = task_sets(train_cfg)
    v = train_cfg.validation
    pinned = {"split": v.split, "task_ids": [t.id for t in val], "k": v.k, "seeds": 1, "every": 1, "limit": None}
    policy = checkpoint or init_checkpoint(train_cfg)
    return {
        name: eval_config(cfg, train_cfg, f"{label}-{name}", policy, harness=source, **pinned)
        for name, source in candidate_sources(train_cfg).items()
    }


def round_tasks(cfg: PipelineConfig, train_cfg: TrainConfig, round_index: int) -> list[str]:
    """The training tasks a fine-tuning round collects on: seeded batches, as training draws them."""
    train, _ = task_sets(train_cfg)
    return batch_for_step([t.id for t in train], train_cfg.seed, cfg.rft.tasks_per_round, round_index)


def collect_configs(
    cfg: PipelineConfig,
    train_cfg: TrainConfig,
    checkpoint: str,
    harnesses: dict[str, str],
    task_ids: list[str],
    label: str,
) -> dict[str, EvalConfig]:
    """A policy under each given harness (name -> source) on training tasks, rft.k rollouts each:
    the rollouts whose successes it is fine-tuned on."""
    pinned = {"split": "train", "task_ids": task_ids, "k": cfg.rft.k, "seeds": 1, "every": 1, "limit": None}
    return {
        name: eval_config(cfg, train_cfg, f"{label}-{name}", checkpoint, harness=source, **pinned)
        for name, source in harnesses.items()
    }


def success_examples(session, run_ids: list[str]) -> list[SftExample]:
    """Every successful rollout of the runs as a fine-tuning example: its tokens as the policy saw
    and wrote them, the loss on the policy's own tokens only (as in the GRPO update)."""
    trajectories = session.scalars(
        select(Trajectory).where(Trajectory.run_id.in_(run_ids), Trajectory.success.is_(True)).order_by(Trajectory.id)
    ).all()
    turns = store.turns_by_trajectory(session, [t.id for t in trajectories])
    return [
        SftExample(t.bench_task_id, s.input_ids, s.loss_mask)
        for t in trajectories
        for s in sequences_from_turns(turns[t.id], 1.0)
    ]


def rft_settings(cfg: PipelineConfig, train_cfg: TrainConfig, label: str, base: str) -> SftConfig:
    """The fine-tune of `base` on collected successes (named after the pipeline and the round or branch)."""
    r = cfg.rft
    return SftConfig(
        name=f"{cfg.name}-{label}",
        base_model=base,
        heldout_fraction=0.0,
        steps=r.steps,
        batch_size=r.batch_size,
        lr=r.lr,
        gradient_checkpointing=r.gradient_checkpointing,
        seed=train_cfg.seed,
        device=train_cfg.trainer.device,
        dtype=train_cfg.trainer.dtype,
        results_dir=train_cfg.results_dir,
        env=train_cfg.env,
    )


@task(name="rft-checkpoint", task_run_name="rft-{label}")
def rft_checkpoint(
    cfg: PipelineConfig, train_cfg: TrainConfig, label: str, base: str, run_ids: list[str], database_url: str | None
) -> dict:
    """Fine-tune `base` on the successful rollouts of the runs: {'checkpoint', 'examples',
    'run_id'} (the fine-tuning run). No success -> `base` unchanged, no run; a checkpoint already
    built is reused."""
    with session_scope(get_engine(database_url)) as session:
        examples = success_examples(session, run_ids)
    if not examples:
        return {"checkpoint": base, "examples": 0, "run_id": None}
    sft_cfg = rft_settings(cfg, train_cfg, label, base)
    path = write_examples(examples, Path(train_cfg.results_dir) / "rft" / f"{checkpoint_name(sft_cfg)}.jsonl")
    run_id = register_sft_run.fn(sft_cfg, database_url, None)
    meta = train_checkpoint(sft_cfg, path, run_id)
    register_checkpoint.fn({**meta, "run_id": run_id}, database_url)
    return {"checkpoint": meta["name"], "examples": len(examples), "run_id": run_id}


def deployment_configs(cfg: PipelineConfig, train_cfg: TrainConfig, policy: str | None, best: str) -> dict:
    """label -> evaluation: the starting policy under H0 ('before', unless evaluate.before is off:
    the base policy's row is then another run's), the baseline's policy under H0 ('after', when it
    trained one) and under its best harness ('best'); with evaluate.test_seeds, the same on the
    whole test split as test-before, test-after, test-best."""
    start = init_checkpoint(train_cfg)
    plan = {"before": (start, {})} if cfg.evaluate.before else {}
    if policy and policy != start:
        plan["after"] = (policy, {})
    plan["best"] = (policy or start, {"harness": best})
    if cfg.evaluate.test_seeds:
        test = {**TEST_SPLIT, "seeds": cfg.evaluate.test_seeds}
        plan |= {f"test-{label}": (ckpt, {**extra, **test}) for label, (ckpt, extra) in list(plan.items())}
    return {label: eval_config(cfg, train_cfg, label, ckpt, **extra) for label, (ckpt, extra) in plan.items()}


def rollout_budget(
    pool_version: str | None,
    benchmark: str,
    selection_runs: list[str],
    database_url: str | None,
    training_runs: list[str] = (),
    finetune_runs: list[str] = (),
) -> dict:
    """A baseline's budget: search = the rollouts of the evolution that froze its pool (None when
    that run is not in this database) plus those of its own harness selections; training = the
    rollouts it collected to fine-tune on. The run ids are kept for the wall time they took:
    search (the selections) and training (the collections and the fine-tuning runs)."""
    with session_scope(get_engine(database_url)) as session:
        evolution_run = store.pool_run_id(session, benchmark, pool_version)
        evolution = store.rollouts_of_runs(session, [evolution_run]) if evolution_run else None
        selection = store.rollouts_of_runs(session, selection_runs)
        training = store.rollouts_of_runs(session, list(training_runs))
    return {
        "search_rollouts": (evolution or 0) + selection,
        "evolution_rollouts": evolution,
        "evolution_run_id": evolution_run,
        "selection_rollouts": selection,
        "training_rollouts": training,
        "search_run_ids": list(selection_runs),
        "training_run_ids": [*training_runs, *finetune_runs],
    }


# -- HarnessX: evolution rounds interleaved with training segments ----------------------------------
def segment_updates(cfg: PipelineConfig) -> list[int]:
    """train.updates split over coupling.rounds segments, the first ones taking the remainder."""
    n, rounds = cfg.train.updates, cfg.coupling.rounds
    return [n // rounds + (1 if r < n % rounds else 0) for r in range(rounds)]


def round_evolution(cfg: PipelineConfig, r: int, policy: str) -> EvolveConfig:
    """One evolution round from H0 with the current policy frozen; its pool is a version of its own."""
    e = cfg.evolve
    return EvolveConfig.model_validate(
        {
            **e.model_dump(),
            "name": f"{cfg.name}-evolve-r{r}",
            "rounds": 1,
            "seed": e.seed + r,
            "warm_start": None,
            "policy": {**e.policy.model_dump(), "model": policy},
            "pool": {**e.pool.model_dump(), "version": f"{cfg.name}-r{r}", "dvc": False},
        }
    )


def segment_config(cfg: PipelineConfig, r: int, policy: str, pools: list[str], updates: int, earlier: list[str]):
    """Training segment r: harnessx updates from the current policy over the pool grown so far,
    its replay buffer starting with the earlier segments' groups."""
    base = training_config(cfg, None)
    return TrainConfig.model_validate(
        {
            **base.model_dump(),
            "name": f"{cfg.name}-train-r{r}",
            "warm_start": None,
            "init": policy,
            "pool": [*base.pool, *pools],
            "updates": updates,
            "replay": {**base.replay.model_dump(), "from_runs": earlier},
        }
    )


def coupled_budget(evolution_runs: list[str], segment_runs: list[str], database_url: str | None) -> dict:
    """HarnessX's budget: search = its evolution rounds' rollouts; training and validation = its
    segments' update groups and re-anchors."""
    with session_scope(get_engine(database_url)) as session:
        roles = [store.rollouts_by_role(session, run) for run in segment_runs]
        search = store.rollouts_of_runs(session, evolution_runs)
    return {
        "search_rollouts": search,
        "training_rollouts": sum(n for r in roles for role, n in r.items() if role in TRAIN_ROLES),
        "validation_rollouts": sum(r.get(Role.REANCHOR, 0) for r in roles),
    }
