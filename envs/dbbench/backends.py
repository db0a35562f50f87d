"""SQL backends for DBBench rollouts: in-memory SQLite (default, no server) and MariaDB/MySQL.

Upstream DBBench runs every task on MySQL with all columns TEXT and judges INSERT/UPDATE tasks
by a hash of the whole table. Both backends here build the same TEXT table, answer with the
same result format and compute the same hash, so a run can move from a laptop (SQLite) to a
shared MariaDB without changing what "success" means. The SQLite backend adds the MySQL
functions and the case/accent-insensitive string comparison that the gold SQL relies on.
"""

from __future__ import annotations

import datetime
import decimal
import hashlib
import os
import re
import secrets
import sqlite3
import time
import unicodedata
from abc import ABC, abstractmethod
from urllib.parse import unquote, urlsplit

from envs.base import DataError
from envs.dbbench.sqlite_dialect import MysqlSyntaxError, mysql_to_sqlite, parse_admin

DEFAULT_MYSQL_URL = "mysql://root@127.0.0.1:3306"
STATEMENT_TIMEOUT_S = 5.0
# Close to MySQL 8's default utf8mb4_0900_ai_ci (upstream's server): case- and accent-
# insensitive, no trailing-space padding. See README.md for the measured effect.
MYSQL_COLLATION = "utf8mb4_uca1400_nopad_ai_ci"


class SqlExecutionError(RuntimeError):
    """A statement the backend itself issued (not the agent's) failed, e.g. hashing a dropped table."""


def quote_ident(name: str) -> str:
    """Backtick-quote an identifier; both SQLite and MySQL accept this, so spaces/leading digits work."""
    return "`" + name.replace("`", "``") + "`"


def storage_columns(columns: list[str]) -> list[str]:
    """Column names as created: MySQL rejects an empty name (one dev table has one), so give it a name."""
    return [name if name.strip() else f"column_{i + 1}" for i, name in enumerate(columns)]


def cell_text(value: object) -> str | None:
    """Store every cell as TEXT like upstream; None stays NULL so concat_ws skips it in the hash."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "1" if value else "0"
    return value if isinstance(value, str) else str(value)


def mysql_text(value: object) -> str | None:
    """Render a value the way MySQL converts it to a string (used by the SQLite shims)."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    return str(value)


def row_hash(values: tuple | list) -> str:
    """First 5 hex chars of md5(concat_ws(',', values)): upstream's per-row fingerprint."""
    joined = ",".join(text for text in (mysql_text(v) for v in values) if text is not None)
    return hashlib.md5(joined.encode("utf-8")).hexdigest()[:5]


def combine_row_hashes(row_hashes: list[str]) -> str:
    """md5 of the sorted, comma-joined row hashes (MySQL's group_concat ORDER BY); '' if no rows.

    MySQL returns NULL for an empty table; '' keeps the return type a string and can never
    equal a real md5.
    """
    if not row_hashes:
        return ""
    return hashlib.md5(",".join(sorted(row_hashes)).encode("utf-8")).hexdigest()


def normalise_value(value: object) -> object:
    """Map driver-specific types to str/int/float/None so both backends print alike."""
    if isinstance(value, decimal.Decimal):
        return int(value) if value == value.to_integral_value() and "." not in str(value) else float(value)
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).decode("utf-8", errors="replace")
    if isinstance(value, (datetime.date, datetime.time, datetime.timedelta)):
        return str(value)
    return value


def format_rows(rows: list[tuple]) -> str:
    """Observation text for a result, as upstream printed it: str() of the list of row tuples."""
    return str(rows)


class SqlBackend(ABC):
    """One rollout's private database holding one table; close() drops everything it created."""

    name: str

    @abstractmethod
    def create_table(self, table_name: str, columns: list[str], rows: list[list]) -> None:
        """Create the TEXT table and load the rows."""

    @abstractmethod
    def execute(self, sql: str) -> tuple[list[tuple] | None, str | None]:
        """Run one agent statement; (rows, None) on success ([] if no result set), (None, message) on error."""

    @abstractmethod
    def table_hash(self, table_name: str, columns: list[str]) -> str:
        """Upstream's whole-table fingerprint used to judge INSERT/UPDATE tasks."""

    @abstractmethod
    def close(self) -> None:
        """Drop the database and release connections; safe to call twice."""

    def __enter__(self) -> SqlBackend:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# ---------------------------------------------------------------- SQLite


