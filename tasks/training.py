"""Prefect tasks of the GRPO training flow (flows/train.py).

The policy and its trainer live in this worker process for the whole run (a `TrainHandle` per
run id): rollouts sample from the policy the trainer updates (or its bf16 copy, refreshed
after every update). An update's groups reach it in memory (tasks/rollout_groups.py); the
database keeps every trajectory as the record and the resume source.

Resume: after every update the trainer state (weights + optimizer) and the count of finished
updates are written atomically under `state_dir/<run id>/`. Starting the same command again
loads them and continues at the next update; the data order and sampling seeds depend only on
(seed, step), and rows have deterministic ids, so a step that was cut short is redone and its
rows replaced, never duplicated.
"""

from __future__ import annotations

import json
import logging
import random
import shutil
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
from prefect import get_run_logger, task
from prefect.cache_policies import NO_CACHE
from prefect.exceptions import MissingContextError
from sqlalchemy import select

from configs.schema import CONFIG_DIR, SftConfig, TrainConfig, load_config
from db import store
from db.engine import database_url as default_url
from db.engine import mask_url, session_scope
from db.ids import stable_id
from db.journal import journal_path, restore_steps, save_step
from db.models import Checkpoint, Evaluation, TrainStep
from harness_pool.pool_store import resolve_pool
from harness_pool.spec import HarnessSpec, load_harness
from rl.checkpoints import checkpoint_path, save_checkpoint
from rl.data_parallel import launched_world
from rl.grpo import group_advantages
from rl.memory import release_memory
from rl.model_store import weights_of
from rl.modes import RESCUE_ROLES, TRAIN_ROLES, Role
from rl.policy import Sampling
from rl.precision import resolve_dtype, rollout_copy, sync_weights
from rl.rollout import RolloutSpec, run_rollouts
from rl.signals import GroupOutcome, step_signals
from rl.train_batch import sequences_from_turns
from rl.trainer import TorchTrainer, TrainerSettings
from tasks import tracking
from tasks.records import build_group, record_bench_tasks, record_harnesses
from tasks.resources import bench_task, bench_tasks, env_factory, get_engine
from tasks.routing import paired_records, store_profiles
from tasks.sft import checkpoint_name

_LOCK = threading.Lock()


class TrainingError(RuntimeError):
    """A training run that cannot start or continue; the message says how to fix it."""


# -- identities and plans -----------------------------------------------------------------
def train_run_id(cfg: TrainConfig) -> str:
    """Same config, same run (the update budget excluded, so raising it extends the run)."""
    return f"{cfg.name}-{cfg.mode}-{stable_id('train', cfg.identity(exclude=frozenset({'updates'})))[:12]}"


def init_checkpoint(cfg: TrainConfig) -> str:
    """The starting weights: the warm-start checkpoint's name when warm_start is set."""
    sft_cfg = warm_start_config(cfg)
    return checkpoint_name(sft_cfg) if sft_cfg is not None else cfg.init


def warm_start_config(cfg: TrainConfig) -> SftConfig | None:
    """The SFT config named by warm_start (relative to the working directory or the repository)."""
    return sft_config_at(cfg.warm_start) if cfg.warm_start else None


def sft_config_at(warm_start: str) -> SftConfig:
    """An SFT config by path, relative to the working directory or the repository."""
    path = Path(warm_start)
    if not path.exists() and (CONFIG_DIR.parent / path).exists():
        path = CONFIG_DIR.parent / path
    return load_config(SftConfig, path)


def task_sets(cfg: TrainConfig) -> tuple[list, list]:
    """(training tasks, validation tasks); validation from the training split is its tail and
    is removed from the training tasks."""
    train = bench_tasks(cfg.env, "train", tiers=cfg.tiers)
    if cfg.validation.split == "train":
        if len(train) <= cfg.validation.n_tasks:
            raise TrainingError(f"only {len(train)} training tasks: lower validation.n_tasks or add tiers")
        val, train = train[-cfg.validation.n_tasks :], train[: -cfg.validation.n_tasks]
    else:
        val = bench_tasks(cfg.env, cfg.validation.split, limit=cfg.validation.n_tasks)
    return (train[: cfg.n_tasks] if cfg.n_tasks else train), val


