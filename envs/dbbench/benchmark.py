"""DBBench as the platform sees it: one `Benchmark` object (registered in envs/registry.py)."""

from __future__ import annotations

from pathlib import Path

from envs.base import Benchmark
from envs.dbbench import demos, detectors
from envs.dbbench.data import TIERS, check_generated_train_split


def _load(split, data_dir=None, limit=None, tiers=None):
    from envs.dbbench.data import load_split

    return load_split(split, data_dir=data_dir, limit=limit, tiers=tuple(tiers) if tiers else None)


def _make_env(task, env):
    from envs.dbbench.env import DbBenchEnv

    return DbBenchEnv(task, backend=env.backend, max_rounds=env.max_rounds, mysql_url=env.mysql_url)


def _check_gold(split, limit=None, env=None):
    from envs.dbbench.gold import check_gold

    return check_gold(split, backend=env.backend if env else "sqlite", limit=limit)


TRAIN_SPLIT_SEED, TRAIN_SPLIT_SIZE = 0, 400


def _prepare_training_split(env) -> str:
    """The generated training split (seed 0, 400 tasks, all tiers), built when it is missing."""
    from envs.base import DataError
    from envs.dbbench.data import resolve_generated_dir, split_path
    from envs.dbbench.train_split import build_train_split

    try:
        return str(split_path("train", data_dir=env.data_dir))
    except DataError:
        target = resolve_generated_dir(None) / "dbbench" / "train.jsonl"
        build_train_split(target, seed=TRAIN_SPLIT_SEED, n_tasks=TRAIN_SPLIT_SIZE, data_dir=env.data_dir)
        return str(target)


BENCHMARK = Benchmark(
    name="dbbench",
    splits=("train", "dev", "standard"),
    tiers=TIERS,
    validation_split="dev",
    test_split="standard",
    load=_load,
    make_env=_make_env,
    fields=detectors.task_fields,
    behaviour_tags=detectors.behaviour_tags,
    behaviours=detectors.TAGS,
    failure_kind=detectors.failure_kind,
    demo_replies=demos.demo_replies,
    protocols="envs.dbbench.protocol",
    rules="envs.dbbench.rules",
    blurb="DBBench, a benchmark where a language model answers questions about one SQL table (or changes it) "
    "through a text protocol",
    check_gold=_check_gold,
    harness_dir=Path(__file__).resolve().parents[2] / "harness_pool" / "harnesses" / "dbbench",
    prepare_training_split=_prepare_training_split,
    check_training_split=check_generated_train_split,
)
