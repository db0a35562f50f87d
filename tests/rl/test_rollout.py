"""Rollout engine: control flow with replayed replies, then the real SmolLM2 on 2 DBBench tasks."""

from __future__ import annotations

import json

import pytest
import torch

from envs.base import SqlAction, StepResult
from envs.dbbench.data import load_split
from envs.dbbench.detectors import behaviour_tags as dbbench_tags
from envs.dbbench.env import DbBenchEnv
from harness_pool.spec import Condition, HookRule, load_harness
from rl.policy import Sampling
from rl.rollout import RolloutSpec, run_rollouts
from tests.doubles import ReplayPolicy


def _task(kind: str):
    return next(t for t in load_split("dev") if t.task_type == kind)


def test_gold_insert_then_answer_succeeds(data_dir):
    task = _task("INSERT")
    policy = ReplayPolicy([f"Action: Operation\n```sql\n{task.gold_sql}\n```", "Action: Answer\nFinal Answer: []"])
    [result] = run_rollouts(policy, [RolloutSpec(task, load_harness("h0"), 0)], DbBenchEnv, Sampling())
    assert result.verdict.success and result.failure_kind is None and result.end_reason == "answered"
    assert [t.action_kind for t in result.turns] == ["sql", "answer"]
    assert result.turns[0].observation == "[]"


def test_round_limit_and_repeated_query_tag(data_dir):
    task = _task("counting")
    policy = ReplayPolicy(["Action: Operation\n```sql\nSELECT 1\n```"])
    [result] = run_rollouts(policy, [RolloutSpec(task, load_harness("h0"), 0)], DbBenchEnv, Sampling(), max_rounds=3)
    assert len(result.turns) == 3 and result.failure_kind == "round_limit"
    assert "repeated_query" in result.behaviour_tags


def test_progress_is_reported_once_per_finished_episode(data_dir):
    task = _task("counting")
    policy = ReplayPolicy(["Action: Operation\n```sql\nSELECT 1\n```"])
    calls = []
    specs = [RolloutSpec(task, load_harness("h0"), i) for i in range(3)]
    run_rollouts(policy, specs, DbBenchEnv, Sampling(), max_rounds=2, on_finished=lambda d, n: calls.append((d, n)))
    assert calls == [(1, 3), (2, 3), (3, 3)]


def test_block_hook_refuses_an_early_answer(data_dir):
    task = _task("counting")
    h = load_harness("h0").model_copy(
        update={
            "hooks": [
                HookRule(
                    at="before_action",
                    when=Condition(action_kind="answer", queries_at_most=0),
                    effect="block",
                    message="Run a query first.",
                )
            ]
        }
    )
    policy = ReplayPolicy(
        [f"Action: Answer\nFinal Answer: {task.label!r}"] * 1
        + ["Action: Operation\n```sql\nSELECT 1\n```", f"Action: Answer\nFinal Answer: {list(task.label)!r}"]
    )
    [result] = run_rollouts(policy, [RolloutSpec(task, h, 0)], DbBenchEnv, Sampling())
    assert result.turns[0].observation == "Run a query first." and result.turns[0].hook_events[0]["effect"] == "block"
    assert result.verdict.success and len(result.turns) == 3


def test_history_window_marks_the_turn_after_a_context_reset(data_dir):
    from harness_pool.spec import ContextPolicy

    h0 = load_harness("h0")
    h = h0.model_copy(
        update={"context": ContextPolicy(max_observation_chars=h0.context.max_observation_chars, history_window=1)}
    )
    policy = ReplayPolicy(["Action: Operation\n```sql\nSELECT 1\n```"])
    [result] = run_rollouts(policy, [RolloutSpec(_task("counting"), h, 0)], DbBenchEnv, Sampling(), max_rounds=4)
    resets = [t.index for t in result.turns if any(e.get("event") == "context_reset" for e in t.hook_events)]
    assert resets == [2, 3]  # from the third turn on, the window drops the oldest exchange


def test_format_error_ends_episode_under_h0(data_dir):
    [result] = run_rollouts(
        ReplayPolicy(["I think the answer is 5."]),
        [RolloutSpec(_task("counting"), load_harness("h0"), 0)],
        DbBenchEnv,
        Sampling(),
    )
    assert (
        result.failure_kind == "format_error" and len(result.turns) == 1 and result.turns[0].parse_error == "no_action"
    )