def batch_for_step(task_ids: list[str], seed: int, batch: int, step: int) -> list[str]:
    """The step's benchmark tasks: epochs of seeded shuffles laid end to end (same on every resume)."""
    n = len(task_ids)
    if n == 0:
        raise TrainingError("no training tasks: run `hs data build-train dbbench` or relax tiers/n_tasks")
    picked = []
    for position in range(step * batch, (step + 1) * batch):
        epoch, offset = divmod(position, n)
        order = list(task_ids)
        random.Random(f"{seed}:{epoch}").shuffle(order)
        picked.append(order[offset])
    return picked


def harness_sets(cfg: TrainConfig) -> tuple[HarnessSpec, list[HarnessSpec], list[HarnessSpec]]:
    bench = cfg.env.benchmark
    return (
        load_harness(cfg.harness, bench),
        resolve_pool(cfg.pool, bench),
        [load_harness(n, bench) for n in cfg.mixture],
    )


def step_seed(seed: int, step: int, phase: int) -> int:
    return int(stable_id("sampling", seed, step, phase)[:8], 16)


def state_dir(cfg: TrainConfig, run_id: str) -> Path:
    return Path(cfg.state_dir).expanduser() / run_id


def read_progress(cfg: TrainConfig, run_id: str) -> dict:
    """{'updates': finished updates, 'state': trainer state file} ({'updates': 0} for a new run)."""
    progress = state_dir(cfg, run_id) / "progress.json"
    if not progress.exists():
        return {"updates": 0}
    return {"state": "trainer.pt", **json.loads(progress.read_text())}


def completed_updates(cfg: TrainConfig, run_id: str) -> int:
    return read_progress(cfg, run_id)["updates"]


def spent_training_rollouts(run_id: str, before_step: int, database_url: str | None) -> int:
    """The rollouts the run's finished updates were formed from (first groups and rescues)."""
    with session_scope(get_engine(database_url)) as session:
        roles = store.rollouts_by_role(session, run_id, before_step)
    return sum(n for role, n in roles.items() if role in TRAIN_ROLES)


def budget_allows(cfg: TrainConfig, run_id: str, step: int, database_url: str | None) -> bool:
    """Whether update `step`, at its most expensive (every group dead and rescued), keeps the run
    within rollout_budget; always true without one."""
    if cfg.rollout_budget is None:
        return True
    return spent_training_rollouts(run_id, step, database_url) + cfg.max_update_rollouts() <= cfg.rollout_budget


def check_recorded_updates(cfg: TrainConfig, run_id: str, database_url: str | None, restore: bool = True) -> int:
    """A run resumes from its trainer state on disk; the updates that state has finished must be
    in the current database too (it may have been switched or deleted since). Missing rows are
    written back from the step files saved beside the state (db/journal.py) when `restore`;
    a step with no file is a one-line LookupError saying how to fix it. Returns rows written."""
    done = completed_updates(cfg, run_id)
    if done == 0:
        return 0
    folder = state_dir(cfg, run_id)
    with session_scope(get_engine(database_url)) as session:
        held = set(session.scalars(select(TrainStep.step).where(TrainStep.run_id == run_id)))
        missing = sorted(set(range(done)) - held)
        unsaved = [s for s in missing if not journal_path(folder, s).exists()]
        if unsaved:
            where = mask_url(database_url or default_url(create_home=False))
            raise LookupError(
                f"run {run_id}: its trainer state in {folder} has {done} finished updates, but {where} holds no "
                f"rows for {len(unsaved)} of them (updates {unsaved[0]}..{unsaved[-1]}) and no saved copy is there: "
                f"copy them from the database they were written to (hs db copy --from OLD_URL --to {where}), or "
                f"delete {folder} to train this run again"
            )
        if missing and restore:
            return sum(restore_steps(session, folder).values())
    return 0


