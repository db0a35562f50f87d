"""Data-parallel GRPO updates over several processes: DeepSpeed ZeRO 0-2, gloo on CPU, NCCL on GPUs.

Launch every rank with the same command, e.g.

    torchrun --nproc_per_node 8 -m cli.main train --config configs/train_dbbench_smol.yaml \
        --set trainer.backend=deepspeed --set trainer.device=cuda

Rank 0 does everything but the gradient work of the other ranks: the Prefect flow, rollouts,
database writes, checkpoints. Each trainer call it makes (init, update, save, load) is first
broadcast to the other ranks as a small command, and they run the same call; `stop` ends them.
Every rank holds full weights (ZeRO <= 2 partitions optimizer state and gradients only), so
rank 0 samples rollouts from its own copy. The update's micro-batches are dealt round-robin;
a rank with fewer runs zero-weighted padding so every rank does the same number of backward
passes (ZeRO-2 reduces inside backward). DeepSpeed averages gradients over ranks, so each
rank's loss is scaled by the world size: the step equals the single-process full-batch step.
The state folder must be on storage all ranks share (DeepSpeed writes one optimizer shard per rank).
"""

from __future__ import annotations

import math
import os
from datetime import timedelta
from pathlib import Path
from typing import Callable

import torch
import torch.distributed as dist

from rl.deepspeed_trainer import DeepSpeedTrainer
from rl.train_batch import TrainSequence


def launched_world() -> tuple[int, int]:
    """(rank, world size) as set by torchrun / the deepspeed launcher; (0, 1) when run plainly."""
    return int(os.environ.get("RANK", "0")), int(os.environ.get("WORLD_SIZE", "1"))


def init_process_group(device: str) -> None:
    """Join the launcher's process group. The timeout is long because the other ranks wait in a
    broadcast while rank 0 rolls out (or builds the warm start); HS_DIST_TIMEOUT_MIN overrides it."""
    if dist.is_initialized():
        return
    gpu = device.startswith("cuda")
    if gpu:
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    minutes = float(os.environ.get("HS_DIST_TIMEOUT_MIN", "480"))
    _deepspeed_comm()  # imported before the group exists: see there
    dist.init_process_group("nccl" if gpu else "gloo", timeout=timedelta(minutes=minutes))


def _deepspeed_comm():
    """DeepSpeed's communication module (None without DeepSpeed), imported before the group exists.
    Its backend's barrier methods take the world group as a default argument, bound at first import:
    imported after init, they keep the group alive past destroy_process_group, and its gloo threads
    are then torn down during interpreter exit, where one still releasing a tensor can abort the
    process ("terminate called without an active exception"). Imported first, the default is None
    and the group ends in _leave_group."""
    try:
        import deepspeed.comm
    except ImportError:  # without DeepSpeed, building the DataParallelTrainer fails and says so
        return None
    return deepspeed.comm


def _broadcast(message: tuple | None) -> tuple:
    box = [message]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def _is_leader() -> bool:
    return not dist.is_initialized() or dist.get_rank() == 0


class DataParallelTrainer(DeepSpeedTrainer):
    """DeepSpeedTrainer whose calls on rank 0 drive the same calls on every other rank.

    `announce` (rank 0 only) is what the other ranks need to build their copy of the model and
    trainer; it is handed to serve_worker's `build` function."""

    backend = "deepspeed-dp"

    def __init__(
        self, model, settings, pad_id: int, zero_stage: int = 2, bf16: bool = False, announce: dict | None = None
    ):
        if zero_stage > 2:
            raise ValueError("data-parallel training needs zero_stage <= 2: rank 0 samples rollouts from full weights")
        if _is_leader():
            _broadcast(("init", announce or {}))
        super().__init__(model, settings, pad_id, zero_stage=zero_stage, bf16=bf16)
        self.rank, self.world = dist.get_rank(), dist.get_world_size()

    def _shard(self, chunks):
        if not chunks:
            return []
        per_rank = math.ceil(len(chunks) / self.world)
        mine = [(chunk, float(self.world)) for chunk in chunks[self.rank :: self.world]]
        return mine + [(chunks[0], 0.0)] * (per_rank - len(mine))

    def _sum_over_ranks(self, values: list[float]) -> list[float]:
        device = self.engine.device if self.engine.device.type == "cuda" else torch.device("cpu")
        t = torch.tensor(values, dtype=torch.float64, device=device)
        dist.all_reduce(t)
        return t.tolist()

    def update(self, seqs: list[TrainSequence]) -> dict[str, float]:
        if self.rank == 0:
            _broadcast(("update", seqs))
        return super().update(seqs)

    def save_state(self, path: Path) -> None:
        if self.rank == 0:
            _broadcast(("save", str(path)))
        super().save_state(path)

    def load_state(self, path: Path) -> None:
        if self.rank == 0:
            _broadcast(("load", str(path)))
        super().load_state(path)


def stop_workers() -> None:
    """Rank 0: release the other ranks (they exit their serve loop) and leave the group; a no-op
    without a group."""
    if dist.is_initialized() and dist.get_rank() == 0 and dist.get_world_size() > 1:
        _broadcast(("stop", None))
        _leave_group()


def _leave_group() -> None:
    """Every rank: wait for the others, then tear the group down. A rank that exits with the group
    still up can abort at interpreter exit while its communication threads are running."""
    dist.barrier()
    ds_comm = _deepspeed_comm()
    if ds_comm is not None and ds_comm.is_initialized():
        ds_comm.destroy_process_group()  # also drops DeepSpeed's own copies of the groups
    else:
        dist.destroy_process_group()


def serve_worker(build: Callable[[dict], DataParallelTrainer]) -> int:
    """Ranks > 0: run the commands rank 0 broadcasts until `stop`; returns the updates done."""
    trainer = None
    while True:
        command, arg = _broadcast(None)
        if command == "init":
            trainer = build(arg)
        elif command == "update":
            trainer.update(arg)
        elif command == "save":
            trainer.save_state(Path(arg))
        elif command == "load":
            trainer.load_state(Path(arg))
        elif command == "stop":
            _leave_group()
            return trainer.updates if trainer else 0
        else:
            raise RuntimeError(f"unknown command from rank 0: {command!r}")


def build_worker_trainer(announce: dict) -> DataParallelTrainer:
    """A non-zero rank's copy of rank 0's model and trainer, from rank 0's `announce`."""
    from rl.trainer import TrainerSettings
    from rl.transformers_policy import TransformersPolicy

    policy = TransformersPolicy(announce["model"], device=announce["device"], shared=False)
    return DataParallelTrainer(
        policy.model, TrainerSettings(**announce["settings"]), policy.pad_id, zero_stage=announce["zero_stage"]
    )
