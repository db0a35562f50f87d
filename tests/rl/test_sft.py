"""Warm start: demonstrations replay to verified successes, the mask covers assistant tokens only,
and a few updates lower the held-out loss (real SmolLM2, real environment)."""

from __future__ import annotations

import random

import pytest
import torch

from envs.dbbench.data import load_split
from envs.dbbench.env import DbBenchEnv
from harness_pool.spec import load_harness
from rl.sft import build_demonstrations, demo_replies, heldout_loss, train_sft


def _mixed_train_tasks(n_per_type: int = 2):
    tasks, seen = [], {}
    for t in load_split("train"):
        kind = "mut" if t.is_mutation else "select"
        key = (kind, t.task_type if kind == "mut" else "select")
        if seen.get(key, 0) < n_per_type:
            seen[key] = seen.get(key, 0) + 1
            tasks.append(t)
    return tasks


@pytest.mark.slow
def test_demonstrations_replay_to_success_and_mask_only_assistant_tokens(train_dir, smol_policy):
    tasks = _mixed_train_tasks(3)
    examples, results = build_demonstrations(smol_policy, tasks, load_harness("h0"), DbBenchEnv, seed=1)
    assert [r.bench_task_id for r in results if not r.verdict.success] == []
    assert len(examples) == len(tasks)
    tok = smol_policy.tokenizer
    rng = random.Random(1)
    for task, example, result in zip(tasks, examples, results):
        replies = demo_replies(task, rng)
        policy_ids = [i for i, m in zip(example.input_ids, example.loss_mask) if m == 1]
        expected = "".join(r + tok.eos_token for r in replies)
        assert tok.decode(policy_ids, skip_special_tokens=False) == expected
        context = tok.decode([i for i, m in zip(example.input_ids, example.loss_mask) if m == 0])
        # the real observation of the gold SQL is context (mask 0), never trained on
        assert result.turns[-2].observation in context
        assert load_harness("h0").system_message() in context and task.description in context


def test_demonstrations_refuse_validation_and_test_tasks(data_dir):
    with pytest.raises(ValueError, match="training split"):
        build_demonstrations(None, load_split("dev")[:1], load_harness("h0"), DbBenchEnv)


@pytest.mark.slow
def test_a_few_updates_change_weights_and_lower_heldout_loss(train_dir, smol_policy):
    from transformers import AutoModelForCausalLM

    tasks = _mixed_train_tasks(2)  # held-out and training demonstrations of every task type
    examples, _ = build_demonstrations(smol_policy, tasks, load_harness("h0"), DbBenchEnv, seed=2)
    held, train = examples[::2], examples[1::2]
    model = AutoModelForCausalLM.from_pretrained(smol_policy.model_dir, dtype=torch.float32)
    before_weights = model.model.layers[0].self_attn.q_proj.weight.detach().clone()
    pad = smol_policy.pad_id
    before = heldout_loss(model, held, pad)
    losses = train_sft(model, train, pad, steps=4, batch_size=2, lr=3e-4, seed=0)
    after = heldout_loss(model, held, pad)
    assert len(losses) == 4 and all(loss > 0 for loss in losses)
    assert not torch.equal(before_weights, model.model.layers[0].self_attn.q_proj.weight)
    assert after < before
