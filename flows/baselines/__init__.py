"""The paper's baselines beside Harness-S, one module each (docs/method.md §8).

A baseline that is a way of forming GRPO groups is a training mode (`train.mode`), planned in
rl/group_planning.py like GRPO, H0-rescue and the fixed mixture; its module here documents it.
A baseline of another shape (no training, or search alternating with fine-tuning) is its own
flow, chosen by the pipeline config's `baseline:` field, and `hs run` starts it like the pipeline.
Every baseline stores one results row of kind 'pipeline', so `hs report` compares it with the rest.
"""

from __future__ import annotations

from importlib import import_module

FLOWS = {  # pipeline config `baseline:` -> (module, flow function)
    "frozen_evolution": ("flows.baselines.frozen_evolution", "frozen_evolution"),
}


def baseline_flow(name: str):
    if name not in FLOWS:
        raise LookupError(f"unknown baseline '{name}': use one of {', '.join(FLOWS)}")
    module, attr = FLOWS[name]
    return getattr(import_module(module), attr)
