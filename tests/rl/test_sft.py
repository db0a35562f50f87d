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


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_recomputing_activations_trains_the_same_weights(dtype):
    """The warm start recomputes activations by default (SftConfig.gradient_checkpointing), which
    is left out of the checkpoint name: so it must train the very same weights. A tiny random
    Llama, two updates of two micro-batches, with and without."""
    import copy

    from rl.memory import checkpoint_activations
    from rl.sft import SftExample
    from tests.doubles import tiny_llama

    plain = tiny_llama()
    initial, recomputed = copy.deepcopy(plain), copy.deepcopy(plain)
    checkpoint_activations(recomputed)
    assert recomputed.is_gradient_checkpointing and not plain.is_gradient_checkpointing
    rng = random.Random(0)
    examples = []
    for _ in range(8):
        n = rng.randint(6, 20)
        examples.append(SftExample("t", [rng.randrange(64) for _ in range(n)], [0] * (n // 2) + [1] * (n - n // 2)))
    for model in (plain, recomputed):
        train_sft(model, examples, pad_id=0, steps=2, batch_size=4, lr=1e-2, seed=0, dtype=dtype)
    assert not all(torch.equal(a, b) for a, b in zip(plain.parameters(), initial.parameters()))  # it did train
    for (name, a), b in zip(plain.named_parameters(), recomputed.parameters()):
        assert torch.equal(a, b), name
