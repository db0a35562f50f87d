"""The paper's baselines beside Harness-S, one module each (docs/method.md §8).

A baseline that is a way of forming GRPO groups is a training mode (`train.mode`), an entry of
rl/training_modes.py like GRPO, H0-rescue and the fixed mixture: HarnessBandit (`harness_bandit`,
its arm choice and documentation in rl/bandit.py) and HarnessX (`harnessx`, its replay buffer
and documentation in rl/replay.py).
A baseline of another shape is its own flow, chosen by the pipeline config's `baseline:` field,
and `hs run` starts it like the pipeline: frozen_evolution.py (no training, H_best deployed),
whale.py (harness search alternating with fine-tuning on own successes), harness_forge.py (a
fine-tuned policy per harness branch), harnessx.py (evolution rounds alternating with harnessx
training segments); search.py holds the harness search they share.
Every baseline stores one results row of kind 'pipeline', so `hs report` compares it with the rest.
"""

from __future__ import annotations

from flows.registry import load_flow


def baseline_flow(name: str):
    """The flow of a pipeline config's `baseline:` (registered in flows/registry.py under its dashed name)."""
    return load_flow(name.replace("_", "-"))
