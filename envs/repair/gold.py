"""Gold replay for repair: every task's gold fix, applied through the environment's own
`replace` and judged by its verifier, must pass; and the control, submitting the buggy copy
untouched, must not. The first proves the injection, the fix and the test lists agree; the
second that a task is not solved for free."""

from __future__ import annotations

from pathlib import Path

from envs.base import CallAction, GoldReport, ToolCall
from envs.repair.data import RepairTask, load_split
from envs.repair.env import RepairEnv


def play(task: RepairTask, calls: list[ToolCall]):
    """Apply `calls` in a fresh copy, then submit; the verdict."""
    with RepairEnv(task, max_rounds=len(calls) + 1) as env:
        env.reset()
        for call in calls:
            env.step(CallAction((call,)))
        env.step(CallAction((ToolCall("submit"),)))
        return env.verify()


def check_gold(
    split: str = "dev",
    limit: int | None = None,
    *,
    tasks: list[RepairTask] | None = None,
    generated_dir: Path | str | None = None,
) -> GoldReport:
    tasks = tasks if tasks is not None else load_split(split, generated_dir=generated_dir, limit=limit)
    report = GoldReport("repair", split, "gold fixes through the environment", "submit the buggy copy")
    for task in sorted(tasks, key=lambda t: t.tier):
        verdict = play(task, [ToolCall("replace", (), dict(task.gold_edit))])
        report.judge_seconds.append(verdict.details["test_seconds"])
        control = play(task, []).success
        report.record(task.tier, verdict.success, control, task.id, f"gold fix did not pass: {verdict.details}")
    return report