@pytest.mark.slow
def test_real_smollm2_group_records_exact_tokens_and_mask(data_dir, smol_policy):
    tasks = load_split("dev")[:2]
    h0 = load_harness("h0")
    # 'warn' keeps episodes going after a malformed reply, so every episode has a second turn
    # whose context (observation, next header) sits between two sampled replies.
    h0 = h0.model_copy(update={"tool_view": h0.tool_view.model_copy(update={"on_invalid": "warn"})})
    specs = [RolloutSpec(t, h0, i) for t in tasks for i in range(2)]
    results = run_rollouts(smol_policy, specs, DbBenchEnv, Sampling(0.8, 0.95, 24, seed=3), max_rounds=2)
    assert len(results) == 4
    assert sum(len(r.turns) == 2 for r in results) >= 3
    tok = smol_policy.tokenizer
    for r in results:
        assert r.turns and r.failure_kind in {"format_error", "round_limit", "wrong_answer", "sql_error", None}
        ids, mask, sampled = [], [], []
        for t in r.turns:
            assert len(t.loss_mask) == len(t.context_ids) + len(t.completion_ids)
            assert len(t.completion_logprobs) == len(t.completion_ids) > 0
            assert all(lp <= 0 for lp in t.completion_logprobs)
            ids += t.context_ids + t.completion_ids
            mask += t.loss_mask
            sampled += t.completion_ids
        # Mask 1 exactly on the policy's sampled tokens, in order.
        assert [i for i, m in zip(ids, mask) if m == 1] == sampled
        # The concatenated tokens are the chat template's rendering of the conversation:
        # nothing re-tokenised, nothing lost between turns.
        text = tok.decode(ids, skip_special_tokens=False, clean_up_tokenization_spaces=False)
        assert text.startswith("<|im_start|>system\n" + h0.system_message())
        assert r.turns[0].context_text.endswith("<|im_start|>assistant\n")
        # Rollout log-probs equal a teacher-forced forward pass (temperature 0.8 scaling).
        with torch.no_grad():
            logits = smol_policy.model(torch.tensor([ids])).logits[0]
        positions = [p for p, m in enumerate(mask) if m == 1]
        logp = torch.log_softmax(logits[[p - 1 for p in positions]] / 0.8, dim=-1)
        forced = logp.gather(1, torch.tensor(sampled)[:, None]).squeeze(1)
        rollout = torch.tensor([lp for t in r.turns for lp in t.completion_logprobs])
        assert torch.allclose(forced, rollout, atol=2e-3)


def test_a_code_hook_rewrites_the_sql_the_environment_runs(data_dir):
    from harness_pool.spec import CodeHook

    task = _task("INSERT")
    broken = task.gold_sql.replace("INSERT", "INSRT", 1)  # what the policy writes: a typo
    fix = CodeHook(
        at="before_action",
        name="fix_typo",
        source=(
            "def hook(ctx, nb):\n    sql = ctx['action_sql'] or ''\n"
            "    if sql.startswith('INSRT'):\n        return {'rewrite': 'INSERT' + sql[5:]}\n    return None"
        ),
    )
    harness = load_harness("h0").model_copy(update={"code_hooks": [fix]})
    policy = ReplayPolicy([f"Action: Operation\n```sql\n{broken}\n```", "Action: Answer\nFinal Answer: []"])
    [result] = run_rollouts(policy, [RolloutSpec(task, harness, 0)], DbBenchEnv, Sampling())
    assert result.verdict.success  # the table was changed by the rewritten statement
    assert "INSRT" in result.turns[0].completion_text and result.turns[0].action["sql"] == task.gold_sql
    assert result.turns[0].hook_events[0]["effect"] == "rewrite"


def test_fc_tools_json_calls_drive_the_real_environment(data_dir):
    task = _task("INSERT")
    sql = json.dumps({"name": "execute_sql", "arguments": {"sql": task.gold_sql}})
    policy = ReplayPolicy([f"```json\n{sql}\n```", '{"name": "submit_answer", "arguments": {"answer": []}}'])
    [result] = run_rollouts(policy, [RolloutSpec(task, load_harness("fc_tools"), 0)], DbBenchEnv, Sampling())
    assert result.verdict.success and result.end_reason == "answered"
    assert [t.action_kind for t in result.turns] == ["sql", "answer"] and result.turns[0].action["sql"] == task.gold_sql


def test_fc_tools_ends_on_a_text_protocol_reply(data_dir):
    policy = ReplayPolicy(["Action: Operation\n```sql\nSELECT 1\n```"])
    [result] = run_rollouts(
        policy, [RolloutSpec(_task("counting"), load_harness("fc_tools"), 0)], DbBenchEnv, Sampling()
    )
    assert result.failure_kind == "format_error" and result.turns[0].parse_error == "no_function_call"


def behaviour_tags(queries: list[str], answered: bool) -> list[str]:
    """DBBench's detectors over these queries, each run without error."""
    return dbbench_tags([(SqlAction(q), StepResult("", False)) for q in queries], answered)


@pytest.mark.parametrize(
    "queries,tagged",
    [
        (["UPDATE `t` SET a = 1", "SELECT * FROM `t`"], True),
        (["  insert into `t` values (1)", "select a from `t`"], True),
        (["SELECT * FROM `t`", "UPDATE `t` SET a = 1"], False),
        (["INSERT INTO `t` VALUES (1)"], False),
        (["DELETE FROM `t`", "UPDATE `t` SET a = 2"], False),
        ([], False),
    ],
)
def test_rechecked_mutation_tag(queries, tagged):
    assert ("rechecked_mutation" in behaviour_tags(queries, answered=True)) == tagged


def test_existing_behaviour_tags_are_unchanged():
    assert behaviour_tags([], answered=True) == ["answered_without_query"]
    assert behaviour_tags(["SELECT 1", "select  1", "UPDATE t SET a = 1", "SELECT 2"], answered=True) == [
        "repeated_query",
        "inspected_first",
        "rechecked_mutation",
    ]
    assert behaviour_tags(["UPDATE t SET a = 1"], answered=False) == []