def mysql_collation_key(text: str) -> str:
    """Accent- and case-insensitive key, no trailing-space padding (as utf8mb4_0900_ai_ci)."""
    decomposed = unicodedata.normalize("NFKD", text)
    return "".join(ch for ch in decomposed if not unicodedata.combining(ch)).casefold()


def _mysql_collate(left: str, right: str) -> int:
    a, b = mysql_collation_key(left), mysql_collation_key(right)
    return (a > b) - (a < b)


def _concat(*args: object) -> str | None:
    texts = [mysql_text(a) for a in args]
    return None if any(t is None for t in texts) else "".join(texts)  # type: ignore[arg-type]


def _concat_ws(sep: object, *args: object) -> str | None:
    if sep is None:
        return None
    return mysql_text(sep).join(t for t in (mysql_text(a) for a in args) if t is not None)  # type: ignore[union-attr]


def _md5(value: object) -> str | None:
    text = mysql_text(value)
    return None if text is None else hashlib.md5(text.encode("utf-8")).hexdigest()


_NUMERIC_PREFIX = re.compile(r"\s*[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?")


def mysql_number(value: object) -> int | float:
    """MySQL's reading of a value in numeric context: text gives a double from its numeric prefix."""
    if isinstance(value, (int, float)):
        return value
    match = _NUMERIC_PREFIX.match(mysql_text(value) or "")
    return float(match.group(0)) if match else 0.0


class _MysqlSum:
    """SUM as MySQL computes it on TEXT columns: a double from each value's numeric prefix.

    SQLite's own sum() returns an integer for integer-looking text ("[(5,)]" where MySQL
    prints "[(5.0,)]"), so observations would differ between backends.
    """

    def __init__(self) -> None:
        self.total: int | float | None = None

    def step(self, value: object) -> None:
        if value is None:
            return
        number = mysql_number(value)
        self.total = number if self.total is None else self.total + number

    def finalize(self) -> int | float | None:
        return self.total


def _case(fn):  # noqa: ANN001 - tiny adapter for lcase/ucase
    # (LEFT/RIGHT cannot be added: they are SQLite keywords, so calls never reach a function.)
    return lambda value: None if value is None else fn(mysql_text(value))


# Collation choices measured against the gold INSERT/UPDATE hashes (README.md): "mysql" is
# the MySQL-like Python collation, "nocase" SQLite's ASCII-only one, "binary" exact bytes.
SQLITE_COLLATIONS = ("mysql", "nocase", "binary")


