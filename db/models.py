"""Typed ORM models of the trajectory database.

One schema serves SQLite (single machine) and PostgreSQL (shared, multi-worker); the Alembic
migrations in ``db/migrations`` create exactly this schema (a test compares them).

Ownership: a run owns its rollout groups and evaluations; a group owns its trajectories; a
trajectory owns its turns. Foreign keys carry ``ON DELETE CASCADE`` along those edges, and the
ORM relationships use ``passive_deletes=True`` so that deleting a parent lets the database drop
the children instead of loading them first. SQLite enforces foreign keys only when each
connection enables them: open engines with :func:`db.engine.make_engine`.

Benchmark instances are ``bench_tasks`` (``BenchTask``): the word "task" belongs to Prefect.
Datetimes are timezone-aware UTC on both backends (SQLite stores them naive, in UTC).
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from sqlalchemy import (
    JSON,
    Boolean,
    CheckConstraint,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.engine import Dialect
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship
from sqlalchemy.types import TypeDecorator

NAMING_CONVENTION = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

RUN_STATUSES = ("running", "completed", "failed")

# Column widths. Hash ids are 64 hex chars at most (sha256); bench task ids are readable paths
# such as "dbbench/dev/0007". Run ids are readable, "<config name>[-<tag>]-<hash>", at most
# db.ids.RUN_ID_MAX (200) characters; the columns that hold a run id, or a checkpoint name made
# from one ("sft-<id>", "<id>-u<N>", "engineer:<checkpoint>", "pool-<benchmark>-<id>"), are RUN_ID
# wide (migration 0009).
HASH_ID = 64
NAME = 200
RUN_ID = 255


def utcnow() -> datetime:
    """The current time, timezone-aware, in UTC."""
    return datetime.now(timezone.utc)


class UTCDateTime(TypeDecorator[datetime]):
    """A timezone-aware UTC datetime on every backend.

    PostgreSQL stores ``timestamptz``; SQLite has no time zones, so values are converted to UTC
    and stored naive, then marked UTC again when read. Naive input is taken to be UTC already.
    """

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            value = value.replace(tzinfo=timezone.utc)
        value = value.astimezone(timezone.utc)
        if dialect.name == "sqlite":
            return value.replace(tzinfo=None)
        return value

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            return value.replace(tzinfo=timezone.utc)
        return value.astimezone(timezone.utc)


# JSON that stores Python None as SQL NULL (not the JSON literal null), for nullable columns.
# On PostgreSQL every JSON column is JSONB: comparable, indexable, and queryable with
# containment operators (e.g. behaviour_tags @> '["repeated_query"]').
JSONDoc = JSON().with_variant(JSONB(), "postgresql")
NullableJSON = JSON(none_as_null=True).with_variant(JSONB(none_as_null=True), "postgresql")


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)
    type_annotation_map = {datetime: UTCDateTime, dict[str, Any]: JSONDoc, list[Any]: JSONDoc}


class Run(Base):
    """One flow execution: an evaluation, a training run, an evolution round, ..."""

    __tablename__ = "runs"
    __table_args__ = (CheckConstraint("status IN (" + ", ".join(f"'{s}'" for s in RUN_STATUSES) + ")", name="status"),)

    id: Mapped[str] = mapped_column(String(RUN_ID), primary_key=True)
    kind: Mapped[str] = mapped_column(String(32), index=True)
    name: Mapped[str] = mapped_column(String(NAME))
    config: Mapped[dict[str, Any]] = mapped_column(default=dict)
    status: Mapped[str] = mapped_column(String(16), default="running")
    prefect_flow_run_id: Mapped[str | None] = mapped_column(String(64))
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    finished_at: Mapped[datetime | None]
    results: Mapped[dict[str, Any] | None] = mapped_column(NullableJSON, default=None)

    groups: Mapped[list[RolloutGroup]] = relationship(
        back_populates="run", cascade="all, delete-orphan", passive_deletes=True
    )
    evaluations: Mapped[list[Evaluation]] = relationship(
        back_populates="run", cascade="all, delete-orphan", passive_deletes=True
    )

    def __repr__(self) -> str:
        return f"Run(id={self.id!r}, kind={self.kind!r}, name={self.name!r}, status={self.status!r})"


class Harness(Base):
    """A frozen harness spec; ``id`` is the sha256 of its canonical JSON (content address)."""

    __tablename__ = "harnesses"

    id: Mapped[str] = mapped_column(String(HASH_ID), primary_key=True)
    name: Mapped[str] = mapped_column(String(NAME))
    benchmark: Mapped[str] = mapped_column(String(64), index=True)
    parent_ids: Mapped[list[Any]] = mapped_column(default=list)
    spec: Mapped[dict[str, Any]] = mapped_column(default=dict)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)

    def __repr__(self) -> str:
        return f"Harness(id={self.id[:12]!r}, name={self.name!r}, benchmark={self.benchmark!r})"


class BenchTask(Base):
    """A benchmark instance (the paper's "task x"), e.g. ``dbbench/dev/0007``."""

    __tablename__ = "bench_tasks"
    __table_args__ = (Index(None, "benchmark", "split"),)

    id: Mapped[str] = mapped_column(String(NAME), primary_key=True)
    benchmark: Mapped[str] = mapped_column(String(64))
    split: Mapped[str] = mapped_column(String(32))
    index: Mapped[int] = mapped_column(Integer)
    task_type: Mapped[str] = mapped_column(String(64))
    tier: Mapped[str | None] = mapped_column(String(32))
    description: Mapped[str] = mapped_column(Text)
    record: Mapped[dict[str, Any]] = mapped_column(default=dict)

    def __repr__(self) -> str:
        return f"BenchTask(id={self.id!r}, task_type={self.task_type!r})"


class RolloutGroup(Base):
    """K rollouts of one policy checkpoint on one bench task (a GRPO group, or an eval group).

    ``step`` is 0 for evaluations. ``harness_id`` is None when the group mixes harnesses (a
    rescue group runs each rollout under a different sibling).
    """

    __tablename__ = "rollout_groups"
    __table_args__ = (Index(None, "run_id", "step"),)

    id: Mapped[str] = mapped_column(String(HASH_ID), primary_key=True)
    run_id: Mapped[str] = mapped_column(String(RUN_ID), ForeignKey("runs.id", ondelete="CASCADE"))
    step: Mapped[int] = mapped_column(Integer, default=0)
    bench_task_id: Mapped[str] = mapped_column(ForeignKey("bench_tasks.id"), index=True)
    harness_id: Mapped[str | None] = mapped_column(ForeignKey("harnesses.id"), index=True)
    seed: Mapped[int] = mapped_column(Integer, default=0)
    k: Mapped[int] = mapped_column(Integer)
    role: Mapped[str] = mapped_column(String(32))
    checkpoint: Mapped[str] = mapped_column(String(RUN_ID))
    n_success: Mapped[int] = mapped_column(Integer, default=0)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)

    run: Mapped[Run] = relationship(back_populates="groups")
    bench_task: Mapped[BenchTask] = relationship()
    harness: Mapped[Harness | None] = relationship()
    trajectories: Mapped[list[Trajectory]] = relationship(
        back_populates="group",
        cascade="all, delete-orphan",
        passive_deletes=True,
        order_by="Trajectory.sample_index",
    )

    def __repr__(self) -> str:
        return (
            f"RolloutGroup(id={self.id[:12]!r}, step={self.step}, role={self.role!r}, "
            f"bench_task_id={self.bench_task_id!r}, n_success={self.n_success}/{self.k})"
        )


