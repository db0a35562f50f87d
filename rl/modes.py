"""The names the training loop chooses by: the built-in training modes and group roles.

StrEnum members are their string values, so configs, database rows and JSON keep the plain
names ("harness_s", "rescue", ...), and comparing with a string still works."""

from __future__ import annotations

from enum import StrEnum


class Mode(StrEnum):
    """The built-in training modes' names; what each does is its entry in rl/training_modes.py
    (MODES), where a new mode registers too."""

    HARNESS_S = "harness_s"
    GRPO = "grpo"
    H0_RESCUE = "h0_rescue"
    FIXED_MIXTURE = "fixed_mixture"
    HARNESS_BANDIT = "harness_bandit"
    HARNESSX = "harnessx"


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
