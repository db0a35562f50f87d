"""HarnessX's replay buffer (pure): which earlier groups an update trains on again."""

from rl.replay import buffer_groups, draw


def _step(*groups):
    return {"groups": [{"group_id": g, "trained": t, "rewards": r} for g, t, r in groups]}


def test_the_buffer_keeps_the_most_recent_trained_groups_with_a_signal():
    steps = [
        _step(("a", True, [1.0, 0.0]), ("dead", True, [0.0, 0.0]), ("replaced", False, [0.0, 1.0])),
        _step(("b", True, [0.0, 1.0]), ("solved", True, [1.0, 1.0])),
        _step(("c", True, [0.5, 0.0])),
    ]
    assert buffer_groups(steps, 10) == ["a", "b", "c"]  # no signal, or not trained on: never replayed
    assert buffer_groups(steps, 2) == ["b", "c"]
    assert buffer_groups(steps, 0) == []


def test_draws_are_seeded_by_run_seed_and_step_and_keep_buffer_order():
    buffer = [f"g{i}" for i in range(10)]
    first = draw(buffer, 3, seed=0, step=4)
    assert first == draw(buffer, 3, seed=0, step=4) and len(set(first)) == 3
    assert first == sorted(first, key=buffer.index)
    assert any(draw(buffer, 3, seed=0, step=s) != first for s in range(5, 9))
    assert draw(["x"], 3, seed=0, step=1) == ["x"]
