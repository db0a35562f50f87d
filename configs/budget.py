"""The rollouts a pipeline config plans to spend, before it runs (the paper's equal-budget point).

Counted the way the report's resource table counts what was spent (analysis/resources.py):
search (a baseline's harness selections), training (the rollouts updates or fine-tunes learn
from) and validation (re-anchors); evaluation and the pool's evolution are left out, since every
method of a comparison shares them. A rescue group is spent only when its first group dies, so
for harness_s and h0_rescue the training figure is a range: no dead group .. every group dead.
HarnessX's coupled evolution is planned at its upper bound: every candidate validated on
max_tasks, and its re-anchors as if every candidate of every round so far joined the pool.

`check_budget` holds a plan to the config's `budget:` caps before anything runs: every figure
but rescue training is an upper bound, so a plan within the caps cannot exceed them, and rescue
training is held to its cap while it runs (the training flow stops before an update that could
cross it, TrainConfig.rollout_budget).
"""

from __future__ import annotations

import math

from configs.pipeline import PipelineConfig
from configs.schema import ConfigError


def planned_rollouts(cfg: PipelineConfig, n_harnesses: int) -> dict[str, int]:
    """{search, training_min, training_max, validation}; `n_harnesses` counts H0 and the pool's
    distinct siblings (the harnesses a search or re-anchor runs)."""
    t, r = cfg.train, cfg.rft
    per_check = t.validation.n_tasks * t.validation.k  # one harness on the validation tasks
    h0_only = t.validation.harnesses == "h0"  # re-anchors measure H0 alone
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
        grown = [n_harnesses + (i + 1) * e.children_per_parent for i in range(rounds)]  # round i evolves first
        return _plan(
            search=rounds * per_round,
            training=t.updates * t.batch_tasks * t.k,
            validation=sum(
                _reanchors(u, t.reanchor_every) * (1 if h0_only else h) * per_check for u, h in zip(segments, grown)
            ),
        )
    plan = _plan(
        training=t.updates * t.batch_tasks * t.k,
        validation=_reanchors(t.updates, t.reanchor_every) * (1 if h0_only else n_harnesses) * per_check,
    )
    plan["training_max"] = t.updates * t.max_update_rollouts()
    return plan


def _reanchors(updates: int, every: int) -> int:
    return math.ceil(updates / every) + 1  # on schedule from update 0, and at the end


def check_budget(cfg: PipelineConfig, plan: dict[str, int]) -> None:
    """A one-line ConfigError when the plan can exceed a cap of `budget:`. Rescue training above
    its cap only at its upper bound is allowed: the training flow stops at the cap."""
    b = cfg.budget
    if b.search_rollouts is not None and plan["search"] > b.search_rollouts:
        raise ConfigError(
            f"budget.search_rollouts {b.search_rollouts:,}: this config plans up to {plan['search']:,} search "
            "rollouts; raise the cap or search less (fewer rft.rounds, validation tasks or evolution candidates)"
        )
    if b.training_rollouts is not None and plan["training_min"] > b.training_rollouts:
        raise ConfigError(
            f"budget.training_rollouts {b.training_rollouts:,}: this config plans {plan['training_min']:,} training "
            "rollouts; raise the cap or train on fewer (train.updates, train.batch_tasks, rft.tasks_per_round)"
        )


def _plan(search: int = 0, training: int = 0, validation: int = 0) -> dict[str, int]:
    return {"search": search, "training_min": training, "training_max": training, "validation": validation}


def describe(plan: dict[str, int], cfg: PipelineConfig | None = None) -> str:
    training = (
        f"{plan['training_min']:,}"
        if plan["training_min"] == plan["training_max"]
        else f"{plan['training_min']:,}-{plan['training_max']:,}"
    )
    out = f"planned rollouts: search {plan['search']:,}, training {training}, validation {plan['validation']:,}"
    if cfg is not None:
        caps = {"search": cfg.budget.search_rollouts, "training": cfg.budget.training_rollouts}
        shown = [f"{k} {v:,}" for k, v in caps.items() if v is not None]
        out += "; caps: " + ", ".join(shown) if shown else ""
    return out