# -- the in-process policy + trainer --------------------------------------------------------
@dataclass
class TrainHandle:
    """The rollout policy and the trainer of one run. With a bf16 rollout copy, `refresh`
    copies the trained weights into it (after every update and after a resume)."""

    policy: object
    trainer: TorchTrainer

    def refresh(self) -> None:
        if self.policy.model is not self.trainer.model:
            sync_weights(self.trainer.export_model(), self.policy.model)


_HANDLES: dict[str, TrainHandle] = {}


def get_handle(cfg: TrainConfig, run_id: str) -> TrainHandle:
    """Load the starting weights once per process, then the saved state when resuming."""
    with _LOCK:
        if run_id not in _HANDLES:
            _HANDLES[run_id] = _load_handle(cfg, run_id)
        return _HANDLES[run_id]


def drop_handle(run_id: str) -> None:
    with _LOCK:
        _HANDLES.pop(run_id, None)


def release_handle(run_id: str) -> None:
    """A finished run's policy, trainer and optimizer state leave memory (later phases load
    the registry checkpoint instead)."""
    drop_handle(run_id)
    release_memory()


def _load_handle(cfg: TrainConfig, run_id: str) -> TrainHandle:
    from rl.transformers_policy import TransformersPolicy

    t = cfg.trainer
    policy = TransformersPolicy(init_checkpoint(cfg), device=t.device, shared=False, engine=t.engine)
    settings = TrainerSettings(
        lr=t.lr,
        weight_decay=t.weight_decay,
        grad_clip=t.grad_clip,
        micro_batch=t.micro_batch,
        logprob_chunk=t.logprob_chunk,
        temperature=cfg.sampling.temperature or 1.0,
        gradient_checkpointing=t.gradient_checkpointing,
        lora=t.lora,
        lora_rank=t.lora_rank,
        dtype=resolve_dtype(t.dtype, t.device),
    )
    if t.backend == "deepspeed" and launched_world()[1] > 1:
        from rl.data_parallel import DataParallelTrainer

        announce = {
            "model": init_checkpoint(cfg),
            "device": t.device,
            "settings": asdict(settings),
            "zero_stage": t.zero_stage,
        }
        trainer = DataParallelTrainer(policy.model, settings, policy.pad_id, zero_stage=t.zero_stage, announce=announce)
    elif t.backend == "deepspeed":
        from rl.deepspeed_trainer import DeepSpeedTrainer

        trainer = DeepSpeedTrainer(policy.model, settings, policy.pad_id, zero_stage=t.zero_stage)
    else:
        trainer = TorchTrainer(policy.model, settings, policy.pad_id)
    rollout_dtype = resolve_dtype(t.rollout_dtype, t.device)
    if rollout_dtype == "float32":
        policy.model = trainer.model  # LoRA/DeepSpeed may wrap it: rollouts sample from what is trained
    else:
        policy.model = rollout_copy(trainer.export_model(), rollout_dtype)
    policy.dtype = rollout_dtype
    handle = TrainHandle(policy, trainer)
    progress = read_progress(cfg, run_id)
    if progress["updates"]:
        state = state_dir(cfg, run_id) / progress["state"]
        if not state.exists():
            raise TrainingError(f"{state} is missing: restore it, or delete {state.parent} to start the run over")
        trainer.load_state(state)
        handle.refresh()
    return handle


# -- tasks ----------------------------------------------------------------------------------
@task(name="register-train-run")
def register_train_run(cfg: TrainConfig, database_url: str | None, prefect_flow_run_id: str | None) -> dict:
    h0, pool, mixture = harness_sets(cfg)
    train, val = task_sets(cfg)
    run_id, init = train_run_id(cfg), init_checkpoint(cfg)
    config = {**cfg.model_dump(mode="json"), "init_checkpoint": init, "init_weights": weights_of(init)}
    with session_scope(get_engine(database_url)) as session:  # hashed before: no transaction held open
        store.upsert_run(
            session,
            id=run_id,
            kind="train",
            name=cfg.name,
            status="running",
            config=config,
            prefect_flow_run_id=prefect_flow_run_id,
        )
        record_harnesses(session, {h.id: h for h in [h0, *pool, *mixture]}.values())
        record_bench_tasks(session, [*train, *val])
    return {"run_id": run_id, "train_task_ids": [t.id for t in train], "val_task_ids": [t.id for t in val]}


