"""The trainable editor's bundle flow with the real policy: failures become stored, traceable bundles."""

from __future__ import annotations

import pytest
from sqlalchemy import select

from configs.schema import EditorBundlesConfig
from db.engine import make_engine, session_scope
from db.models import EditorBundle, Run, Trajectory


def tiny_bundles(tmp_path, **changes) -> dict:
    """Bundle settings at test size: easy tasks, k = 1, short replies, 2 rounds."""
    return (
        dict(
            k=1,
            min_failures=2,
            token_budget=300,
            tiers=["easy"],
            sampling={"temperature": 1.0, "top_p": 1.0, "max_new_tokens": 24},
            env={"max_rounds": 2},
            results_dir=str(tmp_path / "results"),
        )
        | changes
    )


@pytest.mark.slow
def test_bundles_from_the_real_target_are_stored_traceable_and_resumed(tmp_path, train_dir, prefect_api):
    from flows.editor import editor_bundles

    cfg = EditorBundlesConfig.model_validate(tiny_bundles(tmp_path, n_train_tasks=4, n_heldout_tasks=2, max_failures=2))
    url = f"sqlite:///{tmp_path / 'hs.db'}"
    summary = editor_bundles(cfg, database_url=url)
    assert summary["train"]["tasks"] == 4 and summary["heldout"]["tasks"] == 2
    assert summary["train"]["bundles"], "the base policy fails most tasks: at least one training bundle"
    with session_scope(make_engine(url)) as s:
        rows = s.scalars(select(EditorBundle)).all()
        assert s.get(Run, summary["run_id"]).status == "completed"
        for row in rows:  # every failure is a stored failed trajectory of the run, on a distinct task
            trajs = [s.get(Trajectory, t) for t in row.trajectory_ids]
            assert all(t is not None and not t.success and t.run_id == summary["run_id"] for t in trajs)
            assert len({t.bench_task_id for t in trajs}) == len(trajs) == 2
            assert row.content["causes"] and set(row.content["tasks"]) == {t.bench_task_id for t in trajs}
            heldout = row.split == "heldout"
            assert all(("/dev/" in t.bench_task_id) == heldout for t in trajs)
        created = {t.id: t.created_at for t in s.scalars(select(Trajectory)).all()}
    again = editor_bundles(cfg, database_url=url)  # cached harness runs: the same bundles, nothing re-run
    assert again == summary
    with session_scope(make_engine(url)) as s:
        assert {t.id: t.created_at for t in s.scalars(select(Trajectory)).all()} == created


