"""The HarnessBandit baseline's arm choice (pure): one harness per optimizer step, by UCB1.

The paper: one harness per optimizer step, chosen by a bandit over the pool from the rewards it
produced. Our reading (training mode `harness_bandit`, rl/training_modes.py): every group of an
update runs under the arm chosen for that update; nothing rescues a dead group; the update is
the same GRPO update as every other mode's. Departures: the paper does not name its bandit, so
UCB1 is our choice; H0 is an arm like the siblings.

Arms are harnesses (H0 and the pool's siblings). An arm's reward for a step is the mean reward
of every rollout the step ran under it. UCB1: every arm is played once, in the given order;
after that the step's arm maximises mean + c * sqrt(ln t / n), with t the steps played so far
and n the arm's plays (rewards lie in [0, 1]; c = sqrt(2) is the textbook constant). Ties go to
the earlier arm, so the choice is a function of the history alone and a resumed run repeats it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from rl.modes import Role


@dataclass(frozen=True)
class ArmChoice:
    arm: str
    scores: dict[str, float]  # each arm's UCB score at this step (inf: not played yet)
    plays: dict[str, int]
    means: dict[str, float]


def choose_arm(arms: list[str], history: list[tuple[str, float]], exploration: float) -> ArmChoice:
    """The next arm from (arm, step reward) pairs of earlier steps; arms outside `arms` are ignored."""
    if not arms:
        raise ValueError("the bandit needs at least one harness to choose from")
    plays = {a: 0 for a in arms}
    totals = {a: 0.0 for a in arms}
    for arm, reward in history:
        if arm in plays:
            plays[arm] += 1
            totals[arm] += reward
    t = sum(plays.values())
    means = {a: totals[a] / plays[a] if plays[a] else 0.0 for a in arms}
    scores = {a: means[a] + exploration * math.sqrt(math.log(t) / plays[a]) if plays[a] else math.inf for a in arms}
    best = max(arms, key=lambda a: (scores[a], -arms.index(a)))
    return ArmChoice(best, scores, plays, means)


def step_rewards(steps: list[dict]) -> list[tuple[str, float]]:
    """(arm, mean reward) per earlier step, from each step's group summaries (train_steps.details):
    the arm is the harness every rollout of the step's first groups ran under."""
    history = []
    for details in steps:
        groups = [g for g in details.get("groups", []) if g.get("role") == Role.BANDIT]
        arms = {h for g in groups for h in g["harness_ids"]}
        rewards = [r for g in groups for r in g["rewards"]]
        if len(arms) == 1 and rewards:
            history.append((arms.pop(), sum(rewards) / len(rewards)))
    return history
