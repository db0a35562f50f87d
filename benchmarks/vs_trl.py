"""One GRPO step (rollouts + update) here and in TRL's GRPOTrainer, on the same workload.

Workload: SmolLM2-135M-Instruct, one prompt x 8 completions per step, at most 128 new tokens,
single-turn, temperature 0.8, top-p 0.95, learning rate 1e-5, no KL term, reward 1 when the
completion contains a SQL SELECT; 3 steps each, the first step reported apart (warm-up).
TRL runs with its own defaults otherwise (bf16 autocast, HF `generate`, one optimizer step per
generation batch) in a separate virtual environment that `--setup` creates (.venv-trl: TRL and
its dependencies, the same pinned torch and transformers as this project), never in the
project's own dependencies. Our step: the lean engine on a bf16 rollout copy, the fp32-master
update under bf16 autocast, then the copy refreshed (what tasks/train_handle.py does per update).

The two trainers run interleaved (TRL, ours, TRL, ours, ...) for `--rounds` rounds and each one's
median is reported beside the machine's measured limits (benchmarks/machine.py).

Run: .venv/bin/python benchmarks/vs_trl.py --setup   (once; needs the package registry)
     .venv/bin/python benchmarks/vs_trl.py
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from machine import describe, interleaved, measure, median, spread  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
TRL_VENV = ROOT / ".venv-trl"
TRL_PIN = "trl==1.16.0"
PROMPT = [
    {
        "role": "user",
        "content": "Table orders(id, customer, total). Write one SQL query that returns the "
        "number of orders whose total is above 100.",
    }
]
STEPS, K, MAX_NEW, LR, TEMPERATURE, TOP_P = 3, 8, 128, 1e-5, 0.8, 0.95


def reward(text: str) -> float:
    return 1.0 if "select" in text.lower() else 0.0


def setup() -> None:
    import torch
    import transformers

    subprocess.run([sys.executable, "-m", "venv", str(TRL_VENV)], check=True)
    pins = [f"torch=={torch.__version__.split('+')[0]}", f"transformers=={transformers.__version__}", TRL_PIN]
    subprocess.run([str(TRL_VENV / "bin" / "pip"), "install", "-q", *pins], check=True)
    print(f"{TRL_VENV}: {' '.join(pins)}")


def ours(model_dir: str) -> list[float]:
    import torch

    from rl.grpo import group_advantages
    from rl.policy import Sampling
    from rl.precision import rollout_copy, sync_weights
    from rl.train_batch import TrainSequence
    from rl.trainer import TorchTrainer, TrainerSettings
    from rl.transformers_policy import TransformersPolicy

    policy = TransformersPolicy(model_dir, dtype="float32", shared=False)
    trainer = TorchTrainer(
        policy.model, TrainerSettings(lr=LR, micro_batch=8, temperature=TEMPERATURE, dtype="bfloat16"), policy.pad_id
    )
    policy.model = rollout_copy(trainer.model, "bfloat16")
    times = []
    for step in range(STEPS):
        start = time.perf_counter()
        sessions = [policy.start(PROMPT) for _ in range(K)]
        prompt_len = len(sessions[0].token_ids)
        gens = policy.generate(sessions, Sampling(TEMPERATURE, TOP_P, MAX_NEW, seed=step))
        adv = group_advantages(torch.tensor([reward(g.text) for g in gens])).tolist()
        seqs = [
            TrainSequence(
                s.token_ids, [0] * prompt_len + [1] * len(g.token_ids), [float("nan")] * prompt_len + g.logprobs, a
            )
            for s, g, a in zip(sessions, gens, adv)
        ]
        trainer.update(seqs)
        sync_weights(trainer.model, policy.model)
        times.append(time.perf_counter() - start)
    return times


TRL_CHILD = r"""
import json, sys, time
from datasets import Dataset
from transformers import TrainerCallback
from trl import GRPOConfig, GRPOTrainer
model_dir, out_dir, prompt, steps, k, max_new, lr, temperature, top_p = json.loads(sys.argv[1])
def reward(completions, **kw):
    return [1.0 if "select" in c[0]["content"].lower() else 0.0 for c in completions]