def step_sampling(cfg: TrainConfig, step: int, phase: int) -> Sampling:
    """The sampling settings of one phase of one update (0: first groups, 1: rescues, 2: re-anchor)."""
    s = cfg.sampling
    return Sampling(s.temperature, s.top_p, s.max_new_tokens, seed=step_seed(cfg.seed, step, phase))


def group_sequences(groups) -> list:
    """Training sequences of the groups (objects with .rewards, .turn_lists and .group_id), each
    rollout's with its group-relative advantage."""
    seqs = []
    for group in groups:
        rewards = torch.tensor(group.rewards, dtype=torch.float32)
        for turns, advantage in zip(group.turn_lists, group_advantages(rewards).tolist()):
            seqs += sequences_from_turns(turns, advantage, group.group_id)
    return seqs


@task(name="update-policy", task_run_name="update-step{step}", cache_policy=NO_CACHE)
def update_policy(cfg: TrainConfig, run_id: str, step: int, trained: list) -> dict:
    """Group advantages from the rollouts' rewards, then one GRPO update of the in-process policy."""
    handle = get_handle(cfg, run_id)
    started = time.perf_counter()
    seqs = group_sequences(trained)
    scoring = time.perf_counter() - started
    stats = handle.trainer.update(seqs)
    synced = time.perf_counter()
    handle.refresh()  # the next rollouts sample from the new weights
    _logger().info(
        "update %d: loss %.4f, mismatch weight mean %.3f, %.1f%% at the cap 2, %.1f%% below 0.5 (%d tokens)",
        step,
        stats["loss"],
        stats["mismatch_mean"],
        100 * stats["mismatch_at_cap"],
        100 * stats["mismatch_below_half"],
        stats["mismatch_tokens"],
    )
    return {
        **stats,
        "seconds_scoring": scoring,
        "seconds_refresh": time.perf_counter() - synced,
        "sequences": len(seqs),
    }


@task(name="record-step", task_run_name="signals-step{step}", cache_policy=NO_CACHE)
def record_step(
    cfg: TrainConfig,
    run_id: str,
    step: int,
    groups,
    dead: list,
    update: dict,
    reanchor: dict | None,
    database_url: str | None,
    replayed: list = (),
) -> dict:
    """The step's signals to the database (one row, replaced on re-run) and to W&B. `groups` is
    the step's StepGroups (tasks/rollout_groups.py), `dead` its dead first groups, `replayed`
    the earlier groups the update trained on again (harnessx)."""
    outcomes = [
        GroupOutcome(
            g.successes, g.rewards, [r.n_policy_tokens for r in g.results], rescued=g.plan.role in RESCUE_ROLES
        )
        for g in groups.trained
    ]
    metrics = step_signals(outcomes, rollouts_spent=groups.rollouts_spent)
    metrics.update(
        {
            "train/first_group_success": _mean(s for g in groups.first.groups for s in g.successes),
            "train/dead_groups": float(len(dead)),
            "train/replayed_groups": float(len(replayed)),
            "train/loss": update["loss"],
            "train/clip_fraction": update["clip_fraction"],
            "train/grad_norm": update["grad_norm"],
            "train/policy_tokens": update["policy_tokens"],
            "train/mismatch_mean": update["mismatch_mean"],
            "train/mismatch_at_cap": update["mismatch_at_cap"],
            "train/mismatch_below_half": update["mismatch_below_half"],
            "time/rollout_s": groups.seconds,
            "time/scoring_s": update["seconds_scoring"],
            "time/update_s": update["seconds_update"],
            "time/train_tokens_per_s": update["trained_tokens"] / max(update["seconds_forward_backward"], 1e-9),
        }
    )
    if reanchor:
        metrics.update({f"reanchor/{name}_success": rate for name, rate in reanchor["success"].items()})
    with session_scope(get_engine(database_url)) as session:
        session.merge(
            TrainStep(
                id=stable_id("train-step", run_id, step),
                run_id=run_id,
                step=step,
                mode=cfg.mode,
                metrics=metrics,
                details={
                    "groups": groups.summaries(),
                    "update": update,
                    **({"bandit": groups.first.bandit} if groups.first.bandit else {}),
                    **({"replayed": [g.group_id for g in replayed]} if replayed else {}),
                },
            )
        )
    tracking.log_metrics(run_id, cfg.wandb, cfg.model_dump(mode="json"), metrics, step)
    return metrics


