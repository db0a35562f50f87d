"""Per-update training signals of GRPO runs.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-29
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

JSON_DOC = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "train_steps",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("run_id", sa.String(length=64), nullable=False),
        sa.Column("step", sa.Integer(), nullable=False),
        sa.Column("mode", sa.String(length=32), nullable=False),
        sa.Column("metrics", JSON_DOC, nullable=False),
        sa.Column("details", JSON_DOC, nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["run_id"], ["runs.id"], name=op.f("fk_train_steps_run_id_runs"), ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_train_steps")),
    )
    op.create_index(op.f("ix_train_steps_run_id"), "train_steps", ["run_id"], unique=False)


def downgrade() -> None:
    op.drop_index(op.f("ix_train_steps_run_id"), table_name="train_steps")
    op.drop_table("train_steps")
