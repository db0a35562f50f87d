"""HarnessX's shared replay buffer (pure): which earlier groups an update trains on again.

The paper: HarnessX couples harness evolution with GRPO whose groups span harnesses, fed from a
shared replay buffer. Our reading (training mode `harnessx`, rl/training_modes.py): every
group's K rollouts are spread over H0 and the pool's siblings; the buffer holds the most recent
`capacity` groups from earlier updates that carried a learning signal (rewards not all equal);
each update trains on its fresh groups plus `per_update` groups drawn from the buffer (seeded by
the run's seed and the step, so a resumed run draws the same). A replayed group keeps the
advantages of its own rewards and the log-probabilities its rollouts were sampled with, so the
update's mismatch weight min(p_old / p_rollout, 2) corrects (and caps) how stale it is.
Departure: the paper couples the pool's evolution with training; here the pool is frozen for
the run, as for every other mode.
"""

from __future__ import annotations

import random


def buffer_groups(steps: list[dict], capacity: int) -> list[str]:
    """Ids of the `capacity` most recent trained groups with a signal, from the details of the
    earlier updates (oldest first): the buffer an update draws from."""
    held = []
    for details in steps:
        for g in details.get("groups", []):
            if g.get("trained") and g.get("group_id") and len(set(g.get("rewards", []))) > 1:
                held.append(g["group_id"])
    return held[-capacity:] if capacity else []


def draw(buffer: list[str], per_update: int, seed: int, step: int) -> list[str]:
    """A seeded sample of the buffer for one update (all of it when it holds fewer)."""
    if len(buffer) <= per_update:
        return list(buffer)
    return sorted(random.Random(f"replay:{seed}:{step}").sample(buffer, per_update), key=buffer.index)
