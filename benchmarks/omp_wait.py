"""How the OpenMP threads' wait policy moves decode and update time, alone and beside a busy neighbour.

torch's CPU kernels split each operation over OpenMP threads and meet at a barrier after it. A
decode step of a small model is hundreds of short operations; when another process holds one of
the two cores (an environment's sandbox, the database, a test's Prefect server, a neighbour on a
shared host), a thread that spins at the barrier keeps its core while the thread it waits for is
descheduled, and each operation can wait out a scheduler time slice. `OMP_WAIT_POLICY=PASSIVE`
makes waiting threads sleep at once, at the cost of a wake-up per operation.

The decode kernels (rl/decode_kernel.py) split their work over helper threads of their own that
spin briefly and never make the caller wait for one that has not started (rl/decode_pool.cpp);
`HS_DECODE_POOL=0` puts them back on OpenMP's parallel regions, the row that shows what that pays.

The policy is read when the OpenMP runtime starts, so every row is a child process with its own
environment: the default wait policy, PASSIVE (the `hs` default), PASSIVE with the decode kernels
on OpenMP, and (decode) one thread. Each runs alone and beside
one busy neighbour process (a pure-Python loop), interleaved over `--rounds` rounds; medians and
spreads are printed with the machine's description.

Run: .venv/bin/python benchmarks/omp_wait.py [--rounds 3] [--workloads decode,update]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
SHARED_ENV = {k: v for k, v in os.environ.items() if not k.startswith("OMP_")}  # each row sets its own
REPO = HERE.parent
VARIANTS = {
    "default wait policy": {},
    "OMP_WAIT_POLICY=PASSIVE": {"OMP_WAIT_POLICY": "PASSIVE"},
    "PASSIVE, decode kernels on OpenMP": {"OMP_WAIT_POLICY": "PASSIVE", "HS_DECODE_POOL": "0"},
    "one thread": {"OMP_NUM_THREADS": "1"},
}


def child(workload: str) -> None:
    """Time one workload in this process and print its figures as one JSON line."""
    import torch

    from rl.policy import Sampling
    from rl.transformers_policy import TransformersPolicy

    policy = TransformersPolicy("smollm2-135m", dtype="bfloat16", shared=False)
    if workload == "decode":  # 8 rows x 32 greedy tokens, as a rollout batch decodes
        sessions = [policy.start([{"role": "user", "content": f"List the tables of database {i}."}]) for i in range(8)]
        sampling = Sampling(0.0, 1.0, 32)
        policy.generate(sessions, sampling)  # warm-up call, then the timed one from fresh sessions
        sessions = [policy.start(s.messages[:1]) for s in sessions]
        start = time.perf_counter()
        tokens = sum(len(g.token_ids) for g in policy.generate(sessions, sampling))
        seconds = time.perf_counter() - start
        print(json.dumps({"seconds": seconds, "per_second": tokens / seconds}))
    else:  # one forward + backward at 2 x 512 tokens, bf16, as an update's micro-batch
        from rl.logprobs import token_logprobs

        ids = torch.randint(0, 40000, (2, 512))
        mask = torch.ones_like(ids)
        model = policy.model.train()
        times = []
        for _ in range(3):
            start = time.perf_counter()
            token_logprobs(model, ids, mask).float().mean().backward()
            times.append(time.perf_counter() - start)
            model.zero_grad(set_to_none=True)
        seconds = min(times[1:])
        print(json.dumps({"seconds": seconds, "per_second": 2 * 512 / seconds}))


def run_child(workload: str, env: dict[str, str], neighbour: bool) -> dict:
    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"]) if neighbour else None
    try:
        out = subprocess.run(
            [sys.executable, __file__, "--child", workload],
            env={**SHARED_ENV, "PYTHONPATH": str(REPO), "TRANSFORMERS_VERBOSITY": "error", **env},
            capture_output=True, text=True, check=True, timeout=1800,
        )  # fmt: skip
    finally:
        if busy:
            busy.kill()
            busy.wait()
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--workloads", default="decode,update")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return child(args.child)
    sys.path.insert(0, str(HERE))
    sys.path.insert(0, str(REPO))
    from machine import describe, interleaved, measure, median, spread

    print(describe(measure()), flush=True)
    for workload in args.workloads.split(","):
        variants = {k: v for k, v in VARIANTS.items() if workload == "decode" or "THREADS" not in str(v)}
        rows = {
            f"{name}, {where}": (lambda env=env, busy=busy: run_child(workload, env, busy))
            for where, busy in (("alone", False), ("beside a busy process", True))
            for name, env in variants.items()
        }
        results = interleaved(rows, args.rounds)
        unit = "tokens/s" if workload == "decode" else "tokens/s forward+backward"
        print(f"\n{workload} ({unit}; median of {args.rounds} interleaved rounds, min-max of seconds):")
        for name, runs in results.items():
            rate, seconds = median(runs, "per_second"), median(runs, "seconds")
            print(f"  {name:50s} {rate:9.1f}  {seconds:7.2f} s  ({spread(runs, 'seconds')})")


if __name__ == "__main__":
    main()
