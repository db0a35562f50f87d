"""Does the warm-started policy leave GRPO something to learn, and rescue something to do?

For the first N training tasks of each tier: K rollouts under H0 (success rate, share of
all-failed "dead" groups), then for every dead task one rescue group of K rollouts spread over
the seed-pool siblings (round robin). Prints the per-tier table of issue 8:
H0 success, share of dead groups, share of dead groups a sibling solves; and what each
sibling solved. Targets: H0 success 15-60%, dead groups >= 20%, some dead groups rescued.

Run: HS_DATA_DIR=../shared/data .venv/bin/python benchmarks/warm_start_targets.py --model CHECKPOINT [--per-tier 20]
"""

from __future__ import annotations

import argparse
import time
from collections import defaultdict

from cli.environment import apply_defaults  # noqa: E402

apply_defaults()  # the environment of every hs process (OpenMP threads that sleep while waiting), before torch loads

from envs.dbbench.data import TIERS, load_split  # noqa: E402
from envs.dbbench.env import DbBenchEnv  # noqa: E402
from harness_pool.seed_pool import SEED_POOL  # noqa: E402
from harness_pool.spec import load_harness  # noqa: E402
from rl.policy import Sampling  # noqa: E402
from rl.rollout import RolloutSpec, run_rollouts  # noqa: E402
from rl.transformers_policy import TransformersPolicy  # noqa: E402


def run_in_batches(policy, specs, sampling, max_rounds, batch):
    results = []
    for start in range(0, len(specs), batch):
        results += run_rollouts(policy, specs[start : start + batch], DbBenchEnv, sampling, max_rounds=max_rounds)
        print(f"  {len(results)}/{len(specs)} rollouts", flush=True)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--per-tier", type=int, default=20)
    parser.add_argument("--k", type=int, default=8)
    parser.add_argument("--max-rounds", type=int, default=6)
    parser.add_argument("--max-new-tokens", type=int, default=128)
    parser.add_argument("--batch", type=int, default=32, help="rollouts per engine call")
    args = parser.parse_args()
    policy = TransformersPolicy(args.model)
    sampling = Sampling(temperature=1.0, top_p=1.0, max_new_tokens=args.max_new_tokens, seed=0)
    h0 = load_harness("h0")
    siblings = [load_harness(n) for n in SEED_POOL]
    tasks = [t for tier in TIERS for t in load_split("train", tiers=(tier,))[: args.per_tier]]
    started = time.perf_counter()
    print(f"H0: {len(tasks)} tasks x {args.k} rollouts")
    h0_results = run_in_batches(
        policy, [RolloutSpec(t, h0, i) for t in tasks for i in range(args.k)], sampling, args.max_rounds, args.batch
    )
    wins = defaultdict(list)
    for r in h0_results:
        wins[r.bench_task_id].append(r.verdict.success)
    dead = [t for t in tasks if not any(wins[t.id])]
    print(f"rescue: {len(dead)} dead tasks x {args.k} rollouts over {len(siblings)} siblings")
    rescue_specs = [RolloutSpec(t, siblings[i % len(siblings)], i) for t in dead for i in range(args.k)]
    rescue_results = run_in_batches(policy, rescue_specs, sampling, args.max_rounds, args.batch)
    rescued, by_sibling = set(), defaultdict(int)
    names = {s.id: s.name for s in siblings}
    for r in rescue_results:
        if r.verdict.success:
            rescued.add(r.bench_task_id)
            by_sibling[names[r.harness_id]] += 1
    print(
        f"\nmodel {args.model}, K={args.k}, max_rounds {args.max_rounds}, max_new_tokens {args.max_new_tokens}, "
        f"{time.perf_counter() - started:.0f} s"
    )
    print(f"{'tier':8} {'tasks':>5} {'H0 success %':>13} {'dead groups %':>14} {'dead rescued %':>15}")
    for tier in (*TIERS, "all"):
        group = [t for t in tasks if tier == "all" or t.tier == tier]
        d = [t for t in group if t in dead]
        success = 100 * sum(sum(wins[t.id]) for t in group) / (len(group) * args.k)
        print(
            f"{tier:8} {len(group):5d} {success:13.1f} {100 * len(d) / len(group):14.1f} "
            f"{100 * sum(t.id in rescued for t in d) / max(len(d), 1):15.1f}"
        )
    print("successful rescue rollouts per sibling:", dict(by_sibling))
    kinds = defaultdict(int)
    for r in h0_results:
        kinds[r.failure_kind or "success"] += 1
    print("H0 outcomes:", dict(kinds))


if __name__ == "__main__":
    main()
