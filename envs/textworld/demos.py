"""Warm-start demonstrations for TextWorld: a training game's walkthrough written as H0's text
protocol turns (rl/sft.py replays them through the real game and keeps the ones that win)."""

from __future__ import annotations

import random

_THOUGHTS = {  # a short reason per verb, so the demonstrations teach "think, then one command"
    "go": "The goal is elsewhere, so I move on.",
    "open": "It is closed; I open it to get at what is inside.",
    "close": "The goal asks for it to be closed.",
    "take": "The goal needs this item, so I pick it up.",
    "put": "I place the item where the goal says.",
    "insert": "I put the item inside, as the goal says.",
    "unlock": "It is locked; I unlock it with the key.",
    "lock": "The goal asks for it to be locked.",
    "eat": "The goal is to eat it.",
    "drop": "The goal needs this item left here.",
}


def demo_replies(task, rng: random.Random, inspect_prob: float = 0.5) -> list[str]:
    """Optionally a first look around, then every walkthrough command with its reason."""
    replies = []
    if rng.random() < inspect_prob:
        replies.append("First I look around the room.\nAction: look")
    for command in task.walkthrough:
        thought = _THOUGHTS.get(command.split()[0], "This is the next step towards the goal.")
        replies.append(f"{thought}\nAction: {command}")
    return replies
