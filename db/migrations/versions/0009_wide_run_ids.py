"""Wide run ids: every column that holds a run id, or a checkpoint name made from one, is 255 wide.

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-05

Run ids are readable (``<config name>[-<tag>]-<hash>``) and a baseline's evaluations repeat the
names of the harnesses they compare, so some are longer than the 64 characters ``runs.id`` had
(76 in reports/dbbench-main). SQLite never enforced the width; PostgreSQL refused those rows
(``value too long for type character varying(64)``), so `hs db copy` of such a database failed.
``db.ids.run_id`` now makes ids of at most 200 characters; the columns are 255 wide so that
names derived from a run id fit too: the sft run ``sft-<checkpoint>``, the RL checkpoint
``<run id>-u<N>`` (checkpoints.id / parent_id, rollout_groups.checkpoint,
trajectories.checkpoint), an engineer patch's source ``engineer:<checkpoint>`` and a pool's DVC
tag ``pool-<benchmark>-<version>`` (the version defaults to the evolution's run id).

Widening keeps every value. On PostgreSQL the analysis views (0007) read some of these columns,
and a column a view reads cannot change type: they are dropped first and created again, the same
SELECTs. On SQLite each table is rebuilt in batch mode (db/migrations/env.py keeps the views
alone). Downgrading narrows the columns back and fails on PostgreSQL if a longer value is stored.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from pathlib import Path

import sqlalchemy as sa
from alembic import op

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

RUN_ID = 255

# table -> [(column, width before, nullable)]; parents before children.
WIDENED: dict[str, list[tuple[str, int, bool]]] = {
    "runs": [("id", 64, False)],
    "evaluations": [("run_id", 64, False)],
    "rollout_groups": [("run_id", 64, False), ("checkpoint", 200, False)],
    "trajectories": [("run_id", 64, False), ("checkpoint", 200, False)],
    "checkpoints": [("id", 200, False), ("run_id", 64, True), ("parent_id", 200, True)],
    "train_steps": [("run_id", 64, False)],
    "pools": [("run_id", 64, True), ("dvc_tag", 200, True)],
    "evolution_candidates": [("run_id", 64, False)],
    "profile_versions": [("run_id", 64, False)],
    "router_decisions": [("run_id", 64, False)],
    "editor_bundles": [("run_id", 64, False)],
    "editor_patches": [("run_id", 64, False), ("source", 64, False)],
}


def _views():
    """The analysis views' module (0007), loaded from its file (its name starts with a digit)."""
    path = Path(__file__).with_name("0007_analysis_views.py")
    spec = importlib.util.spec_from_file_location("hs_migration_0007", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _resize(widths: dict[str, list[tuple[str, int, int, bool]]]) -> None:
    """widths: table -> [(column, from width, to width, nullable)]."""
    dialect = op.get_bind().dialect.name
    views = _views() if dialect == "postgresql" else None
    if views is not None:
        for name in reversed(views.VIEWS):
            op.execute(f"DROP VIEW IF EXISTS {name}")
    for table, columns in widths.items():
        with op.batch_alter_table(table) as batch:
            for column, old, new, nullable in columns:
                batch.alter_column(
                    column, existing_type=sa.String(length=old), type_=sa.String(length=new), existing_nullable=nullable
                )
    if views is not None:
        definitions = views.view_definitions(dialect)
        for name in views.VIEWS:
            op.execute(f"CREATE VIEW {name} AS{definitions[name]}")


def upgrade() -> None:
    _resize({t: [(c, old, RUN_ID, n) for c, old, n in cols] for t, cols in WIDENED.items()})


def downgrade() -> None:
    _resize({t: [(c, RUN_ID, old, n) for c, old, n in cols] for t, cols in reversed(WIDENED.items())})
