"""Small repository functions the flows and tasks call to write and read the database.

Every function takes an open :class:`~sqlalchemy.orm.Session` and never commits: the caller
owns the transaction, normally ``with session_scope(engine) as session: ...`` at a Prefect task
boundary, so that one task's writes commit or roll back together. Functions ``flush`` where a
later statement depends on rows they wrote.

Writes are idempotent: ids are deterministic (:func:`db.ids.stable_id`), and re-writing the
same id updates or replaces the row instead of adding a second one. Only portable SQL is used
(get-then-update, delete-then-insert), so the same code runs on SQLite and PostgreSQL.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from types import SimpleNamespace
from typing import Any

from sqlalchemy import delete, func, inspect, select, text
from sqlalchemy.orm import Session, selectinload

from db.models import (
    RUN_STATUSES,
    BenchTask,
    Evaluation,
    EvolutionCandidate,
    Harness,
    Pool,
    ProfileVersion,
    RolloutGroup,
    Run,
    TrainStep,
    Trajectory,
    Turn,
    utcnow,
)

MIN_PREFIX = 6
_IN_CHUNK = 500  # ids per IN (...) list: far below SQLite's and PostgreSQL's parameter limits
# Observations are agent-controlled (a SQL result can be ~1 MB): ``turns`` keeps this prefix.
MAX_STORED_OBSERVATION_CHARS = 8_000


def bounded_observation(observation: str | None, limit: int = MAX_STORED_OBSERVATION_CHARS) -> str | None:
    """The first ``limit`` characters of an observation, then a line saying how many were not stored."""
    if observation is None or len(observation) <= limit:
        return observation
    cut = len(observation) - limit
    return f"{observation[:limit]}\n[observation cut for storage: {cut:,} more characters not stored]"


def upsert_run(session: Session, **fields: Any) -> Run:
    """Insert the run ``fields["id"]`` or update the given fields of the existing one."""
    if "id" not in fields:
        raise ValueError("upsert_run needs id=... (use db.ids.stable_id for a deterministic one)")
    _check_status(fields.get("status"))
    run = session.get(Run, fields["id"])
    if run is None:
        run = Run(**fields)
        session.add(run)
    else:
        for name, value in fields.items():
            setattr(run, name, value)
    session.flush()
    return run


def finish_run(session: Session, run_id: str, status: str) -> Run:
    """Set the run's final ``status`` and ``finished_at`` (now, UTC)."""
    _check_status(status)
    run = session.get(Run, run_id)
    if run is None:
        raise LookupError(f"no run with id {run_id!r}; create it first with upsert_run")
    run.status = status
    run.finished_at = utcnow()
    session.flush()
    return run


def upsert_harness(
    session: Session,
    id: str,  # named after the column
    name: str,
    benchmark: str,
    parent_ids: Sequence[str],
    spec: dict[str, Any],
) -> Harness:
    """Insert or update a harness row; ``id`` is the content hash of ``spec``."""
    harness = session.get(Harness, id)
    if harness is None:
        harness = Harness(id=id)
        session.add(harness)
    harness.name = name
    harness.benchmark = benchmark
    harness.parent_ids = list(parent_ids)
    harness.spec = spec
    session.flush()
    return harness


def upsert_bench_tasks(session: Session, rows: Sequence[dict[str, Any]]) -> int:
    """Insert or update bench tasks, one dict of ``BenchTask`` columns per row; returns count.

    Existing ids are fetched in chunks, so loading a 1,600-task split costs a few queries.
    """
    by_id = {row["id"]: row for row in rows}
    existing: dict[str, BenchTask] = {}
    ids = list(by_id)
    for start in range(0, len(ids), _IN_CHUNK):
        chunk = ids[start : start + _IN_CHUNK]
        for task in session.scalars(select(BenchTask).where(BenchTask.id.in_(chunk))):
            existing[task.id] = task
    for task_id, row in by_id.items():
        task = existing.get(task_id)
        if task is None:
            session.add(BenchTask(**row))
        else:
            for name, value in row.items():
                setattr(task, name, value)
    session.flush()
    return len(by_id)


