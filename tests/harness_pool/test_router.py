import pytest

from harness_pool.router import FixedRouter, RandomRouter, Ranking
from harness_pool.seed_pool import SEED_POOL
from harness_pool.spec import load_harness


def _pool():
    return [load_harness(n) for n in SEED_POOL]


def test_random_router_is_a_reproducible_permutation_per_task():
    pool = _pool()
    a = RandomRouter(seed=1).rank("dbbench/train/0001", pool)
    assert sorted(a.harness_ids) == sorted(h.id for h in pool)
    assert RandomRouter(seed=1).rank("dbbench/train/0001", pool) == a
    orders = {tuple(RandomRouter(seed=1).rank(f"dbbench/train/{i:04d}", pool).harness_ids) for i in range(20)}
    assert len(orders) > 1 and a.votes == {"random": a.harness_ids}


def test_top_k_wraps_around_a_small_pool_and_fixed_router_follows_names():
    pool = _pool()
    ranking = FixedRouter(["inspect_first", "schema_rows"]).rank("t", pool)
    ids = {h.name: h.id for h in pool}
    assert ranking.top(5) == [ids["inspect_first"], ids["schema_rows"]] * 2 + [ids["inspect_first"]]
    with pytest.raises(ValueError, match="not in the pool"):
        FixedRouter(["nope"]).rank("t", pool)
    with pytest.raises(ValueError, match="empty ranking"):
        Ranking([]).top(3)
