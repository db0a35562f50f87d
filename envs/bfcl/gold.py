"""Gold replay for BFCL: each turn's ground-truth calls through the environment, then the reply that
ends the turn, must pass every turn's check; the control, replying without any call, must not
(except a task whose every turn needs no call)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from envs.base import CallAction, ReplyAction
from envs.bfcl.calls import parse_calls
from envs.bfcl.data import BfclTask, load_split
from envs.bfcl.env import BfclEnv


@dataclass
class GoldReport:
    split: str
    per_category: dict[str, tuple[int, int]] = field(default_factory=dict)  # category -> (passed, total)
    control_wins: int = 0
    disagreements: list[tuple[str, str]] = field(default_factory=list)

    @property
    def total(self) -> int:
        return sum(total for _, total in self.per_category.values())

    @property
    def agreement(self) -> float:
        return sum(ok for ok, _ in self.per_category.values()) / self.total if self.total else 1.0

    def format_lines(self) -> list[str]:
        lines = [f"gold replay: bfcl/{self.split} (ground-truth calls through the environment)"]
        lines += [f"  {c:<13} {ok:>4}/{total:<4}" for c, (ok, total) in self.per_category.items()]
        lines += [f"  DISAGREE {task_id}: {reason}" for task_id, reason in self.disagreements]
        lines.append(f"  control (reply without calls): {self.control_wins}/{self.total} passed")
        lines.append(f"agreement: {100.0 * self.agreement:.1f}%")
        return lines


def gold_actions(task: BfclTask) -> list:
    actions = []
    for calls in task.ground_truth:
        if calls:
            actions.append(CallAction(tuple(c for text in calls for c in parse_calls(text, max_chars=None))))
        actions.append(ReplyAction("Done."))
    return actions


def play(task: BfclTask, actions: list):
    with BfclEnv(task, max_rounds=len(actions) + 1) as env:
        env.reset()
        for action in actions:
            env.step(action)
        return env.verify()


def check_gold(split: str = "dev", limit: int | None = None, *, tasks: list[BfclTask] | None = None) -> GoldReport:
    tasks = tasks if tasks is not None else load_split(split, limit=limit)
    report, counts = GoldReport(split=split), Counter()
    for task in tasks:
        verdict = play(task, gold_actions(task))
        ok, total = report.per_category.get(task.category, (0, 0))
        report.per_category[task.category] = (ok + int(verdict.success), total + 1)
        if not verdict.success:
            failed = next(c for c in verdict.details["checks"] if not c["valid"])
            report.disagreements.append((task.id, f"{task.bfcl_id} turn {failed['turn']}: {failed.get('error')}"))
        control = play(task, [ReplyAction("I cannot help with that.")] * len(task.turns))
        report.control_wins += int(control.success)
        counts[task.category] += 1
    return report