class Trajectory(Base):
    """One rollout: a policy acting under one harness on one bench task until it stops.

    ``run_id`` and ``bench_task_id`` repeat the group's, so analyses filter without a join.
    """

    __tablename__ = "trajectories"
    __table_args__ = (Index(None, "created_at", "id"),)  # the explorer's search: newest first, paged

    id: Mapped[str] = mapped_column(String(HASH_ID), primary_key=True)
    group_id: Mapped[str] = mapped_column(ForeignKey("rollout_groups.id", ondelete="CASCADE"), index=True)
    run_id: Mapped[str] = mapped_column(String(RUN_ID), ForeignKey("runs.id", ondelete="CASCADE"), index=True)
    bench_task_id: Mapped[str] = mapped_column(ForeignKey("bench_tasks.id"), index=True)
    harness_id: Mapped[str] = mapped_column(ForeignKey("harnesses.id"), index=True)
    sample_index: Mapped[int] = mapped_column(Integer)
    checkpoint: Mapped[str] = mapped_column(String(RUN_ID))
    reward: Mapped[float] = mapped_column(Float)
    success: Mapped[bool] = mapped_column(Boolean)
    failure_kind: Mapped[str | None] = mapped_column(String(64))
    finish_reason: Mapped[str | None] = mapped_column(String(64))
    answer: Mapped[Any | None] = mapped_column(NullableJSON)
    n_turns: Mapped[int] = mapped_column(Integer, default=0)
    n_policy_tokens: Mapped[int] = mapped_column(Integer, default=0)
    behaviour_tags: Mapped[list[Any]] = mapped_column(default=list)
    seconds_total: Mapped[float] = mapped_column(Float, default=0.0)
    seconds_generate: Mapped[float] = mapped_column(Float, default=0.0)
    seconds_env: Mapped[float] = mapped_column(Float, default=0.0)
    details: Mapped[dict[str, Any]] = mapped_column(default=dict)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)

    group: Mapped[RolloutGroup] = relationship(back_populates="trajectories")
    run: Mapped[Run] = relationship()
    bench_task: Mapped[BenchTask] = relationship()
    harness: Mapped[Harness] = relationship()
    turns: Mapped[list[Turn]] = relationship(
        back_populates="trajectory",
        cascade="all, delete-orphan",
        passive_deletes=True,
        order_by="Turn.index",
    )

    def __repr__(self) -> str:
        return (
            f"Trajectory(id={self.id[:12]!r}, bench_task_id={self.bench_task_id!r}, "
            f"sample_index={self.sample_index}, reward={self.reward}, success={self.success})"
        )


