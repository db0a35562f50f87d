"""Warm-start demonstrations for repair, from the gold fix: read the failing test, read the
function around the bug, replace, run the tests, submit (rl/sft.py replays them through the
real environment and keeps the ones that pass)."""

from __future__ import annotations

import random

from envs.repair.data import RepairTask


def _window(task: RepairTask, rng: random.Random) -> tuple[int, int]:
    start = max(task.line - rng.randint(8, 20), 1)
    return start, task.line + rng.randint(8, 20)


def demo_replies(task: RepairTask, rng: random.Random, inspect_prob: float = 0.5) -> list[str]:
    test_file, _, test_name = task.fail_to_pass[0].partition("::")
    function = test_name.split("::")[-1].split("[")[0]
    replies = []
    if rng.random() < inspect_prob:
        replies.append(f"The failing test shows what is expected; I find it first.\nAction: search {function}")
        replies.append(f"I read the failing test.\nAction: read_file {test_file}")
    module = task.file.rsplit("/", 1)[-1][: -len(".py")]
    first, last = _window(task, rng)
    replies.append(
        f"The test exercises {module}; I read the code near the bug.\nAction: read_file {task.file} {first}-{last}"
    )
    edit = task.gold_edit
    blocks = f"```old\n{edit['old']}```\n```new\n{edit['new']}```"
    replies.append(f"This line is wrong; I fix it.\nAction: replace {edit['path']}\n{blocks}")
    replies.append("I run the tests to check the fix.\nAction: run_tests")
    replies.append("The tests pass, so I submit.\nAction: submit")
    return replies
