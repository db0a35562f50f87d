"""GRPO math as pure tensor functions (no database, Prefect or W&B), docs/method.md §3.

Shapes: G = rollouts in a group, B = sequences in a batch, T = tokens per sequence (padded).
- Advantage of a rollout: (R - mean of its group) / max(std of its group, 1e-6); a group whose
  rewards are all equal gets zero advantage and teaches nothing.
- Loss: token-level PPO-style clipped surrogate with an asymmetric clip (ratio kept within
  [1 - 0.20, 1 + 0.28]), no KL term, averaged over the tokens whose loss mask is 1.
- Rollout/trainer mismatch: each token's term is multiplied by the detached weight
  min(max(p_trainer_old / p_rollout, 0), 2), correcting for the rollout engine sampling from
  slightly different probabilities than the trainer computes.
"""

from __future__ import annotations

import torch

CLIP_LOW = 0.20
CLIP_HIGH = 0.28
STD_FLOOR = 1e-6
MISMATCH_CAP = 2.0


def group_advantages(rewards: torch.Tensor) -> torch.Tensor:
    """rewards [G] -> advantages [G]: (R - mean) / max(std, 1e-6), population std."""
    mean = rewards.mean()
    std = rewards.std(unbiased=False)
    return (rewards - mean) / torch.clamp(std, min=STD_FLOOR)


def mismatch_weight(trainer_old_logprobs: torch.Tensor, rollout_logprobs: torch.Tensor) -> torch.Tensor:
    """[B, T] -> [B, T] detached min(max(p_trainer_old / p_rollout, 0), 2)."""
    return torch.clamp(torch.exp(trainer_old_logprobs - rollout_logprobs), min=0.0, max=MISMATCH_CAP).detach()


def clipped_surrogate_loss(
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    loss_mask: torch.Tensor,
    rollout_logprobs: torch.Tensor | None = None,
    clip_low: float = CLIP_LOW,
    clip_high: float = CLIP_HIGH,
    normaliser: float | None = None,
) -> tuple[torch.Tensor, dict]:
    """Token-level clipped surrogate (to minimise).

    logprobs [B, T]: current policy log-probs of the sampled tokens (with grad).
    old_logprobs [B, T]: the trainer's log-probs before this update (no grad).
    advantages [B]: one per sequence, broadcast over its tokens.
    loss_mask [B, T]: 1 on policy-generated tokens, 0 elsewhere.
    rollout_logprobs [B, T] or None: the rollout engine's log-probs; when given, each token's
    term is weighted by mismatch_weight(old_logprobs, rollout_logprobs).
    normaliser: divide the masked sum by this instead of this batch's mask-1 count; gradient
    accumulation over micro-batches passes the whole update's count, so the sum of the
    micro-batch losses equals the loss of the full batch.
    Returns (loss scalar, stats: share of mask-1 tokens whose gradient the clip cut, mean ratio).
    """
    mask = loss_mask.to(logprobs.dtype)
    ratio = torch.exp(logprobs - old_logprobs.detach())
    adv = advantages[:, None].to(logprobs.dtype)
    unclipped = ratio * adv
    clipped = torch.clamp(ratio, 1.0 - clip_low, 1.0 + clip_high) * adv
    per_token = -torch.minimum(unclipped, clipped)
    if rollout_logprobs is not None:
        per_token = per_token * mismatch_weight(old_logprobs, rollout_logprobs)
    n = mask.sum().clamp(min=1.0)
    loss = (per_token * mask).sum() / (n if normaliser is None else max(normaliser, 1.0))
    with torch.no_grad():
        was_clipped = ((clipped < unclipped) & (mask > 0)).to(logprobs.dtype).sum() / n  # gradient cut
        mean_ratio = (ratio * mask).sum() / n
    return loss, {"clip_fraction": was_clipped.item(), "mean_ratio": mean_ratio.item()}