class Turn(Base):
    """One generation of the policy and the environment's answer to it.

    ``context_text``/``context_ids`` is what was added to the conversation before this
    generation (initial prompt, observation, injected hints); ``loss_mask`` is aligned with
    ``context_ids + completion_ids`` (0 for context, 1 for policy-generated tokens).
    """

    __tablename__ = "turns"
    __table_args__ = (UniqueConstraint("trajectory_id", "index"),)

    id: Mapped[str] = mapped_column(String(HASH_ID), primary_key=True)
    trajectory_id: Mapped[str] = mapped_column(ForeignKey("trajectories.id", ondelete="CASCADE"))
    index: Mapped[int] = mapped_column(Integer)
    context_text: Mapped[str] = mapped_column(Text, default="")
    context_ids: Mapped[list[Any]] = mapped_column(default=list)
    completion_text: Mapped[str] = mapped_column(Text, default="")
    completion_ids: Mapped[list[Any]] = mapped_column(default=list)
    completion_logprobs: Mapped[list[Any]] = mapped_column(default=list)
    loss_mask: Mapped[list[Any]] = mapped_column(default=list)
    action_kind: Mapped[str | None] = mapped_column(String(32))
    action: Mapped[Any | None] = mapped_column(NullableJSON)
    observation: Mapped[str | None] = mapped_column(Text)
    hook_events: Mapped[list[Any]] = mapped_column(default=list)
    seconds_generate: Mapped[float] = mapped_column(Float, default=0.0)
    seconds_env: Mapped[float] = mapped_column(Float, default=0.0)

    trajectory: Mapped[Trajectory] = relationship(back_populates="turns")

    def __repr__(self) -> str:
        return f"Turn(trajectory_id={self.trajectory_id[:12]!r}, index={self.index}, action_kind={self.action_kind!r})"


