"""Group planning per training mode (pure): who rescues a dead group, with which harnesses."""

import pytest

from harness_pool.router import FixedRouter, RandomRouter
from harness_pool.spec import load_harness
from rl.group_planning import is_dead
from rl.training_modes import first_groups, rescue_groups


@pytest.fixture(scope="module")
def harnesses():
    names = ["h0", "schema_rows", "format_reminder", "inspect_first"]
    return {n: load_harness(n) for n in names}


class T:
    def __init__(self, i):
        self.id = f"dbbench/train/{i:04d}"


def test_h0_groups_then_sibling_rescue_replaces_only_dead_ones(harnesses):
    h0 = harnesses["h0"]
    pool = [harnesses[n] for n in ("schema_rows", "format_reminder", "inspect_first")]
    first = first_groups("harness_s", [T(1), T(2)], h0, [], k=8)
    assert all(g.role == "h0" and g.harness_id == h0.id and len(g.specs) == 8 for g in first)
    assert [s.sample_index for s in first[0].specs] == list(range(8))
    assert is_dead([False] * 8) and not is_dead([False] * 7 + [True])
    (rescue,) = rescue_groups("harness_s", [T(2)], h0, [h0, *pool], RandomRouter(seed=3), k=8)
    assert rescue.role == "rescue" and rescue.bench_task.id == "dbbench/train/0002"
    used = [s.harness.id for s in rescue.specs]
    assert h0.id not in used and set(used) == {h.id for h in pool}  # 3 siblings cycled over K = 8
    assert [s.sample_index for s in rescue.specs] == list(range(8, 16))
    assert rescue.harness_id is None and rescue.votes["random"]


def test_fixed_router_order_is_kept(harnesses):
    h0 = harnesses["h0"]
    pool = [harnesses["schema_rows"], harnesses["format_reminder"]]
    (g,) = rescue_groups("harness_s", [T(1)], h0, pool, FixedRouter(["format_reminder", "schema_rows"]), k=4)
    assert [s.harness.name for s in g.specs] == ["format_reminder", "schema_rows", "format_reminder", "schema_rows"]


def test_baselines(harnesses):
    h0 = harnesses["h0"]
    assert rescue_groups("grpo", [T(1)], h0, [harnesses["schema_rows"]], RandomRouter(), 8) == []
    (again,) = rescue_groups("h0_rescue", [T(1)], h0, [], None, 4)
    assert again.role == "h0_rescue" and again.harness_id == h0.id
    assert [s.sample_index for s in again.specs] == [4, 5, 6, 7]
    mixture = [harnesses["h0"], harnesses["schema_rows"], harnesses["inspect_first"]]
    (mixed,) = first_groups("fixed_mixture", [T(1)], h0, mixture, 4)
    assert [s.harness.name for s in mixed.specs] == ["h0", "schema_rows", "inspect_first", "h0"]
    assert rescue_groups("fixed_mixture", [T(1)], h0, [], None, 4) == []
    arm = harnesses["inspect_first"]
    bandit = first_groups("harness_bandit", [T(1), T(2)], h0, [], 4, arm=arm)
    assert [(g.role, g.harness_id, len(g.specs)) for g in bandit] == [("bandit", arm.id, 4)] * 2
    assert rescue_groups("harness_bandit", [T(1)], h0, [arm], None, 4) == []
    pool = [harnesses["schema_rows"], harnesses["format_reminder"], h0]  # H0 listed again: one harness
    spans = first_groups("harnessx", [T(1), T(2)], h0, [], 4, pool=pool)
    assert [[s.harness.name for s in g.specs] for g in spans] == [
        ["h0", "schema_rows", "format_reminder", "h0"],
        ["schema_rows", "format_reminder", "h0", "schema_rows"],  # the round robin carries on
    ]
    assert {g.role for g in spans} == {"span"} and rescue_groups("harnessx", [T(1)], h0, pool, None, 4) == []
    with pytest.raises(ValueError, match="the update's arm"):
        first_groups("harness_bandit", [T(1)], h0, [], 4)


def test_empty_pool_or_unknown_mode_is_a_clear_error(harnesses):
    with pytest.raises(ValueError, match="auxiliary harness"):
        rescue_groups("harness_s", [T(1)], harnesses["h0"], [harnesses["h0"]], RandomRouter(), 8)
    with pytest.raises(ValueError, match="unknown training mode"):
        first_groups("ppo", [T(1)], harnesses["h0"], [], 8)
