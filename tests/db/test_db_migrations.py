"""The Alembic migrations produce exactly the ORM's schema, on SQLite and PostgreSQL."""

import os
import subprocess
import sys
from pathlib import Path

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import inspect

from db.engine import current_revision, make_engine, upgrade
from db.models import Base

REPO = Path(__file__).resolve().parents[2]


def _diff(engine):
    with engine.connect() as connection:
        context = MigrationContext.configure(connection, opts={"compare_type": True})
        return compare_metadata(context, Base.metadata)


def test_migration_matches_models(engine):
    assert _diff(engine) == []
    assert current_revision(engine) == "0010"
    tables = set(inspect(engine).get_table_names())
    assert set(Base.metadata.tables) <= tables


def test_upgrade_is_idempotent_and_downgrade_reverses(db_url):
    upgrade(db_url)
    upgrade(db_url)
    engine = make_engine(db_url)
    try:
        assert current_revision(engine) == "0010"
        from alembic import command

        from db.engine import alembic_config

        command.downgrade(alembic_config(db_url), "base")
        assert set(inspect(engine).get_table_names()) <= {"alembic_version"}
        upgrade(db_url)
        assert _diff(engine) == []
    finally:
        engine.dispose()


def test_alembic_cli_with_shipped_ini(tmp_path):
    """Researchers run ``alembic -c db/alembic.ini upgrade head``; it reads HS_DATABASE_URL."""
    url = f"sqlite:///{tmp_path / 'cli.db'}"
    env = {**os.environ, "HS_DATABASE_URL": url}
    alembic = Path(sys.executable).with_name("alembic")
    result = subprocess.run(
        [str(alembic), "-c", "db/alembic.ini", "upgrade", "head"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    engine = make_engine(url)
    try:
        assert current_revision(engine) == "0010"
        assert _diff(engine) == []
    finally:
        engine.dispose()
