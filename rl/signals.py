"""Training signals of one update step (pure, docs/method.md §5), from the groups that fed it.

A group is what the update saw for one task: the kept H0 group, or the rescue group that
replaced a dead one. Definitions:
- valid-group ratio: share of groups holding both a success and a failure (non-zero variance);
- effective-token ratio: share of policy-generated tokens that sit in groups with non-zero
  advantage variance, i.e. tokens that actually receive gradient;
- rescue success: share of rescue groups with at least one success.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class GroupOutcome:
    successes: list[bool]
    rewards: list[float]
    policy_tokens: list[int]  # per rollout
    rescued: bool = False  # True when this group replaced a dead H0 group


def step_signals(groups: list[GroupOutcome], rollouts_spent: int | None = None) -> dict[str, float]:
    n = len(groups)
    valid = [g for g in groups if any(g.successes) and not all(g.successes)]
    informative_tokens = sum(sum(g.policy_tokens) for g in groups if len(set(g.rewards)) > 1)
    all_tokens = sum(sum(g.policy_tokens) for g in groups)
    rescues = [g for g in groups if g.rescued]
    rewards = [r for g in groups for r in g.rewards]
    return {
        "train/reward_mean": sum(rewards) / len(rewards) if rewards else 0.0,
        "train/valid_group_ratio": len(valid) / n if n else 0.0,
        "train/effective_token_ratio": informative_tokens / all_tokens if all_tokens else 0.0,
        "rollout/rescues_triggered": float(len(rescues)),
        "rollout/rescue_success": sum(any(g.successes) for g in rescues) / len(rescues) if rescues else 0.0,
        "rollout/tokens": float(all_tokens),
        "rollout/rollouts_spent": float(rollouts_spent if rollouts_spent is not None else len(rewards)),
    }
