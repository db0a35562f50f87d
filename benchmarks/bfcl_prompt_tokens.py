"""How long are BFCL's warm-start demonstrations with the function documents as JSON ({functions})
and as the signature list ({function_list}, envs/bfcl/docs.py), side by side?

Builds the demonstrations of configs/sft_bfcl_smol.yaml (its tasks, tiers and round budget)
through the real environment twice: under H0 as committed (signature list) and under the same
H0 with the JSON documents in its place. Prints per view: demonstrations kept, those over
SmolLM2's context, median / max / total tokens, and the ratio. With --time-steps N, also times N
fine-tuning steps (forward + backward of one batch of the config's batch size or --batch, the
median-length demonstrations, recomputing activations as the config does) per view.

Run: HS_DATA_DIR=../shared/data .venv/bin/python benchmarks/bfcl_prompt_tokens.py [--time-steps 1]
"""

from __future__ import annotations

import argparse
import statistics
import time

from cli.environment import apply_defaults  # noqa: E402

apply_defaults()  # the environment of every hs process (OpenMP threads that sleep while waiting), before torch loads

from configs.schema import SftConfig, load_config  # noqa: E402
from envs.registry import benchmark  # noqa: E402
from harness_pool.spec import load_harness  # noqa: E402
from rl.sft import build_demonstrations, masked_nll_sum  # noqa: E402
from rl.transformers_policy import TransformersPolicy  # noqa: E402
from tasks.resources import env_factory  # noqa: E402


def views(h0):
    json_system = h0.prompts.system.replace("{function_list}", "{functions}")
    as_json = h0.model_copy(update={"prompts": h0.prompts.model_copy(update={"system": json_system})})
    return {"JSON documents": as_json, "signature list": h0}


def step_seconds(policy, examples, batch_size: int, steps: int) -> float:
    model = policy.model
    model.train()
    model.gradient_checkpointing_enable()
    middle = sorted(examples, key=lambda e: len(e.input_ids))
    start = max(0, len(middle) // 2 - batch_size // 2)
    batch = middle[start : start + batch_size]
    t0 = time.perf_counter()
    for _ in range(steps):
        loss, n = masked_nll_sum(model, batch, policy.pad_id)
        (loss / n).backward()
        model.zero_grad(set_to_none=True)
    model.eval()
    return (time.perf_counter() - t0) / steps


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", default="configs/sft_bfcl_smol.yaml")
    ap.add_argument("--time-steps", type=int, default=0)
    ap.add_argument("--batch", type=int, default=None, help="Demonstrations per timed step (default: the config's).")
    args = ap.parse_args()
    cfg = load_config(SftConfig, args.config)
    tasks = benchmark("bfcl").load("train", data_dir=cfg.env.data_dir, limit=cfg.n_tasks, tiers=cfg.tiers)
    policy = TransformersPolicy(cfg.base_model, shared=False)
    rows = {}
    for name, harness in views(load_harness(cfg.harness, "bfcl")).items():
        t0 = time.perf_counter()
        examples, _ = build_demonstrations(
            policy,
            tasks,
            harness,
            env_factory(cfg.env),
            seed=cfg.seed,
            inspect_prob=cfg.inspect_prob,
            max_rounds=cfg.env.max_rounds,
        )
        lengths = [len(e.input_ids) for e in examples]
        fits = [e for e in examples if len(e.input_ids) <= policy.max_context_tokens]
        rows[name] = {
            "kept": len(examples),
            "over_context": len(examples) - len(fits),
            "median": statistics.median(lengths),
            "max": max(lengths),
            "total": sum(lengths),
            "build_s": time.perf_counter() - t0,
        }
        if args.time_steps:
            rows[name]["step_s"] = step_seconds(policy, fits, args.batch or cfg.batch_size, args.time_steps)
        print(name, {k: round(v, 1) if isinstance(v, float) else v for k, v in rows[name].items()}, flush=True)
    old, new = rows["JSON documents"], rows["signature list"]
    print(f"{len(tasks)} training tasks ({', '.join(cfg.tiers or [])}); signature list / JSON documents:")
    print(f"  median tokens {new['median']:.0f} / {old['median']:.0f} = {new['median'] / old['median']:.2f}x")
    print(f"  total tokens {new['total']:,} / {old['total']:,} = {new['total'] / old['total']:.2f}x")
    print(f"  over the {policy.max_context_tokens}-token context: {new['over_context']} / {old['over_context']}")
    if args.time_steps:
        print(
            f"  one fine-tuning step: {new['step_s']:.1f} s / {old['step_s']:.1f} s"
            f" = {old['step_s'] / new['step_s']:.2f}x faster"
        )


if __name__ == "__main__":
    main()
