"""The GRPO training flow with the real SmolLM2 model: rescue, update, signals, resume."""

from __future__ import annotations

import json
import random

import pytest
import torch
from sqlalchemy import func, select

from configs.schema import TrainConfig
from db.engine import make_engine, session_scope
from db.models import Checkpoint, Evaluation, ProfileVersion, RolloutGroup, RouterDecision, Run, TrainStep, Trajectory
from flows.artifacts import artifact_key
from harness_pool.spec import load_harness
from tests.flows.test_artifacts import artifacts_of


def tiny_cfg(tmp_path, **changes) -> TrainConfig:
    base = dict(
        name="t",
        mode="harness_s",
        init="smollm2-135m",
        pool=["schema_rows", "format_reminder"],
        router={"kind": "random"},  # the method's adaptive router has its own tests; these are about the loop
        k=2,
        batch_tasks=1,
        updates=2,
        reanchor_every=10,
        checkpoint_every=10,
        tiers=["easy"],
        validation={"split": "train", "n_tasks": 1, "k": 1},
        sampling={"temperature": 1.0, "top_p": 1.0, "max_new_tokens": 12},
        trainer={"lr": 1e-4, "micro_batch": 2},
        env={"max_rounds": 2},
        wandb="disabled",
        state_dir=str(tmp_path / "runs"),
        results_dir=str(tmp_path / "results"),
    )
    base.update(changes)
    return TrainConfig.model_validate(base)


class ScriptedByHarness:
    """A test policy over the real model: under the harness whose opening prompt is `good_opening`
    it replies the task's gold demonstration, under any other harness a wrong answer. Replies are
    appended token by token to real sessions (teacher forcing), so the trainer sees real tokens.
    Stands in for a policy that has learned something only one sibling brings out."""

    def __init__(self, inner, good_opening, good_script):
        self.inner, self.name, self.max_context_tokens = inner, "scripted", inner.max_context_tokens
        self.model, self.tokenizer, self.pad_id = inner.model, inner.tokenizer, inner.pad_id
        self.good_opening, self.good_script = good_opening, good_script
        self._scripts = {}

    def start(self, messages):
        session = self.inner.start(messages)
        good = messages == self.good_opening
        self._scripts[id(session)] = list(self.good_script) if good else ['Action: Answer\nFinal Answer: ["nope"]']
        return session

    def extend(self, session, messages):
        self.inner.extend(session, messages)

    def reset_context(self, session, messages):
        self.inner.reset_context(session, messages)

    def generate(self, sessions, sampling):
        return [
            self.inner.append_reply(s, (self._scripts[id(s)] or ["Action: Answer\nFinal Answer: []"]).pop(0))
            for s in sessions
        ]