def replace_group(session: Session, group: RolloutGroup) -> RolloutGroup:
    """Store ``group`` with its trajectories and turns, replacing any group with its id.

    Each turn's observation is stored cut to MAX_STORED_OBSERVATION_CHARS (bounded_observation).
    The old group, its trajectories and their turns are deleted first, so re-running the same
    rollout (same deterministic ids) leaves one copy with the new values. ``group`` should be
    a new (transient) object. Trajectories without ``run_id``/``bench_task_id`` inherit the
    group's; turns are checked for aligned token lists.
    """
    if inspect(group).has_identity:
        raise ValueError(
            f"replace_group needs a new RolloutGroup, got a loaded one ({group.id!r}); "
            "build a fresh object with the same id instead of editing the stored one"
        )
    if group in session:  # added by the caller: keep it out of the delete's autoflush
        session.expunge(group)
    # No autoflush during the delete: a parent's loaded collection may already list the new
    # group (``RolloutGroup(run=run)``), which must not be flushed before the old one is gone.
    with session.no_autoflush:
        _lock_group(session, group.id)
        _delete_group(session, group.id)
    run_id = group.run_id or (group.run.id if group.run is not None else None)
    bench_task_id = group.bench_task_id or (group.bench_task.id if group.bench_task is not None else None)
    for trajectory in group.trajectories:
        if trajectory.run_id is None and trajectory.run is None:
            trajectory.run_id = run_id
        if trajectory.bench_task_id is None and trajectory.bench_task is None:
            trajectory.bench_task_id = bench_task_id
        for turn in trajectory.turns:
            check_turn_alignment(turn)
            turn.observation = bounded_observation(turn.observation)
    session.add(group)
    session.flush()
    return group


def _lock_group(session: Session, group_id: str) -> None:
    """Serialise writers of the same group until this transaction ends (PostgreSQL).

    Two processes replacing one group at once (a retried task and its first attempt, two
    workers) would otherwise both find nothing to delete and collide on its primary key, or
    deadlock on its children. SQLite needs nothing: it has one writer at a time.
    """
    if session.get_bind().dialect.name == "postgresql":
        session.execute(text("SELECT pg_advisory_xact_lock(hashtextextended(:id, 0))"), {"id": group_id})


def delete_step_groups(session: Session, run_id: str, step: int, roles: Sequence[str]) -> int:
    """Remove a training step's groups of the given roles (a redone step writes them afresh)."""
    ids = list(
        session.scalars(
            select(RolloutGroup.id).where(
                RolloutGroup.run_id == run_id, RolloutGroup.step == step, RolloutGroup.role.in_(list(roles))
            )
        )
    )
    for group_id in ids:
        _delete_group(session, group_id)
    return len(ids)


def _delete_group(session: Session, group_id: str) -> None:
    """Delete a group and its rows explicitly (not relying on SQLite's FK pragma)."""
    trajectory_ids = list(session.scalars(select(Trajectory.id).where(Trajectory.group_id == group_id)))
    turn_ids: list[str] = []
    for start in range(0, len(trajectory_ids), _IN_CHUNK):
        chunk = trajectory_ids[start : start + _IN_CHUNK]
        turn_ids += session.scalars(select(Turn.id).where(Turn.trajectory_id.in_(chunk)))
        session.execute(delete(Turn).where(Turn.trajectory_id.in_(chunk)))
    session.execute(delete(Trajectory).where(Trajectory.group_id == group_id))
    session.execute(delete(RolloutGroup).where(RolloutGroup.id == group_id))
    _forget(
        session,
        {(RolloutGroup, group_id)} | {(Trajectory, i) for i in trajectory_ids} | {(Turn, i) for i in turn_ids},
    )


