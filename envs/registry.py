"""The benchmarks the platform runs, each behind the same `Environment` contract.

A benchmark is one `envs/<name>/` package plus one entry here: how to load a split's tasks, how
to build one rollout's environment, the template placeholders its tasks give a harness, and its
behaviour detectors and failure kinds (diagnosis and RQ4). Flows, tasks and the rollout engine
only ask this registry, so adding a benchmark touches no flow. Packages are imported when a
benchmark is first used, so DBBench runs never import TextWorld.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from envs.base import Action, DataError, Environment, StepResult, Verdict

# (action, what the environment answered) for every action that reached the environment
Steps = list[tuple[Action, StepResult]]


@dataclass(frozen=True)
class Benchmark:
    name: str
    splits: tuple[str, ...]  # every split name; the training split is "train"
    tiers: tuple[str, ...]  # difficulty tiers (or categories) of its tasks, for `tiers:` in configs
    validation_split: str
    test_split: str
    load: Callable[..., list]  # (split, data_dir, limit, tiers) -> tasks in a stable order
    make_env: Callable[..., Environment]  # (task, env config) -> a fresh, isolated environment
    fields: Callable[[object], dict[str, str]]  # template placeholders of a task
    behaviour_tags: Callable[[Steps, bool], list[str]]  # (steps, ended by an answer or a win)
    # (verdict, end reason, steps); the rollout engine sets "env_error" itself (envs.base.ENV_ERROR)
    failure_kind: Callable[[Verdict, str, Steps], str | None]
    demo_replies: Callable[..., list[str]]  # (training task, rng, inspect_prob) -> H0 turns that solve it
    runs_model_code: bool = False  # its environment executes what the policy writes: needs the sandbox (sandbox/)


def _dbbench() -> Benchmark:
    from envs.dbbench import demos, detectors
    from envs.dbbench.data import TIERS, load_split
    from envs.dbbench.env import DbBenchEnv

    def load(split, data_dir=None, limit=None, tiers=None):
        return load_split(split, data_dir=data_dir, limit=limit, tiers=tuple(tiers) if tiers else None)

    def make_env(task, env):
        return DbBenchEnv(task, backend=env.backend, max_rounds=env.max_rounds, mysql_url=env.mysql_url)

    return Benchmark(
        "dbbench", ("train", "dev", "standard"), TIERS, "dev", "standard", load, make_env,
        detectors.task_fields, detectors.behaviour_tags, detectors.failure_kind, demos.demo_replies,
    )  # fmt: skip


def _textworld() -> Benchmark:
    try:
        from envs.textworld import demos, detectors
        from envs.textworld.data import SPLITS, TIERS, load_split
        from envs.textworld.env import TextWorldEnv
    except ImportError as exc:  # textworld is installed by `make setup`
        raise DataError(f"TextWorld is not installed ({exc}): run `make setup`") from exc

    def load(split, data_dir=None, limit=None, tiers=None):
        return load_split(split, limit=limit, tiers=tuple(tiers) if tiers else None)

    def make_env(task, env):
        return TextWorldEnv(task, max_rounds=env.max_rounds)

    return Benchmark(
        "textworld", tuple(SPLITS), tuple(t.name for t in TIERS), "dev", "test", load, make_env,
        lambda task: task.fields(), detectors.behaviour_tags, detectors.failure_kind, demos.demo_replies, True,
    )  # fmt: skip


def _bfcl() -> Benchmark:
    try:
        from envs.bfcl import demos, detectors
        from envs.bfcl.data import CATEGORIES, SPLITS, load_split
        from envs.bfcl.env import BfclEnv
    except ImportError as exc:  # bfcl-eval is installed by `make setup`
        raise DataError(f"BFCL is not installed ({exc}): run `make setup`") from exc

    def load(split, data_dir=None, limit=None, tiers=None):
        return load_split(split, limit=limit, tiers=tuple(tiers) if tiers else None)

    def make_env(task, env):
        return BfclEnv(task, max_rounds=env.max_rounds)

    return Benchmark(
        "bfcl", SPLITS, CATEGORIES, "dev", "test", load, make_env,
        detectors.task_fields, detectors.behaviour_tags, detectors.failure_kind, demos.demo_replies, True,
    )  # fmt: skip


def _repair() -> Benchmark:
    from envs.repair import demos, detectors
    from envs.repair.data import SPLITS, TIERS, load_split
    from envs.repair.env import RepairEnv

    def load(split, data_dir=None, limit=None, tiers=None):
        return load_split(split, limit=limit, tiers=tuple(tiers) if tiers else None)

    def make_env(task, env):
        return RepairEnv(task, max_rounds=env.max_rounds)

    return Benchmark(
        "repair", SPLITS, TIERS, "dev", "test", load, make_env,
        lambda task: task.fields(), detectors.behaviour_tags, detectors.failure_kind, demos.demo_replies, True,
    )  # fmt: skip


_BUILDERS: dict[str, Callable[[], Benchmark]] = {
    "dbbench": _dbbench, "textworld": _textworld, "bfcl": _bfcl, "repair": _repair,
}  # fmt: skip
_CACHE: dict[str, Benchmark] = {}
NAMES = tuple(_BUILDERS)


def benchmark(name: str) -> Benchmark:
    if name not in _BUILDERS:
        raise DataError(f"unknown benchmark '{name}': the platform has {', '.join(NAMES)}")
    if name not in _CACHE:
        _CACHE[name] = _BUILDERS[name]()
    return _CACHE[name]


def check_name(name: str) -> str:
    """A benchmark name for a pydantic validator: the name, or ValueError listing the known ones."""
    if name not in _BUILDERS:
        raise ValueError(f"unknown benchmark '{name}': use one of {', '.join(NAMES)}")
    return name


def behaviours(name: str) -> tuple[str, ...]:
    """Every behaviour tag the benchmark's detectors can give, in report order (imports only the
    detectors module, so a report needs no benchmark package installed)."""
    from importlib import import_module

    check_name(name)
    return import_module(f"envs.{name}.detectors").TAGS
