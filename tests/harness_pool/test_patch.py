"""Harness patches: typed edits apply deterministically, with stable content ids and parents."""

from __future__ import annotations

import pytest

from harness_pool.patch import HarnessPatch, apply_patch, parse_patch
from harness_pool.runtime import HarnessRuntime
from harness_pool.spec import HarnessError, dump_harness, load_harness

FIELDS = {
    "instruction": "How many rows?",
    "description": "How many rows?",
    "add_description": "",
    "table_name": "T",
    "headers": "a, b",
}

PATCH = {
    "name": "careful",
    "description": "inspect first, recover from errors, quote names",
    "root_causes": ["unknown_column", "sql_syntax"],
    "edits": [
        {"op": "add_skill", "name": "inspect", "text": "Run SELECT * FROM the table LIMIT 3 first."},
        {"op": "append_prompt", "field": "task_template", "text": "The table is `{table_name}`."},
        {"op": "add_recovery_rule", "when": {"last_step_error": True}, "message": "The query failed; check names."},
        {"op": "add_guard_rule", "when": {"action_kind": "answer", "queries_at_most": 0}, "message": "Query first."},
        {"op": "set_context", "history_window": 4},
        {"op": "set_memory", "query_log": 3},
        {"op": "set_tool_view", "on_invalid": "warn"},
        {
            "op": "add_code_hook",
            "hook": {
                "at": "after_step",
                "name": "count",
                "source": "def hook(ctx, nb):\n    nb['n'] = nb.get('n', 0) + 1\n    return None",
            },
        },
    ],
}


def test_a_patch_applies_deterministically_with_a_stable_id_and_its_parent(tmp_path):
    h0 = load_harness("h0")
    child = apply_patch(h0, parse_patch(PATCH), round=1)
    again = apply_patch(load_harness("h0"), HarnessPatch.model_validate(PATCH), round=1)
    assert child.id == again.id != h0.id
    assert child.parent_ids == [h0.id] and child.name == "careful"
    assert child.provenance.round == 1 and child.provenance.root_causes == ["unknown_column", "sql_syntax"]
    assert load_harness(dump_harness(child, tmp_path / "careful.yaml")).id == child.id
    # every component the edits name changed, nothing else did
    assert child.skills[0].name == "inspect" and child.context.history_window == 4 and child.memory.query_log == 3
    assert child.tool_view.on_invalid == "warn" and child.prompts.system == h0.prompts.system
    assert [(r.at, r.effect) for r in child.hooks] == [("after_step", "inject"), ("before_action", "block")]
    messages, _ = HarnessRuntime(child, FIELDS).opening_messages()
    assert messages[1]["content"].endswith("The table is `T`.")
    # the same edits on another parent give another child
    other = apply_patch(load_harness("schema_rows"), parse_patch(PATCH), round=1)
    assert other.id != child.id and other.parent_ids == [load_harness("schema_rows").id]


def test_patches_that_break_or_do_nothing_are_rejected_in_one_line():
    h0 = load_harness("h0")
    bad_hook = {
        **PATCH,
        "edits": [
            {
                "op": "add_code_hook",
                "hook": {"at": "after_step", "name": "x", "source": "def hook(ctx, nb):\n    return ctx.__class__"},
            }
        ],
    }
    with pytest.raises(HarnessError, match="'__class__' starts with '_'"):
        apply_patch(h0, parse_patch(bad_hook))
    with pytest.raises(HarnessError, match="edits.0"):
        parse_patch({**PATCH, "edits": [{"op": "rename_table", "name": "x"}]})
    with pytest.raises(HarnessError, match="root_causes"):
        parse_patch({**PATCH, "root_causes": ["a", "b", "c", "d"]})
    noop = {**PATCH, "edits": [{"op": "remove_skill", "name": "never-there"}]}
    with pytest.raises(HarnessError, match="changes nothing"):
        apply_patch(h0, parse_patch(noop))
