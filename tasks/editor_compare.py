"""Prefect tasks of the editor comparison (issue 21): sample engineer replies for held-out
bundles from a checkpoint, register the comparison run, and read its patches back as rows of
analysis/editor.py."""

from __future__ import annotations

from prefect import task
from prefect.cache_policies import INPUTS, TASK_SOURCE
from sqlalchemy import select

from configs.schema import EditorTrainConfig, PolicyConfig
from db import store
from db.engine import session_scope
from db.ids import run_id, stable_id
from db.models import EditorBundle, EditorPatch
from harness_pool.bundles import Bundle
from harness_pool.engineer import engineer_messages
from rl.policy import Sampling
from tasks.editor_train import editor_train_run_id
from tasks.records import start_run
from tasks.resources import get_engine, get_policy

ROLE = "editor-compare"


def compare_run_id(cfg: EditorTrainConfig) -> str:
    return run_id("editor-compare", cfg, editor_train_run_id(cfg), tag="compare", identity=False)


@task(name="register-editor-compare")
def register_compare_run(cfg: EditorTrainConfig, database_url: str | None, prefect_flow_run_id: str | None) -> str:
    run_id = compare_run_id(cfg)
    config = {**cfg.model_dump(mode="json"), "train_run_id": editor_train_run_id(cfg)}
    with session_scope(get_engine(database_url)) as session:
        start_run(session, run_id, "editor_compare", f"{cfg.name}-compare", config, prefect_flow_run_id)
    return run_id


@task(
    name="sample-replies",
    cache_policy=(INPUTS - "cfg" - "bundles") + TASK_SOURCE,
    persist_result=True,
    task_run_name="replies-{checkpoint}",
)
def sample_replies(cfg: EditorTrainConfig, checkpoint: str, bundles: list[Bundle], bundle_ids: list[str]) -> list[str]:
    """G replies per bundle (bundle-major) from the engineer checkpoint, at the training temperature."""
    policy = get_policy(PolicyConfig(model=checkpoint))
    sessions = [policy.start(engineer_messages(b)) for b in bundles for _ in range(cfg.group_size)]
    seed = int(stable_id(cfg.seed, "compare", checkpoint)[:8], 16)
    return [g.text for g in policy.generate(sessions, Sampling(cfg.temperature, 1.0, cfg.max_new_tokens, seed=seed))]


@task(name="finish-editor-compare")
def finish_compare_run(run_id: str, results: dict, database_url: str | None) -> None:
    with session_scope(get_engine(database_url)) as session:
        store.finish_run(session, run_id, "completed").results = results


def patch_rows(session, run_id: str):
    """(rows for analysis/editor.py, bundle id -> (failing tasks, controls)) of a comparison run."""
    from analysis.editor import PatchRow, editor_of

    patches = session.scalars(select(EditorPatch).where(EditorPatch.run_id == run_id)).all()
    if not patches:
        raise LookupError(f"run {run_id} has no editor patches: run hs editor compare first (hs db runs lists runs)")
    bundles = {
        b.id: b
        for b in session.scalars(select(EditorBundle).where(EditorBundle.id.in_({p.bundle_id for p in patches})))
    }
    sizes = {i: (len(b.content["failures"]), len(b.content["controls"])) for i, b in bundles.items()}
    rows = [PatchRow(editor_of(p.source), p.bundle_id, p.status, len(p.fixed), len(p.broken)) for p in patches]
    return rows, sizes


def editor_table(run_id: str, database_url: str | None) -> dict:
    """The comparison of a run as plain data (what `hs report editor` prints)."""
    from analysis.editor import compare_best, summarise

    with session_scope(get_engine(database_url)) as session:
        rows, sizes = patch_rows(session, run_id)
    table = {"run_id": run_id, "bundles": len(sizes), "editors": []}
    for s in summarise(rows, sizes):
        table["editors"].append(
            {
                "editor": s.editor,
                "patches": s.patches,
                "static_pass": [s.static_pass.estimate, s.static_pass.low, s.static_pass.high],
                "validated": [s.validated.estimate, s.validated.low, s.validated.high],
                "fixed_mean": s.fixed_mean,
                "broken_mean": s.broken_mean,
                "best_success": s.best_success,
            }
        )
    parent = sum(c / (f + c) for f, c in sizes.values()) / len(sizes)
    table["parent_success"] = parent
    comparisons = {}
    for a, b in (("grpo", "sft"), ("grpo", "offline"), ("sft", "offline"), ("grpo", "llm")):
        found = compare_best(rows, sizes, a, b)
        if found:
            interval, words = found
            comparisons[f"{a} - {b}"] = [interval.estimate, interval.low, interval.high, words]
    table["best_success_differences"] = comparisons
    return table
