"""Evidence bundles and the engineer's reply reading, on a hand-built diagnosis of DBBench's H0."""

import json

import pytest

from harness_pool.bundles import approx_tokens, build_bundles, trim
from harness_pool.diagnosis import Cluster
from harness_pool.engineer import bundle_prompt, demonstration, read_reply
from harness_pool.operators import offline_patch
from harness_pool.spec import load_harness


@pytest.fixture(scope="module")
def h0():
    return load_harness("h0", "dbbench")


def _diagnosis():
    """10 tasks, k = 2: t0-t4 never solved with schema causes, t5-t6 never solved with sql causes,
    t7 solved once, t8-t9 solved twice."""
    d = {}
    for i in range(5):
        d[f"t{i}"] = {
            "successes": [False, False],
            "causes": ["unknown_column", "unknown_table"],
            "trajectory_ids": [f"a{i}", f"b{i}"],
        }
    for i in (5, 6):
        d[f"t{i}"] = {
            "successes": [False, False],
            "causes": ["sql_syntax", "sql_syntax"],
            "trajectory_ids": [f"a{i}", f"b{i}"],
        }
    d["t7"] = {"successes": [True, False], "causes": [None, "wrong_value"], "trajectory_ids": ["a7", "b7"]}
    for i in (8, 9):
        d[f"t{i}"] = {"successes": [True, True], "causes": [None, None], "trajectory_ids": [f"a{i}", f"b{i}"]}
    return d


def _texts():
    return {f"{p}{i}": f"[task {i}] " + "x" * 3000 + f" [end of {p}{i}]" for p in "ab" for i in range(10)}


def _bundles(h0, **kw):
    fields = {f"t{i}": {"instruction": f"question {i}"} for i in range(10)}
    return build_bundles(h0, _diagnosis(), _texts(), fields, split="train", seed=3, **kw)


def test_bundles_group_failures_by_family_over_disjoint_unsolved_tasks(h0):
    bundles = _bundles(h0, max_failures=4, token_budget=800)
    assert [(b.family, len(b.failures)) for b in bundles] == [("schema", 4), ("sql", 2)]
    schema, sql = bundles
    tasks = schema.failing_tasks + sql.failing_tasks
    assert len(set(tasks)) == len(tasks) and "t7" not in tasks  # a task solved once is no failure
    assert set(schema.causes) <= {"unknown_column", "unknown_table"} and sql.causes == ["sql_syntax"]
    assert schema.controls == ["t8", "t9"]  # solved in every rollout
    assert schema.tasks[schema.failing_tasks[0]]["instruction"].startswith("question")
    for f in schema.failures:  # trimmed to the budget's share, head and tail kept
        assert approx_tokens(f.text) <= 200 and f.text.startswith("[task") and f.text.endswith("]")
    # the fifth schema task alone is below min_failures: no bundle of one
    assert len(_bundles(h0, max_failures=4, min_failures=2)) == 2


def test_bundles_are_deterministic_for_a_seed_and_ids_are_content_hashes(h0):
    a, b = _bundles(h0), _bundles(h0)
    assert [x.id for x in a] == [x.id for x in b]
    other = build_bundles(h0, _diagnosis(), _texts(), {}, split="train", seed=4)
    assert [x.trajectory_ids for x in other] != [x.trajectory_ids for x in a]  # the seed picks the rollouts
    assert len({x.id for x in a}) == len(a)


def test_trim_keeps_short_text_and_fits_long_text():
    assert trim("short", 10) == "short"
    cut = trim("A" * 100 + "B" * 1000 + "C" * 100, 50)
    assert approx_tokens(cut) <= 50 and cut.startswith("A") and cut.endswith("C") and "[cut]" in cut


def test_the_engineer_reply_becomes_a_child_or_a_one_line_rejection(h0):
    bundle = _bundles(h0)[0]
    prompt = bundle_prompt(bundle)
    assert bundle.failures[0].bench_task_id in prompt and "unknown" in prompt and '"root_causes"' in prompt
    patch = offline_patch([Cluster(c) for c in bundle.causes], 0, "x", "dbbench")
    reply = demonstration(bundle, patch)[-1]["content"]
    reading = read_reply(reply, bundle, "child-1")
    assert reading.valid and reading.child.name == "child-1" and reading.child.parent_ids == [h0.id]
    bad = {
        "no json": "I would add a skill.",
        "not json": '```json\n{"edits": [\n```',
        "schema": json.dumps({"description": "d", "root_causes": ["x"], "edits": [{"op": "fly"}]}),
        "sandbox": json.dumps(
            {
                "description": "d",
                "root_causes": ["x"],
                "edits": [
                    {
                        "op": "add_code_hook",
                        "hook": {
                            "at": "after_step",
                            "name": "h",
                            "source": "import os\ndef hook(ctx, nb):\n    return None",
                        },
                    }
                ],
            }
        ),
    }
    for kind, text in bad.items():
        r = read_reply(text, bundle, "child-2")
        assert not r.valid and r.reason and "\n" not in r.reason, kind


def test_the_compact_patch_format_names_every_op_and_condition_field():
    from typing import get_args

    from harness_pool.patch import Condition, Edit, patch_format

    text = patch_format()
    for cls in get_args(get_args(Edit)[0]):
        assert f"- {get_args(cls.model_fields['op'].annotation)[0]}: " in text
    assert all(f"{name} (" in text for name in Condition.model_fields)
    assert approx_tokens(text) < 1200  # a fraction of the JSON schema, which a small engineer cannot afford


def test_demonstrations_leave_out_default_fields_and_still_parse_to_the_same_child(h0):
    bundle = _bundles(h0)[0]
    patch = offline_patch([Cluster("format_error")], 1, "x", "dbbench")  # a recovery rule with an empty condition
    reply = demonstration(bundle, patch)[-1]["content"]
    assert "null" not in reply and '"once"' not in reply
    from harness_pool.patch import apply_patch

    assert read_reply(reply, bundle, "x").child.id == apply_patch(h0, patch).id
