"""URL resolution, SQLite connection settings, sessions and the connectivity check."""

import threading
import time

import pytest
from sqlalchemy import func, select, text

from db.engine import (
    DatabaseError,
    check_database,
    database_url,
    make_engine,
    mask_url,
    normalize_url,
    session_scope,
    upgrade,
)
from db.models import Run


def test_database_url_prefers_env_then_hs_home(monkeypatch, tmp_path):
    monkeypatch.setenv("HS_DATABASE_URL", "postgresql://u:p@h:5432/x")
    assert database_url() == "postgresql+psycopg://u:p@h:5432/x"
    monkeypatch.delenv("HS_DATABASE_URL")
    monkeypatch.setenv("HS_HOME", str(tmp_path / "home"))
    assert database_url() == f"sqlite:///{tmp_path / 'home' / 'hs.db'}"
    assert (tmp_path / "home").is_dir()


def test_default_home_is_dot_hs(monkeypatch, tmp_path):
    monkeypatch.delenv("HS_DATABASE_URL", raising=False)
    monkeypatch.delenv("HS_HOME", raising=False)
    monkeypatch.chdir(tmp_path)
    assert database_url() == f"sqlite:///{tmp_path.resolve() / '.hs' / 'hs.db'}"
    assert (tmp_path / ".hs").is_dir()


def test_normalize_and_mask():
    assert normalize_url("postgres://a@h/d") == "postgresql+psycopg://a@h/d"
    assert normalize_url("postgresql+psycopg://a@h/d") == "postgresql+psycopg://a@h/d"
    assert normalize_url("sqlite:///x.db") == "sqlite:///x.db"
    masked = mask_url("postgresql+psycopg://user:s3cret@h:5432/d")
    assert "s3cret" not in masked and "user" in masked


def test_sqlite_engine_settings(sqlite_url):
    engine = make_engine(sqlite_url)
    try:
        with engine.connect() as connection:
            assert connection.execute(text("PRAGMA foreign_keys")).scalar() == 1
            assert connection.execute(text("PRAGMA journal_mode")).scalar() == "wal"
            assert connection.execute(text("PRAGMA busy_timeout")).scalar() >= 1000
    finally:
        engine.dispose()


def test_sqlite_accepts_concurrent_writers(sqlite_url):
    upgrade(sqlite_url)
    engine = make_engine(sqlite_url)
    errors: list[BaseException] = []

    def write(worker: int) -> None:
        try:
            for i in range(10):
                with session_scope(engine) as session:
                    session.add(Run(id=f"w{worker}-{i}", kind="eval", name="n", config={}))
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(w,)) for w in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    try:
        assert errors == []
        with session_scope(engine) as session:
            assert session.scalar(select(func.count()).select_from(Run)) == 40
    finally:
        engine.dispose()


def test_session_scope_rolls_back_on_error(sqlite_url):
    upgrade(sqlite_url)
    engine = make_engine(sqlite_url)
    try:
        with pytest.raises(RuntimeError):
            with session_scope(engine) as session:
                session.add(Run(id="r1", kind="eval", name="n", config={}))
                session.flush()
                raise RuntimeError("boom")
        with session_scope(engine) as session:
            assert session.get(Run, "r1") is None
    finally:
        engine.dispose()


@pytest.mark.serial
def test_check_database_unreachable_is_fast_and_one_line():
    url = "postgresql+psycopg://postgres:hunter2@127.0.0.1:9/nope"
    start = time.monotonic()
    with pytest.raises(DatabaseError) as info:
        check_database(url)
    assert time.monotonic() - start < 5
    message = str(info.value)
    assert "\n" not in message
    assert "HS_DATABASE_URL" in message
    assert "127.0.0.1:9/nope" in message
    assert "hunter2" not in message
    assert "connection refused" in message


def test_check_database_bad_sqlite_folder(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    with pytest.raises(DatabaseError) as info:
        check_database(f"sqlite:///{blocker}/sub/hs.db")
    assert "\n" not in str(info.value) and "HS_DATABASE_URL" in str(info.value)


def test_check_database_ok(db_url):
    check_database(db_url)


@pytest.mark.postgres
def test_check_database_missing_postgres_database(postgres_url):
    url = postgres_url.rsplit("/", 1)[0] + "/hs_test_does_not_exist"
    with pytest.raises(DatabaseError) as info:
        check_database(url)
    message = str(info.value)
    assert "\n" not in message and "does not exist" in message and "HS_DATABASE_URL" in message


def test_postgresql_json_stores_non_finite_numbers_as_null():
    """JSONB refuses NaN and Infinity (a bandit's score of an arm never played); they are stored as
    null there, everything else as Python's json writes it."""
    import json
    import math

    from db.engine import postgres_json

    value = {"scores": {"a": math.inf, "b": 0.5, "c": -math.inf}, "xs": [math.nan, 1, "Infinity"], "n": None}
    assert json.loads(postgres_json(value)) == {
        "scores": {"a": None, "b": 0.5, "c": None},
        "xs": [None, 1, "Infinity"],
        "n": None,
    }
    assert postgres_json({"a": [1.5, "x"]}) == json.dumps({"a": [1.5, "x"]})
