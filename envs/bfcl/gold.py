"""Gold replay for BFCL: each turn's ground-truth calls through the environment, then the reply that
ends the turn, must pass every turn's check; the control, replying without any call, must not
(except a task whose every turn needs no call)."""

from __future__ import annotations

from envs.base import CallAction, GoldReport, ReplyAction
from envs.bfcl.calls import parse_calls
from envs.bfcl.data import BfclTask, load_split
from envs.bfcl.env import BfclEnv


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
    report = GoldReport("bfcl", split, "ground-truth calls through the environment", "reply without calls")
    for task in tasks:
        verdict = play(task, gold_actions(task))
        control = play(task, [ReplyAction("I cannot help with that.")] * len(task.turns))
        failed = next((c for c in verdict.details["checks"] if not c["valid"]), {})
        why = f"{task.bfcl_id} turn {failed.get('turn')}: {failed.get('error')}"
        report.record(task.category, verdict.success, control.success, task.id, why)
    return report