def _logger():
    """The Prefect run logger inside a flow, the module logger when a task runs bare (`.fn`)."""
    try:
        return get_run_logger()
    except MissingContextError:
        return logging.getLogger(__name__)


def _mean(values) -> float:
    values = list(values)
    return sum(values) / len(values) if values else 0.0


@task(name="save-progress", task_run_name="save-step{step}")
def save_progress(cfg: TrainConfig, run_id: str, step: int, database_url: str | None) -> str | None:
    """Trainer state for resume (every update); a named registry checkpoint every
    checkpoint_every updates and after the last one. Returns the registry name, if one was written."""
    handle = get_handle(cfg, run_id)
    folder = state_dir(cfg, run_id)
    updates = step + 1
    state = f"trainer-u{updates}.pt"
    handle.trainer.save_state(folder / state)
    name = None
    if updates % cfg.checkpoint_every == 0 or updates == cfg.updates:
        name = register_rl_checkpoint(cfg, run_id, handle, updates, database_url)
    with session_scope(get_engine(database_url)) as session:  # this step's rows, beside the state
        save_step(session, folder, run_id, step)
    # The pointer switches atomically, so a kill at any moment leaves a consistent (count, state) pair.
    tmp = folder / "progress.json.tmp"
    tmp.write_text(json.dumps({"updates": updates, "state": state, "run_id": run_id}))
    tmp.replace(folder / "progress.json")
    for old in folder.glob("trainer-u*"):
        if old.name not in (state, Path(state).stem):
            shutil.rmtree(old) if old.is_dir() else old.unlink()
    return name


def rl_checkpoint_name(run_id: str, updates: int) -> str:
    return f"{run_id}-u{updates}"


def final_checkpoint(cfg: TrainConfig, run_id: str, updates: int, database_url: str | None) -> str:
    """The registry checkpoint after the run's last update: written on schedule after
    train.updates, registered here when the rollout budget ended training earlier."""
    name = rl_checkpoint_name(run_id, updates)
    if not checkpoint_path(name).exists():
        name = register_rl_checkpoint(cfg, run_id, get_handle(cfg, run_id), updates, database_url)
    return name


def register_rl_checkpoint(
    cfg: TrainConfig, run_id: str, handle: TrainHandle, updates: int, database_url: str | None
) -> str:
    name, parent = rl_checkpoint_name(run_id, updates), init_checkpoint(cfg)
    meta = {
        "name": name,
        "kind": "rl",
        "run_id": run_id,
        "parent": parent,
        "step": updates,
        "mode": cfg.mode,
        "config": cfg.model_dump(mode="json"),
    }
    save_checkpoint(handle.trainer.export_model(), handle.policy.tokenizer, name, meta)
    with session_scope(get_engine(database_url)) as session:
        session.merge(
            Checkpoint(
                id=name,
                run_id=run_id,
                kind="rl",
                parent_id=parent,
                base_model=parent,
                path=str(checkpoint_path(name).resolve()),
                step=updates,
                provenance={"mode": cfg.mode, "config": cfg.model_dump(mode="json")},
                metrics={},
            )
        )
    return name


