"""The toy benchmark's registration object (found through the harness_s.benchmarks entry point)."""

from __future__ import annotations

from pathlib import Path

from envs.base import Benchmark, CommandAction, GoldReport
from toy_bench.env import SPLITS, TIERS, ToyEnv, load_split


def _load(split, data_dir=None, limit=None, tiers=None):
    return load_split(split, limit=limit, tiers=tuple(tiers) if tiers else None)


def _behaviour_tags(steps, ended) -> list[str]:
    return ["said_once"] if sum(isinstance(a, CommandAction) for a, _ in steps) == 1 else []


def _failure_kind(verdict, end_reason, steps) -> str | None:
    if verdict.success:
        return None
    return "format_error" if end_reason == "format_error" else "wrong_word"


def _demo_replies(task, rng, inspect_prob=0.0) -> list[str]:
    return [f"The word is {task.word}.\nAction: say {task.word}"]


def _check_gold(split, limit=None, env=None) -> GoldReport:
    report = GoldReport("toy", split, "say the word", "say 'nothing'")
    for task in load_split(split, limit=limit):
        gold, control = ToyEnv(task), ToyEnv(task)
        gold.reset(), control.reset()
        gold.step(CommandAction(f"say {task.word}")), control.step(CommandAction("say nothing"))
        report.record(task.tier, gold.verify().success, control.verify().success, task.id, "gold word refused")
    return report


BENCHMARK = Benchmark(
    name="toy",
    splits=tuple(SPLITS),
    tiers=TIERS,
    validation_split="dev",
    test_split="test",
    load=_load,
    make_env=lambda task, env: ToyEnv(task, max_rounds=env.max_rounds),
    fields=lambda task: task.fields(),
    behaviour_tags=_behaviour_tags,
    behaviours=("said_once",),
    failure_kind=_failure_kind,
    demo_replies=_demo_replies,
    protocols="toy_bench.protocol",
    rules="toy_bench.rules",
    blurb="a toy benchmark where a language model says back a secret word shown in the task",
    check_gold=_check_gold,
    harness_dir=Path(__file__).parent / "harnesses",
)