def _forget(session: Session, keys: set[tuple[type, str]]) -> None:
    """Drop objects whose rows were just deleted with SQL, so new rows can take their ids.

    Bulk deletes bypass the identity map; a stale object left there would clash with a new
    object of the same primary key at the next flush.
    """
    if not keys:
        return
    for obj in list(session.identity_map.values()):
        state = inspect(obj)
        if state.identity is None:
            continue
        # An expunged group or trajectory takes its loaded children along: test membership.
        if (state.mapper.class_, state.identity[0]) in keys and obj in session:
            session.expunge(obj)
    group_ids = {key for cls, key in keys if cls is RolloutGroup}
    for obj in list(session.identity_map.values()):
        # A loaded Run.groups collection still lists the deleted group: reload it when read.
        if isinstance(obj, Run) and "groups" in inspect(obj).dict:
            if any(g.id in group_ids for g in inspect(obj).dict["groups"]):
                session.expire(obj, ["groups"])


def check_turn_alignment(turn: Turn) -> None:
    """Raise ValueError when a turn's token lists do not line up.

    ``loss_mask`` covers ``context_ids + completion_ids``; ``completion_logprobs`` covers
    ``completion_ids``. Empty lists mean "not recorded" and are accepted.
    """
    context, completion = turn.context_ids or [], turn.completion_ids or []
    mask, logprobs = turn.loss_mask or [], turn.completion_logprobs or []
    where = f"turn {turn.index} of trajectory {turn.trajectory_id or '(new)'}"
    if mask and len(mask) != len(context) + len(completion):
        raise ValueError(
            f"{where}: loss_mask has {len(mask)} entries, expected len(context_ids) + "
            f"len(completion_ids) = {len(context)} + {len(completion)}"
        )
    if logprobs and len(logprobs) != len(completion):
        raise ValueError(
            f"{where}: completion_logprobs has {len(logprobs)} entries but completion_ids has {len(completion)}"
        )


def record_evaluation(session: Session, evaluation: Evaluation) -> Evaluation:
    """Store an evaluation, replacing the row with the same id; returns the stored object."""
    stored = session.merge(evaluation)
    session.flush()
    return stored


def list_trajectories(
    session: Session,
    run_id: str | None = None,
    bench_task_id: str | None = None,
    success: bool | None = None,
    limit: int | None = 50,
    *,
    harness_id: str | None = None,
) -> list[Trajectory]:
    """Trajectories matching every given filter, newest first (turns not loaded)."""
    query = select(Trajectory)
    if run_id is not None:
        query = query.where(Trajectory.run_id == run_id)
    if bench_task_id is not None:
        query = query.where(Trajectory.bench_task_id == bench_task_id)
    if success is not None:
        query = query.where(Trajectory.success == success)
    if harness_id is not None:
        query = query.where(Trajectory.harness_id == harness_id)
    query = query.order_by(Trajectory.created_at.desc(), Trajectory.group_id, Trajectory.sample_index)
    if limit is not None:
        query = query.limit(limit)
    return list(session.scalars(query))


def get_trajectory(session: Session, id_or_prefix: str) -> Trajectory:
    """The trajectory with this id, or the only one whose id starts with this prefix.

    A prefix needs at least 6 characters. Turns are loaded with it. Raises LookupError when
    nothing matches or the prefix is ambiguous.
    """
    key = id_or_prefix.strip()
    options = (selectinload(Trajectory.turns),)
    exact = session.get(Trajectory, key, options=options)
    if exact is not None:
        return exact
    if len(key) < MIN_PREFIX:
        raise LookupError(f"no trajectory with id {key!r}; a prefix needs at least {MIN_PREFIX} characters")
    query = (
        select(Trajectory)
        .where(Trajectory.id.startswith(key, autoescape=True))
        .options(*options)
        .order_by(Trajectory.id)
        .limit(6)
    )
    matches = list(session.scalars(query))
    if not matches:
        raise LookupError(f"no trajectory id starts with {key!r}")
    if len(matches) > 1:
        shown = ", ".join(m.id for m in matches[:5])
        more = " ..." if len(matches) > 5 else ""
        raise LookupError(f"trajectory prefix {key!r} is ambiguous: {shown}{more}; give more characters")
    return matches[0]


