"""Repository repair as the platform sees it: one `Benchmark` object (registered in envs/registry.py)."""

from __future__ import annotations

from pathlib import Path

from envs.base import Benchmark
from envs.repair import demos, detectors
from envs.repair.data import SPLITS, TIERS


def _load(split, data_dir=None, limit=None, tiers=None):
    from envs.repair.data import load_split

    return load_split(split, limit=limit, tiers=tuple(tiers) if tiers else None)


def _make_env(task, env):
    from envs.repair.env import RepairEnv

    return RepairEnv(task, max_rounds=env.max_rounds)


def _check_gold(split, limit=None, env=None):
    from envs.repair.gold import check_gold

    return check_gold(split, limit=limit)


BENCHMARK = Benchmark(
    name="repair",
    splits=SPLITS,
    tiers=TIERS,
    validation_split="dev",
    test_split="test",
    load=_load,
    make_env=_make_env,
    fields=lambda task: task.fields(),
    behaviour_tags=detectors.behaviour_tags,
    behaviours=detectors.TAGS,
    failure_kind=detectors.failure_kind,
    demo_replies=demos.demo_replies,
    protocols="envs.repair.protocol",
    rules="envs.repair.rules",
    blurb="repository repair, where a language model fixes a bug in a real Python project by reading, "
    "editing and testing its code until the project's failing tests pass",
    check_gold=_check_gold,
    harness_dir=Path(__file__).resolve().parents[2] / "harness_pool" / "harnesses" / "repair",
    runs_model_code=True,
)
