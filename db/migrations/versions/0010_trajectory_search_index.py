"""Trajectory search index: ``trajectories (created_at, id)``.

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-05

The explorer's search (ui/queries.py) lists matching trajectories newest first, 50 to a page.
Without an index on that order every search sorted all matching rows before taking a page; with
it the database walks the index backwards and stops once a page is full (figures in
docs/guide.md, "The trajectory explorer").
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_index(op.f("ix_trajectories_created_at_id"), "trajectories", ["created_at", "id"], unique=False)


def downgrade() -> None:
    op.drop_index(op.f("ix_trajectories_created_at_id"), table_name="trajectories")
