"""Initial schema: runs, harnesses, bench tasks, rollout groups, trajectories, turns, evaluations.

Written from an autogenerate draft and reviewed; ``tests/db/test_db_migrations.py`` checks that
it yields exactly ``db.models`` on SQLite and PostgreSQL. Datetime columns are plain
``DateTime(timezone=True)`` here: ``db.models.UTCDateTime`` only converts values in Python.

Revision ID: 0001
Revises:
Create Date: 2025-01-01
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

JSON_DOC = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")
NULLABLE_JSON = sa.JSON(none_as_null=True).with_variant(postgresql.JSONB(none_as_null=True), "postgresql")

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _created_at() -> sa.Column:
    return sa.Column("created_at", sa.DateTime(timezone=True), nullable=False)


def _fk(column: str, table: str, referred: str, cascade: bool) -> sa.ForeignKeyConstraint:
    return sa.ForeignKeyConstraint(
        [column],
        [f"{referred}.id"],
        name=op.f(f"fk_{table}_{column}_{referred}"),
        ondelete="CASCADE" if cascade else None,
    )


def upgrade() -> None:
    op.create_table(
        "runs",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("kind", sa.String(length=32), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("config", JSON_DOC, nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("prefect_flow_run_id", sa.String(length=64), nullable=True),
        _created_at(),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.CheckConstraint("status IN ('running', 'completed', 'failed')", name=op.f("ck_runs_status")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_runs")),
    )
    op.create_index(op.f("ix_runs_kind"), "runs", ["kind"], unique=False)

    op.create_table(
        "harnesses",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("benchmark", sa.String(length=64), nullable=False),
        sa.Column("parent_ids", JSON_DOC, nullable=False),
        sa.Column("spec", JSON_DOC, nullable=False),
        _created_at(),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_harnesses")),
    )
    op.create_index(op.f("ix_harnesses_benchmark"), "harnesses", ["benchmark"], unique=False)

    op.create_table(
        "bench_tasks",
        sa.Column("id", sa.String(length=200), nullable=False),
        sa.Column("benchmark", sa.String(length=64), nullable=False),
        sa.Column("split", sa.String(length=32), nullable=False),
        sa.Column("index", sa.Integer(), nullable=False),
        sa.Column("task_type", sa.String(length=64), nullable=False),
        sa.Column("tier", sa.String(length=32), nullable=True),
        sa.Column("description", sa.Text(), nullable=False),
        sa.Column("record", JSON_DOC, nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_bench_tasks")),
    )
    op.create_index(op.f("ix_bench_tasks_benchmark_split"), "bench_tasks", ["benchmark", "split"], unique=False)

    op.create_table(
        "evaluations",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("run_id", sa.String(length=64), nullable=False),
        sa.Column("benchmark", sa.String(length=64), nullable=False),
        sa.Column("split", sa.String(length=32), nullable=False),
        sa.Column("harness_id", sa.String(length=64), nullable=True),
        sa.Column("routing", sa.String(length=32), nullable=False),
        sa.Column("k", sa.Integer(), nullable=False),
        sa.Column("n_seeds", sa.Integer(), nullable=False),
        sa.Column("n_bench_tasks", sa.Integer(), nullable=False),
        sa.Column("metrics", JSON_DOC, nullable=False),
        _created_at(),
        _fk("run_id", "evaluations", "runs", cascade=True),
        _fk("harness_id", "evaluations", "harnesses", cascade=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_evaluations")),
    )
    op.create_index(op.f("ix_evaluations_run_id"), "evaluations", ["run_id"], unique=False)

    op.create_table(
        "rollout_groups",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("run_id", sa.String(length=64), nullable=False),
        sa.Column("step", sa.Integer(), nullable=False),
        sa.Column("bench_task_id", sa.String(length=200), nullable=False),
        sa.Column("harness_id", sa.String(length=64), nullable=True),
        sa.Column("seed", sa.Integer(), nullable=False),
        sa.Column("k", sa.Integer(), nullable=False),
        sa.Column("role", sa.String(length=32), nullable=False),
        sa.Column("checkpoint", sa.String(length=200), nullable=False),
        sa.Column("n_success", sa.Integer(), nullable=False),
        _created_at(),
        _fk("run_id", "rollout_groups", "runs", cascade=True),
        _fk("bench_task_id", "rollout_groups", "bench_tasks", cascade=False),
        _fk("harness_id", "rollout_groups", "harnesses", cascade=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_rollout_groups")),
    )
    for columns in (["bench_task_id"], ["harness_id"], ["run_id", "step"]):
        name = op.f("ix_rollout_groups_" + "_".join(columns))
        op.create_index(name, "rollout_groups", columns, unique=False)

    op.create_table(
        "trajectories",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("group_id", sa.String(length=64), nullable=False),
        sa.Column("run_id", sa.String(length=64), nullable=False),
        sa.Column("bench_task_id", sa.String(length=200), nullable=False),
        sa.Column("harness_id", sa.String(length=64), nullable=False),
        sa.Column("sample_index", sa.Integer(), nullable=False),
        sa.Column("checkpoint", sa.String(length=200), nullable=False),
        sa.Column("reward", sa.Float(), nullable=False),
        sa.Column("success", sa.Boolean(), nullable=False),
        sa.Column("failure_kind", sa.String(length=64), nullable=True),
        sa.Column("finish_reason", sa.String(length=64), nullable=True),
        sa.Column("answer", NULLABLE_JSON, nullable=True),
        sa.Column("n_turns", sa.Integer(), nullable=False),
        sa.Column("n_policy_tokens", sa.Integer(), nullable=False),
        sa.Column("behaviour_tags", JSON_DOC, nullable=False),
        sa.Column("seconds_total", sa.Float(), nullable=False),
        sa.Column("seconds_generate", sa.Float(), nullable=False),
        sa.Column("seconds_env", sa.Float(), nullable=False),
        sa.Column("details", JSON_DOC, nullable=False),
        _created_at(),
        _fk("group_id", "trajectories", "rollout_groups", cascade=True),
        _fk("run_id", "trajectories", "runs", cascade=True),
        _fk("bench_task_id", "trajectories", "bench_tasks", cascade=False),
        _fk("harness_id", "trajectories", "harnesses", cascade=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_trajectories")),
    )
    for column in ("bench_task_id", "group_id", "harness_id", "run_id"):
        op.create_index(op.f(f"ix_trajectories_{column}"), "trajectories", [column], unique=False)

    op.create_table(
        "turns",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("trajectory_id", sa.String(length=64), nullable=False),
        sa.Column("index", sa.Integer(), nullable=False),
        sa.Column("context_text", sa.Text(), nullable=False),
        sa.Column("context_ids", JSON_DOC, nullable=False),
        sa.Column("completion_text", sa.Text(), nullable=False),
        sa.Column("completion_ids", JSON_DOC, nullable=False),
        sa.Column("completion_logprobs", JSON_DOC, nullable=False),
        sa.Column("loss_mask", JSON_DOC, nullable=False),
        sa.Column("action_kind", sa.String(length=32), nullable=True),
        sa.Column("action", NULLABLE_JSON, nullable=True),
        sa.Column("observation", sa.Text(), nullable=True),
        sa.Column("hook_events", JSON_DOC, nullable=False),
        sa.Column("seconds_generate", sa.Float(), nullable=False),
        sa.Column("seconds_env", sa.Float(), nullable=False),
        _fk("trajectory_id", "turns", "trajectories", cascade=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_turns")),
        sa.UniqueConstraint("trajectory_id", "index", name=op.f("uq_turns_trajectory_id_index")),
    )


def downgrade() -> None:
    # Children first; dropping a table drops its indexes.
    for table in (
        "turns",
        "trajectories",
        "rollout_groups",
        "evaluations",
        "bench_tasks",
        "harnesses",
        "runs",
    ):
        op.drop_table(table)
