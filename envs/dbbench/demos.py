"""Warm-start demonstrations for DBBench: a training task's gold SQL and answer, written as H0's
text protocol turns (rl/sft.py replays them through the real environment and keeps the verified)."""

from __future__ import annotations

import json
import random


def demo_replies(task, rng: random.Random, inspect_prob: float = 0.5) -> list[str]:
    """The scripted assistant turns for one training task in H0's text protocol."""
    replies = []
    if rng.random() < inspect_prob:
        replies.append(
            f"First I look at a few rows of the table.\nAction: Operation\n```sql\n"
            f"SELECT * FROM `{task.table_name}` LIMIT 3;\n```"
        )
    if task.is_mutation:
        what = "insert the new row" if task.task_type == "INSERT" else "update the matching rows"
        replies.append(f"I will {what}.\nAction: Operation\n```sql\n{task.gold_sql}\n```")
        replies.append("The table is changed as requested.\nAction: Answer\nFinal Answer: []")
    else:
        replies.append(f"I will compute the answer with one query.\nAction: Operation\n```sql\n{task.gold_sql}\n```")
        replies.append(f"The query gives the answer.\nAction: Answer\nFinal Answer: {json.dumps(list(task.label))}")
    return replies