class SqliteBackend(SqlBackend):
    """A fresh in-memory SQLite database, so rollouts are isolated for free and need no server."""

    name = "sqlite"

    def __init__(self, collation: str = "mysql", timeout_s: float = STATEMENT_TIMEOUT_S) -> None:
        if collation not in SQLITE_COLLATIONS:
            raise ValueError(f"collation must be one of {SQLITE_COLLATIONS}, got {collation!r}")
        self.collation = collation
        self.timeout_s = timeout_s
        self._deadline = float("inf")
        self.conn: sqlite3.Connection | None = sqlite3.connect(":memory:", isolation_level=None)
        self._install_shims(self.conn)

    def _install_shims(self, conn: sqlite3.Connection) -> None:
        """Add the MySQL functions/collation that gold SQL and the hash query use, plus guards."""
        conn.create_collation("MYSQL", _mysql_collate)
        conn.create_function("md5", 1, _md5, deterministic=True)
        conn.create_function("concat", -1, _concat, deterministic=True)
        conn.create_function("concat_ws", -1, _concat_ws, deterministic=True)
        conn.create_aggregate("sum", 1, _MysqlSum)
        conn.create_function("lcase", 1, _case(str.lower), deterministic=True)
        conn.create_function("ucase", 1, _case(str.upper), deterministic=True)
        # An agent must not reach files outside its in-memory database.
        conn.set_authorizer(self._authorize)
        # A runaway query (e.g. a huge cross join) must not stall the rollout worker.
        conn.set_progress_handler(lambda: 1 if time.monotonic() > self._deadline else 0, 10_000)

    @staticmethod
    def _authorize(action: int, *_: object) -> int:
        return sqlite3.SQLITE_DENY if action in (sqlite3.SQLITE_ATTACH, sqlite3.SQLITE_DETACH) else sqlite3.SQLITE_OK

    def _column_type(self) -> str:
        return {"mysql": "TEXT COLLATE MYSQL", "nocase": "TEXT COLLATE NOCASE", "binary": "TEXT"}[self.collation]

    def _conn(self) -> sqlite3.Connection:
        if self.conn is None:
            raise SqlExecutionError("backend is closed")
        return self.conn

    def create_table(self, table_name: str, columns: list[str], rows: list[list]) -> None:
        conn = self._conn()
        names = storage_columns(columns)
        column_sql = ", ".join(f"{quote_ident(n)} {self._column_type()}" for n in names)
        conn.execute(f"CREATE TABLE {quote_ident(table_name)} ({column_sql})")
        placeholders = ", ".join("?" for _ in names)
        conn.executemany(
            f"INSERT INTO {quote_ident(table_name)} VALUES ({placeholders})",
            [[cell_text(v) for v in row] for row in rows],
        )

    def execute(self, sql: str) -> tuple[list[tuple] | None, str | None]:
        conn = self._conn()
        admin = parse_admin(sql)
        if admin is not None:
            return self._admin_statement(*admin)
        try:
            translated = mysql_to_sqlite(sql)
        except MysqlSyntaxError as exc:
            return None, str(exc)
        # The deadline covers this statement only; the harness's own queries (hash) never expire.
        self._deadline = time.monotonic() + self.timeout_s
        try:
            cursor = conn.execute(translated)
            rows = cursor.fetchall() if cursor.description else []
        except sqlite3.OperationalError as exc:
            if str(exc) == "interrupted":
                return None, f"query timed out after {self.timeout_s:g} s"
            return None, str(exc)
        except (sqlite3.Error, sqlite3.Warning, ValueError, OverflowError) as exc:
            return None, str(exc)
        finally:
            self._deadline = float("inf")
        return [tuple(normalise_value(v) for v in row) for row in rows], None

    def _admin_statement(self, kind: str, table: str | None) -> tuple[list[tuple] | None, str | None]:
        """SHOW TABLES / DESCRIBE answered in MySQL's result shape, so inspecting looks alike.

        Table names match exactly, as on MySQL under Linux (SQLite itself ignores case).
        """
        conn = self._conn()
        tables = [name for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]
        if kind == "tables":
            return [(name,) for name in tables], None
        if table not in tables:
            return None, f"Table '{table}' doesn't exist"
        info = conn.execute(f"PRAGMA table_info({quote_ident(table)})").fetchall()
        # MySQL's DESCRIBE columns: Field, Type, Null, Key, Default, Extra
        return [
            (name, (decl or "").split()[0].lower() if decl else "", "NO" if notnull else "YES", "PRI" if pk else "", default, "")
            for _, name, decl, notnull, default, pk in info
        ], None

    def table_hash(self, table_name: str, columns: list[str]) -> str:
        """Per-row hashes by the same SQL expression as on MySQL; the final aggregate in Python.

        SQLite's group_concat only accepts ORDER BY from 3.44, so the sort/join/md5 step runs
        here; `combine_row_hashes` reproduces MySQL's group_concat(... ORDER BY ...) exactly.
        """
        cols = ", ".join(quote_ident(n) for n in storage_columns(columns))
        sql = f"SELECT substr(md5(concat_ws(',', {cols})), 1, 5) FROM {quote_ident(table_name)}"
        try:
            hashes = [row[0] for row in self._conn().execute(sql).fetchall()]
        except sqlite3.Error as exc:
            raise SqlExecutionError(str(exc)) from exc
        return combine_row_hashes(hashes)

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None