@pytest.mark.slow
def test_dead_h0_group_is_replaced_by_a_sibling_rescue_with_nonzero_advantage(tmp_path, train_dir):
    from harness_pool.runtime import HarnessRuntime, task_fields
    from harness_pool.spec import load_harness
    from rl.sft import demo_replies
    from rl.trainer import TorchTrainer, TrainerSettings
    from rl.transformers_policy import TransformersPolicy
    from tasks import rollout_groups, step_record, train_handle
    from tasks.resources import bench_tasks

    url = f"sqlite:///{tmp_path / 'hs.db'}"
    cfg = tiny_cfg(
        tmp_path, k=4, router={"kind": "fixed", "names": ["schema_rows", "format_reminder"]}, env={"max_rounds": 4}
    )
    run = step_record.register_train_run.fn(cfg, url, None)
    task = bench_tasks(cfg.env, "train", tiers=["easy"])[0]
    good = load_harness("schema_rows")
    opening, _ = HarnessRuntime(good, task_fields(task)).opening_messages()
    inner = TransformersPolicy("smollm2-135m", shared=False)  # private copy: the update changes it
    policy = ScriptedByHarness(inner, opening, demo_replies(task, random.Random(0), inspect_prob=0.0))
    trainer = TorchTrainer(inner.model, TrainerSettings(lr=1e-4, micro_batch=2), inner.pad_id)
    run_id = run.run_id
    train_handle._HANDLES[run_id] = train_handle.TrainHandle(policy, trainer)
    try:
        first = rollout_groups.sample_first_groups.fn(cfg, run, 0, [task.id])
        dead = rollout_groups.dead_groups(first)
        assert [g.successes for g in dead] == [[False] * 4]
        rescue = rollout_groups.sample_rescue_groups.fn(cfg, run, 0, dead, url)
        groups = rollout_groups.record_groups.fn(cfg, run_id, 0, first, rescue, url)
        first_summary, rescue_summary = groups.summaries()
        assert (
            first_summary["role"] == "h0" and first_summary["successes"] == [False] * 4 and not first_summary["trained"]
        )
        assert rescue_summary["role"] == "rescue" and rescue_summary["trained"]
        assert rescue_summary["successes"] == [True, False, True, False]  # schema_rows solves, format_reminder does not
        assert [g.group_id for g in groups.trained] == [rescue_summary["group_id"]] and groups.rollouts_spent == 8
        seqs = train_handle.group_sequences(groups.trained)
        assert [s.advantage for s in seqs] == [1.0, -1.0, 1.0, -1.0]
        with session_scope(make_engine(url)) as s:
            assert s.scalar(select(func.count()).select_from(RolloutGroup)) == 2  # the dead group is kept too
            decision = s.scalars(select(RouterDecision)).one()  # the rescue's routing decision is on record
            rows, fmt = load_harness("schema_rows").id, load_harness("format_reminder").id
            assert (decision.router, decision.purpose, decision.chosen) == ("fixed", "rescue", [rows, fmt, rows, fmt])
            # the sequences the update got in memory are the stored trajectories' tokens
            stored = s.scalars(select(RolloutGroup).where(RolloutGroup.id == rescue_summary["group_id"])).one()
            trajs = sorted(stored.trajectories, key=lambda t: t.sample_index)
            assert [
                sum((list(t.context_ids) + list(t.completion_ids) for t in sorted(tr.turns, key=lambda t: t.index)), [])
                for tr in trajs
            ] == [q.input_ids for q in seqs]
        before = [p.detach().clone() for p in inner.model.parameters()]
        update = train_handle.update_policy.fn(cfg, run_id, 0, groups.trained)
        assert update["trained_sequences"] == 4 and update["grad_norm"] > 0
        assert any(not torch.equal(a, b) for a, b in zip(before, inner.model.parameters()))
        signals = step_record.record_step.fn(cfg, run_id, 0, groups, dead, update, None, url)
        assert signals["train/valid_group_ratio"] == 1.0 and signals["rollout/rescues_triggered"] == 1.0
        assert signals["rollout/rescue_success"] == 1.0 and signals["rollout/rollouts_spent"] == 8.0
        assert signals["train/first_group_success"] == 0.0 and signals["train/dead_groups"] == 1.0
    finally:
        train_handle.drop_handle(run_id)


@pytest.mark.slow
def test_harness_bandit_plays_every_harness_then_the_one_that_paid(tmp_path, train_dir):
    """harness_bandit: one harness per update; UCB1 plays H0 and each sibling once, then returns to
    the sibling whose rollouts succeeded; each choice is on record and read back from the rows."""
    from harness_pool.runtime import HarnessRuntime, task_fields
    from rl.sft import demo_replies
    from rl.trainer import TorchTrainer, TrainerSettings
    from rl.transformers_policy import TransformersPolicy
    from tasks import rollout_groups, step_record, train_handle
    from tasks.resources import bench_tasks

    url = f"sqlite:///{tmp_path / 'hs.db'}"
    cfg = tiny_cfg(tmp_path, mode="harness_bandit", k=2, updates=4, env={"max_rounds": 4})
    run = step_record.register_train_run.fn(cfg, url, None)
    task = bench_tasks(cfg.env, "train", tiers=["easy"])[0]
    opening, _ = HarnessRuntime(load_harness("schema_rows"), task_fields(task)).opening_messages()
    inner = TransformersPolicy("smollm2-135m", shared=False)
    policy = ScriptedByHarness(inner, opening, demo_replies(task, random.Random(0), inspect_prob=0.0) * 2)
    run_id = run.run_id
    train_handle._HANDLES[run_id] = train_handle.TrainHandle(
        policy, TorchTrainer(inner.model, TrainerSettings(lr=1e-6, micro_batch=2), inner.pad_id)
    )
    played = []
    try:
        for step in range(4):
            first = rollout_groups.sample_first_groups.fn(cfg, run, step, [task.id], url)
            none = rollout_groups.Sampled([], 0.0)
            groups = rollout_groups.record_groups.fn(cfg, run_id, step, first, none, url)
            update = train_handle.update_policy.fn(cfg, run_id, step, groups.trained)
            step_record.record_step.fn(cfg, run_id, step, groups, rollout_groups.dead_groups(first), update, None, url)
            played.append(first.bandit["arm"])
            assert [g.plan.role for g in first.groups] == ["bandit"]
        assert played == ["h0", "schema_rows", "format_reminder", "schema_rows"]
        with session_scope(make_engine(url)) as s:
            rows = s.scalars(select(TrainStep).where(TrainStep.run_id == run_id).order_by(TrainStep.step)).all()
            assert [r.details["bandit"]["arm"] for r in rows] == played
            assert rows[3].details["bandit"]["means"] == {"h0": 0.0, "schema_rows": 1.0, "format_reminder": 0.0}
            groups = s.scalars(select(RolloutGroup).where(RolloutGroup.run_id == run_id)).all()
            assert {g.role for g in groups} == {"bandit"}
        again = rollout_groups.sample_first_groups.fn(cfg, run, 3, [task.id], url)  # a redone update
        assert again.bandit == first.bandit
    finally:
        train_handle.drop_handle(run_id)


