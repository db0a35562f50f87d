"""Frozen harness pools and evolution candidates with their fixed/broken task sets.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-29
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

JSON_DOC = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "pools",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("benchmark", sa.String(length=32), nullable=False),
        sa.Column("version", sa.String(length=200), nullable=False),
        sa.Column("base_harness_id", sa.String(length=64), nullable=False),
        sa.Column("path", sa.Text(), nullable=False),
        sa.Column("members", JSON_DOC, nullable=False),
        sa.Column("run_id", sa.String(length=64), nullable=True),
        sa.Column("dvc_tag", sa.String(length=200), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["run_id"], ["runs.id"], name=op.f("fk_pools_run_id_runs"), ondelete="SET NULL"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_pools")),
        sa.UniqueConstraint("benchmark", "version", name=op.f("uq_pools_benchmark_version")),
    )
    op.create_table(
        "evolution_candidates",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("run_id", sa.String(length=64), nullable=False),
        sa.Column("round", sa.Integer(), nullable=False),
        sa.Column("parent_id", sa.String(length=64), nullable=False),
        sa.Column("harness_id", sa.String(length=64), nullable=True),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("editor", sa.String(length=32), nullable=False),
        sa.Column("root_causes", JSON_DOC, nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("selected", sa.Boolean(), nullable=False),
        sa.Column("fixed", JSON_DOC, nullable=False),
        sa.Column("broken", JSON_DOC, nullable=False),
        sa.Column("solved", JSON_DOC, nullable=False),
        sa.Column("validation_tasks", JSON_DOC, nullable=False),
        sa.Column("details", JSON_DOC, nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["run_id"], ["runs.id"], name=op.f("fk_evolution_candidates_run_id_runs"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_evolution_candidates")),
    )
    op.create_index(op.f("ix_evolution_candidates_run_id"), "evolution_candidates", ["run_id"], unique=False)


def downgrade() -> None:
    op.drop_index(op.f("ix_evolution_candidates_run_id"), table_name="evolution_candidates")
    op.drop_table("evolution_candidates")
    op.drop_table("pools")
