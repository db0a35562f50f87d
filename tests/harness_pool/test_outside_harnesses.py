"""Harnesses outside the pool (RQ6): loadable by name, never members of a training pool."""

from __future__ import annotations

from pathlib import Path

import pytest

from envs.base import SqlAction
from envs.dbbench.data import load_split
from harness_pool.pool_store import load_pool
from harness_pool.runtime import HarnessRuntime, task_fields
from harness_pool.seed_pool import SEED_POOL, seed_siblings
from harness_pool.spec import load_harness
from harness_pool.tool_view import parse_action

OUTSIDE = ["fc_tools", "terse"]
POOLS = Path(__file__).parents[2] / "harness_pool" / "pools"
# Measured before the json tool view was added: a new protocol choice must not re-hash H0 (and
# with it every sibling's parent id and every frozen pool).
H0_ID = "02db5aa23376ddff65d0f34d65fbb9cc458e7202d0bd4b82b93e1af2d3476100"


def test_h0_id_is_unchanged():
    assert load_harness("h0").id == H0_ID


@pytest.mark.parametrize("name", OUTSIDE)
def test_outside_harness_loads_from_h0_and_is_in_no_pool(name):
    spec = load_harness(name)
    assert spec.name == name and spec.parent_ids == [H0_ID]
    assert spec.prompts.task_template == load_harness("h0").prompts.task_template
    seed_ids = {s.id for s in seed_siblings(load_harness("h0"))} | {load_harness(n).id for n in SEED_POOL}
    assert name not in SEED_POOL and spec.id not in seed_ids
    manifest, base, siblings = load_pool("v1", root=POOLS)
    assert manifest.member(name) is None and spec.id not in {m.id for m in manifest.members}
    assert spec.id not in {base.id, *(s.id for s in siblings)}


def test_fc_tools_parses_json_calls_that_h0_rejects():
    call = (
        'I will count the rows.\n```json\n{"name": "execute_sql", "arguments": {"sql": "SELECT COUNT(*) FROM `t`"}}'
        "\n```"
    )
    fc, h0 = load_harness("fc_tools").tool_view, load_harness("h0").tool_view
    assert fc.protocol == "dbbench_json_v1"
    assert parse_action(fc.protocol, call, fc.accept_scalar_answer).action == SqlAction("SELECT COUNT(*) FROM `t`")
    assert parse_action(h0.protocol, call, h0.accept_scalar_answer).kind == "invalid"


def test_terse_keeps_the_text_protocol_with_a_short_prompt():
    terse, h0 = load_harness("terse"), load_harness("h0")
    assert terse.tool_view == h0.tool_view
    assert len(terse.prompts.system.splitlines()) <= 4 < len(h0.prompts.system.splitlines())


def test_fc_tools_prompt_shows_calls_the_parser_accepts(data_dir):
    """Prompts go through str.format, so the file doubles its JSON braces; the policy must see
    single braces, and each example call in the prompt must parse as what it claims to be."""
    (system, _), _ = HarnessRuntime(load_harness("fc_tools"), task_fields(load_split("dev")[0])).opening_messages()
    text = system["content"]
    assert "{{" not in text and '{"name": "submit_answer", "arguments": {"answer": ["value1"]}}\n' in text
    sql_example, answer_example = text.split("```json")[1:3]
    assert parse_action("dbbench_json_v1", sql_example).action == SqlAction("SELECT * FROM `table name` LIMIT 5;")
    assert parse_action("dbbench_json_v1", answer_example).kind == "answer"
