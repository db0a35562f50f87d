"""Rollout groups in threads, as a pipeline phase runs them: the decode server against merging per turn.

Workload: G rollout groups at once, each one training task x K rollouts under H0 stepped turn by
turn in its own thread (as Prefect's thread task runner runs a collection's or an evaluation's
groups), through one shared policy (tasks/resources.py: BatchingPolicy around TransformersPolicy),
real environment, parsing, hooks, token bookkeeping and log-probs. Defaults: a collection of
configs/main (8 groups x K = 8, temperature 1, top-p 1, 96 new tokens, up to 4 rounds); an
evaluation is `--groups 16 --k 3`.

Rows, in this process on the same groups and seeds:
- decode server (rl/decode_server.py): one continuously batched loop; a group's sequences take rows
  as soon as rows are free and the group gets its replies as soon as they are complete;
- merged per turn (rl/batching.py, the pipeline before): concurrent calls wait for the running one,
  then run as one call, and every group in it waits for the call's slowest reply;
- where the compiled few-row kernel runs for the engine's dtype on this CPU (fp32; bf16 with
  AVX-512 BF16 and no AMX), the decode server with its projections as `nn.Linear` computes them
  instead (rl/decode.py `project`).
Both draw every sequence from the same stream, so they sample the same episodes up to rounding.
Beside tokens/s, each row's decode steps and rows decoding per step are counted: where a step
costs about the same at any batch (a GPU, bf16 matrix units), fewer steps for the same tokens is
the gain; on a CPU whose fp32 matmuls are the bound, a step's cost grows with its rows.
Rows run interleaved (A, B, A, B, ...) for `--rounds` rounds; medians and ranges are reported
beside the machine's CPU, bandwidth and matmul peaks measured in the same run.

Run: HS_DATA_DIR=../shared/data .venv/bin/python benchmarks/concurrent_groups.py [--groups 16 --k 3]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from cli.environment import apply_defaults  # noqa: E402

apply_defaults()  # the environment of every hs process, before torch loads

import torch  # noqa: E402

from envs.dbbench.env import DbBenchEnv  # noqa: E402
from harness_pool.spec import load_harness  # noqa: E402
from rl import decode  # noqa: E402
from rl.batching import BatchingPolicy  # noqa: E402
from rl.policy import Sampling  # noqa: E402
from rl.rollout import RolloutSpec, run_rollouts  # noqa: E402
from rl.transformers_policy import TransformersPolicy  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from machine import describe, interleaved, kernel_projects_model, measure, median, nn_linear_projections, spread  # noqa: E402
from rollout_throughput import default_model  # noqa: E402


class StepCounter:
    """Counts the decode loop's steps: how many rows decode in each (what a step's cost is
    spread over where the step costs about the same at any batch, as on a GPU or with bf16
    matrix units), how many rows the buffer holds and how many steps also prefill."""

    def __init__(self):
        self.counts = {"steps": 0, "decoding": 0, "buffer": 0, "prefilling": 0}
        self.step = decode._Batch.step

        def counted(batch):
            states = batch.state
            self.counts["steps"] += 1
            self.counts["decoding"] += sum(s == decode.DECODE for s in states)
            self.counts["buffer"] += len(states)
            self.counts["prefilling"] += any(s == decode.PREFILL for s in states)
            return self.step(batch)

        decode._Batch.step = counted

    def take(self) -> dict:
        counts, self.counts = self.counts, dict.fromkeys(self.counts, 0)
        return counts


def phase(
    policy: BatchingPolicy, groups: list[list[RolloutSpec]], sampling: Sampling, max_rounds: int, counter: StepCounter
) -> dict:
    """Every group in its own thread at once, as a phase's task runner runs them."""

    def group(index: int):
        seeded = Sampling(sampling.temperature, sampling.top_p, sampling.max_new_tokens, seed=index)
        return run_rollouts(policy, groups[index], DbBenchEnv, seeded, max_rounds=max_rounds)

    start = time.perf_counter()
    with ThreadPoolExecutor(max_workers=len(groups)) as pool:
        results = [r for rs in pool.map(group, range(len(groups))) for r in rs]
    seconds = time.perf_counter() - start
    steps = counter.take()
    return {
        "steps": steps["steps"],
        "rows_per_step": steps["decoding"] / max(steps["steps"], 1),
        "buffer_rows": steps["buffer"] / max(steps["steps"], 1),
        "prefilling_steps": steps["prefilling"],
        "tokens": sum(r.n_policy_tokens for r in results),
        "seconds": seconds,
        "episodes": len(results),
        "turns": sum(len(r.turns) for r in results) / len(results),
        "success": sum(r.verdict.success for r in results) / len(results),
    }


def positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value}: give a whole number of at least 1")
    return value


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=None, help="default: the warm-start checkpoint if built, else smollm2-135m")
    parser.add_argument("--split", default="train")
    parser.add_argument("--groups", type=positive, default=8)
    parser.add_argument("--k", type=positive, default=8)
    parser.add_argument("--max-new-tokens", type=positive, default=96)
    parser.add_argument("--max-rounds", type=positive, default=4)
    parser.add_argument("--temperature", type=float, default=1.0)
    parser.add_argument("--top-p", type=float, default=1.0)
    parser.add_argument("--dtype", default="auto")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--rounds", type=positive, default=3, help="interleaved rounds; each row's median is reported")
    args = parser.parse_args()
    torch.set_num_threads(os.cpu_count() or 1)
    from configs.schema import EnvConfig
    from tasks.resources import bench_tasks

    model = args.model or default_model()
    tasks = bench_tasks(EnvConfig(), args.split)[: args.groups]
    h0 = load_harness("h0")
    groups = [[RolloutSpec(t, h0, i) for i in range(args.k)] for t in tasks]
    sampling = Sampling(args.temperature, args.top_p, args.max_new_tokens)
    inner = TransformersPolicy(model, device=args.device, dtype=args.dtype, shared=False)
    policy = BatchingPolicy(inner)
    policy.generate([policy.start([{"role": "user", "content": "warm up"}])], Sampling(max_new_tokens=4, seed=0))
    counter = StepCounter()  # from here on: the warm-up's steps are not counted

    def merged_per_turn() -> dict:
        inner.serves_concurrent_calls = False
        try:
            return phase(policy, groups, sampling, args.max_rounds, counter)
        finally:
            inner.serves_concurrent_calls = True

    rows = {
        f"decode server ({inner.engine}, {inner.dtype})": lambda: phase(
            policy, groups, sampling, args.max_rounds, counter
        ),
        "merged per turn (before)": merged_per_turn,
    }
    if kernel_projects_model(inner.model):

        def with_nn_linear() -> dict:
            with nn_linear_projections():
                return phase(policy, groups, sampling, args.max_rounds, counter)

        rows["decode server, nn.Linear projections"] = with_nn_linear
    machine = measure(args.device)
    results = interleaved(rows, args.rounds)
    rates = {name: [{"rate": r["tokens"] / r["seconds"], **r} for r in runs] for name, runs in results.items()}
    print(describe(machine))
    print(
        f"model {model}; {len(groups)} groups of {args.k} ({args.split} tasks) in threads, up to {args.max_rounds} "
        f"rounds, temperature {args.temperature}, top-p {args.top_p}, max_new_tokens {args.max_new_tokens}, "
        f"{args.device}; rows interleaved, median of {args.rounds} rounds"
    )
    print(
        f"{'row':34} {'tokens':>7} {'seconds':>8} {'tok/s':>7} {'(range)':>13} "
        f"{'episodes/s':>10} {'turns/ep':>8} {'success':>7}"
    )
    for name, runs in rates.items():
        print(
            f"{name:34} {median(runs, 'tokens'):7.0f} {median(runs, 'seconds'):8.1f} {median(runs, 'rate'):7.1f} "
            f"{spread(runs, 'rate'):>13} {median(runs, 'episodes') / median(runs, 'seconds'):10.2f} "
            f"{median(runs, 'turns'):8.2f} {median(runs, 'success'):7.2f}"
        )
    print(f"{'row':34} {'steps':>7} {'rows decoding per step':>22} {'rows in the buffer':>18} {'steps prefilling':>16}")
    for name, runs in rates.items():
        print(
            f"{name:34} {median(runs, 'steps'):7.0f} {median(runs, 'rows_per_step'):22.1f} "
            f"{median(runs, 'buffer_rows'):18.1f} {median(runs, 'prefilling_steps'):16.0f}"
        )
    served, merged = (median(runs, "rate") for runs in list(rates.values())[:2])
    print(f"decode server / merged per turn: {served / merged:.2f}x tokens/s")


if __name__ == "__main__":
    main()
