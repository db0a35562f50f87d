"""Turning rollout results into database rows (deterministic ids, one group at a time).

A task that writes a group also returns its *record* (`GroupRecord`: what `build_group` turns
into rows, rollout results included). Prefect persists that return value, so when a later run
gets the task's result from the cache (the task never executes), `ensure_group` writes the same
rows into whatever database is current: moving from SQLite to PostgreSQL, or losing the
database file, costs a re-run of the same command and no model time. Ids are deterministic, so
this is an upsert.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from db import store
from db.ids import stable_id
from db.models import Harness, RolloutGroup, Trajectory, Turn
from harness_pool.spec import HarnessError
from rl.rollout import RolloutResult


def start_run(session: Session, run_id: str, kind: str, name: str, config: dict, prefect_flow_run_id: str | None):
    """Insert (or mark running again) the run row of a flow that is starting or resuming."""
    return store.upsert_run(
        session,
        id=run_id,
        kind=kind,
        name=name,
        status="running",
        config=config,
        prefect_flow_run_id=prefect_flow_run_id,
    )


def policy_weights(policy) -> str | None:
    """The digest of a local policy's weights (a PolicyConfig), recorded in the run's config as
    provenance; None for a served model, whose weights this platform cannot see."""
    from rl.model_store import weights_of

    return weights_of(policy.model) if policy.backend == "transformers" else None


def record_harnesses(session: Session, harnesses) -> None:
    """The harness rows a run refers to (HarnessSpec objects), upserted."""
    for h in harnesses:
        store.upsert_harness(
            session,
            id=h.id,
            name=h.name,
            benchmark=h.benchmark,
            parent_ids=h.parent_ids,
            spec=h.model_dump(mode="json"),
        )


def check_run_harnesses(session: Session, run_id: str, harnesses) -> None:
    """A run that resumes must find its stored rollouts under the harnesses its config resolves to
    now (HarnessSpec objects): a harness file edited since the run started would otherwise mix two
    harnesses' rollouts in one run's metrics. Raises a one-line error that says how to go on."""
    allowed = {h.id for h in harnesses}
    held = session.execute(
        select(RolloutGroup.harness_id, func.min(Harness.name))
        .join(Harness, Harness.id == RolloutGroup.harness_id)
        .where(RolloutGroup.run_id == run_id)
        .group_by(RolloutGroup.harness_id)
    ).all()
    stale = sorted(f"{name} ({hid[:12]})" for hid, name in held if hid not in allowed)
    if stale:
        now = ", ".join(sorted(f"{h.name} ({h.id[:12]})" for h in harnesses))
        raise HarnessChangedError(
            f"run {run_id} holds rollouts under {', '.join(stale)}, but its config now resolves to {now}: "
            "a harness file changed since the run started; give this run a new name (--set name=...) "
            "to start it afresh, or restore the harness file to resume it"
        )


class HarnessChangedError(HarnessError):
    """A resumed run's harness is no longer the one its rollouts were made under."""


def record_bench_tasks(session: Session, bench_tasks) -> None:
    """The benchmark task rows a run refers to (BenchTask objects), upserted."""
    fields = ("id", "benchmark", "split", "index", "task_type", "tier", "description", "record")
    store.upsert_bench_tasks(session, [{name: getattr(t, name) for name in fields} for t in bench_tasks])


def group_id(run_id: str, step: int, bench_task_id: str, harness_id: str | None, seed: int, role: str) -> str:
    return stable_id("group", run_id, step, bench_task_id, harness_id or "mixed", seed, role)


def trajectory_id(run_id: str, step: int, bench_task_id: str, result: RolloutResult, seed: int, role: str) -> str:
    return stable_id("traj", run_id, step, bench_task_id, result.harness_id, seed, role, result.sample_index)


@dataclass(frozen=True)
class GroupRecord:
    """One rollout group as written: where it belongs (run, step, task, harness, seed, role), the
    checkpoint that made it, its rollout results and, optionally, one dict per result joining each
    trajectory's `details` beside the verifier's (e.g. an LLM diagnosis and its token use).
    `build_group` turns it into rows; a task that writes a group returns it too (`ensure_group`)."""

    run_id: str
    step: int
    bench_task_id: str
    harness_id: str | None
    seed: int
    role: str
    checkpoint: str
    results: list[RolloutResult]
    extra_details: list[dict] | None = None

    @property
    def group_id(self) -> str:
        return group_id(self.run_id, self.step, self.bench_task_id, self.harness_id, self.seed, self.role)


def build_group(g: GroupRecord) -> RolloutGroup:
    """The group's rows: the group, its trajectories and their turns."""
    group = RolloutGroup(
        id=g.group_id,
        run_id=g.run_id,
        step=g.step,
        bench_task_id=g.bench_task_id,
        harness_id=g.harness_id,
        seed=g.seed,
        k=len(g.results),
        role=g.role,
        checkpoint=g.checkpoint,
        n_success=sum(r.verdict.success for r in g.results),
    )
    for n, r in enumerate(g.results):
        tid = trajectory_id(g.run_id, g.step, g.bench_task_id, r, g.seed, g.role)
        traj = Trajectory(
            id=tid,
            run_id=g.run_id,
            bench_task_id=g.bench_task_id,
            harness_id=r.harness_id,
            sample_index=r.sample_index,
            checkpoint=g.checkpoint,
            reward=r.verdict.reward,
            success=r.verdict.success,
            failure_kind=r.failure_kind,
            finish_reason=r.end_reason,
            answer=r.answer,
            n_turns=len(r.turns),
            n_policy_tokens=r.n_policy_tokens,
            behaviour_tags=r.behaviour_tags,
            seconds_total=r.seconds_total,
            seconds_generate=r.seconds_generate,
            seconds_env=r.seconds_env,
            details=_jsonable({**r.verdict.details, **(g.extra_details[n] if g.extra_details else {})}),
        )
        traj.turns = [
            Turn(
                id=stable_id(tid, t.index),
                index=t.index,
                context_text=t.context_text,
                context_ids=t.context_ids,
                completion_text=t.completion_text,
                completion_ids=t.completion_ids,
                completion_logprobs=t.completion_logprobs,
                loss_mask=t.loss_mask,
                action_kind=t.action_kind,
                action=_jsonable(t.action),
                observation=t.observation,
                hook_events=t.hook_events,
                seconds_generate=t.seconds_generate,
                seconds_env=t.seconds_env,
            )
            for t in r.turns
        ]
        group.trajectories.append(traj)
    return group


def ensure_group(session: Session, record: GroupRecord) -> bool:
    """Write the group of `record` unless the database already holds it whole; True if it wrote."""
    gid = record.group_id
    held = session.scalar(select(func.count()).select_from(Trajectory).where(Trajectory.group_id == gid))
    if session.get(RolloutGroup, gid) is not None and held == len(record.results):
        return False
    store.replace_group(session, build_group(record))
    return True


def _jsonable(value):
    """JSON columns take plain data; answers may hold Decimal or bytes from SQL drivers."""
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return str(value)
