"""Training flow: GRPO with complementary harness rescue, and its baselines (docs/method.md §3).

The run's harnesses (H0, pool, mixture) and task sets are loaded once, when it registers
(tasks/run_identity.py RunContext), and handed to every update's tasks and re-anchors.
For each update step s (re-anchor first when s is a multiple of reanchor_every, once more at
the end):
  1. a batch of training tasks (seeded order, the same on every resume);
  2. K rollouts per task under H0; a group with no success is dead, and by mode:
     harness_s  -> the router's top K siblings run once each, and that group replaces it;
     h0_rescue  -> K fresh rollouts under H0 replace it;   grpo -> it stays;
     fixed_mixture -> every group's K rollouts were spread over a fixed harness set;
     harness_bandit -> every group ran under the one harness UCB1 chose for the update;
     harnessx -> every group was spread over H0 + pool; earlier groups from a replay buffer join;
  3. group advantages and one clipped-surrogate update of the policy;
  4. signals to the database and W&B; trainer state saved for resume; a named checkpoint every
     checkpoint_every updates.
With a rollout_budget, an update starts only if its most expensive outcome (every group dead and
rescued) keeps the training rollouts within it; otherwise training ends there (equal budgets).
Re-anchoring freezes the policy and runs paired validation of H0 and every pool harness on
the same validation tasks, recording each one's success rate.

Departure from the paper at CPU scale: a 135M model with a supervised warm start
(`warm_start:`) on a generated, graded training split; the paper uses 4B+ instruct models.

Run: hs train --config configs/train_dbbench_smol.yaml --mode harness_s
"""

from __future__ import annotations

from prefect import flow, get_run_logger
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from configs.schema import TrainConfig
from flows import artifacts
from flows.hooks import mark_failed_on_failure
from flows.opening import open_run
from rl.memory import release_memory
from tasks.phase_times import timed
from tasks.reanchor import paired_validation
from tasks.rollout_groups import (
    dead_groups,
    record_groups,
    replay_groups,
    sample_first_groups,
    sample_rescue_groups,
)
from tasks.run_identity import RunContext, batch_for_step, init_checkpoint, train_run_id
from tasks.step_record import final_checkpoint, finish_train_run, record_step, register_train_run, save_progress
from tasks.train_checkpoints import budget_allows, check_recorded_updates, completed_updates
from tasks.train_handle import release_handle, update_policy


def _progress() -> Progress:
    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("valid groups {task.fields[valid]:.2f} rescue ok {task.fields[rescue]:.2f}"),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
    )


@flow(name="reanchor", flow_run_name="reanchor-step{step}")
def reanchor(config: TrainConfig, run: RunContext, step: int, database_url: str | None = None) -> dict:
    """Freeze the policy; paired validation of every pool harness and H0 on the same tasks."""
    result = paired_validation(config, run, step, database_url)
    get_run_logger().info(
        "re-anchor at step %d: %s", step, ", ".join(f"{k} {v:.2f}" for k, v in result["success"].items())
    )
    return result


@flow(
    name="train",
    flow_run_name="train-{config.name}-{config.mode}",
    on_failure=[
        mark_failed_on_failure(TrainConfig, train_run_id),
        artifacts.failure_artifact(TrainConfig, train_run_id),
    ],
    on_crashed=[artifacts.failure_artifact(TrainConfig, train_run_id)],
)
def train(config: TrainConfig, database_url: str | None = None) -> dict:
    cfg = config
    logger = get_run_logger()
    run = open_run(cfg, register_train_run, database_url, warm_start=True)  # warm start, run row, owner
    run_id = run.run_id  # `run`: the run's harnesses and task ids, loaded once for every update
    if check_recorded_updates(cfg, run_id, database_url):  # resumed into a new or emptied database
        logger.info("run %s: its finished updates were written back from %s", run_id, cfg.state_dir)
    start = completed_updates(cfg, run_id)
    logger.info(
        "run %s from %s: updates %d..%d, %d training tasks, mode %s",
        run_id,
        init_checkpoint(cfg),
        start,
        cfg.updates - 1,
        len(run.train_task_ids),
        cfg.mode,
    )
    published = artifacts.TrainingProgress(run_id, start, cfg.updates)  # the UI's progress bar
    with _progress() as bar:
        bar_id = bar.add_task("updates", total=cfg.updates, completed=start, valid=0.0, rescue=0.0)
        for step in range(start, cfg.updates):
            if not budget_allows(cfg, run_id, step, database_url):  # the next update could cross rollout_budget
                logger.info(
                    "run %s: training rollout budget %d reached after %d updates", run_id, cfg.rollout_budget, step
                )
                break
            reanchored = None
            if step % cfg.reanchor_every == 0:  # freeze the policy, re-measure every harness on validation
                with timed("re-anchors"):
                    reanchored = reanchor(cfg, run, step, database_url)
            batch = batch_for_step(run.train_task_ids, cfg.seed, cfg.batch_tasks, step)
            with timed("collections"):
                first = sample_first_groups(cfg, run, step, batch, database_url)  # K rollouts per task under H0
                dead = dead_groups(first)  # no success: no GRPO signal
                rescue = sample_rescue_groups(cfg, run, step, dead, database_url)  # by mode: router-chosen siblings
            with timed("records"):
                groups = record_groups(cfg, run_id, step, first, rescue, database_url)  # a rescue replaces its dead one
            with timed("collections"):
                replayed = replay_groups(cfg, run_id, step, database_url)  # harnessx: earlier groups from its buffer
                release_memory(
                    collect=False
                )  # the decode buffers and logits of the collection: back to the OS before the update
            with timed("updates"):
                update = update_policy(cfg, run_id, step, [*groups.trained, *replayed])  # advantages, clipped update
            with timed("records"):
                signals = record_step(cfg, run_id, step, groups, dead, update, reanchored, database_url, replayed)
                save_progress(cfg, run_id, step, database_url)  # trainer state + this step's rows, for resume
            published.advance(step + 1)
            bar.update(
                bar_id,
                completed=step + 1,
                valid=signals["train/valid_group_ratio"],
                rescue=signals["rollout/rescue_success"],
            )
    updates = completed_updates(cfg, run_id)  # train.updates, or fewer when the rollout budget ended training
    with timed("re-anchors"):
        final_reanchor = reanchor(cfg, run, updates, database_url)
    with timed("records"):
        checkpoint = final_checkpoint(cfg, run_id, updates, database_url)
    summary = finish_train_run(cfg, run_id, final_reanchor, database_url, updates)
    release_handle(run_id)  # the trained weights live on as the registry checkpoint; free model and optimizer
    result = {**summary, "final_reanchor": final_reanchor, "checkpoint": checkpoint}
    artifacts.publish_training(cfg, result, published)  # the per-update table
    return result
