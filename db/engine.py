"""Engines, sessions, migrations and a connectivity check for the trajectory database.

The URL comes from ``HS_DATABASE_URL``; without it, a SQLite file ``<HS_HOME or .hs>/hs.db``.
PostgreSQL URLs may be written ``postgresql://...``; they are rewritten to psycopg 3
(``postgresql+psycopg://...``).

Sessions are opened at task boundaries only (``with session_scope(engine) as s: ...``) and
never passed between Prefect tasks; tasks pass ids instead.

Schema changes go through Alembic (``db/migrations``): ``upgrade()`` from code, or
``alembic -c db/alembic.ini upgrade head`` from the repository root (it reads
``HS_DATABASE_URL`` the same way).
"""

from __future__ import annotations

import json
import math
import os
import re
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, create_engine, event, text
from sqlalchemy.engine import URL, make_url
from sqlalchemy.orm import Session
from sqlalchemy.pool import NullPool, StaticPool

ENV_DATABASE_URL = "HS_DATABASE_URL"
ENV_HOME = "HS_HOME"
DEFAULT_HOME = ".hs"
MIGRATIONS_DIR = Path(__file__).resolve().parent / "migrations"
CONNECT_TIMEOUT_S = 3
SQLITE_BUSY_TIMEOUT_S = 30


class DatabaseError(Exception):
    """The database cannot be used; the message is one line saying why and how to fix it."""


def database_url(create_home: bool = True) -> str:
    """``HS_DATABASE_URL`` if set, else ``sqlite:///<HS_HOME or .hs>/hs.db``.

    The SQLite path is made absolute (relative ``HS_HOME`` or ``.hs`` is taken from the
    current directory). ``create_home`` False leaves that folder alone: `hs` commands resolve
    the URL first and create the folder only when they write (see :func:`check_database`).
    """
    url = os.environ.get(ENV_DATABASE_URL, "").strip()
    if url:
        return normalize_url(url)
    # Absolute, so that logs name the file and a later chdir does not move the database.
    home = Path(os.environ.get(ENV_HOME, "").strip() or DEFAULT_HOME).expanduser().resolve()
    if create_home:
        home.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{home / 'hs.db'}"


def sqlite_file(url: str | URL) -> Path | None:
    """The absolute path of a SQLite database file, None for other backends and in-memory SQLite."""
    parsed = make_url(normalize_url(url)) if not isinstance(url, URL) else url
    if parsed.get_backend_name() != "sqlite" or _is_sqlite_memory(parsed):
        return None
    return Path(parsed.database).expanduser().resolve()


def folder_problem(folder: Path, create: bool = False) -> str | None:
    """Why files cannot be written into ``folder`` (with how to fix it), or None when they can.

    The folder (or, when it is missing and ``create`` allows making it, its nearest existing
    ancestor) must be a directory in which a file can really be created: a probe file is created
    and removed at once, so permissions, ACLs and read-only mounts count as the kernel sees them.
    """
    folder = Path(folder).expanduser().absolute()
    existing = folder
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        return f"{existing} is a file, not a folder: remove or rename it"
    if existing != folder and not create:
        return f"folder {folder} does not exist: create it first (mkdir -p {folder})"
    probe = existing / f".hs-write-probe-{os.getpid()}-{secrets.token_hex(4)}"
    try:
        fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        return f"folder {existing} is not writable ({reason}): make it writable (chmod u+w {existing})"
    os.close(fd)
    os.unlink(probe)
    return None


def normalize_url(url: str | URL) -> str:
    """Point PostgreSQL URLs without an explicit driver at psycopg 3."""
    text_url = url.render_as_string(hide_password=False) if isinstance(url, URL) else str(url)
    for prefix in ("postgresql://", "postgres://"):
        if text_url.startswith(prefix):
            return "postgresql+psycopg://" + text_url[len(prefix) :]
    return text_url


def mask_url(url: str | URL) -> str:
    """The URL with its password replaced by ``***`` (for messages and logs)."""
    try:
        return make_url(str(url) if isinstance(url, str) else url).render_as_string(hide_password=True)
    except Exception:  # noqa: BLE001 - unparsable: mask anything between "user:" and "@"
        return re.sub(r"(//[^:/@]*:)[^@]*@", r"\1***@", str(url))


def _is_sqlite_memory(url: URL) -> bool:
    return url.database in (None, "", ":memory:") or "mode=memory" in str(url)


def _enable_sqlite_pragmas(engine: Engine, wal: bool) -> None:
    """Foreign keys (cascades), a busy timeout and WAL on every new SQLite connection.

    WAL lets readers proceed while one writer commits; the busy timeout makes concurrent
    writers (threads or worker processes) wait for the lock instead of failing at once.
    """

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        cursor = dbapi_connection.cursor()
        cursor.execute(f"PRAGMA busy_timeout = {SQLITE_BUSY_TIMEOUT_S * 1000}")
        cursor.execute("PRAGMA foreign_keys = ON")
        if wal:
            cursor.execute("PRAGMA journal_mode = WAL")
            cursor.execute("PRAGMA synchronous = NORMAL")
        cursor.close()


