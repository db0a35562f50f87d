"""TextWorld as the platform sees it: one `Benchmark` object (registered in envs/registry.py)."""

from __future__ import annotations

from pathlib import Path

from envs.base import Benchmark, DataError
from envs.textworld import demos, detectors
from envs.textworld.data import SPLITS, TIERS


def _load(split, data_dir=None, limit=None, tiers=None):
    from envs.textworld.data import load_split

    return load_split(split, limit=limit, tiers=tuple(tiers) if tiers else None)


def _make_env(task, env):
    try:
        from envs.textworld.env import TextWorldEnv
    except ImportError as exc:  # textworld is installed by `make setup`
        raise DataError(f"textworld is not installed ({exc}): run `make setup`") from exc
    return TextWorldEnv(task, max_rounds=env.max_rounds)


def _check_gold(split, limit=None, env=None):
    from envs.textworld.gold import check_gold

    return check_gold(split, limit=limit)


BENCHMARK = Benchmark(
    name="textworld",
    splits=tuple(SPLITS),
    tiers=tuple(t.name for t in TIERS),
    validation_split="dev",
    test_split="test",
    load=_load,
    make_env=_make_env,
    fields=lambda task: task.fields(),
    behaviour_tags=detectors.behaviour_tags,
    behaviours=detectors.TAGS,
    failure_kind=detectors.failure_kind,
    demo_replies=demos.demo_replies,
    protocols="envs.textworld.protocol",
    rules="envs.textworld.rules",
    blurb="TextWorld, text adventure games where a language model reaches a goal by typing commands",
    check_gold=_check_gold,
    harness_dir=Path(__file__).resolve().parents[2] / "harness_pool" / "harnesses" / "textworld",
    runs_model_code=True,
)
