"""Alembic environment for the trajectory database.

The URL is, in order: ``config.attributes["url"]`` (set by :func:`db.engine.upgrade`), the
``sqlalchemy.url`` option of an ini file, then ``HS_DATABASE_URL`` / the default SQLite file.
SQLite migrations run in batch mode (it cannot ALTER most things in place) with foreign keys
off, so that recreating a table does not cascade-delete its children.
"""

from __future__ import annotations

import logging.config

from alembic import context
from sqlalchemy.pool import NullPool

from db.engine import database_url, make_engine, normalize_url
from db.models import Base, UTCDateTime

config = context.config
if config.config_file_name is not None and config.file_config.has_section("loggers"):
    logging.config.fileConfig(config.config_file_name, disable_existing_loggers=False)

target_metadata = Base.metadata


def render_item(type_: str, obj: object, autogen_context: object) -> str | bool:
    """Render our UTC TypeDecorator as the plain column type it stores (no app import)."""
    if type_ == "type" and isinstance(obj, UTCDateTime):
        return "sa.DateTime(timezone=True)"
    return False


def _url() -> str:
    url = config.attributes.get("url") or config.get_main_option("sqlalchemy.url")
    return normalize_url(url) if url else database_url()


def run_migrations_offline() -> None:
    url = _url()
    context.configure(
        url=url,
        target_metadata=target_metadata,
        literal_binds=True,
        render_as_batch=url.startswith("sqlite"),
        render_item=render_item,
        dialect_opts={"paramstyle": "named"},
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    engine = make_engine(_url(), poolclass=NullPool)
    is_sqlite = engine.dialect.name == "sqlite"
    try:
        with engine.connect() as connection:
            if is_sqlite:  # PRAGMA foreign_keys is a no-op inside a transaction
                connection.exec_driver_sql("PRAGMA foreign_keys = OFF")
                # Batch migrations rebuild a table by copy + rename; the legacy rename leaves the analysis
                # views (0007) pointing at the table's name instead of failing on them.
                connection.exec_driver_sql("PRAGMA legacy_alter_table = ON")
                connection.commit()
            context.configure(
                connection=connection,
                target_metadata=target_metadata,
                render_as_batch=is_sqlite,
                compare_type=True,
                render_item=render_item,
            )
            with context.begin_transaction():
                context.run_migrations()
            if is_sqlite:
                connection.exec_driver_sql("PRAGMA foreign_keys = ON")
                connection.commit()
    finally:
        engine.dispose()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
