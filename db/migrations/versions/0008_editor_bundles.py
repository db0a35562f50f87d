"""Editor bundles and patches: the evidence a trainable harness editor reads and what its patches did (issue 21).

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-02
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

JSON_DOC = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "editor_bundles",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("run_id", sa.String(length=64), nullable=False),
        sa.Column("benchmark", sa.String(length=64), nullable=False),
        sa.Column("split", sa.String(length=16), nullable=False),
        sa.Column("family", sa.String(length=64), nullable=False),
        sa.Column("parent_id", sa.String(length=64), nullable=False),
        sa.Column("causes", JSON_DOC, nullable=False),
        sa.Column("trajectory_ids", JSON_DOC, nullable=False),
        sa.Column("content", JSON_DOC, nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["run_id"], ["runs.id"], name=op.f("fk_editor_bundles_run_id_runs"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_editor_bundles")),
    )
    op.create_index(op.f("ix_editor_bundles_run_id"), "editor_bundles", ["run_id"], unique=False)
    op.create_table(
        "editor_patches",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("run_id", sa.String(length=64), nullable=False),
        sa.Column("bundle_id", sa.String(length=64), nullable=False),
        sa.Column("step", sa.Integer(), nullable=False),
        sa.Column("sample_index", sa.Integer(), nullable=False),
        sa.Column("source", sa.String(length=64), nullable=False),
        sa.Column("harness_id", sa.String(length=64), nullable=True),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("fixed", JSON_DOC, nullable=False),
        sa.Column("broken", JSON_DOC, nullable=False),
        sa.Column("reward", sa.Float(), nullable=True),
        sa.Column("patch", JSON_DOC, nullable=True),
        sa.Column("reply", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["bundle_id"],
            ["editor_bundles.id"],
            name=op.f("fk_editor_patches_bundle_id_editor_bundles"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["run_id"], ["runs.id"], name=op.f("fk_editor_patches_run_id_runs"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_editor_patches")),
    )
    op.create_index(op.f("ix_editor_patches_bundle_id"), "editor_patches", ["bundle_id"], unique=False)
    op.create_index(op.f("ix_editor_patches_run_id_step"), "editor_patches", ["run_id", "step"], unique=False)


def downgrade() -> None:
    op.drop_index(op.f("ix_editor_patches_run_id_step"), table_name="editor_patches")
    op.drop_index(op.f("ix_editor_patches_bundle_id"), table_name="editor_patches")
    op.drop_table("editor_patches")
    op.drop_index(op.f("ix_editor_bundles_run_id"), table_name="editor_bundles")
    op.drop_table("editor_bundles")