def count_rows(session: Session, models: Iterable[type] = ()) -> dict[str, int]:
    """Row counts per table (all tables by default): a cheap summary for logs and tests."""
    chosen = list(models) or [Run, Harness, BenchTask, RolloutGroup, Trajectory, Turn, Evaluation]
    return {model.__tablename__: session.scalar(select(func.count()).select_from(model)) or 0 for model in chosen}


def training_runs(session: Session) -> list[Run]:
    """Every training run, oldest first."""
    return list(session.scalars(select(Run).where(Run.kind == "train").order_by(Run.created_at)))


def run_trajectory_ids(session: Session, run_id: str) -> list[str]:
    """Ids of a run's trajectories in sample order."""
    query = (
        select(Trajectory.id)
        .join(RolloutGroup, RolloutGroup.id == Trajectory.group_id)
        .where(RolloutGroup.run_id == run_id)
        .order_by(Trajectory.sample_index)
    )
    return list(session.scalars(query))


def newest_profile(
    session: Session, harness: str, run_id: str | None = None, version: int | None = None
) -> ProfileVersion:
    """The newest behaviour profile of the harness named ``harness`` (or whose id starts with it),
    optionally of one training run and one version (re-anchor step). Raises LookupError (one line)."""
    ids = select(Harness.id).where((Harness.name == harness) | Harness.id.startswith(harness, autoescape=True))
    query = select(ProfileVersion).where(ProfileVersion.harness_id.in_(ids))
    if run_id:
        query = query.where(ProfileVersion.run_id == run_id)
    if version is not None:
        query = query.where(ProfileVersion.version == version)
    newest = session.scalars(
        query.order_by(ProfileVersion.created_at.desc(), ProfileVersion.version.desc()).limit(1)
    ).first()
    if newest is None:
        raise LookupError(
            f"no behaviour profile for '{harness}'{f' in run {run_id}' if run_id else ''}"
            f"{f' at version {version}' if version is not None else ''}: profiles are induced at "
            "the re-anchors of `hs train`; list runs with `hs report training`"
        )
    return newest


def _check_status(status: str | None) -> None:
    if status is not None and status not in RUN_STATUSES:
        raise ValueError(f"run status {status!r} is not one of {', '.join(RUN_STATUSES)}")


__all__ = [
    "bounded_observation",
    "check_turn_alignment",
    "count_rows",
    "finish_run",
    "get_trajectory",
    "list_trajectories",
    "newest_profile",
    "record_evaluation",
    "replace_group",
    "run_trajectory_ids",
    "training_history",
    "training_runs",
    "upsert_bench_tasks",
    "upsert_harness",
    "upsert_run",
]


def rollouts_of_runs(session: Session, run_ids: Sequence[str]) -> int:
    """Trajectories (rollouts) the runs wrote, all roles."""
    if not run_ids:
        return 0
    return session.scalar(select(func.count()).select_from(Trajectory).where(Trajectory.run_id.in_(list(run_ids))))


def rollouts_by_role(session: Session, run_id: str, before_step: int | None = None) -> dict[str, int]:
    """A run's trajectories (rollouts) per group role ('h0', 'rescue', 'reanchor', 'diagnose', ...),
    only those of steps before `before_step` when given."""
    query = (
        select(RolloutGroup.role, func.count(Trajectory.id))
        .join(Trajectory, Trajectory.group_id == RolloutGroup.id)
        .where(RolloutGroup.run_id == run_id)
    )
    if before_step is not None:
        query = query.where(RolloutGroup.step < before_step)
    rows = session.execute(query.group_by(RolloutGroup.role)).all()
    return {role: n for role, n in rows}


