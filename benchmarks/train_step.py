"""Cost of one GRPO update: seconds per phase, training tokens/s, share of the matmul peak and
peak memory, for the previous default and the new one side by side in one run.

One update on 8 sequences of 1,024 tokens (4 turns each: 160 context tokens, loss mask 0, then
96 sampled tokens, loss mask 1; advantages +1/-1). Each setting runs in its own process so its
peak resident memory (VmHWM, or CUDA's peak allocation on a GPU) is its own, on the allocator `hs`
runs on (jemalloc where the system has it, cli/launch.py; a row named "..., glibc" on glibc's). The first row is
the update as it was before issue 16: float32, a separate old-log-prob pass, micro-batch 2.
The share of peak divides the update's matmul work (6 x parameters x tokens for forward and
backward, plus attention) by its seconds and by a bf16 2048^3 matmul measured in this run. The
rows run interleaved (A, B, C, A, B, C, ...) for `--rounds` rounds, each in a fresh process, and
each row's median is reported beside the machine's measured limits (benchmarks/machine.py).

Run: .venv/bin/python benchmarks/train_step.py [--model smollm2-135m] [--device cpu]
GPU check on a random-initialised model of realistic shape (no hub needed):
     python benchmarks/train_step.py --model random:qwen2.5-0.5b --device cuda --backends torch,deepspeed
"""

from __future__ import annotations

import argparse
import json
import math
import resource
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from machine import describe, interleaved, measure, median, spread  # noqa: E402

from cli.environment import apply_defaults  # noqa: E402

apply_defaults()  # the environment of every hs process (OpenMP threads that sleep while waiting), before torch loads

SETTINGS = {
    "fp32 + old pass, micro 2": {"micro_batch": 2, "dtype": "float32", "old_pass": True},
    "fp32, micro 2": {"micro_batch": 2, "dtype": "float32"},
    "fp32, micro 2 + grad ckpt": {"micro_batch": 2, "dtype": "float32", "gradient_checkpointing": True},
    "bf16, micro 1": {"micro_batch": 1, "dtype": "bfloat16"},
    "bf16, micro 1 + grad ckpt": {"micro_batch": 1, "dtype": "bfloat16", "gradient_checkpointing": True},
    "bf16, micro 2": {"micro_batch": 2, "dtype": "bfloat16"},
    "bf16, micro 2 + grad ckpt": {"micro_batch": 2, "dtype": "bfloat16", "gradient_checkpointing": True},
    "bf16, micro 2 + grad ckpt, glibc": {"micro_batch": 2, "dtype": "bfloat16", "gradient_checkpointing": True},
    "bf16, micro 4": {"micro_batch": 4, "dtype": "bfloat16"},
    "bf16, micro 8": {"micro_batch": 8, "dtype": "bfloat16"},
    "bf16, micro 8 + grad ckpt": {"micro_batch": 8, "dtype": "bfloat16", "gradient_checkpointing": True},
    # micro-batches by padded tokens (trainer.micro_tokens): short sequences packed, a forward's activations bounded
    "fp32, 512 tokens": {"micro_tokens": 512, "dtype": "float32"},
    "fp32, 1024 tokens": {"micro_tokens": 1024, "dtype": "float32"},
    "bf16, 512 tokens": {"micro_tokens": 512, "dtype": "bfloat16"},
    "bf16, 1024 tokens": {"micro_tokens": 1024, "dtype": "bfloat16"},
    "bf16, 2048 tokens + grad ckpt": {"micro_tokens": 2048, "dtype": "bfloat16", "gradient_checkpointing": True},
    "bf16, 4096 tokens + grad ckpt": {"micro_tokens": 4096, "dtype": "bfloat16", "gradient_checkpointing": True},
}


