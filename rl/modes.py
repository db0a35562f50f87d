"""The names the training loop chooses by: training modes and group roles (one place for both).

StrEnum members are their string values, so configs, database rows and JSON keep the plain
names ("harness_s", "rescue", ...), and comparing with a string still works."""

from __future__ import annotations

from enum import StrEnum


class Mode(StrEnum):
    """How an update's groups are formed (rl/group_planning.py)."""

    HARNESS_S = "harness_s"  # a dead H0 group is replaced by the router's top K siblings
    GRPO = "grpo"  # no rescue
    H0_RESCUE = "h0_rescue"  # a dead H0 group is replaced by K fresh H0 rollouts
    FIXED_MIXTURE = "fixed_mixture"  # every group spread over a fixed harness list
    HARNESS_BANDIT = "harness_bandit"  # one harness per update, chosen by UCB1 over H0 + pool (rl/bandit.py)
    HARNESSX = "harnessx"  # every group spread over H0 + pool, plus groups replayed from a buffer (rl/replay.py)


RESCUE_MODES = (Mode.HARNESS_S, Mode.H0_RESCUE)  # a dead group is replaced by a second group of K rollouts


class Role(StrEnum):
    """What a stored rollout group was for."""

    H0 = "h0"  # an update's first group under H0
    MIXTURE = "mixture"  # an update's group in fixed_mixture
    BANDIT = "bandit"  # an update's group under the harness the bandit chose for the update
    SPAN = "span"  # an update's group spread over H0 and the pool (harnessx)
    RESCUE = "rescue"  # the siblings that replaced a dead group
    H0_RESCUE = "h0_rescue"  # fresh H0 rollouts that replaced a dead group
    REANCHOR = "reanchor"  # paired validation at a re-anchor


FIRST_ROLES = (Role.H0, Role.MIXTURE, Role.BANDIT, Role.SPAN)
RESCUE_ROLES = (Role.RESCUE, Role.H0_RESCUE)
TRAIN_ROLES = FIRST_ROLES + RESCUE_ROLES
