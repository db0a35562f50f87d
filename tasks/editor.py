"""Prefect tasks of the trainable harness editor (issue 21): register a bundle run, turn the frozen
target's diagnosis runs into evidence bundles and store them.

The target's rollouts reuse the evolution's `run_harness` (persisted and cached, so a restarted
run skips every finished harness run); bundles are content-addressed, so storing them again is a
no-op.
"""

from __future__ import annotations

import random

from prefect import task
from sqlalchemy import select
from sqlalchemy.orm import selectinload

from configs.schema import EditorBundlesConfig
from db import store
from db.engine import session_scope
from db.ids import run_id
from db.models import BenchTask, EditorBundle, Trajectory
from harness_pool.bundles import Bundle, approx_tokens, build_bundles
from harness_pool.spec import HarnessSpec, load_harness
from tasks.evolution import policy_config
from tasks.llm_editing import render_turns
from tasks.records import record_bench_tasks, record_harnesses, start_run
from tasks.resources import bench_task, bench_tasks, get_engine, get_policy

SPLITS = {"train": "train", "heldout": "dev"}  # bundle split -> the benchmark split its tasks come from


def bundles_run_id(cfg: EditorBundlesConfig) -> str:
    return run_id("editor-bundles", cfg)


def bundle_task_ids(cfg: EditorBundlesConfig) -> dict[str, list[str]]:
    """Seeded samples: training tasks (of the configured tiers) and validation tasks."""
    out = {}
    for split, source in SPLITS.items():
        n = cfg.n_train_tasks if split == "train" else cfg.n_heldout_tasks
        ids = [t.id for t in bench_tasks(cfg.env, source, tiers=cfg.tiers if split == "train" else None)]
        out[split] = sorted(random.Random(f"{cfg.seed}-{split}").sample(ids, min(n, len(ids))))
    return out


@task(name="register-editor-bundles")
def register_bundles_run(cfg: EditorBundlesConfig, database_url: str | None, prefect_flow_run_id: str | None) -> dict:
    parent = load_harness(cfg.harness, cfg.env.benchmark)
    task_ids = bundle_task_ids(cfg)
    run_id = bundles_run_id(cfg)
    config = {**cfg.model_dump(mode="json"), "policy_model": policy_config(cfg).model}
    with session_scope(get_engine(database_url)) as session:
        start_run(session, run_id, "editor_bundles", cfg.name, config, prefect_flow_run_id)
        record_harnesses(session, [parent])
        record_bench_tasks(session, [bench_task(cfg.env, i) for ids in task_ids.values() for i in ids])
    return {"run_id": run_id, "parent": parent.model_dump(mode="json"), "task_ids": task_ids}


def _token_counter(cfg: EditorBundlesConfig):
    tokenizer = getattr(get_policy(policy_config(cfg)), "tokenizer", None)
    return (lambda text: len(tokenizer(text, add_special_tokens=False)["input_ids"])) if tokenizer else approx_tokens


@task(name="store-editor-bundles", task_run_name="bundles-{split}")
def store_bundles(
    cfg: EditorBundlesConfig, run_id: str, parent: dict, diagnosis: dict, split: str, database_url: str | None
) -> list[str]:
    """The bundles of one split's diagnosis, written to editor_bundles; returns their ids."""
    spec = HarnessSpec.model_validate(parent)
    failed = [
        tid for r in diagnosis["tasks"].values() for tid, ok in zip(r["trajectory_ids"], r["successes"]) if not ok
    ]
    with session_scope(get_engine(database_url)) as session:
        trajs = session.scalars(
            select(Trajectory).where(Trajectory.id.in_(failed)).options(selectinload(Trajectory.turns))
        ).all()
        texts = {t.id: render_turns(sorted(t.turns, key=lambda x: x.index)) for t in trajs}
        rows = session.scalars(select(BenchTask).where(BenchTask.id.in_(list(diagnosis["tasks"])))).all()
        fields = {b.id: {"type": b.task_type, "tier": b.tier, "description": b.description} for b in rows}
        bundles = build_bundles(
            spec,
            diagnosis["tasks"],
            texts,
            fields,
            split=split,
            seed=cfg.seed,
            min_failures=cfg.min_failures,
            max_failures=cfg.max_failures,
            token_budget=cfg.token_budget,
            n_controls=cfg.n_controls,
            count=_token_counter(cfg),
        )
        for b in bundles:
            session.merge(bundle_row(b, run_id))
    return [b.id for b in bundles]


def bundle_row(bundle: Bundle, run_id: str) -> EditorBundle:
    return EditorBundle(
        id=bundle.id,
        run_id=run_id,
        benchmark=bundle.benchmark,
        split=bundle.split,
        family=bundle.family,
        parent_id=HarnessSpec.model_validate(bundle.parent).id,
        causes=list(bundle.causes),
        trajectory_ids=bundle.trajectory_ids,
        content=bundle.model_dump(mode="json"),
    )


def load_bundles(run_id: str, split: str, database_url: str | None) -> list[Bundle]:
    """The stored bundles of a bundle run and split, in id order."""
    with session_scope(get_engine(database_url)) as session:
        rows = session.scalars(
            select(EditorBundle)
            .where(EditorBundle.run_id == run_id, EditorBundle.split == split)
            .order_by(EditorBundle.id)
        ).all()
        return [Bundle.model_validate({k: v for k, v in r.content.items() if k != "id"}) for r in rows]


@task(name="finish-editor-bundles")
def finish_bundles_run(run_id: str, summary: dict, database_url: str | None) -> None:
    with session_scope(get_engine(database_url)) as session:
        store.finish_run(session, run_id, "completed").results = summary
