"""Cost of one GRPO update: seconds per phase, training tokens/s and peak memory.

One update on 8 sequences of 1,024 tokens (4 turns each: 160 context tokens, loss mask 0, then
96 sampled tokens, loss mask 1; advantages +1/-1), for several trainer settings side by side.
Each setting runs in its own process so its peak resident memory (ru_maxrss) is its own.

Run: .venv/bin/python benchmarks/train_step.py [--model smollm2-135m] [--device cpu]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import subprocess
import sys
import time

os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

SETTINGS = {
    "micro 2": {"micro_batch": 2},
    "micro 1": {"micro_batch": 1},
    "micro 2 + grad ckpt": {"micro_batch": 2, "gradient_checkpointing": True},
}


def sequences(vocab: int, n: int = 8, turns: int = 4, ctx: int = 160, gen: int = 96):
    import random

    from rl.train_batch import TrainSequence

    rng = random.Random(0)
    out = []
    for i in range(n):
        ids = [rng.randrange(100, vocab - 1) for _ in range(turns * (ctx + gen))]
        mask = ([0] * ctx + [1] * gen) * turns
        out.append(TrainSequence(ids, mask, [math.nan] * len(ids), 1.0 if i % 2 == 0 else -1.0))
    return out


def one(model_name: str, device: str, setting: dict) -> dict:
    import torch

    from rl.trainer import TorchTrainer, TrainerSettings
    from rl.transformers_policy import TransformersPolicy

    policy = TransformersPolicy(model_name, device=device, shared=False)
    trainer = TorchTrainer(policy.model, TrainerSettings(lr=1e-6, **setting), policy.pad_id)
    seqs = sequences(policy.model.config.vocab_size)
    if device.startswith("cuda"):
        torch.cuda.reset_peak_memory_stats()
    started = time.perf_counter()
    stats = trainer.update(seqs)
    stats["wall_s"] = time.perf_counter() - started
    stats["peak_rss_gib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    if device.startswith("cuda"):
        stats["peak_cuda_gib"] = torch.cuda.max_memory_allocated() / 2**30
    stats["tokens_per_s"] = stats["trained_tokens"] / stats["seconds_update"]
    return stats


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--only", default=None, help=argparse.SUPPRESS)  # child process: one setting
    args = parser.parse_args()
    if args.only:
        print(json.dumps(one(args.model, args.device, SETTINGS[args.only])))
        return
    print(f"one GRPO update on 8 x 1024 tokens ({8 * 384} of them sampled, loss mask 1), model {args.model}, {args.device}")
    header = f"{'setting':22} {'old lp s':>9} {'fwd+bwd s':>10} {'optim s':>8} {'update s':>9} {'tok/s':>7} {'peak GiB':>9}"
    print(header)
    for name in SETTINGS:
        out = subprocess.run([sys.executable, __file__, "--model", args.model, "--device", args.device, "--only", name],
                             capture_output=True, text=True)
        if out.returncode != 0:
            print(f"{name:22} failed: {out.stderr.strip().splitlines()[-1] if out.stderr.strip() else out.returncode}")
            continue
        s = json.loads(out.stdout.strip().splitlines()[-1])
        peak = s.get("peak_cuda_gib", s["peak_rss_gib"])
        print(f"{name:22} {s['seconds_old_logprobs']:9.1f} {s['seconds_forward_backward']:10.1f} "
              f"{s['seconds_optimizer']:8.2f} {s['seconds_update']:9.1f} {s['tokens_per_s']:7.0f} {peak:9.2f}", flush=True)


if __name__ == "__main__":
    main()
