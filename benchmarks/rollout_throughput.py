"""Rollout engine throughput vs one plain batched `model.generate` on the same prompts.

For each of N dev tasks: a group of 8 rollouts through the engine under H0 (real environment,
parsing, hooks, token bookkeeping, log-probs; multi-turn until the episodes end or
--max-rounds), then one plain `model.generate` call on the same 8 first-turn prompts with the
same sampling settings. Prints generated tokens/s and episodes/min for both and their ratio
(engine / plain; 1.0 = no overhead). The engine runs every turn; the plain call only the first,
so tokens/s is the fair comparison.

Run: HS_DATA_DIR=../shared/data .venv/bin/python benchmarks/rollout_throughput.py [--tasks 3]
"""

from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

import torch  # noqa: E402

from envs.dbbench.data import load_split  # noqa: E402
from envs.dbbench.env import DbBenchEnv  # noqa: E402
from harness_pool.runtime import HarnessRuntime, task_fields  # noqa: E402
from harness_pool.spec import load_harness  # noqa: E402
from rl.policy import Sampling  # noqa: E402
from rl.rollout import RolloutSpec, run_rollouts  # noqa: E402
from rl.transformers_policy import TransformersPolicy  # noqa: E402


def plain_generate(policy: TransformersPolicy, prompt_ids: list[int], k: int, sampling: Sampling) -> tuple[int, float]:
    input_ids = torch.tensor([prompt_ids] * k)
    torch.manual_seed(sampling.seed or 0)
    start = time.perf_counter()
    with torch.inference_mode():
        out = policy.model.generate(input_ids=input_ids, attention_mask=torch.ones_like(input_ids), do_sample=True,
                                    temperature=sampling.temperature, top_p=sampling.top_p, top_k=0,
                                    max_new_tokens=sampling.max_new_tokens, eos_token_id=policy.eos_ids,
                                    pad_token_id=policy.pad_id)
    seconds = time.perf_counter() - start
    new = out[:, len(prompt_ids):].tolist()
    tokens = sum(next((j + 1 for j, t in enumerate(row) if t in policy.eos_ids), len(row)) for row in new)
    return tokens, seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=3)
    parser.add_argument("--k", type=int, default=8)
    parser.add_argument("--max-new-tokens", type=int, default=128)
    parser.add_argument("--max-rounds", type=int, default=3)
    args = parser.parse_args()
    torch.set_num_threads(os.cpu_count() or 1)
    policy = TransformersPolicy("smollm2-135m")
    h0 = load_harness("h0")
    tasks = load_split("dev")[: args.tasks]
    sampling = Sampling(temperature=0.8, top_p=0.95, max_new_tokens=args.max_new_tokens, seed=0)
    plain_generate(policy, policy.encode("warm up"), 2, Sampling(max_new_tokens=4))  # first-call overhead

    eng_tokens = eng_secs = plain_tokens = plain_secs = 0.0
    episodes = 0
    print(f"{'task':18} {'engine tok/s':>12} {'plain tok/s':>12} {'ratio':>6} {'turns/episode':>14}")
    for task in tasks:
        start = time.perf_counter()
        results = run_rollouts(policy, [RolloutSpec(task, h0, i) for i in range(args.k)], DbBenchEnv, sampling,
                               max_rounds=args.max_rounds)
        secs = time.perf_counter() - start
        tokens = sum(r.n_policy_tokens for r in results)
        messages, _ = HarnessRuntime(h0, task_fields(task)).opening_messages()
        prompt_ids = policy.start(messages).token_ids
        p_tokens, p_secs = plain_generate(policy, prompt_ids, args.k, sampling)
        turns = sum(len(r.turns) for r in results) / len(results)
        print(f"{task.id:18} {tokens / secs:12.1f} {p_tokens / p_secs:12.1f} {(tokens / secs) / (p_tokens / p_secs):6.2f} {turns:14.2f}")
        eng_tokens, eng_secs, plain_tokens, plain_secs = eng_tokens + tokens, eng_secs + secs, plain_tokens + p_tokens, plain_secs + p_secs
        episodes += len(results)
    eng_rate, plain_rate = eng_tokens / eng_secs, plain_tokens / plain_secs
    print(f"\ngroup of {args.k}, {len(tasks)} dev tasks, max_new_tokens {args.max_new_tokens}, {torch.get_num_threads()} threads")
    print(f"engine: {eng_rate:.1f} generated tok/s, {episodes / eng_secs * 60:.1f} episodes/min")
    print(f"plain model.generate (first turn only): {plain_rate:.1f} generated tok/s, "
          f"{len(tasks) * args.k / plain_secs * 60:.1f} single-turn completions/min")
    print(f"ratio engine/plain tokens/s: {eng_rate / plain_rate:.2f}")


if __name__ == "__main__":
    main()