@pytest.mark.slow
def test_cold_start_keeps_validated_offline_patches_and_fine_tunes_the_engineer(
    tmp_path, train_dir, prefect_api, monkeypatch
):
    """The target is ScalarAnswers (tests/flows/test_evolve_flow.py): right answers written as bare
    scalars, which H0 rejects (answer_not_list) and a lenient patch accepts, so validation has a
    known outcome; the engineer is the real model, fine-tuned for 1 step."""
    import yaml

    from configs.schema import EditorSftConfig
    from db.models import Checkpoint, EditorPatch
    from flows.editor import editor_sft
    from harness_pool.engineer import read_reply
    from tasks import evolution
    from tasks.editor import bundle_task_ids, load_bundles
    from tasks.resources import bench_task
    from tests.flows.test_evolve_flow import ScalarAnswers

    monkeypatch.setenv("HS_CHECKPOINT_DIR", str(tmp_path / "ckpt"))
    bundles = tiny_bundles(tmp_path, n_train_tasks=8, n_heldout_tasks=4, max_failures=3, token_budget=200)
    (tmp_path / "bundles.yaml").write_text(yaml.safe_dump(bundles))
    target = EditorBundlesConfig.model_validate(bundles)
    tasks = [bench_task(target.env, i) for i in bundle_task_ids(target)["train"]]
    labels = {t.description: str(t.label[0]) for t in tasks if not t.is_mutation and len(t.label) == 1}
    assert len(labels) >= 1
    monkeypatch.setattr(evolution, "get_policy", lambda _: ScalarAnswers(labels))
    # an LLM editor (a local stand-in speaking the chat-completions protocol) proposes a patch per bundle
    from tests.harness_pool.test_llm_editor import _serve, fenced, openai_body

    lenient = {"description": "accept scalar answers", "root_causes": ["answer_not_list"]}
    lenient["edits"] = [{"op": "set_tool_view", "accept_scalar_answer": True}]
    server = _serve("/v1/chat/completions", openai_body, [fenced(lenient)] * 12)
    url_llm = f"http://127.0.0.1:{server.server_address[1]}/v1"
    cfg = EditorSftConfig(
        bundles=str(tmp_path / "bundles.yaml"),
        llm={"kind": "openai", "model": "editor-model", "base_url": url_llm, "api_key_env": "HS_TEST_NO_SUCH_KEY"},
        variants=3,
        k=1,
        steps=1,
        batch_size=1,
        heldout_fraction=0.0,
        results_dir=str(tmp_path / "results"),
    )
    url = f"sqlite:///{tmp_path / 'hs.db'}"
    result = editor_sft(cfg, database_url=url)
    assert result["bundles"] >= 1 and result["validated"] >= 1
    with session_scope(make_engine(url)) as s:
        rows = s.scalars(select(EditorPatch).where(EditorPatch.run_id == result["run_id"])).all()
        assert len(rows) == result["candidates"] and sum(r.status == "valid" for r in rows) == result["validated"]
        for r in rows:
            bundle = s.get(EditorBundle, r.bundle_id)
            failing = {f["bench_task_id"] for f in bundle.content["failures"]}
            assert set(r.fixed) <= failing and r.status in ("valid", "invalid", "rejected")
            assert r.status != "valid" or (r.fixed and not r.broken and r.reward > 0)
        assert s.get(Checkpoint, result["checkpoint"]).kind == "engineer_sft"
        llm_rows = [r for r in rows if r.source == "llm:editor-model"]
        assert len(llm_rows) == result["bundles"] and any(r.status == "valid" for r in llm_rows)
    # a demonstration, decoded from its token ids, is a reply the engineer's reader accepts
    demos = (tmp_path / "results" / "editor-sft" / result["checkpoint"] / "demos.jsonl").read_text().splitlines()
    import json

    from transformers import AutoTokenizer

    from rl.model_store import resolve_model

    first = json.loads(demos[0])
    reply = [i for i, m in zip(first["input_ids"], first["loss_mask"]) if m]
    text = AutoTokenizer.from_pretrained(resolve_model("smollm2-135m")).decode(reply, skip_special_tokens=True)
    bundle = next(b for b in load_bundles(result["bundles_run_id"], "train", url) if b.id == first["bench_task_id"])
    assert read_reply(text, bundle, "again").valid

    # GRPO from that cold start: sampled patches are read, re-run or rejected, scored and recorded
    from configs.schema import EditorTrainConfig
    from db.models import TrainStep
    from flows.editor import editor_train
    from tasks import editor_train as train_tasks

    (tmp_path / "sft.yaml").write_text(yaml.safe_dump(cfg.model_dump(mode="json")))
    grpo = EditorTrainConfig(
        sft=str(tmp_path / "sft.yaml"),
        updates=1,
        bundles_per_update=1,
        group_size=2,
        max_new_tokens=48,
        results_dir=str(tmp_path / "results"),
    )
    trained = editor_train(grpo, database_url=url)
    assert len(trained["history"]) == 1 and trained["history"][0]["editor/rejected_share"] <= 1.0
    with session_scope(make_engine(url)) as s:
        patches = s.scalars(select(EditorPatch).where(EditorPatch.run_id == trained["run_id"])).all()
        assert len(patches) == 2 and all(p.source.startswith("engineer:") and p.reply is not None for p in patches)
        for p in patches:  # a rejected patch has its reason and the lowest reward; a run one its outcome
            assert (p.status == "rejected") == (p.harness_id is None)
            assert p.status != "rejected" or (p.reason and p.reward == -1.0)
        step = s.scalars(select(TrainStep).where(TrainStep.run_id == trained["run_id"])).one()
        assert step.mode == "editor_grpo" and len(step.details["patches"]) == 2
        assert s.get(Checkpoint, trained["checkpoint"]).kind == "engineer_grpo"
    monkeypatch.setattr(train_tasks, "engineer", lambda *_: pytest.fail("a finished run sampled again"))
    assert editor_train(grpo, database_url=url)["checkpoint"] == trained["checkpoint"]

    # the comparison on held-out bundles: offline operators, the SFT engineer, the GRPO engineer
    from flows.editor import editor_compare

    table = editor_compare(grpo, database_url=url)
    editors = {e["editor"]: e for e in table["editors"]}
    assert set(editors) == {"offline", "llm", "sft", "grpo"} and table["bundles"] >= 1
    server.shutdown()
    server.server_close()
    assert editors["sft"]["patches"] == editors["grpo"]["patches"] == 2 * table["bundles"]
    with session_scope(make_engine(url)) as s:
        compared = s.scalars(select(EditorPatch).where(EditorPatch.run_id == table["run_id"])).all()
        assert {s.get(EditorBundle, p.bundle_id).split for p in compared} == {"heldout"}


def test_engineer_sequences_carry_group_relative_advantages_on_reply_tokens_only():
    from tasks.editor_train import sequences

    samples = [
        {"bundle_id": b, "sample_index": i, "prompt_ids": [1, 2, 3], "token_ids": [7, 8], "logprobs": [-0.1, -0.2]}
        for b in ("x", "y")
        for i in range(2)
    ]
    seqs = sequences(samples, [1.0, -1.0, 0.5, 0.5])
    assert [s.advantage for s in seqs] == pytest.approx([1.0, -1.0, 0.0, 0.0])  # y's equal rewards teach nothing
    assert seqs[0].input_ids == [1, 2, 3, 7, 8] and seqs[0].loss_mask == [0, 0, 0, 1, 1]
    assert seqs[0].rollout_logprobs[3:] == [-0.1, -0.2] and seqs[0].group_key == "x"


@pytest.mark.slow
def test_evolution_proposes_children_with_an_engineer_checkpoint(tmp_path, train_dir, prefect_api):
    """editor.kind trained: each candidate's failures become a bundle the engineer (here the base
    model, which rarely writes a valid patch) answers; its reply is recorded with the outcome."""
    from db.models import EvolutionCandidate
    from flows.evolve import evolve
    from tests.flows.test_evolve_flow import evolve_cfg

    cfg = evolve_cfg(
        tmp_path,
        rounds=1,
        children_per_parent=1,
        diagnose={"n_tasks": 3, "k": 1, "min_support": 1},
        editor={"kind": "trained", "checkpoint": "smollm2-135m", "max_tokens": 64},
    )
    url = f"sqlite:///{tmp_path / 'hs.db'}"
    evolve(cfg, database_url=url)
    with session_scope(make_engine(url)) as s:
        cands = s.scalars(select(EvolutionCandidate)).all()
    assert len(cands) == 1 and cands[0].editor == "trained"
    c = cands[0]
    editor = c.details["editor"]
    assert editor["kind"] == "trained" and editor["checkpoint"] == "smollm2-135m" and editor["raw"]
    assert c.status in ("valid", "invalid", "rejected")
    assert c.status != "rejected" or c.details["error"]
