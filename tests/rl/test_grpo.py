"""GRPO math against numbers computed by hand."""

import math

import pytest
import torch

from rl.grpo import clipped_surrogate_loss, group_advantages, mismatch_weight


def test_group_advantages_by_hand():
    # rewards 1, 0, 0, 1: mean 0.5, population std 0.5 -> +1, -1, -1, +1
    assert group_advantages(torch.tensor([1.0, 0.0, 0.0, 1.0])).tolist() == [1.0, -1.0, -1.0, 1.0]
    # rewards 1, 0, 0, 0: mean .25, std sqrt(3)/4 -> (0.75, -0.25...) / 0.4330
    adv = group_advantages(torch.tensor([1.0, 0.0, 0.0, 0.0]))
    assert adv[0].item() == pytest.approx(0.75 / (math.sqrt(3) / 4), rel=1e-5)
    assert adv[1].item() == pytest.approx(-0.25 / (math.sqrt(3) / 4), rel=1e-5)


def test_all_equal_group_has_zero_advantage_and_zero_gradient():
    adv = group_advantages(torch.tensor([0.0, 0.0, 0.0]))
    assert adv.tolist() == [0.0, 0.0, 0.0]
    logp = torch.tensor([[-1.0, -2.0]] * 3, requires_grad=True)
    loss, _ = clipped_surrogate_loss(logp, logp.detach(), adv, torch.ones(3, 2))
    loss.backward()
    assert loss.item() == 0.0 and torch.all(logp.grad == 0)


def test_clipping_is_asymmetric_and_masked_tokens_do_not_count():
    old = torch.zeros(1, 3)
    # ratios e^0.5=1.6487 (above 1.28), e^-0.5=0.6065 (below 0.8), and a masked token
    new = torch.tensor([[0.5, -0.5, 3.0]])
    mask = torch.tensor([[1.0, 1.0, 0.0]])
    loss_pos, stats = clipped_surrogate_loss(new, old, torch.tensor([1.0]), mask)
    # A>0: min(r*A, clip(r)*A): token1 min(1.6487, 1.28)=1.28; token2 min(0.6065, 0.8)=0.6065
    assert loss_pos.item() == pytest.approx(-(1.28 + math.exp(-0.5)) / 2, rel=1e-5)
    assert stats["clip_fraction"] == pytest.approx(0.5)
    loss_neg, _ = clipped_surrogate_loss(new, old, torch.tensor([-1.0]), mask)
    # A<0: min(-r, -clip(r)): token1 min(-1.6487, -1.28)=-1.6487; token2 min(-0.6065, -0.8)=-0.8
    assert loss_neg.item() == pytest.approx(-(-math.exp(0.5) - 0.8) / 2, rel=1e-5)


def test_mismatch_weight_is_capped_detached_and_applied():
    old = torch.log(torch.tensor([[0.5, 0.9, 0.1]]))
    rollout = torch.log(torch.tensor([[0.25, 0.9, 0.5]]))
    w = mismatch_weight(old, rollout)
    assert w.tolist()[0] == pytest.approx([2.0, 1.0, 0.2], rel=1e-5) and not w.requires_grad
    logp = old.clone().requires_grad_(True)
    loss, _ = clipped_surrogate_loss(logp, old, torch.tensor([1.0]), torch.ones(1, 3), rollout_logprobs=rollout)
    # ratio 1 everywhere -> per-token -A * w, mean over 3 tokens
    assert loss.item() == pytest.approx(-(2.0 + 1.0 + 0.2) / 3, rel=1e-5)
    loss.backward()
    assert logp.grad.tolist()[0] == pytest.approx([-2.0 / 3, -1.0 / 3, -0.2 / 3], rel=1e-5)
