"""DeepSpeed ZeRO trainer backend (several GPUs; also runs on CPU in one process for tests).

Same update as TorchTrainer (rl/trainer.py): old log-probs, micro-batched clipped surrogate
normalised by the whole update's mask-1 tokens, one optimizer step. DeepSpeed owns the
optimizer (AdamW), the gradient clip and ZeRO partitioning (stage from config). Gradient
accumulation is caller-owned (`managed_gradient_accumulation: false`): every backward only
accumulates, and `step()` is the boundary, because an update's number of micro-batches
varies with how many groups carry signal.

Launch several processes with the `deepspeed` launcher (it sets RANK, WORLD_SIZE, MASTER_ADDR);
a single process without them gets a one-rank group.
"""

from __future__ import annotations

import os
from pathlib import Path

import torch

from rl.memory import checkpoint_activations
from rl.trainer import TorchTrainer, TrainerSettings, wrap_lora

CHECKPOINT_TAG = "state"  # not "latest": DeepSpeed writes a file of that name beside the tag folder


def ds_config(settings: TrainerSettings, zero_stage: int, bf16: bool = False) -> dict:
    return {
        "train_micro_batch_size_per_gpu": settings.micro_batch,
        "gradient_accumulation_steps": 1,
        "managed_gradient_accumulation": False,
        "gradient_clipping": settings.grad_clip,
        "optimizer": {
            "type": "AdamW",
            "params": {"lr": settings.lr, "weight_decay": settings.weight_decay, "torch_adam": True},
        },
        "zero_optimization": {"stage": zero_stage},
        "bf16": {"enabled": bf16},
        "steps_per_print": 10**9,
        "wall_clock_breakdown": False,
    }


def _single_process_env() -> None:
    for key, value in {
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": os.environ.get("MASTER_PORT", "29511"),
        "RANK": "0",
        "LOCAL_RANK": "0",
        "WORLD_SIZE": "1",
    }.items():
        os.environ.setdefault(key, value)


class DeepSpeedTrainer(TorchTrainer):
    backend = "deepspeed"

    def __init__(self, model, settings: TrainerSettings, pad_id: int, zero_stage: int = 2, bf16: bool = False):
        import deepspeed

        _single_process_env()
        self.settings, self.pad_id, self.updates = settings, pad_id, 0
        if settings.lora:
            model = wrap_lora(model, settings.lora_rank)
        if settings.gradient_checkpointing:
            checkpoint_activations(model)
        params = [p for p in model.parameters() if p.requires_grad]
        self.engine, self.optimizer, _, _ = deepspeed.initialize(
            model=model, model_parameters=params, config=ds_config(settings, zero_stage, bf16)
        )
        self.model = self.engine.module
        self.params = params

    def _zero_grad(self) -> None:
        self.engine.zero_grad()

    def _backward(self, loss: torch.Tensor) -> None:
        self.engine.backward(loss, scale_wrt_gas=False)

    def _step(self) -> float:
        self.engine.step()
        norm = self.engine.get_global_grad_norm()
        return float(norm) if norm is not None else 0.0

    def save_state(self, path: Path) -> None:
        """DeepSpeed's own checkpoint layout (partitioned optimizer state: one file per rank) in a
        folder beside `path`; `path` itself (written by rank 0) points to it."""
        folder = path.with_suffix("")
        self.engine.save_checkpoint(str(folder), tag=CHECKPOINT_TAG, client_state={"updates": self.updates})
        if self.engine.global_rank == 0:
            path.write_text(str(folder))

    def load_state(self, path: Path) -> None:
        _, client = self.engine.load_checkpoint(path.read_text().strip(), tag=CHECKPOINT_TAG)
        self.updates = int((client or {}).get("updates", 0))
