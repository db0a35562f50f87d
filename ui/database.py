"""A read-only engine on the trajectory database: the explorer can never write a row."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Engine, event

from db.engine import make_engine


def read_only_engine(url: str) -> Engine:
    """SQLite: every connection `query_only`; PostgreSQL: every session's transactions READ ONLY."""
    engine = make_engine(url, create_folder=False)
    backend = engine.url.get_backend_name()

    @event.listens_for(engine, "connect")
    def _read_only(dbapi_connection: Any, _record: Any) -> None:
        cursor = dbapi_connection.cursor()
        if backend == "sqlite":
            cursor.execute("PRAGMA query_only = ON")
        elif backend == "postgresql":
            cursor.execute("SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY")
        cursor.close()
        if backend == "postgresql":
            dbapi_connection.commit()

    return engine
