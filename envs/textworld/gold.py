"""Gold replay for TextWorld: the generator's walkthrough, played through the environment, must win;
and the control, playing nothing but "look" for the same number of rounds, must not.

The walkthrough check proves the environment runs the game the generator built and that the
verifier reads the game's own win condition; the control proves a win is not free.
"""

from __future__ import annotations

from pathlib import Path

from envs.base import CommandAction, GoldReport
from envs.textworld.data import GameTask, load_split
from envs.textworld.env import TextWorldEnv


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
    report = GoldReport("textworld", split, "walkthroughs through the environment", "only 'look'")
    for task in sorted(tasks, key=lambda t: t.tier):
        won, last = play(task, list(task.walkthrough))
        control_won, _ = play(task, ["look"] * len(task.walkthrough))
        report.record(task.tier, won, control_won, task.id, f"walkthrough did not win; last answer: {last[:160]!r}")
    return report