class Clock(TrainerCallback):
    times, t = [], None
    def on_step_begin(self, args, state, control, **kw): Clock.t = time.perf_counter()
    def on_step_end(self, args, state, control, **kw): Clock.times.append(time.perf_counter() - Clock.t)
cfg = GRPOConfig(output_dir=out_dir, per_device_train_batch_size=k, num_generations=k, max_completion_length=max_new,
                 learning_rate=lr, max_steps=steps, temperature=temperature, top_p=top_p, beta=0.0, use_cpu=True,
                 report_to="none", save_strategy="no", logging_steps=1, seed=0, dataloader_num_workers=0)
data = Dataset.from_list([{"prompt": prompt}] * (steps * k))
trainer = GRPOTrainer(model=model_dir, reward_funcs=reward, args=cfg, train_dataset=data, callbacks=[Clock()])
trainer.train()
print(json.dumps({"times": Clock.times, "bf16": cfg.bf16}))
"""


def trl(model_dir: str) -> dict:
    python = TRL_VENV / "bin" / "python"
    if not python.exists():
        raise SystemExit(
            f"{TRL_VENV} is missing: run `.venv/bin/python {Path(__file__).relative_to(ROOT)} --setup` first"
        )
    with tempfile.TemporaryDirectory() as out:
        arg = json.dumps([model_dir, out, PROMPT, STEPS, K, MAX_NEW, LR, TEMPERATURE, TOP_P])
        run = subprocess.run(
            [str(python), "-c", TRL_CHILD, arg],
            capture_output=True,
            text=True,
            env={**os.environ, "TRANSFORMERS_VERBOSITY": "error"},
        )
    if run.returncode != 0:
        raise SystemExit("TRL failed: " + (run.stderr.strip().splitlines() or ["?"])[-1])
    return json.loads(run.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--setup", action="store_true", help="create .venv-trl with TRL pinned")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds; each trainer's median is reported")
    args = parser.parse_args()
    if args.setup:
        setup()
        return
    from rl.model_store import resolve_model

    model_dir = str(resolve_model("smollm2-135m"))
    machine = measure()
    theirs_bf16 = []

    def run_trl() -> dict:
        out = trl(model_dir)
        theirs_bf16.append(out["bf16"])
        return {"first": out["times"][0], "later": _later(out["times"])}

    def run_ours() -> dict:
        times = ours(model_dir)
        return {"first": times[0], "later": _later(times)}

    results = interleaved({"TRL": run_trl, "ours": run_ours}, args.rounds)
    print(describe(machine))
    print(
        f"GRPO step: 1 prompt x {K} completions, <= {MAX_NEW} new tokens, lr {LR}, {STEPS} steps; "
        f"cpu; interleaved, median of {args.rounds} rounds"
    )
    print(f"{'trainer':28} {'step 1 s':>9} {'later steps s (mean)':>21} {'(range)':>13}")
    names = {"TRL": f"TRL {TRL_PIN.split('==')[1]} (bf16={theirs_bf16[0]})", "ours": "harness-s (lean, bf16)"}
    for key, runs in results.items():
        print(f"{names[key]:28} {median(runs, 'first'):9.1f} {median(runs, 'later'):21.1f} {spread(runs, 'later'):>13}")
    ratio = median(results["ours"], "later") / median(results["TRL"], "later")
    print(f"ratio harness-s / TRL step time (later steps, medians): {ratio:.2f}")


def _later(times: list[float]) -> float:
    """Mean step time after the first (warm-up) step."""
    return sum(times[1:]) / max(len(times) - 1, 1)


if __name__ == "__main__":
    main()
