"""tasks/evaluation.py groups_in_flight: how many rollout groups an evaluation runs at once."""

from configs.schema import EvalConfig
from rl.decode import DecodeEngine
from tasks.evaluation import EPISODES_IN_FLIGHT, groups_in_flight


def test_one_process_runs_no_more_episodes_than_its_decode_engine_has_rows():
    assert EPISODES_IN_FLIGHT == DecodeEngine.max_rows
    assert groups_in_flight(EvalConfig(group_concurrency=16, k=3)) == 16  # 48 episodes: as configured
    assert groups_in_flight(EvalConfig(group_concurrency=16, k=8)) == 8  # 128 would wait for 64 rows
    assert groups_in_flight(EvalConfig(group_concurrency=4, k=8)) == 4
    assert groups_in_flight(EvalConfig(group_concurrency=16, k=64)) == 1


def test_on_ray_every_group_has_its_own_process_and_the_configured_concurrency_holds():
    cfg = EvalConfig(group_concurrency=16, k=8, runner={"kind": "ray"})
    assert groups_in_flight(cfg) == 16
