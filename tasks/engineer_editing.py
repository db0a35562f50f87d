"""The trained engineer as evolution's editor (`editor.kind: trained`, issue 21): the failures a
candidate targets become an evidence bundle, the engineer checkpoint (run locally) writes one
patch for it, and the reply is read like any engineer reply (a child, or a rejection reason)."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import selectinload

from configs.schema import EvolveConfig, PolicyConfig
from db.engine import session_scope
from db.ids import stable_id
from db.models import Trajectory
from harness_pool.bundles import Bundle, BundleFailure, control_tasks, trim
from harness_pool.engineer import engineer_messages, read_reply
from harness_pool.operators import family_of
from harness_pool.spec import HarnessSpec
from rl.policy import Sampling
from tasks.llm_editing import render_turns
from tasks.resources import get_engine, get_policy

MAX_FAILURES = 4
TOKEN_BUDGET = 1200
N_CONTROLS = 4


def target_bundle(parent: HarnessSpec, target, diagnosis: dict, database_url: str | None, seed: str) -> Bundle:
    """The bundle of a candidate: one failed rollout (with a targeted cause) of up to 4 tasks the
    parent never solved, their texts trimmed to the budget, and the parent's controls."""
    causes = [c.cause for c in target]
    picked = []
    for task_id in sorted(diagnosis["tasks"]):
        r = diagnosis["tasks"][task_id]
        if any(r["successes"]):
            continue
        hit = next(((tid, c) for tid, c in zip(r["trajectory_ids"], r["causes"]) if c in causes), None)
        if hit:
            picked.append((task_id, *hit))
    picked = picked[:MAX_FAILURES]
    with session_scope(get_engine(database_url)) as session:
        trajs = session.scalars(
            select(Trajectory)
            .where(Trajectory.id.in_([t for _, t, _ in picked]))
            .options(selectinload(Trajectory.turns))
        ).all()
        texts = {t.id: render_turns(sorted(t.turns, key=lambda x: x.index)) for t in trajs}
    share = TOKEN_BUDGET // max(len(picked), 1)
    return Bundle(
        benchmark=parent.benchmark,
        split="evolve",
        family=family_of(parent.benchmark).get(causes[0], causes[0]),
        parent=parent.model_dump(mode="json"),
        causes=causes,
        failures=[
            BundleFailure(trajectory_id=t, bench_task_id=task, cause=c, text=trim(texts.get(t, ""), share))
            for task, t, c in picked
        ],
        controls=sorted(control_tasks(diagnosis["tasks"], seed)[:N_CONTROLS]),
    )


def engineer_child(
    cfg: EvolveConfig, parent: HarnessSpec, target, name: str, round: int, diagnosis: dict, database_url: str | None
):
    """(child or None, error or None, editor info with the reply and the checkpoint)."""
    e = cfg.editor
    bundle = target_bundle(parent, target, diagnosis, database_url, f"{cfg.seed}-{parent.id}")
    info = {"kind": "trained", "checkpoint": e.checkpoint, "bundle_id": bundle.id, "attempts": 1}
    if not bundle.failures:
        return None, "no failed rollout with a targeted cause to show the engineer", {**info, "errors": ["no failures"]}
    policy = get_policy(PolicyConfig(model=e.checkpoint))
    session = policy.start(engineer_messages(bundle))
    seed = int(stable_id(cfg.seed, round, parent.id, name)[:8], 16)
    reply = policy.generate([session], Sampling(e.temperature, 1.0, e.max_tokens, seed=seed))[0].text
    reading = read_reply(reply, bundle, name, round)
    info = {**info, "raw": [reply[:4000]], "errors": [reading.reason] if reading.reason else []}
    return reading.child, reading.reason, info
