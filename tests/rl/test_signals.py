import pytest

from rl.signals import GroupOutcome, step_signals


def test_signals_from_a_hand_built_batch():
    groups = [
        GroupOutcome([True, False], [1.0, 0.0], [10, 30]),  # valid: 40 informative tokens
        GroupOutcome([False, False], [0.0, 0.0], [20, 20]),  # dead, not rescued (grpo mode)
        GroupOutcome([True, True], [1.0, 1.0], [5, 5]),  # all solved: no gradient
        GroupOutcome([False, True], [0.0, 1.0], [15, 15], rescued=True),  # rescue that worked
        GroupOutcome([False, False], [0.0, 0.0], [25, 25], rescued=True),  # rescue that failed
    ]
    s = step_signals(groups, rollouts_spent=14)
    assert s["train/valid_group_ratio"] == pytest.approx(2 / 5)
    assert s["train/effective_token_ratio"] == pytest.approx((40 + 30) / (40 + 40 + 10 + 30 + 50))
    assert s["rollout/rescues_triggered"] == 2 and s["rollout/rescue_success"] == pytest.approx(0.5)
    assert s["train/reward_mean"] == pytest.approx(4 / 10)
    assert s["rollout/rollouts_spent"] == 14 and s["rollout/tokens"] == 170


def test_empty_batch_is_all_zero():
    assert set(step_signals([]).values()) == {0.0}
