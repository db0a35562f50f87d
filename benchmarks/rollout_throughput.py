"""Rollout throughput on a multi-turn workload: the engine against plain fp32 `model.generate`.

Workload: N training tasks x K rollouts at once (as one GRPO step samples them), under H0, up
to --max-rounds turns, real environment, parsing, hooks, token bookkeeping and log-probs. The
policy is the warm-started checkpoint (configs/sft_dbbench_smol.yaml) when it has been built,
since the base model ends nearly every episode at its first turn.

Rows, all in this process on the same prompts:
- engine (default: lean loop, keys/values kept across turns, continuous batching, dtype auto);
- the same engine with one batched call per turn (every episode waits for the turn's slowest reply);
- the same engine with torch's SDPA and sampler for the decode step instead of the compiled kernels
  (rl/decode_kernel.py: attention and sampler);
- the same engine with the kernels' work split by OpenMP's parallel regions instead of their own
  helper threads (rl/decode_pool.cpp);
- the same engine with its projections as `nn.Linear` computes them (MKL's sgemm, oneDNN in bf16),
  not with the compiled few-row kernel (rl/decode.py `project`; only where that kernel runs for
  the engine's dtype on this CPU);
- previous engine (model.generate per turn, fp32, the whole conversation prefilled each turn);
- plain fp32 `model.generate` on the same N x K first-turn prompts, one call (first turn only).
Tokens/s (sampled tokens over wall time) is the fair comparison. The rows run interleaved
(A, B, C, A, B, C, ...) for `--rounds` rounds and each row's median is reported, beside the
machine's CPU, bandwidth and matmul peaks measured in the same run (benchmarks/machine.py). The
physical limits are the decode rate at which reading the weights once per step saturates the
measured memory read bandwidth, times the batch, and the rate at which the step's matmuls (2 FLOP
per weight per sampled token) saturate the measured matmul peak of the engine's dtype; the engine's
share of each, and of the lower one, is printed too. One
decode step is then timed (with the compiled kernels, then with SDPA and the torch sampler, then with
the kernels and `nn.Linear` projections where that row runs) at batch N x K
and contexts 512 and 1,536 against reading the weights and that context's keys/values once.

Run: HS_DATA_DIR=../shared/data .venv/bin/python benchmarks/rollout_throughput.py [--tasks 4 --k 8]
"""

from __future__ import annotations

import argparse
import itertools
import os
import sys
import time
from contextlib import nullcontext
from pathlib import Path

from cli.environment import apply_defaults  # noqa: E402

apply_defaults()  # the environment of every hs process (OpenMP threads that sleep while waiting), before torch loads

import torch  # noqa: E402

from envs.dbbench.env import DbBenchEnv  # noqa: E402
from harness_pool.runtime import HarnessRuntime, task_fields  # noqa: E402
from harness_pool.spec import load_harness  # noqa: E402
from rl import decode_kernel  # noqa: E402
from rl.policy import Sampling  # noqa: E402
from rl.rollout import RolloutSpec, run_rollouts  # noqa: E402
from rl.transformers_policy import TransformersPolicy  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from machine import (  # noqa: E402
    describe,
    interleaved,
    kernel_projects_model,
    kernels_on_openmp,
    measure,
    median,
    nn_linear_projections,
    spread,
)


def default_model() -> str:
    from configs.schema import SftConfig, load_config
    from rl.checkpoints import is_complete
    from tasks.sft import checkpoint_name

    name = checkpoint_name(load_config(SftConfig, "configs/sft_dbbench_smol.yaml"))
    return name if is_complete(name) else "smollm2-135m"


def engine_run(policy, specs, sampling, max_rounds) -> dict:
    start = time.perf_counter()
    results = run_rollouts(policy, specs, DbBenchEnv, sampling, max_rounds=max_rounds)
    seconds = time.perf_counter() - start
    return {
        "tokens": sum(r.n_policy_tokens for r in results),
        "seconds": seconds,
        "turns": sum(len(r.turns) for r in results) / len(results),
        "env_s": sum(r.seconds_env for r in results),
    }


def plain_generate(policy: TransformersPolicy, prompts: list[list[int]], sampling: Sampling) -> dict:
    width = max(len(p) for p in prompts)
    ids = torch.full((len(prompts), width), policy.pad_id)
    attention = torch.zeros_like(ids)
    for row, p in enumerate(prompts):
        ids[row, width - len(p) :], attention[row, width - len(p) :] = torch.tensor(p), 1
    torch.manual_seed(sampling.seed or 0)
    start = time.perf_counter()
    with torch.inference_mode():
        out = policy.model.generate(
            input_ids=ids,
            attention_mask=attention,
            do_sample=True,
            temperature=sampling.temperature,
            top_p=sampling.top_p,
            top_k=0,
            max_new_tokens=sampling.max_new_tokens,
            eos_token_id=policy.eos_ids,
            pad_token_id=policy.pad_id,
        )
    seconds = time.perf_counter() - start
    new = out[:, width:].tolist()
    tokens = sum(next((j + 1 for j, t in enumerate(row) if t in policy.eos_ids), len(row)) for row in new)
    return {"tokens": tokens, "seconds": seconds}


