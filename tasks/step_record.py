"""What a training run records (flows/train.py): its run row at the start, each update's signals
and resume state, its final registry checkpoint and its end.

Every write is keyed by a deterministic id (the run's, the step's, the checkpoint's name), so a
resumed run that redoes a step replaces its rows.
"""

from __future__ import annotations

from prefect import task
from prefect.cache_policies import NO_CACHE
from sqlalchemy import select

from configs.schema import TrainConfig
from db import store
from db.engine import session_scope
from db.ids import stable_id
from db.journal import save_step
from db.models import TrainStep
from rl.checkpoints import checkpoint_path
from rl.model_store import weights_of
from rl.modes import RESCUE_ROLES
from rl.signals import GroupOutcome, step_signals
from tasks import tracking
from tasks.records import record_bench_tasks, record_harnesses
from tasks.resources import get_engine
from tasks.run_identity import RunContext, harness_sets, init_checkpoint, task_sets, train_run_id
from tasks.train_checkpoints import (
    register_rl_checkpoint,
    rl_checkpoint_name,
    state_dir,
    trainer_state_name,
    write_progress,
)
from tasks.train_handle import get_handle


@task(name="register-train-run")
def register_train_run(cfg: TrainConfig, database_url: str | None, prefect_flow_run_id: str | None) -> RunContext:
    """The run row, its harnesses and benchmark tasks; returns the run's context (its harnesses
    and task ids, loaded here once for the whole run)."""
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
    return RunContext(run_id, h0, pool, mixture, [t.id for t in train], [t.id for t in val])


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
    state = trainer_state_name(updates)
    handle.trainer.save_state(folder / state)
    name = None
    if updates % cfg.checkpoint_every == 0 or updates == cfg.updates:
        model, tokenizer = handle.trainer.export_model(), handle.policy.tokenizer
        name = register_rl_checkpoint(cfg, run_id, model, tokenizer, updates, database_url)
    with session_scope(get_engine(database_url)) as session:  # this step's rows, beside the state
        save_step(session, folder, run_id, step)
    write_progress(folder, run_id, updates, state)
    return name


def final_checkpoint(cfg: TrainConfig, run_id: str, updates: int, database_url: str | None) -> str:
    """The registry checkpoint after the run's last update: written on schedule after
    train.updates, registered here when the rollout budget ended training earlier."""
    name = rl_checkpoint_name(run_id, updates)
    if not checkpoint_path(name).exists():
        handle = get_handle(cfg, run_id)
        model, tokenizer = handle.trainer.export_model(), handle.policy.tokenizer
        name = register_rl_checkpoint(cfg, run_id, model, tokenizer, updates, database_url)
    return name


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
