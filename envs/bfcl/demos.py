"""Warm-start demonstrations for BFCL: each turn's ground-truth calls, then a reply that ends the
turn, as H0's text protocol turns (rl/sft.py replays them and keeps those that pass every turn)."""

from __future__ import annotations

import random

from envs.bfcl.calls import parse_calls


def demo_replies(task, rng: random.Random, inspect_prob: float = 0.5) -> list[str]:
    replies = []
    for calls in task.ground_truth:
        if calls:
            text = "[" + ", ".join(c.text() for t in calls for c in parse_calls(t, max_chars=None)) + "]"
            replies.append(f"I will call the functions this request needs.\nAction: call\n```python\n{text}\n```")
            replies.append("Action: reply\nDone: I have carried out your request.")
        else:
            replies.append(
                "Action: reply\nI cannot do that with the functions I have, or I need more details from you."
            )
    return replies