class Evaluation(Base):
    """Aggregate metrics of one policy/harness/routing on one benchmark split."""

    __tablename__ = "evaluations"

    id: Mapped[str] = mapped_column(String(HASH_ID), primary_key=True)
    run_id: Mapped[str] = mapped_column(String(RUN_ID), ForeignKey("runs.id", ondelete="CASCADE"), index=True)
    benchmark: Mapped[str] = mapped_column(String(64))
    split: Mapped[str] = mapped_column(String(32))
    harness_id: Mapped[str | None] = mapped_column(ForeignKey("harnesses.id"))
    routing: Mapped[str] = mapped_column(String(32), default="h0")
    k: Mapped[int] = mapped_column(Integer)
    n_seeds: Mapped[int] = mapped_column(Integer)
    n_bench_tasks: Mapped[int] = mapped_column(Integer)
    metrics: Mapped[dict[str, Any]] = mapped_column(default=dict)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)

    run: Mapped[Run] = relationship(back_populates="evaluations")

    def __repr__(self) -> str:
        return (
            f"Evaluation(id={self.id[:12]!r}, benchmark={self.benchmark!r}, split={self.split!r}, "
            f"routing={self.routing!r})"
        )


class Checkpoint(Base):
    """Policy weights in the checkpoint registry (warm start, RL steps), with their provenance.

    ``path`` is the registry folder holding a Hugging Face model directory; ``parent_id`` the
    checkpoint it was trained from (None for a base model); ``provenance`` the config, data
    and losses that made it.
    """

    __tablename__ = "checkpoints"

    id: Mapped[str] = mapped_column(String(RUN_ID), primary_key=True)
    run_id: Mapped[str | None] = mapped_column(String(RUN_ID), ForeignKey("runs.id", ondelete="SET NULL"), index=True)
    kind: Mapped[str] = mapped_column(String(32))
    parent_id: Mapped[str | None] = mapped_column(String(RUN_ID))
    base_model: Mapped[str] = mapped_column(String(NAME))
    path: Mapped[str] = mapped_column(Text)
    step: Mapped[int] = mapped_column(Integer, default=0)
    provenance: Mapped[dict[str, Any]] = mapped_column(default=dict)
    metrics: Mapped[dict[str, Any]] = mapped_column(default=dict)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)

    def __repr__(self) -> str:
        return f"Checkpoint(id={self.id!r}, kind={self.kind!r}, step={self.step})"


class TrainStep(Base):
    """Signals of one GRPO update (docs/method.md §5): one row per (run, step), replaced on re-run.

    ``metrics`` holds the flat signal names also sent to W&B (train/valid_group_ratio,
    rollout/rescue_success, time/rollout_s, ...); ``details`` the per-group record of the step
    (task, role, harness ids, successes, router votes) for analyses.
    """

    __tablename__ = "train_steps"

    id: Mapped[str] = mapped_column(String(HASH_ID), primary_key=True)
    run_id: Mapped[str] = mapped_column(String(RUN_ID), ForeignKey("runs.id", ondelete="CASCADE"), index=True)
    step: Mapped[int] = mapped_column(Integer)
    mode: Mapped[str] = mapped_column(String(32))
    metrics: Mapped[dict[str, Any]] = mapped_column(default=dict)
    details: Mapped[dict[str, Any]] = mapped_column(default=dict)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)

    def __repr__(self) -> str:
        return f"TrainStep(run_id={self.run_id!r}, step={self.step}, mode={self.mode!r})"


class Pool(Base):
    """A frozen harness pool: H0 plus siblings, written to harness_pool/pools/<benchmark>/<version>/.

    ``id`` is the content id of the pool (hash of its sorted member ids); ``members`` lists
    {name, id, file, parent_ids, round, root_causes, edit} as in the version's manifest.
    """

    __tablename__ = "pools"
    __table_args__ = (UniqueConstraint("benchmark", "version"),)

    id: Mapped[str] = mapped_column(String(HASH_ID), primary_key=True)
    benchmark: Mapped[str] = mapped_column(String(32))
    version: Mapped[str] = mapped_column(String(NAME))
    base_harness_id: Mapped[str] = mapped_column(String(HASH_ID))
    path: Mapped[str] = mapped_column(Text)
    members: Mapped[list[Any]] = mapped_column(default=list)
    run_id: Mapped[str | None] = mapped_column(String(RUN_ID), ForeignKey("runs.id", ondelete="SET NULL"))
    dvc_tag: Mapped[str | None] = mapped_column(String(RUN_ID))  # "pool-<benchmark>-<version>"
    created_at: Mapped[datetime] = mapped_column(default=utcnow)

    def __repr__(self) -> str:
        return f"Pool(benchmark={self.benchmark!r}, version={self.version!r}, members={len(self.members)})"