def test_a_re_anchor_of_h0_alone_measures_only_h0_and_writes_no_sibling_profile(tmp_path, train_dir):
    """validation.harnesses h0 (methods that read no profile): the re-anchor runs, stores and
    reports H0 alone; no sibling gets a profile induced from rollouts it never had."""
    from tasks import reanchor, step_record, train_handle

    url = f"sqlite:///{tmp_path / 'hs.db'}"
    cfg = tiny_cfg(
        tmp_path, mode="harness_bandit", validation={"split": "train", "n_tasks": 2, "k": 1, "harnesses": "h0"}
    )
    run = step_record.register_train_run.fn(cfg, url, None)
    try:
        result = reanchor.paired_validation.fn(cfg, run, 0, url)
    finally:
        train_handle.drop_handle(run.run_id)
    assert list(result["success"]) == ["h0"] and result["profiles"] == {}
    with session_scope(make_engine(url)) as s:
        measured = s.scalars(select(RolloutGroup.harness_id).where(RolloutGroup.run_id == run.run_id)).all()
        assert measured == [load_harness("h0").id] * 2  # one group per validation task
        assert s.scalar(select(func.count()).select_from(ProfileVersion)) == 0
        reanchors = s.scalars(select(Evaluation).where(Evaluation.run_id == run.run_id)).all()
        assert [(e.routing, e.harness_id) for e in reanchors] == [("reanchor", load_harness("h0").id)]


