"""Cost of one GRPO update: seconds per phase, training tokens/s and peak memory.

One update on 8 sequences of 1,024 tokens (4 turns each: 160 context tokens, loss mask 0, then
96 sampled tokens, loss mask 1; advantages +1/-1), for several trainer settings side by side.
Each setting runs in its own process so its peak resident memory (ru_maxrss, or CUDA's peak
allocation on a GPU) is its own.

Run: .venv/bin/python benchmarks/train_step.py [--model smollm2-135m] [--device cpu]
GPU check on a random-initialised model of realistic shape (no hub needed):
     python benchmarks/train_step.py --model random:qwen2.5-0.5b --device cuda --dtype bfloat16 --backends torch,deepspeed
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


# Qwen2.5 shapes (hidden, layers, heads, kv heads, MLP, vocab), from their published configs.
RANDOM_SHAPES = {
    "tiny": (64, 2, 4, 2, 128, 1024),
    "qwen2.5-0.5b": (896, 24, 14, 2, 4864, 151936),
    "qwen2.5-1.5b": (1536, 28, 12, 2, 8960, 151936),
}


def build_model(model_name: str, device: str, dtype: str):
    """(model, pad id): a registry/built-in model, or 'random:<shape>' initialised from a config."""
    import torch

    if model_name.startswith("random:"):
        from transformers import Qwen2Config, Qwen2ForCausalLM

        hidden, layers, heads, kv, mlp, vocab = RANDOM_SHAPES[model_name.split(":", 1)[1]]
        torch.manual_seed(0)
        cfg = Qwen2Config(hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=heads,
                          num_key_value_heads=kv, intermediate_size=mlp, vocab_size=vocab, max_position_embeddings=4096,
                          tie_word_embeddings=True)
        return Qwen2ForCausalLM(cfg).to(dtype=getattr(torch, dtype), device=device).eval(), 0
    from rl.transformers_policy import TransformersPolicy

    policy = TransformersPolicy(model_name, device=device, dtype=dtype, shared=False)
    return policy.model, policy.pad_id


def one(model_name: str, device: str, dtype: str, backend: str, setting: dict) -> dict:
    import torch

    from rl.trainer import TorchTrainer, TrainerSettings

    model, pad_id = build_model(model_name, device, dtype)
    settings = TrainerSettings(lr=1e-6, **setting)
    if backend == "deepspeed":
        from rl.deepspeed_trainer import DeepSpeedTrainer

        trainer = DeepSpeedTrainer(model, settings, pad_id, zero_stage=2, bf16=dtype == "bfloat16")
    else:
        trainer = TorchTrainer(model, settings, pad_id)
    seqs = sequences(model.config.vocab_size)
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
    parser.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
    parser.add_argument("--backends", default="torch", help="comma list of trainer backends: torch,deepspeed")
    parser.add_argument("--only", default=None, help=argparse.SUPPRESS)  # child process: "backend|setting"
    args = parser.parse_args()
    if args.only:
        backend, setting = args.only.split("|")
        print(json.dumps(one(args.model, args.device, args.dtype, backend, SETTINGS[setting])))
        return
    print(f"one GRPO update on 8 x 1024 tokens ({8 * 384} of them sampled, loss mask 1), model {args.model}, "
          f"{args.device}, {args.dtype}")
    peak_kind = "CUDA peak GiB" if args.device.startswith("cuda") else "peak RSS GiB"
    print(f"{'backend':9} {'setting':22} {'old lp s':>9} {'fwd+bwd s':>10} {'optim s':>8} {'update s':>9} {'tok/s':>7} "
          f"{peak_kind:>13}")
    for backend in args.backends.split(","):
        for name in SETTINGS:
            out = subprocess.run([sys.executable, __file__, "--model", args.model, "--device", args.device, "--dtype",
                                  args.dtype, "--only", f"{backend}|{name}"], capture_output=True, text=True)
            if out.returncode != 0:
                last = out.stderr.strip().splitlines()[-1] if out.stderr.strip() else str(out.returncode)
                print(f"{backend:9} {name:22} failed: {last}")
                continue
            s = json.loads(out.stdout.strip().splitlines()[-1])
            peak = s.get("peak_cuda_gib", s["peak_rss_gib"])
            print(f"{backend:9} {name:22} {s['seconds_old_logprobs']:9.1f} {s['seconds_forward_backward']:10.1f} "
                  f"{s['seconds_optimizer']:8.2f} {s['seconds_update']:9.1f} {s['tokens_per_s']:7.0f} {peak:13.2f}",
                  flush=True)


if __name__ == "__main__":
    main()