class EvolutionCandidate(Base):
    """One child harness proposed during evolution, with its validation outcome.

    ``fixed``/``broken``/``solved`` are benchmark-task id lists on the candidate's validation
    tasks: targeted failures it solved, solved controls it failed, and every task it solved.
    """

    __tablename__ = "evolution_candidates"

    id: Mapped[str] = mapped_column(String(HASH_ID), primary_key=True)
    run_id: Mapped[str] = mapped_column(String(RUN_ID), ForeignKey("runs.id", ondelete="CASCADE"), index=True)
    round: Mapped[int] = mapped_column(Integer)
    parent_id: Mapped[str] = mapped_column(String(HASH_ID))
    harness_id: Mapped[str | None] = mapped_column(String(HASH_ID))
    name: Mapped[str] = mapped_column(String(NAME))
    editor: Mapped[str] = mapped_column(String(32))
    root_causes: Mapped[list[Any]] = mapped_column(default=list)
    status: Mapped[str] = mapped_column(String(16))  # valid | invalid | rejected (static check failed)
    selected: Mapped[bool] = mapped_column(default=False)
    fixed: Mapped[list[Any]] = mapped_column(default=list)
    broken: Mapped[list[Any]] = mapped_column(default=list)
    solved: Mapped[list[Any]] = mapped_column(default=list)
    validation_tasks: Mapped[list[Any]] = mapped_column(default=list)
    details: Mapped[dict[str, Any]] = mapped_column(default=dict)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)

    def __repr__(self) -> str:
        return f"EvolutionCandidate(name={self.name!r}, round={self.round}, status={self.status!r})"


class EditorBundle(Base):
    """An evidence bundle for the trainable harness editor (harness_pool/bundles.py): a parent
    harness, 2-4 failed trajectories of a frozen target sharing a family of root causes, their
    causes and the parent's control tasks. ``id`` is the bundle's content hash; ``content`` is
    the whole bundle, ``trajectory_ids`` the failures it was built from (kept outside the JSON
    so a query can join them)."""

    __tablename__ = "editor_bundles"

    id: Mapped[str] = mapped_column(String(HASH_ID), primary_key=True)
    run_id: Mapped[str] = mapped_column(String(RUN_ID), ForeignKey("runs.id", ondelete="CASCADE"), index=True)
    benchmark: Mapped[str] = mapped_column(String(64))
    split: Mapped[str] = mapped_column(String(16))  # train | heldout
    family: Mapped[str] = mapped_column(String(64))
    parent_id: Mapped[str] = mapped_column(String(HASH_ID))
    causes: Mapped[list[Any]] = mapped_column(default=list)
    trajectory_ids: Mapped[list[Any]] = mapped_column(default=list)
    content: Mapped[dict[str, Any]] = mapped_column(default=dict)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)

    def __repr__(self) -> str:
        return f"EditorBundle(id={self.id[:12]!r}, split={self.split!r}, family={self.family!r})"


