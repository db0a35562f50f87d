"""BFCL's diagnosis rules on real episodes (real tasks and API classes, replayed replies) and its
offline operators applied to its H0."""

from __future__ import annotations

import pytest

pytest.importorskip("bfcl_eval")

from envs.bfcl.data import load_split  # noqa: E402
from envs.bfcl.env import BfclEnv  # noqa: E402
from envs.bfcl.rules import CAUSES, FAMILIES, OPERATORS, root_cause  # noqa: E402
from harness_pool.diagnosis import Cluster  # noqa: E402
from harness_pool.operators import VARIANTS, offline_patch  # noqa: E402
from harness_pool.patch import apply_patch  # noqa: E402
from harness_pool.spec import load_harness  # noqa: E402
from rl.policy import Sampling  # noqa: E402
from rl.rollout import RolloutSpec, run_rollouts  # noqa: E402
from tests.doubles import ReplayPolicy  # noqa: E402


def _cause(replies: list[str]) -> str | None:
    task = next(t for t in load_split("dev") if t.category == "base")
    spec = RolloutSpec(task, load_harness("h0", "bfcl"), 0)
    [result] = run_rollouts(ReplayPolicy(replies), [spec], BfclEnv, Sampling(), max_rounds=4)
    return root_cause(result)


def test_root_causes_of_real_episodes():
    assert _cause(["I would like to help."]) == "format_error"
    assert _cause(["Action: reply\nDone."]) == "no_call"
    assert _cause(["Action: call\n```python\n[teleport(to='mars')]\n```"]) == "unknown_function"


def test_every_cause_has_a_family_and_operator_variants_that_apply_to_h0():
    h0 = load_harness("h0", "bfcl")
    assert set(OPERATORS) == set(CAUSES) == {c for causes in FAMILIES.values() for c in causes}
    children = {
        apply_patch(h0, offline_patch([Cluster(cause, ["a", "b"])], v, f"{cause}-v{v}", "bfcl"), round=1).id
        for cause in CAUSES
        for v in range(VARIANTS)
    }
    assert len(children) == len(CAUSES) * VARIANTS