@pytest.mark.slow
def test_harnessx_spans_harnesses_and_replays_a_group_with_a_signal_token_for_token(tmp_path, train_dir):
    """harnessx: a group's rollouts spread over H0 + pool; the next update trains on its fresh
    group and, from the replay buffer, the earlier group with a signal, read back from the rows
    with the same tokens and recorded log-probabilities."""
    from harness_pool.runtime import HarnessRuntime, task_fields
    from rl.sft import demo_replies
    from rl.trainer import TorchTrainer, TrainerSettings
    from rl.transformers_policy import TransformersPolicy
    from tasks import rollout_groups, step_record, train_handle
    from tasks.resources import bench_tasks

    url = f"sqlite:///{tmp_path / 'hs.db'}"
    cfg = tiny_cfg(tmp_path, mode="harnessx", k=2, env={"max_rounds": 4}, replay={"capacity": 4, "per_update": 2})
    run = step_record.register_train_run.fn(cfg, url, None)
    task = bench_tasks(cfg.env, "train", tiers=["easy"])[0]
    opening, _ = HarnessRuntime(load_harness("schema_rows"), task_fields(task)).opening_messages()
    inner = TransformersPolicy("smollm2-135m", shared=False)
    policy = ScriptedByHarness(inner, opening, demo_replies(task, random.Random(0), inspect_prob=0.0))
    run_id = run.run_id
    train_handle._HANDLES[run_id] = train_handle.TrainHandle(
        policy, TorchTrainer(inner.model, TrainerSettings(lr=1e-6, micro_batch=2), inner.pad_id)
    )
    try:
        steps = []
        for step in range(2):
            first = rollout_groups.sample_first_groups.fn(cfg, run, step, [task.id], url)
            groups = rollout_groups.record_groups.fn(cfg, run_id, step, first, rollout_groups.Sampled([], 0.0), url)
            replayed = rollout_groups.replay_groups.fn(cfg, run_id, step, url)
            update = train_handle.update_policy.fn(cfg, run_id, step, [*groups.trained, *replayed])
            step_record.record_step.fn(cfg, run_id, step, groups, [], update, None, url, replayed)
            steps.append((groups, replayed, update))
        (g0,), none, update0 = steps[0][0].trained, steps[0][1], steps[0][2]
        assert [r.harness_id for r in g0.results] == [load_harness("h0").id, load_harness("schema_rows").id]
        assert g0.successes == [False, True] and none == [] and update0["sequences"] == 2
        _, (again,), update1 = steps[1]
        assert again.group_id == g0.group_id and again.rewards == g0.rewards and update1["sequences"] == 4
        original, replay = train_handle.group_sequences([g0]), train_handle.group_sequences([again])
        assert [(q.input_ids, q.advantage) for q in replay] == [(q.input_ids, q.advantage) for q in original]
        flat = [[x for q in seqs for x in q.rollout_logprobs] for seqs in (replay, original)]
        assert flat[0] == pytest.approx(flat[1], nan_ok=True)
        with session_scope(make_engine(url)) as s:
            row = s.scalars(select(TrainStep).where(TrainStep.run_id == run_id, TrainStep.step == 1)).one()
            assert row.details["replayed"] == [g0.group_id] and row.metrics["train/replayed_groups"] == 1.0
            assert {g.role for g in s.scalars(select(RolloutGroup).where(RolloutGroup.run_id == run_id))} == {"span"}
    finally:
        train_handle.drop_handle(run_id)


