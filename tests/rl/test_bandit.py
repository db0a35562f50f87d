"""HarnessBandit's arm choice (pure): UCB1 over harnesses from the rewards of earlier updates."""

import math

import pytest

from rl.bandit import choose_arm, step_rewards


def test_every_arm_is_played_once_in_order_before_any_is_repeated():
    arms = ["h0", "a", "b"]
    assert choose_arm(arms, [], 1.4).arm == "h0"
    assert choose_arm(arms, [("h0", 1.0)], 1.4).arm == "a"
    assert choose_arm(arms, [("h0", 1.0), ("a", 0.0)], 1.4).arm == "b"


def test_after_the_first_round_the_upper_confidence_bound_decides():
    arms = ["h0", "a", "b"]
    history = [("h0", 0.2), ("a", 0.6), ("b", 0.1)]
    choice = choose_arm(arms, history, 0.0)  # no exploration: the best mean
    assert choice.arm == "a" and choice.plays == {"h0": 1, "a": 1, "b": 1}
    # an arm played far less than the others wins on its bonus
    history += [("a", 0.6)] * 20
    choice = choose_arm(arms, history, 1.4)
    assert choice.arm in ("h0", "b")
    t = len(history)
    assert choice.scores["a"] == pytest.approx(0.6 + 1.4 * math.sqrt(math.log(t) / 21))
    assert choice.scores["h0"] == pytest.approx(0.2 + 1.4 * math.sqrt(math.log(t) / 1))
    assert choice.arm == "h0"  # ties and near-ties: the higher score; h0's mean beats b's


def test_ties_go_to_the_earlier_arm_and_unknown_arms_are_ignored():
    assert choose_arm(["a", "b"], [("a", 0.5), ("b", 0.5), ("gone", 1.0)], 1.0).arm == "a"
    with pytest.raises(ValueError, match="at least one harness"):
        choose_arm([], [], 1.0)


def test_step_rewards_read_the_bandit_groups_of_each_update():
    steps = [
        {"groups": [{"role": "bandit", "harness_ids": ["x", "x"], "rewards": [1.0, 0.0]}] * 2},
        {"groups": [{"role": "bandit", "harness_ids": ["y", "y"], "rewards": [0.0, 0.0]}]},
        {"groups": [{"role": "h0", "harness_ids": ["h", "h"], "rewards": [1.0, 1.0]}]},  # not a bandit step
    ]
    assert step_rewards(steps) == [("x", 0.5), ("y", 0.0)]
