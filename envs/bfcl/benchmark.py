"""BFCL multi-turn as the platform sees it: one `Benchmark` object (registered in envs/registry.py)."""

from __future__ import annotations

from pathlib import Path

from envs.base import Benchmark, DataError
from envs.bfcl import demos, detectors
from envs.bfcl.data import CATEGORIES, SPLITS


def _load(split, data_dir=None, limit=None, tiers=None):
    from envs.bfcl.data import load_split

    return load_split(split, limit=limit, tiers=tuple(tiers) if tiers else None)


def _make_env(task, env):
    try:
        from envs.bfcl.env import BfclEnv
    except ImportError as exc:  # bfcl-eval is installed by `make setup`
        raise DataError(f"bfcl-eval is not installed ({exc}): run `make setup`") from exc
    return BfclEnv(task, max_rounds=env.max_rounds)


def _check_gold(split, limit=None, env=None):
    from envs.bfcl.gold import check_gold

    return check_gold(split, limit=limit)


BENCHMARK = Benchmark(
    name="bfcl",
    splits=SPLITS,
    tiers=CATEGORIES,
    validation_split="dev",
    test_split="test",
    load=_load,
    make_env=_make_env,
    fields=detectors.task_fields,
    behaviour_tags=detectors.behaviour_tags,
    behaviours=detectors.TAGS,
    failure_kind=detectors.failure_kind,
    demo_replies=demos.demo_replies,
    protocols="envs.bfcl.protocol",
    rules="envs.bfcl.rules",
    blurb="BFCL multi-turn, where a language model serves a user's successive requests by calling functions "
    "of stateful apps",
    check_gold=_check_gold,
    harness_dir=Path(__file__).resolve().parents[2] / "harness_pool" / "harnesses" / "bfcl",
    runs_model_code=True,
)