def make_engine(url: str | URL | None = None, *, create_folder: bool = True, **kwargs: Any) -> Engine:
    """An engine for ``url`` (default :func:`database_url`), set up for this project.

    SQLite: usable from several threads, foreign keys on, WAL journal, 30 s busy timeout; the
    file's folder is created (unless ``create_folder`` is False). PostgreSQL: psycopg 3, 3 s
    connect timeout, pre-ping, JSON written by :func:`postgres_json` (NaN and infinities, which
    JSONB refuses, are stored as null). Extra keyword arguments go to :func:`sqlalchemy.create_engine`.
    """
    parsed = make_url(normalize_url(url if url is not None else database_url()))
    if parsed.get_backend_name() == "sqlite":
        connect_args = {"check_same_thread": False, "timeout": SQLITE_BUSY_TIMEOUT_S}
        connect_args.update(kwargs.pop("connect_args", {}))
        memory = _is_sqlite_memory(parsed)
        if memory:
            # One shared connection, or every thread would see its own empty database.
            kwargs.setdefault("poolclass", StaticPool)
        elif create_folder:
            Path(parsed.database).expanduser().parent.mkdir(parents=True, exist_ok=True)
        engine = create_engine(parsed, connect_args=connect_args, **kwargs)
        _enable_sqlite_pragmas(engine, wal=not memory)
        return engine
    if parsed.get_backend_name() == "postgresql":
        connect_args = {"connect_timeout": CONNECT_TIMEOUT_S}
        connect_args.update(kwargs.pop("connect_args", {}))
        kwargs.setdefault("pool_pre_ping", True)
        kwargs.setdefault("json_serializer", postgres_json)
        return create_engine(parsed, connect_args=connect_args, **kwargs)
    return create_engine(parsed, **kwargs)


def postgres_json(value: Any) -> str:
    """JSON text PostgreSQL accepts: NaN, Infinity and -Infinity (which Python's json writes and
    SQLite keeps, e.g. a bandit's score of an arm never played) become null, as in JavaScript."""
    try:
        return json.dumps(value, allow_nan=False)
    except ValueError:
        return json.dumps(_finite(value), allow_nan=False)


def _finite(value: Any) -> Any:
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


@contextmanager
def session_scope(engine: Engine) -> Iterator[Session]:
    """A session that commits on success, rolls back on error, and always closes.

    ``expire_on_commit=False``: objects keep their loaded values after the commit, so a task
    can read ids and fields of what it wrote after the block ends.
    """
    session = Session(engine, expire_on_commit=False)
    try:
        yield session
        session.commit()
    except BaseException:
        session.rollback()
        raise
    finally:
        session.close()


def alembic_config(url: str | URL | None = None) -> Any:
    """An Alembic ``Config`` built in code: our migrations, the given (or default) URL."""
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    # Passed as an attribute, not a main option: ConfigParser would interpolate "%" in
    # URL-encoded passwords.
    config.attributes["url"] = normalize_url(url if url is not None else database_url())
    return config


def upgrade(url: str | URL | None = None, revision: str = "head") -> None:
    """Migrate the database at ``url`` (default :func:`database_url`) to ``revision``.

    Idempotent. Call it once per flow run before workers start writing, not from every
    worker at once (concurrent DDL on PostgreSQL can race).
    """
    from alembic import command

    command.upgrade(alembic_config(url), revision)


def current_revision(engine: Engine) -> str | None:
    """The Alembic revision the database is at, or None when it was never migrated."""
    from alembic.runtime.migration import MigrationContext

    with engine.connect() as connection:
        return MigrationContext.configure(connection).get_current_revision()


_REASONS = (
    # (pattern in the driver's message, short reason, how to fix)
    ("connection refused", "connection refused", "start PostgreSQL or set {env}"),
    ("timeout expired", f"no answer within {CONNECT_TIMEOUT_S} s", "check host/port or set {env}"),
    ("timed out", f"no answer within {CONNECT_TIMEOUT_S} s", "check host/port or set {env}"),
    ("could not translate host name", "unknown host", "fix the host in {env}"),
    ("name or service not known", "unknown host", "fix the host in {env}"),
    ("password authentication failed", "authentication failed", "fix user/password in {env}"),
    ("no password supplied", "a password is required", "put the password in {env}"),
    ("does not exist", None, "create it (e.g. createdb) or set {env}"),
    ("unknown database", None, "create it or set {env}"),
    ("not a directory", None, "check that its folder is writable or set {env}"),
    ("permission denied", None, "check that its folder is writable or set {env}"),
    ("unable to open database file", "cannot open the SQLite file", "check that its folder is writable or set {env}"),
    ("no module named", None, "install the driver (psycopg[binary]) or set {env}"),
)


