"""A training run's identity and plan: its id, its starting weights (the warm start), its task
sets and data order, its harnesses and its sampling seeds.

Everything here depends on the config alone (and the seed and step), so a resumed run
(tasks/train_checkpoints.py) redoes a step that was cut short with the same data and seeds.
Other phases name their warm start through `warm_start_config` too (evolution, the pool report,
the editor, the baselines).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path

from configs.schema import CONFIG_DIR, SftConfig, TrainConfig, load_config
from db.ids import run_id, stable_id
from harness_pool.pool_store import resolve_pool
from harness_pool.spec import HarnessSpec, load_harness
from rl.policy import Sampling
from tasks.resources import bench_tasks
from tasks.sft import checkpoint_name


class TrainingError(RuntimeError):
    """A training run that cannot start or continue; the message says how to fix it."""


# -- identity and warm start ----------------------------------------------------------------
def train_run_id(cfg: TrainConfig) -> str:
    """Same config, same run (the update budget excluded, so raising it extends the run)."""
    return run_id("train", cfg, tag=cfg.mode, exclude=frozenset({"updates"}))


def init_checkpoint(cfg: TrainConfig) -> str:
    """The starting weights: the warm-start checkpoint's name when warm_start is set."""
    sft_cfg = warm_start_config(cfg)
    return checkpoint_name(sft_cfg) if sft_cfg is not None else cfg.init


def warm_start_config(cfg: TrainConfig) -> SftConfig | None:
    """The SFT config named by warm_start (relative to the working directory or the repository)."""
    return sft_config_at(cfg.warm_start) if cfg.warm_start else None


def sft_config_at(warm_start: str) -> SftConfig:
    """An SFT config by path, relative to the working directory or the repository."""
    path = Path(warm_start)
    if not path.exists() and (CONFIG_DIR.parent / path).exists():
        path = CONFIG_DIR.parent / path
    return load_config(SftConfig, path)


# -- the plan -------------------------------------------------------------------------------
def task_sets(cfg: TrainConfig) -> tuple[list, list]:
    """(training tasks, validation tasks); validation from the training split is its tail and
    is removed from the training tasks."""
    train = bench_tasks(cfg.env, "train", tiers=cfg.tiers)
    if cfg.validation.split == "train":
        if len(train) <= cfg.validation.n_tasks:
            raise TrainingError(f"only {len(train)} training tasks: lower validation.n_tasks or add tiers")
        val, train = train[-cfg.validation.n_tasks :], train[: -cfg.validation.n_tasks]
    else:
        val = bench_tasks(cfg.env, cfg.validation.split, limit=cfg.validation.n_tasks)
    if cfg.task_ids is not None:
        known = {t.id for t in train}
        unknown = [t for t in cfg.task_ids if t not in known]
        if unknown:
            raise TrainingError(
                f"task_ids {', '.join(unknown[:3])}{' ...' if len(unknown) > 3 else ''} are not training tasks of "
                f"this run (tiers {cfg.tiers or 'all'}, validation tasks left out): ids look like "
                f"{cfg.env.benchmark}/train/0007"
            )
        wanted = set(cfg.task_ids)
        train = [t for t in train if t.id in wanted]
    return (train[: cfg.n_tasks] if cfg.n_tasks else train), val


def batch_for_step(task_ids: list[str], seed: int, batch: int, step: int) -> list[str]:
    """The step's benchmark tasks: epochs of seeded shuffles laid end to end (same on every resume)."""
    n = len(task_ids)
    if n == 0:
        raise TrainingError("no training tasks: run `hs data build-train dbbench` or relax tiers/n_tasks")
    picked = []
    for position in range(step * batch, (step + 1) * batch):
        epoch, offset = divmod(position, n)
        order = list(task_ids)
        random.Random(f"{seed}:{epoch}").shuffle(order)
        picked.append(order[offset])
    return picked


def harness_sets(cfg: TrainConfig) -> tuple[HarnessSpec, list[HarnessSpec], list[HarnessSpec]]:
    """(H0, the pool, the mixture), loaded from their files."""
    bench = cfg.env.benchmark
    return (
        load_harness(cfg.harness, bench),
        resolve_pool(cfg.pool, bench),
        [load_harness(n, bench) for n in cfg.mixture],
    )


@dataclass(frozen=True)
class RunContext:
    """What a training run resolves from its config once, when it registers (tasks/step_record.py
    register_train_run), and hands to every update's tasks: its id, its harnesses (H0, the pool,
    the mixture) and its training and validation task ids. The harness files are read once per
    run, not at every update, so a file edited while the run trains does not change it halfway
    (`hs train` refuses to resume a run whose harness files changed: cli/preflight.py)."""

    run_id: str
    h0: HarnessSpec
    pool: list[HarnessSpec]
    mixture: list[HarnessSpec]
    train_task_ids: list[str]
    val_task_ids: list[str]


def step_seed(seed: int, step: int, phase: int) -> int:
    return int(stable_id("sampling", seed, step, phase)[:8], 16)


def step_sampling(cfg: TrainConfig, step: int, phase: int) -> Sampling:
    """The sampling settings of one phase of one update (0: first groups, 1: rescues, 2: re-anchor)."""
    s = cfg.sampling
    return Sampling(s.temperature, s.top_p, s.max_new_tokens, seed=step_seed(cfg.seed, step, phase))