def decode_step_profile(policy, batch: int, context: int) -> dict:
    """Where one lean decode step's time goes at `batch` rows attending to `context` slots (ms)."""
    from rl.decode import DecodeEngine, sample_tokens

    engine = DecodeEngine(policy.model, policy.eos_ids, policy.pad_id)
    layers, kv_heads, head_dim = engine._geometry()
    kv = torch.zeros((layers, 2, batch, kv_heads, context + 8, head_dim), dtype=policy.model.dtype)
    tokens = torch.randint(100, 20000, (batch, 1))
    slots = torch.full((batch, 1), context)

    def step():
        return engine._logits(engine._forward(tokens, slots, kv, slice(0, batch), context + 1)[:, -1])

    def timed(fn) -> float:  # median of 7 calls, seconds
        times = []
        for _ in range(7):
            start = time.perf_counter()
            fn()
            times.append(time.perf_counter() - start)
        return sorted(times)[3]

    with torch.inference_mode():
        logits = step()
        forward = timed(step)
        sampler = timed(lambda: sample_tokens(logits, 0.8, 0.95, None))
        with torch.profiler.profile() as prof:
            started = time.perf_counter()
            for _ in range(3):
                step()
            profiled = (time.perf_counter() - started) / 3
    ops = {e.key: e.self_cpu_time_total / 3 / 1000 for e in prof.key_averages()}
    # the profiled step runs slower than the timed one (the profiler's own cost, a noisy neighbour):
    # its shares, not its milliseconds, split the timed forward, so the parts add up to it
    scale = forward / profiled
    attention = scale * sum(v for k, v in ops.items() if "scaled_dot_product" in k or k == decode_kernel.PROFILER_NAME)
    matmuls = ("aten::mm", "aten::addmm", "aten::bmm", decode_kernel.LINEAR_PROFILER_NAME)
    matmul = scale * sum(v for k, v in ops.items() if k in matmuls)
    return {
        "forward": forward * 1000,
        "attention": attention,
        "matmul": matmul,
        "other": forward * 1000 - attention - matmul,
        "sampler": sampler * 1000,
        "kv_bytes": kv.numel() * kv.element_size() * context / (context + 8),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=None, help="default: the warm-start checkpoint if built, else smollm2-135m")
    parser.add_argument("--split", default="train")
    parser.add_argument("--tasks", type=int, default=4)
    parser.add_argument("--k", type=int, default=8)
    parser.add_argument("--max-new-tokens", type=int, default=128)
    parser.add_argument("--max-rounds", type=int, default=4)
    parser.add_argument("--dtype", default="auto")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--skip-previous", action="store_true", help="leave out the previous engine's row (slow)")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds; each row's median is reported")
    args = parser.parse_args()
    torch.set_num_threads(os.cpu_count() or 1)
    from configs.schema import EnvConfig
    from tasks.resources import bench_tasks

    model = args.model or default_model()
    tasks = bench_tasks(EnvConfig(), args.split)[: args.tasks]
    h0 = load_harness("h0")
    specs = [RolloutSpec(t, h0, i) for t in tasks for i in range(args.k)]
    sampling = Sampling(temperature=0.8, top_p=0.95, max_new_tokens=args.max_new_tokens, seed=0)

    engine = TransformersPolicy(model, device=args.device, dtype=args.dtype, shared=False)
    fp32 = TransformersPolicy(model, device=args.device, dtype="float32", shared=False, engine="hf")
    warm = Sampling(max_new_tokens=4, seed=0)
    for p in (engine, fp32):  # first-call overheads
        p.generate([p.start([{"role": "user", "content": "warm up"}])], warm)

    prompts = [
        engine.start(HarnessRuntime(h0, task_fields(t)).opening_messages()[0]).token_ids
        for t in tasks
        for _ in range(args.k)
    ]

    def one_call_per_turn() -> dict:
        engine.continuous_batching = False
        try:
            return engine_run(engine, specs, sampling, args.max_rounds)
        finally:
            engine.continuous_batching = True

    rows = {f"engine ({engine.engine}, {engine.dtype})": lambda: engine_run(engine, specs, sampling, args.max_rounds)}
    rows["same, one call per turn"] = one_call_per_turn
    if decode_kernel.available():

        def sdpa_attention() -> dict:
            with decode_kernel.turned_off():
                return engine_run(engine, specs, sampling, args.max_rounds)

        rows["same, SDPA + torch sampler"] = sdpa_attention

        def openmp_threads() -> dict:
            with kernels_on_openmp():
                return engine_run(engine, specs, sampling, args.max_rounds)

        rows["same, kernels on OpenMP threads"] = openmp_threads
    kernel_rows = kernel_projects_model(engine.model)
    if kernel_rows:

        def with_nn_linear() -> dict:
            with nn_linear_projections():
                return engine_run(engine, specs, sampling, args.max_rounds)

        rows["same, nn.Linear projections"] = with_nn_linear
    if not args.skip_previous:
        rows["previous engine (hf, float32)"] = lambda: engine_run(fp32, specs, sampling, args.max_rounds)
    rows["plain fp32 generate, first turn"] = lambda: plain_generate(fp32, prompts, sampling)
    machine = measure(args.device)
    results = interleaved(rows, args.rounds)
    rates = {name: [{"rate": r["tokens"] / r["seconds"], **r} for r in runs] for name, runs in results.items()}

    weight_bytes = sum(p.numel() * p.element_size() for p in engine.model.parameters())
    limit = machine["bandwidth"] / weight_bytes * len(specs)
    # every weight is multiplied once per sampled token (the tied embedding as the output layer): 2 FLOP
    step_flop = 2 * sum(p.numel() for p in engine.model.parameters()) * len(specs)
    peak = machine["bf16_peak"] if engine.model.dtype == torch.bfloat16 else machine["fp32_peak"]
    arithmetic = peak / step_flop * len(specs)
    plain = median(rates["plain fp32 generate, first turn"], "rate")
    print(describe(machine))
    print(
        f"model {model}; {len(tasks)} {args.split} tasks x K={args.k} at once, up to {args.max_rounds} rounds, "
        f"max_new_tokens {args.max_new_tokens}, {args.device}; rows interleaved, median of {args.rounds} rounds"
    )
    print(f"{'row':34} {'tokens':>7} {'seconds':>8} {'tok/s':>7} {'(range)':>13} {'vs plain':>8} {'turns/ep':>8}")
    for name, runs in rates.items():
        rate = median(runs, "rate")
        turns = f"{median(runs, 'turns'):8.2f}" if "turns" in runs[0] else f"{'1':>8}"
        print(
            f"{name:34} {median(runs, 'tokens'):7.0f} {median(runs, 'seconds'):8.1f} {rate:7.1f} "
            f"{spread(runs, 'rate'):>13} {rate / plain:7.2f}x {turns}"
        )
    first = next(iter(rates.values()))
    print(
        f"engine weights {weight_bytes / 1e6:.0f} MB: weight-read decode limit {limit:.0f} tok/s at batch "
        f"{len(specs)}; the engine reaches {100 * median(first, 'rate') / limit:.1f}%"
    )
    print(
        f"arithmetic limit at the measured {engine.model.dtype} matmul peak {arithmetic:.0f} tok/s; the lower of the "
        f"two limits, {min(limit, arithmetic):.0f} tok/s, is what a decode step can reach at batch {len(specs)}: "
        f"the engine reaches {100 * median(first, 'rate') / min(limit, arithmetic):.1f}%"
    )
    print(f"engine time in the environment (all rollouts, summed, median): {median(first, 'env_s'):.3f} s")
    attentions = {"compiled kernels": nullcontext, "SDPA + torch sampler": decode_kernel.turned_off}
    if kernel_rows:
        attentions["compiled kernels, nn.Linear projections"] = nn_linear_projections
    for (attention, off), context in itertools.product(attentions.items(), (512, 1536)):
        with off():
            p = decode_step_profile(engine, len(specs), context)
        ideal = (weight_bytes + p["kv_bytes"]) / machine["bandwidth"] * 1000
        print(
            f"one decode step ({attention}), batch {len(specs)}, context {context}: "
            f"forward {p['forward']:.0f} ms (attention {p['attention']:.0f}, matmul {p['matmul']:.0f}, "
            f"other {p['other']:.0f}), sampler {p['sampler']:.0f} ms; "
            f"reading weights + keys/values once {ideal:.0f} ms: "
            f"the step is {(p['forward'] + p['sampler']) / ideal:.1f}x that; "
            f"its matmuls would take {step_flop / peak * 1000:.0f} ms at the matmul peak "
            f"(they run at {step_flop / peak * 1000 / p['matmul']:.0%} of it)"
        )


if __name__ == "__main__":
    main()
