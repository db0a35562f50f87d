"""The rollouts a pipeline config plans to spend, before it runs (the paper's equal-budget point).

Counted the way the report's resource table counts what was spent (analysis/resources.py):
search (a baseline's harness selections), training (the rollouts updates or fine-tunes learn
from) and validation (re-anchors); evaluation and the pool's evolution are left out, since every
method of a comparison shares them. A rescue group is spent only when its first group dies, so
for harness_s and h0_rescue the training figure is a range: no dead group .. every group dead.
HarnessX's coupled evolution is planned at its upper bound (every candidate validated on
max_tasks) and its re-anchors with the pool it starts with (the pool grows after each round).
"""

from __future__ import annotations

import math

from configs.pipeline import PipelineConfig

RESCUE_MODES = ("harness_s", "h0_rescue")


def planned_rollouts(cfg: PipelineConfig, n_harnesses: int) -> dict[str, int]:
    """{search, training_min, training_max, validation}; `n_harnesses` counts H0 and the pool's
    distinct siblings (the harnesses a search or re-anchor runs)."""
    t, r = cfg.train, cfg.rft
    per_check = t.validation.n_tasks * t.validation.k  # one harness on the validation tasks
    if cfg.baseline == "frozen_evolution":
        return _plan(search=n_harnesses * per_check)
    if cfg.baseline == "whale":
        collected = r.rounds * r.tasks_per_round * r.k * min(r.harnesses, n_harnesses)
        return _plan(search=(r.rounds + 1) * n_harnesses * per_check, training=collected)
    if cfg.baseline == "harness_forge":
        branches = min(r.harnesses, n_harnesses)
        return _plan(
            search=n_harnesses * per_check + branches * per_check,
            training=branches * r.rounds * r.tasks_per_round * r.k,
        )
    if cfg.baseline == "harnessx":  # evolution rounds (at most) + segments (re-anchors: the pool as it starts)
        e, rounds = cfg.evolve, cfg.coupling.rounds
        per_round = e.diagnose.n_tasks * e.diagnose.k + e.children_per_parent * e.validation.max_tasks * e.validation.k
        n = t.updates // rounds
        segments = [n + (1 if i < t.updates % rounds else 0) for i in range(rounds)]
        checks = sum(math.ceil(u / t.reanchor_every) + 1 for u in segments)
        return _plan(
            search=rounds * per_round,
            training=t.updates * t.batch_tasks * t.k,
            validation=checks * n_harnesses * per_check,
        )
    first = t.updates * t.batch_tasks * t.k
    reanchors = math.ceil(t.updates / t.reanchor_every) + 1  # on schedule from update 0, and at the end
    plan = _plan(training=first, validation=reanchors * n_harnesses * per_check)
    if t.mode in RESCUE_MODES:
        plan["training_max"] = 2 * first
    return plan


def _plan(search: int = 0, training: int = 0, validation: int = 0) -> dict[str, int]:
    return {"search": search, "training_min": training, "training_max": training, "validation": validation}


def describe(plan: dict[str, int]) -> str:
    training = (
        f"{plan['training_min']:,}"
        if plan["training_min"] == plan["training_max"]
        else f"{plan['training_min']:,}-{plan['training_max']:,}"
    )
    return f"planned rollouts: search {plan['search']:,}, training {training}, validation {plan['validation']:,}"
