"""Gold replay for TextWorld: the generator's walkthrough, played through the environment, must win;
and the control, playing nothing but "look" for the same number of rounds, must not.

The walkthrough check proves the environment runs the game the generator built and that the
verifier reads the game's own win condition; the control proves a win is not free.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from envs.base import CommandAction
from envs.textworld.data import GameTask, load_split
from envs.textworld.env import TextWorldEnv


@dataclass
class GoldReport:
    split: str
    per_tier: dict[str, tuple[int, int]] = field(default_factory=dict)  # tier -> (walkthrough won, total)
    control_wins: int = 0
    disagreements: list[tuple[str, str]] = field(default_factory=list)  # (task id, reason)

    @property
    def total(self) -> int:
        return sum(total for _, total in self.per_tier.values())

    @property
    def agreement(self) -> float:
        return sum(won for won, _ in self.per_tier.values()) / self.total if self.total else 1.0

    def format_lines(self) -> list[str]:
        """Printable summary; the last line is exactly `agreement: X%` (one decimal)."""
        lines = [f"gold replay: textworld/{self.split} (walkthroughs through the environment)"]
        lines += [f"  {tier:<6} {won:>4}/{total:<4}" for tier, (won, total) in sorted(self.per_tier.items())]
        lines += [f"  DISAGREE {task_id}: {reason}" for task_id, reason in self.disagreements]
        lines.append(f"  control (only 'look'): {self.control_wins}/{self.total} won")
        lines.append(f"agreement: {100.0 * self.agreement:.1f}%")
        return lines


def play(task: GameTask, commands: list[str], max_rounds: int | None = None) -> tuple[bool, str]:
    """Play `commands` in a fresh instance; (won, last observation)."""
    with TextWorldEnv(task, max_rounds=max_rounds or max(len(commands), 1)) as env:
        env.reset()
        observation = ""
        for command in commands:
            if env.done:
                break
            observation = env.step(CommandAction(command)).observation
        return env.verify().success, observation


def check_gold(
    split: str = "dev",
    limit: int | None = None,
    *,
    tasks: list[GameTask] | None = None,
    generated_dir: Path | str | None = None,
) -> GoldReport:
    tasks = tasks if tasks is not None else load_split(split, limit=limit, generated_dir=generated_dir)
    report = GoldReport(split=split)
    for task in tasks:
        won, last = play(task, list(task.walkthrough))
        done, total = report.per_tier.get(task.tier, (0, 0))
        report.per_tier[task.tier] = (done + int(won), total + 1)
        if not won:
            report.disagreements.append((task.id, f"walkthrough did not win; last answer: {last[:160]!r}"))
        control_won, _ = play(task, ["look"] * len(task.walkthrough))
        report.control_wins += int(control_won)
    return report
