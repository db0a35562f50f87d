"""Two data-parallel ranks on CPU (gloo), launched through torchrun by test_data_parallel.py.

Rank 0 drives a DataParallelTrainer exactly as the training flow does (update, an update with no
signal, save, stop); rank 1 serves. Each rank writes its final weights; rank 0 also writes its
stats and the weights of the same update done by one TorchTrainer process on the whole batch.
Usage: torchrun --nproc_per_node 2 tests/rl/dp_ranks.py OUT_DIR ZERO_STAGE
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).parent))
from test_trainer import batch, tiny_model  # noqa: E402

from rl.data_parallel import DataParallelTrainer, init_process_group, launched_world, serve_worker, stop_workers  # noqa: E402
from rl.trainer import TorchTrainer, TrainerSettings  # noqa: E402

SETTINGS = TrainerSettings(lr=1e-2, micro_batch=1)
SIGNAL = (1.0, -1.0, 0.5)  # three micro-batches over two ranks: rank 1 runs one padding chunk


def gloo_threads() -> int:
    """This process's gloo worker threads (Linux names them pt_gloo_runloop)."""
    tasks = Path("/proc/self/task")
    return sum((t / "comm").read_text().strip() == "pt_gloo_runloop" for t in tasks.iterdir())


def main(out: Path, stage: int) -> None:
    rank, _ = launched_world()
    init_process_group("cpu")
    built = {}

    def build(announce: dict) -> DataParallelTrainer:
        built["trainer"] = DataParallelTrainer(tiny_model(), SETTINGS, 0, zero_stage=announce["zero_stage"])
        return built["trainer"]

    if rank == 0:
        trainer = DataParallelTrainer(tiny_model(), SETTINGS, 0, zero_stage=stage, announce={"zero_stage": stage})
        stats = trainer.update(batch(advantages=SIGNAL))
        idle = trainer.update(batch(advantages=(0.0, 0.0)))
        trainer.save_state(out / "state.pt")
        in_group = gloo_threads()
        stop_workers()
        left = not torch.distributed.is_initialized()
        threads = {"in_group": in_group, "left": gloo_threads()}
        summary = {"first": stats, "idle": idle, "updates": trainer.updates, "left": left, "gloo_threads": threads}
        (out / "stats.json").write_text(json.dumps(summary))
        reference = TorchTrainer(tiny_model(), SETTINGS, 0)  # one process, the whole batch
        reference.update(batch(advantages=SIGNAL))
        torch.save({k: v.detach().clone() for k, v in reference.model.named_parameters()}, out / "reference.pt")
    else:
        updates = serve_worker(build)
        trainer = built["trainer"]
        left = not torch.distributed.is_initialized()
        (out / "worker.json").write_text(json.dumps({"updates": updates, "left": left}))
    torch.save({k: v.detach().clone() for k, v in trainer.model.named_parameters()}, out / f"rank{rank}.pt")


if __name__ == "__main__":
    main(Path(sys.argv[1]), int(sys.argv[2]))