@task(name="paired-validation", task_run_name="validate-step{step}")
def paired_validation(
    cfg: TrainConfig, run_id: str, step: int, val_task_ids: list[str], database_url: str | None
) -> dict:
    """Frozen policy; H0 and every pool harness (H0 alone with validation.harnesses h0) on the
    same validation tasks (k each).

    Stores one group per (harness, task) with role 'reanchor' and one Evaluation per harness
    (routing 'reanchor', metrics: step, success rate, solved task ids). Already recorded for
    this step (a resumed run): read back instead of re-run."""
    h0, pool, _ = harness_sets(cfg)
    harnesses = list({h.id: h for h in ([h0] if cfg.validation.harnesses == "h0" else [h0, *pool])}.values())
    eval_ids = {h.id: stable_id("reanchor", run_id, step, h.id) for h in harnesses}
    with session_scope(get_engine(database_url)) as session:
        found = session.scalars(select(Evaluation).where(Evaluation.id.in_(list(eval_ids.values())))).all()
        if len(found) == len(harnesses):
            names = {h.id: h.name for h in harnesses}
            return {"step": step, "success": {names[e.harness_id]: e.metrics["success_rate"] for e in found}}
    handle = get_handle(cfg, run_id)
    the_tasks = [bench_task(cfg.env, i) for i in val_task_ids]
    specs = [RolloutSpec(t, h, i) for h in harnesses for t in the_tasks for i in range(cfg.validation.k)]
    every = max(1, len(specs) // 10)

    def progress(done: int, total: int) -> None:  # a re-anchor is minutes of one call: say how far it is
        if done % every == 0 or done == total:
            _logger().info("re-anchor step %d: %d/%d validation episodes finished", step, done, total)

    with torch.no_grad():
        results = run_rollouts(
            handle.policy, specs, env_factory(cfg.env), step_sampling(cfg, step, 2), cfg.env.max_rounds, progress
        )
    success: dict[str, float] = {}
    with session_scope(get_engine(database_url)) as session:
        for h in harnesses:
            mine = [r for r in results if r.harness_id == h.id]
            for t in the_tasks:
                group = build_group(
                    run_id=run_id,
                    step=step,
                    bench_task_id=t.id,
                    harness_id=h.id,
                    seed=cfg.seed,
                    role=Role.REANCHOR,
                    checkpoint=f"{run_id}@{step}",
                    results=[r for r in mine if r.bench_task_id == t.id],
                )
                store.replace_group(session, group)
            rate = _mean(r.verdict.success for r in mine)
            success[h.name] = rate
            store.record_evaluation(
                session,
                Evaluation(
                    id=eval_ids[h.id],
                    run_id=run_id,
                    benchmark=cfg.env.benchmark,
                    split=cfg.validation.split,
                    harness_id=h.id,
                    routing="reanchor",
                    k=cfg.validation.k,
                    n_seeds=1,
                    n_bench_tasks=len(the_tasks),
                    metrics={
                        "step": step,
                        "success_rate": rate,
                        "solved": sorted({r.bench_task_id for r in mine if r.verdict.success}),
                    },
                ),
            )
        measured_pool = [h for h in harnesses if h.id != h0.id]  # a sibling gets a profile only when measured
        profiles = store_profiles(
            session, cfg, run_id, step, h0, measured_pool, paired_records(results, {t.id: t for t in the_tasks})
        )
    return {"step": step, "success": success, "profiles": profiles}


@task(name="finish-train-run")
def finish_train_run(
    cfg: TrainConfig, run_id: str, final_reanchor: dict, database_url: str | None, updates: int | None = None
) -> dict:
    """`updates`: the updates the run made (train.updates unless the rollout budget ended it sooner)."""
    updates = cfg.updates if updates is None else updates
    tracking.log_metrics(
        run_id,
        cfg.wandb,
        cfg.model_dump(mode="json"),
        {f"reanchor/{k}_success": v for k, v in final_reanchor["success"].items()},
        updates,
    )
    with session_scope(get_engine(database_url)) as session:
        save_step(session, state_dir(cfg, run_id), run_id, updates)  # the final re-anchor's rows
        store.finish_run(session, run_id, "completed")
        rows = session.scalars(select(TrainStep).where(TrainStep.run_id == run_id).order_by(TrainStep.step)).all()
        history = [{"step": r.step, **r.metrics} for r in rows]
    tracking.finish(run_id)
    return {"run_id": run_id, "history": history}
