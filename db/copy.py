"""Copy a whole trajectory database into another (`hs db copy --to URL`), e.g. SQLite -> PostgreSQL.

The target is migrated to the latest revision first, then every table of the schema is copied in
dependency order (parents before children), in chunks, as upserts keyed by primary key: copying
twice, or into a database that already holds some of the rows, leaves one copy of each row with
the source's values. Rows the target has and the source lacks are kept. Column types go through
SQLAlchemy's own processing (JSON, UTC datetimes), so each backend stores its native form (NaN and
infinities in JSON, which PostgreSQL refuses, become null there: db.engine.postgres_json); the
analysis views are defined by the migrations and need no copying. The copy is one transaction: a
row the target refuses stops it with a one-line DatabaseError naming the table, nothing written.

With ``runs``, only those runs' rows are copied (a table with a ``run_id`` keeps the rows of those
runs; turns follow their trajectories), plus every harness and bench task: the export a report
ships with (`hs db copy --run ... --no-turns`), small enough to commit, that `hs report` reads.
"""

from __future__ import annotations

from collections.abc import Callable

from sqlalchemy import Select, Table, func, select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection
from sqlalchemy.exc import DBAPIError
from sqlalchemy.pool import NullPool

from db.engine import DatabaseError, make_engine, mask_url, normalize_url, upgrade
from db.models import Base

CHUNK_ROWS = 200  # turns carry token lists: keep one chunk's parameters small on both backends


def tables() -> list[Table]:
    """Every table of the schema, parents before children."""
    return list(Base.metadata.sorted_tables)


def upsert_rows(connection: Connection, table: Table, rows: list[dict]) -> None:
    """Insert `rows` into `table`, replacing rows with the same primary key (SQLite, PostgreSQL)."""
    dialect = connection.dialect.name
    if dialect == "postgresql":
        insert = postgresql.insert(table)
    elif dialect == "sqlite":
        insert = sqlite.insert(table)
    else:
        raise ValueError(f"copying into a {dialect} database is not supported: use SQLite or PostgreSQL")
    keys = [c.name for c in table.primary_key.columns]
    others = [c.name for c in table.columns if c.name not in keys]
    statement = (
        insert.on_conflict_do_update(index_elements=keys, set_={n: insert.excluded[n] for n in others})
        if others
        else insert.on_conflict_do_nothing(index_elements=keys)
    )
    connection.execute(statement, rows)


def _rows_of(table: Table, runs: set[str] | None) -> Select:
    """The rows of `table` to copy: all of them, or those belonging to `runs`."""
    query = select(table)
    if runs is None:
        return query
    if table.name == "runs":
        return query.where(table.c.id.in_(sorted(runs)))
    if "run_id" in table.c:
        return query.where(table.c.run_id.in_(sorted(runs)))
    if table.name == "turns":
        trajectories = Base.metadata.tables["trajectories"]
        kept = select(trajectories.c.id).where(trajectories.c.run_id.in_(sorted(runs)))
        return query.where(table.c.trajectory_id.in_(kept))
    return query  # harnesses, bench tasks: shared by every run, small


def copy_database(
    source_url: str,
    target_url: str,
    on_rows: Callable[[str, int, int], None] | None = None,
    *,
    runs: set[str] | None = None,
    turns: bool = True,
) -> dict[str, int]:
    """Copy every row of `source_url` into `target_url` (only `runs`' rows when given, and no
    turns when `turns` is False); rows copied per table.

    `on_rows(table, done, total)` is called after every chunk (a progress bar).
    """
    if normalize_url(source_url) == normalize_url(target_url):
        raise ValueError(f"source and target are the same database ({mask_url(source_url)}): give another --to")
    upgrade(source_url)  # a source on an older revision reads with the current models
    upgrade(target_url)
    source = make_engine(source_url, create_folder=False, poolclass=NullPool)
    target = make_engine(target_url, poolclass=NullPool)
    copied: dict[str, int] = {}
    try:
        with source.connect() as reader, target.begin() as writer:
            for table in tables():
                if table.name == "turns" and not turns:
                    continue
                query = _rows_of(table, runs)
                total = reader.scalar(select(func.count()).select_from(query.subquery())) or 0
                done = 0
                order = [c for c in table.primary_key.columns]
                result = reader.execution_options(yield_per=CHUNK_ROWS).execute(query.order_by(*order))
                for chunk in result.mappings().partitions(CHUNK_ROWS):
                    try:
                        upsert_rows(writer, table, [dict(row) for row in chunk])
                    except DBAPIError as exc:
                        raise _refused(table, target_url, exc) from exc
                    done += len(chunk)
                    if on_rows:
                        on_rows(table.name, done, total)
                if on_rows and total == 0:
                    on_rows(table.name, 0, 0)
                copied[table.name] = done
    finally:
        source.dispose()
        target.dispose()
    return copied


def _refused(table: Table, target_url: str, exc: DBAPIError) -> DatabaseError:
    reason = " ".join(str(exc.orig or exc).strip().splitlines()[0].split())[:200]
    return DatabaseError(
        f"{mask_url(target_url)} refused a row of table {table.name} ({reason}); nothing was copied (one "
        "transaction): fix that row in the source, or copy only the runs you need (--run)"
    )


def count_rows(url: str) -> dict[str, int]:
    """Rows per table of the schema in `url`."""
    engine = make_engine(url, create_folder=False, poolclass=NullPool)
    try:
        with engine.connect() as connection:
            return {t.name: connection.scalar(select(func.count()).select_from(t)) or 0 for t in tables()}
    finally:
        engine.dispose()
