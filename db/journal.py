"""A training run's rows, one file per update step, kept beside its trainer state.

A training run resumes from its trainer state on disk (`state_dir/<run id>/`). Without its rows
the current database could not report on the updates that state has finished: the database may
have been switched (SQLite -> PostgreSQL) or deleted since. So after every step the rows written
for it are saved next to the state (`rows-step<N>.pkl.gz`: its rollout groups with their
trajectories and turns, the train step, router decisions, re-anchor evaluations and profiles, and
the checkpoint it registered), and a resumed run that finds them missing writes them back as
upserts by primary key. This costs no model time and leaves one copy of every row.
"""

from __future__ import annotations

import gzip
import pickle
from pathlib import Path

from sqlalchemy import Table, select
from sqlalchemy.orm import Session

from db.copy import tables, upsert_rows
from db.models import Base

_IN_CHUNK = 500


def _table(name: str) -> Table:
    return Base.metadata.tables[name]


def _rows(session: Session, table: Table, *where) -> list[dict]:
    return [dict(r) for r in session.execute(select(table).where(*where)).mappings()]


def _rows_in(session: Session, table: Table, column: str, values: list) -> list[dict]:
    out = []
    for start in range(0, len(values), _IN_CHUNK):
        out += _rows(session, table, table.c[column].in_(values[start : start + _IN_CHUNK]))
    return out


def step_rows(session: Session, run_id: str, step: int) -> dict[str, list[dict]]:
    """Every row a training run wrote for update step `step` (re-anchor rows of that step included)."""
    groups = _rows(
        session,
        _table("rollout_groups"),
        _table("rollout_groups").c.run_id == run_id,
        _table("rollout_groups").c.step == step,
    )
    trajectories = _rows_in(session, _table("trajectories"), "group_id", [g["id"] for g in groups])
    evaluations = [
        e
        for e in _rows(
            session,
            _table("evaluations"),
            _table("evaluations").c.run_id == run_id,
            _table("evaluations").c.routing == "reanchor",
        )
        if (e["metrics"] or {}).get("step") == step
    ]
    by_step = {
        name: _rows(session, _table(name), _table(name).c.run_id == run_id, _table(name).c.step == step)
        for name in ("train_steps", "router_decisions")
    }
    return {
        "rollout_groups": groups,
        "trajectories": trajectories,
        "turns": _rows_in(session, _table("turns"), "trajectory_id", [t["id"] for t in trajectories]),
        "evaluations": evaluations,
        **by_step,
        "profile_versions": _rows(
            session,
            _table("profile_versions"),
            _table("profile_versions").c.run_id == run_id,
            _table("profile_versions").c.version == step,
        ),
        "checkpoints": _rows(
            session,
            _table("checkpoints"),
            _table("checkpoints").c.run_id == run_id,
            _table("checkpoints").c.step == step + 1,
        ),
    }


def journal_path(folder: Path, step: int) -> Path:
    return folder / f"rows-step{step}.pkl.gz"


def save_step(session: Session, folder: Path, run_id: str, step: int) -> Path:
    """Write step `step`'s rows to its file in `folder`, atomically."""
    path = journal_path(folder, step)
    tmp = path.with_suffix(".tmp")
    with gzip.open(tmp, "wb", compresslevel=1) as fh:
        pickle.dump(step_rows(session, run_id, step), fh)
    tmp.replace(path)
    return path


def restore_steps(session: Session, folder: Path) -> dict[str, int]:
    """Upsert every saved step of `folder` into the session's database; rows per table."""
    written: dict[str, int] = {}
    connection = session.connection()
    for path in sorted(folder.glob("rows-step*.pkl.gz")):
        with gzip.open(path, "rb") as fh:
            rows = pickle.load(fh)  # noqa: S301 - our own file, written by save_step beside the trainer state
        for table in tables():  # parents before children
            if rows.get(table.name):
                upsert_rows(connection, table, rows[table.name])
                written[table.name] = written.get(table.name, 0) + len(rows[table.name])
    return written
