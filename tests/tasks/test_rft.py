"""Fine-tuning on a policy's own successes (WHALE, HarnessForge; tasks/baselines.py): the
examples are the stored successful rollouts' tokens, and the fine-tune is a real checkpoint."""

from __future__ import annotations

import random

import pytest
import torch

from configs.pipeline import PipelineConfig
from db import store
from db.engine import make_engine, session_scope
from db.models import Checkpoint, Run
from harness_pool.spec import load_harness
from tests.flows.test_pipeline_flow import tiny_pipeline


@pytest.fixture
def rollouts(tmp_path, train_dir, smol_policy):
    """Two real rollouts of one training task under H0, stored as one group: the gold replies
    (a success) and a wrong answer (a failure), teacher-forced through the real engine."""
    from configs.schema import EnvConfig
    from rl.policy import Sampling
    from rl.rollout import RolloutSpec, run_rollouts
    from rl.sft import ForcedReplies, demo_replies
    from tasks.records import GroupRecord, build_group, record_bench_tasks, record_harnesses
    from tasks.resources import bench_tasks, env_factory, get_engine

    url = f"sqlite:///{tmp_path / 'hs.db'}"
    env = EnvConfig(max_rounds=4)
    task = bench_tasks(env, "train", tiers=["easy"])[0]
    h0 = load_harness("h0")
    scripts = [demo_replies(task, random.Random(0), inspect_prob=0.0), ['Action: Answer\nFinal Answer: ["nope"]']]
    forced = ForcedReplies(smol_policy, scripts)
    results = run_rollouts(forced, [RolloutSpec(task, h0, i) for i in range(2)], env_factory(env), Sampling(), 4)
    assert [r.verdict.success for r in results] == [True, False]
    with session_scope(get_engine(url)) as s:  # migrated on first use
        store.upsert_run(s, id="collect-run", kind="eval", name="collect", config={}, status="completed")
        record_harnesses(s, [h0])
        record_bench_tasks(s, [task])
        store.replace_group(
            s,
            build_group(GroupRecord("collect-run", 0, task.id, h0.id, 0, "eval", "smollm2-135m", results)),
        )
    return url, results


@pytest.mark.slow
def test_successes_become_examples_and_a_fine_tuned_checkpoint(tmp_path, rollouts, monkeypatch):
    from rl.checkpoints import is_complete
    from rl.train_batch import sequences_from_turns
    from tasks.baselines import rft_checkpoint, success_examples
    from tasks.pipeline import training_config

    monkeypatch.setenv("HS_CHECKPOINT_DIR", str(tmp_path / "ckpt"))
    url, results = rollouts
    with session_scope(make_engine(url)) as s:
        examples = success_examples(s, ["collect-run"])
    (gold,) = sequences_from_turns(results[0].turns, 1.0)  # only the success, token for token
    assert [(e.input_ids, e.loss_mask) for e in examples] == [(gold.input_ids, gold.loss_mask)]
    assert sum(examples[0].loss_mask) == results[0].n_policy_tokens

    cfg = tiny_pipeline(tmp_path, rft={"steps": 2, "batch_size": 1, "lr": 1e-4})
    train_cfg = training_config(cfg, "v1")
    tuned = rft_checkpoint.fn(cfg, train_cfg, "rft-r0", "smollm2-135m", ["collect-run"], url)
    assert tuned["examples"] == 1 and tuned["checkpoint"] != "smollm2-135m" and is_complete(tuned["checkpoint"])
    with session_scope(make_engine(url)) as s:
        row = s.get(Checkpoint, tuned["checkpoint"])
        assert row.parent_id == "smollm2-135m" and row.kind == "sft"
        run = s.get(Run, tuned["run_id"])  # the fine-tuning run, whose wall time the resource table sums
        assert run.kind == "sft" and run.finished_at is not None and row.run_id == run.id
    again = rft_checkpoint.fn(cfg, train_cfg, "rft-r0", "smollm2-135m", ["collect-run"], url)
    assert again == tuned  # built once: the same name is reused

    from transformers import AutoModelForCausalLM

    from rl.model_store import resolve_model

    base = AutoModelForCausalLM.from_pretrained(resolve_model("smollm2-135m"), dtype=torch.float32)
    new = AutoModelForCausalLM.from_pretrained(resolve_model(tuned["checkpoint"]), dtype=torch.float32)
    assert any(not torch.equal(a, b) for a, b in zip(base.parameters(), new.parameters()))


@pytest.mark.slow
def test_no_success_leaves_the_policy_unchanged(tmp_path, rollouts, monkeypatch):
    from tasks.baselines import rft_checkpoint
    from tasks.pipeline import training_config

    monkeypatch.setenv("HS_CHECKPOINT_DIR", str(tmp_path / "ckpt"))
    url, _ = rollouts
    cfg = tiny_pipeline(tmp_path)
    assert rft_checkpoint.fn(cfg, training_config(cfg, "v1"), "rft-r0", "base-x", ["no-such-run"], url) == {
        "checkpoint": "base-x",
        "examples": 0,
        "run_id": None,  # no fine-tuning run
    }


def test_rft_settings_are_part_of_the_pipeline_identity_only_when_changed(tmp_path):
    plain = tiny_pipeline(tmp_path)
    assert "rft" not in plain.identity()  # pipelines recorded before rft existed keep their ids
    assert "rft" in tiny_pipeline(tmp_path, rft={"rounds": 3}).identity()
    assert isinstance(plain, PipelineConfig)