def _one_line_reason(exc: BaseException, option: str | None = None) -> tuple[str, str]:
    """(reason, fix); the fix names ``option`` (the command's own flag, e.g. --to) when given."""
    original = getattr(exc, "orig", None) or exc
    message = " ".join(str(original).split()) or type(original).__name__
    lowered = message.lower()
    for pattern, reason, fix in _REASONS:
        if pattern in lowered:
            detail = reason or _first_clause(message)
            return detail, _name_option(fix, option)
    return _first_clause(message), _name_option("check the server or set {env}", option)


def _name_option(fix: str, option: str | None) -> str:
    if option is None:
        return fix.format(env=ENV_DATABASE_URL)
    return fix.replace("set {env}", "change {env}").format(env=option)


def _first_clause(message: str) -> str:
    # psycopg prefixes "connection failed: connection to server at ... failed: <reason>".
    tail = message.rsplit("failed:", 1)[-1].strip()
    tail = tail.removeprefix("FATAL:").strip()
    return (tail or message)[:200]


def _check_sqlite_file(
    path: Path, masked: str, must_exist: bool, create_folder: bool, option: str | None = None
) -> None:
    """Readers need the file; everyone needs its folder, writable (the WAL journal lives beside it)."""
    where = option or f"{ENV_DATABASE_URL} / --database-url"
    if must_exist and not path.is_file():
        compressed = path.with_name(path.name + ".xz")
        if compressed.is_file():  # a committed export, such as reports/dbbench-main/rows.db.xz
            raise DatabaseError(
                f"no trajectory database at {path}, only its compressed copy: decompress it first "
                f"(xz -dk {compressed}), or point {where} at another database"
            )
        missing = (
            ""
            if path.parent.is_dir()
            else f" ({path.parent} is a file, not a folder)"
            if path.parent.exists()
            else f" (folder {path.parent} does not exist)"
        )
        raise DatabaseError(
            f"no trajectory database at {path}{missing}: create one with `hs db upgrade` (commands that "
            f"record runs, such as `hs eval`, create it too), or point {where} at an existing one"
        )
    problem = folder_problem(path.parent, create=create_folder)
    if problem is not None:
        why = (
            f" (SQLite writes {path.name}-wal and {path.name}-shm beside the database, even to read it)"
            if path.parent.is_dir()
            else ""
        )
        where = option or f"--database-url / {ENV_DATABASE_URL}"
        raise DatabaseError(f"cannot use {masked}: {problem}, or point {where} elsewhere{why}")


def check_database(
    url: str | URL | None = None,
    timeout_s: float = CONNECT_TIMEOUT_S,
    *,
    must_exist: bool = False,
    create_folder: bool = True,
    option: str | None = None,
) -> None:
    """Connect and run ``SELECT 1``; raise :class:`DatabaseError` with a one-line fix if not.

    Fast: a fresh connection with a ``timeout_s`` connect timeout, no pool. For a SQLite file:
    ``must_exist`` (commands that only read) refuses a missing file instead of creating an empty
    one; ``create_folder`` False refuses a missing folder instead of creating it; the folder must
    be writable either way (the WAL journal lives beside the file). ``option`` is the flag the
    fix names (e.g. ``--to`` for `hs db copy`); default ``HS_DATABASE_URL`` / ``--database-url``.
    """
    raw = normalize_url(url if url is not None else database_url(create_home=False))
    masked = mask_url(raw)
    try:
        parsed = make_url(raw)
    except Exception as exc:
        raise DatabaseError(
            f"invalid database URL {masked!r}: write {option or ENV_DATABASE_URL} as "
            "postgresql://user@host:5432/dbname or sqlite:///path/to/hs.db"
        ) from exc
    path = sqlite_file(parsed)
    if path is not None:
        _check_sqlite_file(path, masked, must_exist, create_folder, option)
    connect_args: dict[str, Any] = {}
    if parsed.get_backend_name() == "postgresql":
        connect_args["connect_timeout"] = max(1, round(timeout_s))
    try:
        engine = make_engine(parsed, create_folder=create_folder, poolclass=NullPool, connect_args=connect_args)
    except Exception as exc:  # missing driver, or a SQLite folder that cannot be created
        reason, fix = _one_line_reason(exc, option)
        raise DatabaseError(f"cannot open {masked}: {reason}; {fix}") from exc
    try:
        with engine.connect() as connection:
            connection.execute(text("SELECT 1"))
    except Exception as exc:
        reason, fix = _one_line_reason(exc, option)
        raise DatabaseError(f"cannot reach {masked}: {reason}; {fix}") from exc
    finally:
        engine.dispose()


__all__ = [
    "DatabaseError",
    "alembic_config",
    "check_database",
    "current_revision",
    "database_url",
    "folder_problem",
    "make_engine",
    "mask_url",
    "normalize_url",
    "postgres_json",
    "session_scope",
    "sqlite_file",
    "upgrade",
]