@pytest.mark.slow
def test_killed_run_resumes_from_the_last_update_without_duplicates(tmp_path, train_dir, prefect_api, monkeypatch):
    from flows.train import train
    from rl.trainer import TorchTrainer
    from tasks import run_identity, train_checkpoints, train_handle

    monkeypatch.setenv("HS_CHECKPOINT_DIR", str(tmp_path / "ckpt"))
    url = f"sqlite:///{tmp_path / 'hs.db'}"
    cfg = tiny_cfg(tmp_path)
    run_id = run_identity.train_run_id(cfg)
    real_update, calls = TorchTrainer.update, []

    def dies_on_second_update(self, seqs):
        calls.append(len(seqs))
        if len(calls) == 2:
            raise KeyboardInterrupt("killed")  # like Ctrl-C in the middle of update 2
        return real_update(self, seqs)

    monkeypatch.setattr(TorchTrainer, "update", dies_on_second_update)
    with pytest.raises(BaseException):
        train(cfg, database_url=url)
    assert train_checkpoints.completed_updates(cfg, run_id) == 1
    (crash,) = artifacts_of(key=artifact_key("train", "failure", run_id))  # how to re-run it, on its page
    assert "## train crashed" in crash.data and f"`hs rerun {crash.flow_run_id}`" in crash.data
    train_handle.drop_handle(run_id)  # a new process: weights and optimizer come back from disk
    monkeypatch.setattr(TorchTrainer, "update", real_update)

    state = train(cfg, database_url=url, return_state=True)
    result = state.result()
    assert train_checkpoints.completed_updates(cfg, run_id) == 2
    assert [h["step"] for h in result["history"]] == [0, 1]
    published = {a.key: a for a in artifacts_of(state.state_details.flow_run_id)}
    assert published[artifact_key("train", run_id, "progress")].data == 100.0  # 1 of 2 when it resumed, then 2
    table = json.loads(published[artifact_key("train", run_id, "updates")].data)
    assert [row["step"] for row in table] == [0, 1]
    assert [row["valid-group ratio"] for row in table] == [
        f"{h['train/valid_group_ratio']:.3f}" for h in result["history"]
    ]
    with session_scope(make_engine(url)) as s:
        steps = s.scalars(select(TrainStep).where(TrainStep.run_id == run_id).order_by(TrainStep.step)).all()
        train_ids = [t.id for t in run_identity.task_sets(cfg)[0]]
        for row in steps:  # the data order of a fresh run
            expected = run_identity.batch_for_step(train_ids, cfg.seed, cfg.batch_tasks, row.step)
            assert sorted({g["bench_task_id"] for g in row.details["groups"]}) == sorted(set(expected))
        groups = s.scalars(select(RolloutGroup).where(RolloutGroup.run_id == run_id)).all()
        keys = [(g.step, g.bench_task_id, g.role, g.harness_id) for g in groups]
        assert len(keys) == len(set(keys))
        for g in groups:
            n = s.scalar(select(func.count()).select_from(Trajectory).where(Trajectory.group_id == g.id))
            assert n == g.k
        reanchors = s.scalars(select(Evaluation).where(Evaluation.run_id == run_id)).all()
        assert sorted({e.metrics["step"] for e in reanchors}) == [0, 2]  # start and end
        assert len(reanchors) == 2 * 3  # H0 + 2 siblings, each time
        versions = s.scalars(select(ProfileVersion).where(ProfileVersion.run_id == run_id)).all()
        assert sorted((v.version, v.harness_id) for v in versions) == sorted(  # a profile per sibling and re-anchor
            (step, load_harness(n).id) for step in (0, 2) for n in ("schema_rows", "format_reminder")
        )
        assert s.get(Run, run_id).status == "completed"
        from rl.checkpoints import weights_digest
        from rl.model_store import resolve_model

        assert s.get(Run, run_id).config["init_weights"] == weights_digest(resolve_model("smollm2-135m"))
        ckpt = s.get(Checkpoint, f"{run_id}-u2")
        assert ckpt is not None and ckpt.kind == "rl" and ckpt.parent_id == "smollm2-135m"
        assert set(ckpt.provenance["precision"]) >= {"update", "rollouts", "device"}
    progress = json.loads((tmp_path / "runs" / run_id / "progress.json").read_text())
    assert progress == {"updates": 2, "state": "trainer-u2.pt", "run_id": run_id}
    assert sorted(p.name for p in (tmp_path / "runs" / run_id).iterdir()) == [  # old trainer states pruned;
        "progress.json",
        "rows-step0.pkl.gz",
        "rows-step1.pkl.gz",
        "rows-step2.pkl.gz",
        "trainer-u2.pt",
    ]  # rows kept


@pytest.mark.slow
def test_training_stops_before_an_update_that_could_cross_the_rollout_budget(
    tmp_path, train_dir, prefect_api, monkeypatch
):
    """harness_s spends 2 (K under H0) or 4 (a dead group rescued) rollouts per update here; with a
    budget of 6 an update starts only if 4 more keep the run within 6. Training ends there with its
    final re-anchor and a registered checkpoint, and starting again changes nothing."""
    from flows.train import train
    from tasks import train_checkpoints

    monkeypatch.setenv("HS_CHECKPOINT_DIR", str(tmp_path / "ckpt"))
    url = f"sqlite:///{tmp_path / 'hs.db'}"
    cfg = tiny_cfg(tmp_path, updates=3, rollout_budget=6)
    result = train(cfg, database_url=url)
    run_id = result["run_id"]
    done = train_checkpoints.completed_updates(cfg, run_id)
    assert 1 <= done < cfg.updates
    spent = train_checkpoints.spent_training_rollouts(run_id, done, url)
    assert spent <= 6 < spent + cfg.max_update_rollouts()  # within the cap, and the next update could cross it
    assert result["checkpoint"] == f"{run_id}-u{done}"
    assert [h["step"] for h in result["history"]] == list(range(done))
    with session_scope(make_engine(url)) as s:
        assert s.get(Checkpoint, result["checkpoint"]) is not None
        reanchors = s.scalars(select(Evaluation).where(Evaluation.run_id == run_id)).all()
        assert sorted({e.metrics["step"] for e in reanchors}) == [0, done]
        assert s.get(Run, run_id).status == "completed"
    again = train(cfg, database_url=url)  # resumes into the same stop
    assert again["checkpoint"] == result["checkpoint"] and train_checkpoints.completed_updates(cfg, run_id) == done
    assert train_checkpoints.spent_training_rollouts(run_id, done + 1, url) == spent