# ---------------------------------------------------------------- MySQL / MariaDB


def parse_mysql_url(url: str) -> dict:
    """mysql://user:password@host:port -> pymysql.connect kwargs (no database part)."""
    parts = urlsplit(url)
    if parts.scheme not in ("mysql", "mysql+pymysql", "mariadb"):
        raise DataError(f"MySQL URL {url!r} must look like mysql://root@127.0.0.1:3306 (set HS_MYSQL_URL)")
    host = parts.hostname or "127.0.0.1"
    return {
        "host": host,
        "port": parts.port or 3306,
        "user": unquote(parts.username or "root"),
        "password": unquote(parts.password or ""),
        # TLS to a loopback server buys nothing and its context setup costs ~16 ms per
        # connection (two per rollout); remote servers keep pymysql's "preferred" TLS.
        "ssl_disabled": host in ("127.0.0.1", "localhost", "::1"),
    }


class MysqlBackend(SqlBackend):
    """A fresh database `hs_rollout_<16 hex>` on a MariaDB/MySQL server, dropped on close().

    The agent's statements run on a second connection as a throwaway user granted only that
    database, so a rollout can neither read nor drop another rollout's table.
    """

    name = "mysql"

    def __init__(self, url: str | None = None, timeout_s: float = STATEMENT_TIMEOUT_S) -> None:
        import pymysql  # local import: SQLite-only users need no MySQL driver at import time

        self._pymysql = pymysql
        self.url = url or os.environ.get("HS_MYSQL_URL") or DEFAULT_MYSQL_URL
        self._params = parse_mysql_url(self.url)
        self.database = f"hs_rollout_{secrets.token_hex(8)}"
        self._user = self.database[:32]
        self._admin = self._connect(**self._params)
        self._agent = None
        try:
            self._setup(timeout_s)
        except Exception:
            self.close()
            raise

    def _connect(self, **params: object):  # noqa: ANN202 - pymysql connection
        try:
            return self._pymysql.connect(
                charset="utf8mb4", autocommit=True, connect_timeout=5, **params
            )
        except self._pymysql.err.OperationalError as exc:
            raise DataError(
                f"Cannot reach MySQL/MariaDB at {self.url} ({exc.args[-1]}): start it "
                "(e.g. `service mariadb start`) or set HS_MYSQL_URL=mysql://user:pass@host:port"
            ) from exc

    def _setup(self, timeout_s: float) -> None:
        password = secrets.token_hex(12)
        with self._admin.cursor() as cur:
            cur.execute(f"CREATE DATABASE {quote_ident(self.database)} CHARACTER SET utf8mb4 COLLATE {MYSQL_COLLATION}")
            cur.execute(f"CREATE USER '{self._user}'@'%%' IDENTIFIED BY %s", (password,))
            cur.execute(f"GRANT ALL PRIVILEGES ON {quote_ident(self.database)}.* TO '{self._user}'@'%'")
            cur.execute(f"USE {quote_ident(self.database)}")
        self._agent = self._connect(**{**self._params, "user": self._user, "password": password}, database=self.database)
        with self._agent.cursor() as cur:
            # Non-strict mode, as the server that recorded upstream's answer_md5 evidently ran:
            # in strict mode `UPDATE ... WHERE text_col = 16` aborts on the first non-numeric
            # cell (error 1292) and two standard gold updates never apply.
            cur.execute("SET SESSION sql_mode = 'NO_ENGINE_SUBSTITUTION'")
            try:  # MariaDB's per-statement time limit; MySQL proper names it differently.
                cur.execute(f"SET SESSION max_statement_time = {timeout_s:g}")
            except self._pymysql.err.MySQLError:
                pass

    def create_table(self, table_name: str, columns: list[str], rows: list[list]) -> None:
        names = storage_columns(columns)
        column_sql = ", ".join(f"{quote_ident(n)} TEXT" for n in names)
        with self._admin.cursor() as cur:
            cur.execute(f"CREATE TABLE {quote_ident(table_name)} ({column_sql})")
            if rows:
                placeholders = ", ".join("%s" for _ in names)
                cur.executemany(
                    f"INSERT INTO {quote_ident(table_name)} VALUES ({placeholders})",
                    [[cell_text(v) for v in row] for row in rows],
                )

    def execute(self, sql: str) -> tuple[list[tuple] | None, str | None]:
        if self._agent is None:
            raise SqlExecutionError("backend is closed")
        try:
            with self._agent.cursor() as cur:
                cur.execute(sql)
                rows = cur.fetchall() if cur.description else ()
        except self._pymysql.err.MySQLError as exc:
            return None, _mysql_message(exc)
        except (ValueError, UnicodeError) as exc:
            return None, str(exc)
        return [tuple(normalise_value(v) for v in row) for row in rows], None

    def table_hash(self, table_name: str, columns: list[str]) -> str:
        """Upstream's exact hash query, computed by the server."""
        cols = ", ".join(quote_ident(n) for n in storage_columns(columns))
        sql = (
            "SELECT md5(group_concat(rowhash ORDER BY rowhash)) FROM "
            f"(SELECT substring(md5(concat_ws(',', {cols})), 1, 5) AS rowhash "
            f"FROM {quote_ident(table_name)}) AS sub"
        )
        try:
            with self._admin.cursor() as cur:
                cur.execute(sql)
                (value,) = cur.fetchone()
        except self._pymysql.err.MySQLError as exc:
            raise SqlExecutionError(_mysql_message(exc)) from exc
        return value or ""

    def close(self) -> None:
        agent = getattr(self, "_agent", None)
        if agent is not None:
            try:
                agent.close()
            except Exception:  # noqa: BLE001 - closing a dead connection must not mask the real error
                pass
            self._agent = None
        admin = getattr(self, "_admin", None)
        if admin is None:
            return
        try:
            with admin.cursor() as cur:
                cur.execute(f"DROP DATABASE IF EXISTS {quote_ident(self.database)}")
                cur.execute(f"DROP USER IF EXISTS '{self._user}'@'%'")
        finally:
            admin.close()
            self._admin = None


