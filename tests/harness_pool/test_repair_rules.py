"""Repair's diagnosis rules on real episodes (a real injected toolz bug, replayed replies) and its
offline operators applied to its H0."""

from __future__ import annotations

import pytest

from envs.repair.data import load_split
from envs.repair.env import RepairEnv
from envs.repair.rules import CAUSES, FAMILIES, OPERATORS, root_cause
from harness_pool.diagnosis import Cluster
from harness_pool.operators import VARIANTS, offline_patch
from harness_pool.patch import apply_patch
from harness_pool.spec import load_harness
from rl.policy import Sampling
from rl.rollout import RolloutSpec, run_rollouts
from tests.doubles import ReplayPolicy


@pytest.fixture(scope="module")
def task(repair_generated):
    return load_split("train", generated_dir=repair_generated)[0]


def _cause(task, replies: list[str]) -> str | None:
    spec = RolloutSpec(task, load_harness("h0", "repair"), 0)
    [result] = run_rollouts(ReplayPolicy(replies), [spec], RepairEnv, Sampling(), max_rounds=4)
    return root_cause(result)


def test_root_causes_of_real_episodes(task):
    assert _cause(task, ["I will fix it."]) == "format_error"
    assert _cause(task, ["Action: submit"]) == "no_edit"
    refused = f"Action: replace {task.file}\n```old\nthis text is not in the file\n```\n```new\nx\n```"
    assert _cause(task, [refused, "Action: submit"]) == "edit_refused"


def test_every_cause_has_a_family_and_operator_variants_that_apply_to_h0():
    h0 = load_harness("h0", "repair")
    assert set(OPERATORS) == set(CAUSES) == {c for causes in FAMILIES.values() for c in causes}
    children = {
        apply_patch(h0, offline_patch([Cluster(cause, ["a", "b"])], v, f"{cause}-v{v}", "repair"), round=1).id
        for cause in CAUSES
        for v in range(VARIANTS)
    }
    assert len(children) == len(CAUSES) * VARIANTS
