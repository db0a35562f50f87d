"""Behaviour profile versions and router decisions (the adaptive router).

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-29
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

JSON_DOC = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "profile_versions",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("run_id", sa.String(length=64), nullable=False),
        sa.Column("harness_id", sa.String(length=64), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("inducer", sa.String(length=200), nullable=False),
        sa.Column("success_rate", sa.Float(), nullable=False),
        sa.Column("profile", JSON_DOC, nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["run_id"], ["runs.id"], name=op.f("fk_profile_versions_run_id_runs"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_profile_versions")),
        sa.UniqueConstraint(
            "run_id", "harness_id", "version", name=op.f("uq_profile_versions_run_id_harness_id_version")
        ),
    )
    op.create_index(op.f("ix_profile_versions_run_id"), "profile_versions", ["run_id"], unique=False)
    op.create_table(
        "router_decisions",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("run_id", sa.String(length=64), nullable=False),
        sa.Column("step", sa.Integer(), nullable=False),
        sa.Column("bench_task_id", sa.String(length=200), nullable=False),
        sa.Column("purpose", sa.String(length=16), nullable=False),
        sa.Column("router", sa.String(length=200), nullable=False),
        sa.Column("profile_version", sa.Integer(), nullable=True),
        sa.Column("ranking", JSON_DOC, nullable=False),
        sa.Column("chosen", JSON_DOC, nullable=False),
        sa.Column("votes", JSON_DOC, nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["run_id"], ["runs.id"], name=op.f("fk_router_decisions_run_id_runs"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_router_decisions")),
    )
    op.create_index(op.f("ix_router_decisions_run_id"), "router_decisions", ["run_id"], unique=False)


def downgrade() -> None:
    op.drop_index(op.f("ix_router_decisions_run_id"), table_name="router_decisions")
    op.drop_table("router_decisions")
    op.drop_index(op.f("ix_profile_versions_run_id"), table_name="profile_versions")
    op.drop_table("profile_versions")
