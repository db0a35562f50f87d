"""TextWorld's diagnosis rules on real episodes (real games, replayed replies) and its offline
operators applied to its H0."""

from __future__ import annotations

import pytest

pytest.importorskip("textworld")

from envs.textworld.data import load_split  # noqa: E402
from envs.textworld.env import TextWorldEnv  # noqa: E402
from envs.textworld.rules import CAUSES, FAMILIES, OPERATORS, root_cause  # noqa: E402
from harness_pool.diagnosis import Cluster  # noqa: E402
from harness_pool.operators import VARIANTS, offline_patch, target_groups  # noqa: E402
from harness_pool.patch import apply_patch  # noqa: E402
from harness_pool.spec import load_harness  # noqa: E402
from rl.policy import Sampling  # noqa: E402
from rl.rollout import RolloutSpec, run_rollouts  # noqa: E402
from tests.doubles import ReplayPolicy  # noqa: E402


@pytest.fixture(scope="module")
def game(tmp_path_factory):
    return load_split("dev", limit=3, generated_dir=tmp_path_factory.mktemp("generated"))[2]  # tier q3


def _cause(game, replies: list[str], max_rounds: int = 4) -> str | None:
    spec = RolloutSpec(game, load_harness("h0", "textworld"), 0)
    [result] = run_rollouts(ReplayPolicy(replies), [spec], TextWorldEnv, Sampling(), max_rounds=max_rounds)
    return root_cause(result)


def test_root_causes_of_real_episodes(game):
    assert _cause(game, [f"Action: {c}" for c in game.walkthrough]) is None
    assert _cause(game, ["I am not sure what to do."]) == "format_error"
    assert _cause(game, ["Action: fly to the moon"]) == "stuck_invalid"
    assert _cause(game, ["Action: look"]) == "repeated_command"
    assert _cause(game, ["Action: look", "Action: inventory", "Action: examine key", "Action: look"]) == "no_progress"


def test_every_cause_has_a_family_and_operator_variants_that_apply_to_h0():
    h0 = load_harness("h0", "textworld")
    assert set(OPERATORS) == set(CAUSES) == {c for causes in FAMILIES.values() for c in causes}
    children = set()
    for cause in CAUSES:
        for variant in range(VARIANTS):
            patch = offline_patch([Cluster(cause, ["t1", "t2"])], variant, f"{cause}-v{variant}", "textworld")
            child = apply_patch(h0, patch, round=1)
            assert child.benchmark == "textworld" and child.parent_ids == [h0.id]
            children.add(child.id)
    assert len(children) == len(CAUSES) * VARIANTS  # every variant is a distinct harness


def test_targets_group_textworld_causes_by_family():
    clusters = [
        Cluster("stuck_invalid", ["a", "b", "c"]),
        Cluster("repeated_command", ["a", "d"]),
        Cluster("lost", ["e", "f"]),
    ]
    groups = target_groups(clusters, benchmark="textworld")
    assert [[c.cause for c in g] for g in groups] == [["stuck_invalid", "repeated_command"], ["lost"]]
    assert target_groups(clusters, "dbbench") == []  # DBBench's operators know none of these causes
