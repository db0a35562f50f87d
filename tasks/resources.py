"""Per-process handles that Prefect tasks share: the policy, the database engine, task lists.

A model is loaded once per worker process and reused by every rollout-group task that asks
for the same policy config; tasks still receive and return only small references.
"""

from __future__ import annotations

import json
import threading
from functools import lru_cache

from configs.schema import EnvConfig, PolicyConfig
from db.engine import database_url, make_engine, sqlite_file, upgrade
from envs.registry import benchmark
from rl.batching import BatchingPolicy
from rl.policy import Policy

_LOCK = threading.Lock()
_POLICIES: dict[str, Policy] = {}
_UPGRADED: set[str] = set()


def get_policy(cfg: PolicyConfig) -> Policy:
    key = cfg.model_dump_json()
    with _LOCK:
        if key not in _POLICIES:
            if cfg.backend == "openai":
                from rl.openai_policy import OpenAIChatPolicy

                _POLICIES[key] = OpenAIChatPolicy(model=cfg.model, base_url=cfg.base_url, api_key_env=cfg.api_key_env)
            else:
                from rl.transformers_policy import TransformersPolicy

                # one local model at a time: the pipeline evaluates policies one after another, and a
                # group still running keeps its own reference to the policy it started with
                _drop_local_policies()
                # Concurrent rollout groups (Prefect worker threads) share batched generate calls.
                _POLICIES[key] = BatchingPolicy(
                    TransformersPolicy(model=cfg.model, device=cfg.device, dtype=cfg.dtype, engine=cfg.engine)
                )
        return _POLICIES[key]


def drop_local_policies() -> None:
    """Free the local models this process holds (a phase that no longer samples from them)."""
    with _LOCK:
        _drop_local_policies()


def _drop_local_policies() -> None:
    from rl.transformers_policy import forget_shared_models

    for stale in [k for k, p in _POLICIES.items() if isinstance(p, BatchingPolicy)]:
        del _POLICIES[stale]
    forget_shared_models()


def get_engine(url: str | None):
    """Engine for `url` (None: HS_DATABASE_URL or the local SQLite file), migrated to head once.

    A SQLite file deleted since (a long-lived worker between flow runs) is created and
    migrated afresh, instead of pooled connections writing into the unlinked file.
    """
    engine = _engine(url or database_url())  # resolved now: HS_DATABASE_URL may change in a long-lived process
    path = sqlite_file(engine.url)
    with _LOCK:
        key = str(engine.url)
        if path is not None and not path.exists():
            engine.dispose()
            _UPGRADED.discard(key)
        if key not in _UPGRADED:
            upgrade(engine.url)
            _UPGRADED.add(key)
    return engine


@lru_cache(maxsize=8)
def _engine(url: str | None):
    return make_engine(url)


@lru_cache(maxsize=16)
def _split(name: str, split: str, data_dir: str | None) -> tuple:
    return tuple(benchmark(name).load(split, data_dir=data_dir))


def bench_tasks(
    env: EnvConfig, split: str, limit: int | None = None, tiers: list[str] | None = None, every: int = 1
) -> list:
    """The tasks of a split of the configured benchmark (`tiers`: only those difficulty tiers)."""
    tasks = [t for t in _split(env.benchmark, split, env.data_dir) if not tiers or t.tier in tiers][::every]
    return tasks[:limit] if limit else tasks


def bench_task(env: EnvConfig, bench_task_id: str):
    parts = bench_task_id.split("/")
    if len(parts) != 3:
        raise LookupError(f"benchmark task id {bench_task_id!r}: ids look like {env.benchmark}/dev/0007")
    name, split = parts[0], parts[1]
    for task in _split(name, split, env.data_dir):
        if task.id == bench_task_id:
            return task
    raise LookupError(f"benchmark task {bench_task_id} not in split {split}")


def env_factory(env: EnvConfig):
    """Builds one fresh environment per rollout, for the benchmark of each task."""

    def make(task):
        return benchmark(getattr(task, "benchmark", env.benchmark)).make_env(task, env)

    return make


def canonical(obj) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str)
