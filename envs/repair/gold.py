"""Gold replay for repair: every task's gold fix, applied through the environment's own
`replace` and judged by its verifier, must pass; and the control, submitting the buggy copy
untouched, must not. The first proves the injection, the fix and the test lists agree; the
second that a task is not solved for free."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from envs.base import CallAction, ToolCall
from envs.repair.data import RepairTask, load_split
from envs.repair.env import RepairEnv


@dataclass
class GoldReport:
    split: str
    per_tier: dict[str, tuple[int, int]] = field(default_factory=dict)  # project -> (gold passed, total)
    control_passes: int = 0
    disagreements: list[tuple[str, str]] = field(default_factory=list)
    test_seconds: list[float] = field(default_factory=list)

    @property
    def total(self) -> int:
        return sum(total for _, total in self.per_tier.values())

    @property
    def agreement(self) -> float:
        return sum(ok for ok, _ in self.per_tier.values()) / self.total if self.total else 1.0

    def format_lines(self) -> list[str]:
        """Printable summary; the last line is exactly `agreement: X%` (one decimal)."""
        lines = [f"gold replay: repair/{self.split} (gold fixes through the environment)"]
        lines += [f"  {tier:<10} {ok:>4}/{total:<4}" for tier, (ok, total) in sorted(self.per_tier.items())]
        lines += [f"  DISAGREE {task_id}: {reason}" for task_id, reason in self.disagreements]
        lines.append(f"  control (submit the buggy copy): {self.control_passes}/{self.total} passed")
        if self.test_seconds:
            lines.append(
                f"  mean wall time of a judged test run: {sum(self.test_seconds) / len(self.test_seconds):.2f} s"
            )
        lines.append(f"agreement: {100.0 * self.agreement:.1f}%")
        return lines


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
    report = GoldReport(split=split)
    for task in tasks:
        verdict = play(task, [ToolCall("replace", (), dict(task.gold_edit))])
        report.test_seconds.append(verdict.details["test_seconds"])
        ok, total = report.per_tier.get(task.tier, (0, 0))
        report.per_tier[task.tier] = (ok + int(verdict.success), total + 1)
        if not verdict.success:
            report.disagreements.append((task.id, f"gold fix did not pass: {verdict.details}"))
        report.control_passes += int(play(task, []).success)
    return report
