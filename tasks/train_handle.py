"""The policy and trainer of a training run, held in this worker process, and the GRPO update.

The policy and its trainer live in this worker process for the whole run (a `TrainHandle` per
run id): rollouts sample from the policy the trainer updates (or its bf16 copy, refreshed
after every update). An update's groups reach it in memory (tasks/rollout_groups.py); the
database keeps every trajectory as the record and the resume source. A resumed run's handle
loads the trainer state its last update saved (tasks/train_checkpoints.py).
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import asdict, dataclass

import torch
from prefect import get_run_logger, task
from prefect.cache_policies import NO_CACHE
from prefect.exceptions import MissingContextError

from configs.schema import TrainConfig
from rl.data_parallel import launched_world
from rl.grpo import group_advantages
from rl.memory import release_memory
from rl.precision import resolve_dtype, rollout_copy, set_aside_weights, sync_weights
from rl.train_batch import sequences_from_turns
from rl.trainer import TorchTrainer, TrainerSettings
from tasks.run_identity import TrainingError, init_checkpoint
from tasks.train_checkpoints import read_progress, state_dir

_LOCK = threading.Lock()


@dataclass
class TrainHandle:
    """The rollout policy and the trainer of one run. With a bf16 rollout copy, the copy's
    memory is set aside during an update and `refresh` copies the trained weights into it
    (after every update and after a resume)."""

    policy: object
    trainer: TorchTrainer

    def update(self, seqs: list) -> dict:
        if self.policy.model is not self.trainer.model:
            set_aside_weights(self.policy.model)  # the update's peak holds gradients and optimizer state instead
        try:
            stats = self.trainer.update(seqs)
        finally:
            started = time.perf_counter()
            self.refresh()  # the next rollouts sample from the new weights (the old ones after a failed update)
        return {**stats, "seconds_refresh": time.perf_counter() - started}

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
        micro_tokens=t.micro_tokens,
        logprob_chunk=t.logprob_chunk,
        temperature=cfg.sampling.temperature or 1.0,
        gradient_checkpointing=t.gradient_checkpointing,
        lora=t.lora,
        lora_rank=t.lora_rank,
        dtype=resolve_dtype(t.dtype, t.device),
        optimizer_aside=t.backend == "torch" and t.device == "cpu",  # its saved state is on disk after every update
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


# -- the update -----------------------------------------------------------------------------
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
    stats = handle.update(seqs)
    n_sequences = len(seqs)
    del seqs
    release_memory(collect=False)  # the update's activations and gradients: back to the OS before the next collection
    run_logger().info(
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
        "sequences": n_sequences,
    }


def run_logger():
    """The Prefect run logger inside a flow, the module logger when a task runs bare (`.fn`)."""
    try:
        return get_run_logger()
    except MissingContextError:
        return logging.getLogger(__name__)