def drop_stale_rollouts(url: str | None = None) -> int:
    """Drop every `hs_rollout_*` database and user left by killed processes; returns how many.

    Only for a server where no rollout is running: it cannot tell stale from live ones.
    """
    import pymysql

    params = parse_mysql_url(url or os.environ.get("HS_MYSQL_URL") or DEFAULT_MYSQL_URL)
    conn = pymysql.connect(charset="utf8mb4", autocommit=True, **params)
    try:
        with conn.cursor() as cur:
            cur.execute("SHOW DATABASES LIKE 'hs\\_rollout\\_%'")
            databases = [name for (name,) in cur.fetchall()]
            for name in databases:
                cur.execute(f"DROP DATABASE IF EXISTS {quote_ident(name)}")
            cur.execute("SELECT user, host FROM mysql.user WHERE user LIKE 'hs\\_rollout\\_%'")
            for user, host in cur.fetchall():
                cur.execute("DROP USER IF EXISTS %s@%s", (user, host))
    finally:
        conn.close()
    return len(databases)


def _mysql_message(exc: Exception) -> str:
    """pymysql errors carry (code, message); show 'code: message' so the agent sees MySQL's own words."""
    if len(exc.args) >= 2:
        return f"{exc.args[0]}: {exc.args[1]}"
    return str(exc)


def make_backend(kind: str = "sqlite", mysql_url: str | None = None) -> SqlBackend:
    """Backend by name, so configs can say `backend: sqlite|mysql`."""
    if kind == "sqlite":
        return SqliteBackend()
    if kind == "mysql":
        return MysqlBackend(mysql_url)
    raise ValueError(f"unknown SQL backend {kind!r}: use 'sqlite' or 'mysql'")