def editor_tokens(session: Session, run_ids: list[str]) -> int:
    """API tokens (prompt + completion) the evolution runs spent on an LLM: the editors'
    proposals, as each candidate recorded them, and the LLM diagnoses, as each diagnosed
    trajectory recorded them; offline operators and rule diagnosis spend none."""
    candidates = session.scalars(select(EvolutionCandidate.details).where(EvolutionCandidate.run_id.in_(run_ids)))
    diagnosed = session.scalars(
        select(Trajectory.details)
        .join(RolloutGroup, Trajectory.group_id == RolloutGroup.id)
        .where(RolloutGroup.run_id.in_(run_ids), RolloutGroup.role == "diagnose")
    )
    usages = [((d or {}).get("editor") or {}).get("usage") for d in candidates]
    usages += [((d or {}).get("diagnosis") or {}).get("usage") for d in diagnosed]
    return sum(int(u.get("prompt_tokens", 0)) + int(u.get("completion_tokens", 0)) for u in usages if u)


def pool_run_id(session: Session, benchmark: str, version: str | None) -> str | None:
    """The evolution run that froze a pool version, when this database holds it."""
    if version is None:
        return None
    return session.scalar(select(Pool.run_id).where(Pool.benchmark == benchmark, Pool.version == version))


def turns_by_trajectory(session: Session, trajectory_ids: list[str], chunk: int = 500) -> dict[str, list[Turn]]:
    """Every turn of the trajectories, in turn order, keyed by trajectory id (one query per chunk
    of ids rather than one per trajectory)."""
    out: dict[str, list[Turn]] = {t: [] for t in trajectory_ids}
    for i in range(0, len(trajectory_ids), chunk):
        rows = session.scalars(
            select(Turn)
            .where(Turn.trajectory_id.in_(trajectory_ids[i : i + chunk]))
            .order_by(Turn.trajectory_id, Turn.index)
        )
        for row in rows:
            out[row.trajectory_id].append(row)
    return out


def group_rollouts(session: Session, group_id: str) -> tuple[list[float], list[list[SimpleNamespace]]]:
    """A stored group's rewards and each rollout's turns (token ids, recorded log-probs, hook
    events) as plain objects that outlive the session, in sample order: what an update needs to
    train on it again."""
    trajectories = session.scalars(
        select(Trajectory).where(Trajectory.group_id == group_id).order_by(Trajectory.sample_index)
    ).all()
    by_trajectory = turns_by_trajectory(session, [t.id for t in trajectories])
    turns = []
    for t in trajectories:
        rows = by_trajectory[t.id]
        turns.append(
            [
                SimpleNamespace(
                    context_ids=list(r.context_ids),
                    completion_ids=list(r.completion_ids),
                    completion_logprobs=list(r.completion_logprobs or []),
                    hook_events=list(r.hook_events or []),
                )
                for r in rows
            ]
        )
    return [t.reward for t in trajectories], turns


def train_step_details(session: Session, run_id: str, before: int) -> list[dict[str, Any]]:
    """The details documents (groups, update, decisions) of a training run's updates 0..before-1, in order."""
    rows = session.scalars(
        select(TrainStep).where(TrainStep.run_id == run_id, TrainStep.step < before).order_by(TrainStep.step)
    )
    return [r.details or {} for r in rows]


def training_history(session: Session, run_id: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(per-update metrics with 'step', re-anchor results {step, harness, success_rate}) of a training run."""
    if session.get(Run, run_id) is None:
        raise LookupError(f"no run '{run_id}': list training runs with `hs report training` and no argument")
    steps = [
        {"step": r.step, **r.metrics}
        for r in session.scalars(select(TrainStep).where(TrainStep.run_id == run_id).order_by(TrainStep.step))
    ]
    rows = session.execute(
        select(Evaluation, Harness.name)
        .join(Harness, Harness.id == Evaluation.harness_id)
        .where(Evaluation.run_id == run_id, Evaluation.routing == "reanchor")
    ).all()
    reanchors = [
        {"step": e.metrics["step"], "harness": name, "success_rate": e.metrics["success_rate"]} for e, name in rows
    ]
    return steps, sorted(reanchors, key=lambda r: (r["step"], r["harness"]))