class EditorPatch(Base):
    """One patch proposed for an evidence bundle and what it did: an offline operator's or LLM
    editor's (cold-start candidates, step 0) or one the engineer sampled (GRPO update ``step``,
    sample ``sample_index``). ``status``: valid (fixed >= min_fixed targeted failures, broke <=
    max_broken controls), invalid (it ran but did not), rejected (no child harness: ``reason``).
    ``reward`` = (fixed - broken) / tasks re-run, the lowest reward for a rejected patch."""

    __tablename__ = "editor_patches"
    __table_args__ = (Index(None, "run_id", "step"),)

    id: Mapped[str] = mapped_column(String(HASH_ID), primary_key=True)
    run_id: Mapped[str] = mapped_column(String(RUN_ID), ForeignKey("runs.id", ondelete="CASCADE"))
    bundle_id: Mapped[str] = mapped_column(ForeignKey("editor_bundles.id", ondelete="CASCADE"), index=True)
    step: Mapped[int] = mapped_column(Integer, default=0)
    sample_index: Mapped[int] = mapped_column(Integer, default=0)
    source: Mapped[str] = mapped_column(String(RUN_ID))  # offline-v<variant> | engineer:<checkpoint> | llm:<model>
    harness_id: Mapped[str | None] = mapped_column(String(HASH_ID))
    status: Mapped[str] = mapped_column(String(16))
    reason: Mapped[str | None] = mapped_column(Text)
    fixed: Mapped[list[Any]] = mapped_column(default=list)
    broken: Mapped[list[Any]] = mapped_column(default=list)
    reward: Mapped[float | None] = mapped_column(Float)
    patch: Mapped[dict[str, Any] | None] = mapped_column(NullableJSON)
    reply: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)

    def __repr__(self) -> str:
        return f"EditorPatch(bundle_id={self.bundle_id[:12]!r}, source={self.source!r}, status={self.status!r})"


class ProfileVersion(Base):
    """A sibling's behaviour profile as induced at one re-anchor (or from a pool report).

    ``version`` is the training step of the re-anchor that produced it (0 before training);
    ``profile`` holds {prefer: [...], avoid: [...]} entries with their evidence.
    """

    __tablename__ = "profile_versions"
    __table_args__ = (UniqueConstraint("run_id", "harness_id", "version"),)

    id: Mapped[str] = mapped_column(String(HASH_ID), primary_key=True)
    run_id: Mapped[str] = mapped_column(String(RUN_ID), ForeignKey("runs.id", ondelete="CASCADE"), index=True)
    harness_id: Mapped[str] = mapped_column(String(HASH_ID))
    version: Mapped[int] = mapped_column(Integer)
    inducer: Mapped[str] = mapped_column(String(NAME))
    success_rate: Mapped[float] = mapped_column(Float, default=0.0)
    profile: Mapped[dict[str, Any]] = mapped_column(default=dict)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)

    def __repr__(self) -> str:
        return f"ProfileVersion(harness_id={self.harness_id[:12]!r}, version={self.version})"


class RouterDecision(Base):
    """One routing decision: a rescue at a training step or a Rank-1 choice at evaluation,
    with the final ranking, what was chosen and each voter's own ranking (RQ3, RQ5)."""

    __tablename__ = "router_decisions"

    id: Mapped[str] = mapped_column(String(HASH_ID), primary_key=True)
    run_id: Mapped[str] = mapped_column(String(RUN_ID), ForeignKey("runs.id", ondelete="CASCADE"), index=True)
    step: Mapped[int] = mapped_column(Integer, default=0)
    bench_task_id: Mapped[str] = mapped_column(String(NAME))
    purpose: Mapped[str] = mapped_column(String(16))  # rescue | rank1
    router: Mapped[str] = mapped_column(String(NAME))
    profile_version: Mapped[int | None] = mapped_column(Integer)
    ranking: Mapped[list[Any]] = mapped_column(default=list)
    chosen: Mapped[list[Any]] = mapped_column(default=list)
    votes: Mapped[dict[str, Any]] = mapped_column(default=dict)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)

    def __repr__(self) -> str:
        return f"RouterDecision(purpose={self.purpose!r}, step={self.step}, task={self.bench_task_id!r})"


__all__ = [
    "EvolutionCandidate",
    "ProfileVersion",
    "RouterDecision",
    "Pool",
    "Base",
    "BenchTask",
    "Checkpoint",
    "TrainStep",
    "Evaluation",
    "Harness",
    "NAMING_CONVENTION",
    "RUN_STATUSES",
    "RolloutGroup",
    "Run",
    "Trajectory",
    "Turn",
    "UTCDateTime",
    "utcnow",
]