def sequences(vocab: int, lengths: list[int] | None = None):
    """One sequence per length (default 8 x 1,024), in turns of 160 context tokens (loss mask 0) then 96
    sampled (mask 1), the last turn cut at the length; advantages +1/-1."""
    import random

    from rl.train_batch import TrainSequence

    rng = random.Random(0)
    out = []
    for i, length in enumerate(lengths or [1024] * 8):
        ids = [rng.randrange(100, vocab - 1) for _ in range(length)]
        mask = (([0] * 160 + [1] * 96) * (length // 256 + 1))[:length]
        out.append(TrainSequence(ids, mask, [math.nan] * len(ids), 1.0 if i % 2 == 0 else -1.0))
    return out


def parse_lengths(text: str | None) -> list[int] | None:
    """'330:1110:16' -> 16 lengths evenly from 330 to 1,110; '512,1024' -> those; None -> the default."""
    if not text:
        return None
    if ":" in text:
        low, high, n = (int(x) for x in text.split(":"))
        return [round(low + (high - low) * i / max(n - 1, 1)) for i in range(n)]
    return [int(x) for x in text.split(",")]


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
        cfg = Qwen2Config(
            hidden_size=hidden,
            num_hidden_layers=layers,
            num_attention_heads=heads,
            num_key_value_heads=kv,
            intermediate_size=mlp,
            vocab_size=vocab,
            max_position_embeddings=4096,
            tie_word_embeddings=True,
        )
        return Qwen2ForCausalLM(cfg).to(dtype=getattr(torch, dtype), device=device).eval(), 0
    from rl.transformers_policy import TransformersPolicy

    policy = TransformersPolicy(model_name, device=device, dtype=dtype, shared=False)
    return policy.model, policy.pad_id


def child_environment(name: str) -> dict:
    """A row runs on the allocator `hs` runs on (jemalloc where the system has it, cli/launch.py);
    a row whose name ends in ", glibc" on glibc's."""
    import os

    from cli.launch import allocator_environment

    glibc = name.endswith(", glibc")
    environ = {k: v for k, v in os.environ.items() if not (glibc and k in ("LD_PRELOAD", "MALLOC_CONF"))}
    environ["HS_ALLOCATOR"] = "glibc" if glibc else environ.get("HS_ALLOCATOR", "jemalloc")
    return allocator_environment(environ) or environ


def peak_rss_gib() -> float:
    """This process's own peak resident set (ru_maxrss may carry a forking parent's peak)."""
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 2**20
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


def update_flops(model, seqs) -> float:
    """Forward + backward matmul work: 6 x non-embedding parameters x tokens, the vocabulary
    projection (6 x hidden x vocab per token) and attention (12 x layers x hidden x T^2 / 2)."""
    cfg = model.config
    n = sum(p.numel() for name, p in model.named_parameters() if "embed" not in name and "lm_head" not in name)
    tokens = sum(len(s.input_ids) for s in seqs)
    attention = sum(12 * cfg.num_hidden_layers * cfg.hidden_size * len(s.input_ids) ** 2 / 2 for s in seqs)
    return 6 * n * tokens + 6 * cfg.hidden_size * cfg.vocab_size * tokens + attention


def one(model_name: str, device: str, backend: str, setting: dict, lengths: list[int] | None = None) -> dict:
    import torch

    from rl.trainer import TorchTrainer, TrainerSettings

    setting = dict(setting)
    old_pass = setting.pop("old_pass", False)
    model, pad_id = build_model(model_name, device, "float32")  # float32 master weights in every setting
    settings = TrainerSettings(lr=1e-6, **setting)
    if backend == "deepspeed":
        from rl.deepspeed_trainer import DeepSpeedTrainer

        trainer = DeepSpeedTrainer(model, settings, pad_id, zero_stage=2, bf16=settings.dtype == "bfloat16")
    else:
        trainer = TorchTrainer(model, settings, pad_id)
    seqs = sequences(model.config.vocab_size, lengths)
    if device.startswith("cuda"):
        torch.cuda.reset_peak_memory_stats()
    started = time.perf_counter()
    old_s = 0.0
    if old_pass:
        from rl.train_batch import micro_batches

        trainer.old_logprobs(micro_batches(seqs, settings.micro_batch))
        old_s = time.perf_counter() - started
    stats = trainer.update(seqs)
    stats["seconds_old_logprobs"] = old_s
    stats["seconds_total"] = time.perf_counter() - started
    stats["peak_rss_gib"] = peak_rss_gib()
    if device.startswith("cuda"):
        stats["peak_cuda_gib"] = torch.cuda.max_memory_allocated() / 2**30
    stats["tokens_per_s"] = stats["trained_tokens"] / stats["seconds_total"]
    stats["flops"] = update_flops(model, seqs)
    return stats


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--backends", default="torch", help="comma list of trainer backends: torch,deepspeed")
    parser.add_argument("--settings", default=";".join(SETTINGS), help="semicolon list of the rows to run")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds; each row's median is reported")
    parser.add_argument(
        "--lengths",
        default=None,
        help="sequence lengths: 'LOW:HIGH:N' evenly spaced, or a comma list (default 8 x 1024)",
    )
    parser.add_argument("--only", default=None, help=argparse.SUPPRESS)  # child process: "backend|setting"
    args = parser.parse_args()
    if args.only:
        backend, setting = args.only.split("|")
        from rl.memory import allocator_in_use

        stats = one(args.model, args.device, backend, SETTINGS[setting], parse_lengths(args.lengths))
        print(json.dumps({**stats, "allocator": allocator_in_use()}))
        return
    machine = measure(args.device)
    # each row against the matmul peak of the dtype it computes in: bf16 rows against bf16's (the
    # issue's target), fp32 rows against fp32's (where bf16 is emulated, its peak says nothing)
    peaks = {"bfloat16": machine["bf16_peak"], "float32": machine["fp32_peak"]}

    def row(backend: str, name: str):
        def run() -> dict:
            command = [sys.executable, __file__, "--model", args.model, "--device", args.device]
            command += ["--lengths", args.lengths] if args.lengths else []
            env = child_environment(name)
            out = subprocess.run([*command, "--only", f"{backend}|{name}"], capture_output=True, text=True, env=env)
            if out.returncode != 0:
                last = out.stderr.strip().splitlines()[-1] if out.stderr.strip() else str(out.returncode)
                return {"failed": last}
            return json.loads(out.stdout.strip().splitlines()[-1])

        return run

    rows = {(b, n): row(b, n) for b in args.backends.split(",") for n in args.settings.split(";")}
    results = interleaved({f"{b} {n}": run for (b, n), run in rows.items()}, args.rounds)
    print(describe(machine))
    seqs = sequences(10**6, parse_lengths(args.lengths))
    print(
        f"one GRPO update on {len(seqs)} sequences of {min(len(s.input_ids) for s in seqs)}-"
        f"{max(len(s.input_ids) for s in seqs)} tokens ({sum(len(s.input_ids) for s in seqs)} in all, "
        f"{sum(s.n_policy_tokens for s in seqs)} sampled: loss mask 1), model {args.model}, {args.device}; "
        f"rows interleaved, median of {args.rounds} rounds"
    )
    peak_kind = "CUDA peak GiB" if args.device.startswith("cuda") else "peak RSS GiB"
    print(
        f"{'backend':9} {'setting':33} {'old lp s':>8} {'fwd+bwd s':>9} {'optim s':>7} {'total s':>8} {'(range)':>11} "
        f"{'speed-up':>8} {'% dtype peak':>12} {peak_kind:>13}"
    )
    baseline = None
    for (backend, name), runs in zip(rows, results.values()):
        failed = [r["failed"] for r in runs if "failed" in r]
        if failed:
            print(f"{backend:9} {name:33} failed: {failed[0]}")
            continue
        total = median(runs, "seconds_total")
        baseline = baseline or total
        memory = median(runs, "peak_cuda_gib" if "peak_cuda_gib" in runs[0] else "peak_rss_gib")
        print(
            f"{backend:9} {name:33} {median(runs, 'seconds_old_logprobs'):8.1f} "
            f"{median(runs, 'seconds_forward_backward'):9.1f} {median(runs, 'seconds_optimizer'):7.2f} {total:8.1f} "
            f"{spread(runs, 'seconds_total'):>11} {baseline / total:7.2f}x "
            f"{100 * runs[0]['flops'] / total / peaks[SETTINGS[name]['dtype']]:11.1f}% {memory:13.2f}",
            flush=True,
        )


if __name__ == "__main__":
    main()
