"""The default DBBench backend: a fresh in-memory SQLite database per rollout, no server.

It adds the MySQL functions and the case/accent-insensitive string comparison that the gold SQL
relies on (envs/dbbench/README.md lists every rule), and bounds what one agent statement may
cost: time, value size, database and TEMP size, heap, rows and characters read back; files,
PRAGMAs that write and code-loading functions are refused.
"""

from __future__ import annotations

import hashlib
import re
import sqlite3
import threading
import time
from collections.abc import Callable

from envs.dbbench.backends import (
    MAX_SQL_CHARS,
    STATEMENT_TIMEOUT_S,
    SqlBackend,
    SqlExecutionError,
    SqlResult,
    cell_text,
    combine_row_hashes,
    mysql_collate,
    mysql_text,
    quote_ident,
    read_bounded,
    statement_too_long,
    storage_columns,
    timeout_message,
)
from envs.dbbench.sqlite_dialect import MysqlSyntaxError, mysql_to_sqlite, parse_admin

# SQLite. LENGTH bounds every string/blob value and row (MySQL's TEXT holds 65,535 bytes);
# the page limits bound the rollout's database and its TEMP tables.
SQLITE_MAX_VALUE_BYTES = 1_000_000
SQLITE_MAX_COLUMNS = 64  # the widest DBBench table has 17; so a result row holds at most 64 MB
SQLITE_PAGE_BYTES = 4096
SQLITE_MAX_DB_BYTES = 64 * 2**20
SQLITE_MAX_TEMP_BYTES = 16 * 2**20
# FILE, not MEMORY: with temp storage in memory SQLite sorts a whole ORDER BY / GROUP BY in
# one VM step, which the deadline cannot interrupt, and the MYSQL collation is a Python call
# per comparison: a 5M-row sort ran 22 s (1M rows: 11 s) and held 250 MB. With FILE the sorter
# spills sorted runs of ~2 MB and stays interruptible (5.1 s, 27 MB RSS). Its temp files are
# unlinked when created (never visible) and hold at most what one statement writes before its
# deadline (measured: up to 1.7 GB for 5 s of a blob sort), freed when the statement ends.
SQLITE_TEMP_STORE = "FILE"
# Heap limits are process-wide in SQLite (every connection in the process, including a
# SQLite trajectory database). Normal rollouts need well under 1 MiB each (the largest table
# is 105 rows x 17 short cells), so these only ever stop a runaway sort or DISTINCT set; a
# hostile rollout can hold at most 80 MiB (database + temp) between statements. The soft
# limit only makes SQLite return cache memory sooner; the hard limit makes an allocation past
# it fail with "out of memory" (an error observation), never crash the process.
SQLITE_SOFT_HEAP_LIMIT = 128 * 2**20
SQLITE_HARD_HEAP_LIMIT = 256 * 2**20
# Read-only PRAGMAs an agent (and SHOW/DESCRIBE emulation) may use; every other one is denied.
SQLITE_ALLOWED_PRAGMAS = frozenset(
    {"table_info", "table_xinfo", "table_list", "index_list", "index_info", "index_xinfo", "foreign_key_list"}
)
# load_extension loads code; fts3_tokenizer hands out and accepts raw pointers. (printf and
# format are replaced by a refusal instead: SQLite's own ALTER TABLE ADD COLUMN calls printf.)
SQLITE_DENIED_FUNCTIONS = frozenset({"load_extension", "fts3_tokenizer"})
# ATTACH/DETACH reach files (VACUUM INTO attaches its target file too); virtual tables are
# not needed by DBBench and some modules create many shadow tables.
_SQLITE_DENIED_ACTIONS = frozenset(
    {sqlite3.SQLITE_ATTACH, sqlite3.SQLITE_DETACH, sqlite3.SQLITE_CREATE_VTABLE, sqlite3.SQLITE_DROP_VTABLE}
)

_VALUE_TOO_BIG = f"string or blob too big (values are limited to {SQLITE_MAX_VALUE_BYTES:,} bytes)"
# sqlite3 reports any exception in a Python function as "user-defined function raised
# exception"; a shim leaves its own message here for SqliteBackend.execute to show.
_shim_refusal = threading.local()


class _ShimRefusal(Exception):
    def __init__(self, message: str) -> None:
        super().__init__(message)
        _shim_refusal.message = message


def _check_size(n_chars: int) -> None:
    """Refuse a result over SQLITE_MAX_VALUE_BYTES before building it.

    Characters never outnumber UTF-8 bytes, so this only refuses what SQLite would refuse.
    """
    if n_chars > SQLITE_MAX_VALUE_BYTES:
        raise _ShimRefusal(_VALUE_TOO_BIG)


def _no_printf(*_: object) -> None:
    # SQLite's printf('%.*c', 1000000000, 'x') runs for seconds inside one VM step, and MySQL
    # has no printf (its FORMAT(X, D) means something else). SQLite's own ALTER TABLE still
    # uses the built-in: internal SQL prefers built-in functions over these.
    raise _ShimRefusal("printf() and format() are not available (MySQL has no printf; use CONCAT())")


def _raw_size(args: tuple) -> int:
    """A lower bound of the UTF-8 bytes the arguments' text takes, known before decoding blobs."""
    return sum(len(a) for a in args if isinstance(a, (str, bytes, bytearray)))


def _concat(*args: object) -> str | None:
    if any(a is None for a in args):
        return None
    _check_size(_raw_size(args))  # before decoding 60 one-megabyte blobs into text
    texts = [mysql_text(a) for a in args]
    _check_size(sum(len(t) for t in texts))  # type: ignore[arg-type]
    return "".join(texts)  # type: ignore[arg-type]


def _concat_ws(sep: object, *args: object) -> str | None:
    if sep is None:
        return None
    _check_size(_raw_size(args))
    texts = [t for t in (mysql_text(a) for a in args) if t is not None]
    separator = mysql_text(sep)
    _check_size(sum(len(t) for t in texts) + len(separator) * max(len(texts) - 1, 0))  # type: ignore[arg-type]
    return separator.join(texts)  # type: ignore[union-attr]


# SQLite's own instr(), replace() and two-argument trim() compare every position of one
# argument with every position of the other: on two 1 MB values one call runs for minutes
# inside a single VM step, where the statement deadline cannot stop it. These linear
# versions keep SQLite's results for text and numbers.


def _sqlite_text(value: object) -> str | None:
    """A value as SQLite's text conversion gives it (REAL as '%!.15g': 1.0 -> '1.0')."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).decode("utf-8", errors="replace")
    if isinstance(value, float):
        text = format(value, ".15g")
        if text.lstrip("-").isdigit():
            return text + ".0"
        if "e" in text and "." not in text:
            mantissa, exponent = text.split("e")
            return f"{mantissa}.0e{exponent}"
        return text
    return str(value)


def _instr(haystack: object, needle: object) -> int | None:
    if haystack is None or needle is None:
        return None
    if isinstance(needle, (bytes, bytearray)):  # SQLite: a blob needle searches bytes
        data = haystack if isinstance(haystack, (bytes, bytearray)) else (_sqlite_text(haystack) or "").encode("utf-8")
        return bytes(data).find(bytes(needle)) + 1
    return (_sqlite_text(haystack) or "").find(_sqlite_text(needle) or "") + 1


def _replace(value: object, pattern: object, replacement: object) -> object:
    if value is None or pattern is None:
        return None
    old = _sqlite_text(pattern) or ""
    if old == "":
        return value  # SQLite returns the first argument unchanged
    if replacement is None:
        return None
    text, new = _sqlite_text(value) or "", _sqlite_text(replacement) or ""
    _check_size(len(text) + text.count(old) * (len(new) - len(old)))
    return text.replace(old, new)


def _trimmer(left: bool, right: bool) -> Callable[[object, object], str | None]:
    def trim(value: object, characters: object) -> str | None:
        if value is None or characters is None:
            return None
        text, drop = _sqlite_text(value) or "", set(_sqlite_text(characters) or "")
        start, end = 0, len(text)
        while left and start < end and text[start] in drop:
            start += 1
        while right and end > start and text[end - 1] in drop:
            end -= 1
        return text[start:end]

    return trim


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


def _case(fn):  # tiny adapter for lcase/ucase
    # (LEFT/RIGHT cannot be added: they are SQLite keywords, so calls never reach a function.)
    return lambda value: None if value is None else fn(mysql_text(value))


# Collation choices measured against the gold INSERT/UPDATE hashes (README.md): "mysql" is
# the MySQL-like Python collation, "nocase" SQLite's ASCII-only one, "binary" exact bytes.
SQLITE_COLLATIONS = ("mysql", "nocase", "binary")


def _configure_sqlite_heap(conn: sqlite3.Connection) -> None:
    """Set the process-wide heap limits, never raising one already lower (see the constants)."""
    for pragma, limit in (("hard_heap_limit", SQLITE_HARD_HEAP_LIMIT), ("soft_heap_limit", SQLITE_SOFT_HEAP_LIMIT)):
        (current,) = conn.execute(f"PRAGMA {pragma}").fetchone()
        if current == 0 or current > limit:
            conn.execute(f"PRAGMA {pragma} = {limit}")


def _sqlite_message(exc: Exception) -> str:
    """SQLite's message, with the limit named where one was hit."""
    text = str(exc)
    if text == "user-defined function raised exception":
        return getattr(_shim_refusal, "message", None) or text
    if text == "string or blob too big":
        return _VALUE_TOO_BIG
    if text == "database or disk is full":
        return (
            f"database or disk is full (the database is limited to {SQLITE_MAX_DB_BYTES // 2**20} MiB, "
            f"TEMP tables to {SQLITE_MAX_TEMP_BYTES // 2**20} MiB)"
        )
    return text


class SqliteBackend(SqlBackend):
    """A fresh in-memory SQLite database, so rollouts are isolated for free and need no server."""

    name = "sqlite"

    def __init__(self, collation: str = "mysql", timeout_s: float = STATEMENT_TIMEOUT_S) -> None:
        if collation not in SQLITE_COLLATIONS:
            raise ValueError(f"collation must be one of {SQLITE_COLLATIONS}, got {collation!r}")
        self.collation = collation
        self.timeout_s = timeout_s
        self._deadline = float("inf")
        self._expired = False  # the MYSQL collation saw the deadline pass (see _collate)
        self.conn: sqlite3.Connection | None = sqlite3.connect(":memory:", isolation_level=None)
        self._apply_limits(self.conn)
        self._install_shims(self.conn)

    @staticmethod
    def _apply_limits(conn: sqlite3.Connection) -> None:
        """Size limits (README.md, "Limits"); set before the authorizer, which denies these PRAGMAs."""
        conn.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, SQLITE_MAX_VALUE_BYTES)
        conn.setlimit(sqlite3.SQLITE_LIMIT_SQL_LENGTH, MAX_SQL_CHARS * 2)  # room for the dialect rewrite
        conn.setlimit(sqlite3.SQLITE_LIMIT_COLUMN, SQLITE_MAX_COLUMNS)
        conn.setlimit(sqlite3.SQLITE_LIMIT_ATTACHED, 0)
        conn.execute(f"PRAGMA temp_store = {SQLITE_TEMP_STORE}")
        conn.execute(f"PRAGMA main.max_page_count = {SQLITE_MAX_DB_BYTES // SQLITE_PAGE_BYTES}")
        conn.execute(f"PRAGMA temp.max_page_count = {SQLITE_MAX_TEMP_BYTES // SQLITE_PAGE_BYTES}")
        _configure_sqlite_heap(conn)

    def _install_shims(self, conn: sqlite3.Connection) -> None:
        """Add the MySQL functions/collation that gold SQL and the hash query use, plus guards."""
        conn.create_collation("MYSQL", self._collate)
        conn.create_function("md5", 1, _md5, deterministic=True)
        conn.create_function("concat", -1, _concat, deterministic=True)
        conn.create_function("concat_ws", -1, _concat_ws, deterministic=True)
        conn.create_aggregate("sum", 1, _MysqlSum)
        conn.create_function("lcase", 1, _case(str.lower), deterministic=True)
        conn.create_function("ucase", 1, _case(str.upper), deterministic=True)
        conn.create_function("instr", 2, _instr, deterministic=True)
        conn.create_function("replace", 3, _replace, deterministic=True)
        conn.create_function("trim", 2, _trimmer(True, True), deterministic=True)
        conn.create_function("ltrim", 2, _trimmer(True, False), deterministic=True)
        conn.create_function("rtrim", 2, _trimmer(False, True), deterministic=True)
        conn.create_function("printf", -1, _no_printf, deterministic=True)
        conn.create_function("format", -1, _no_printf, deterministic=True)
        # An agent must not reach files, change limits or load code.
        conn.set_authorizer(self._authorize)
        # A runaway query (e.g. a huge cross join) must not stall the rollout worker.
        conn.set_progress_handler(lambda: 1 if time.monotonic() > self._deadline else 0, 10_000)

    def _collate(self, left: str, right: str) -> int:
        """The MYSQL collation; past the deadline it answers "equal" at once.

        A sort compares inside one VM step, where the progress handler cannot stop it; with
        cheap comparisons the sort ends quickly and the statement is reported as timed out.
        """
        if time.monotonic() > self._deadline:
            self._expired = True
            return 0
        return mysql_collate(left, right)

    @staticmethod
    def _authorize(action: int, arg1: str | None, arg2: str | None, *_: object) -> int:
        if action in _SQLITE_DENIED_ACTIONS:
            return sqlite3.SQLITE_DENY
        if action == sqlite3.SQLITE_PRAGMA:
            return sqlite3.SQLITE_OK if (arg1 or "").lower() in SQLITE_ALLOWED_PRAGMAS else sqlite3.SQLITE_DENY
        if action == sqlite3.SQLITE_FUNCTION and (arg2 or "").lower() in SQLITE_DENIED_FUNCTIONS:
            return sqlite3.SQLITE_DENY
        return sqlite3.SQLITE_OK

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

    def execute(self, sql: str) -> SqlResult:
        conn = self._conn()
        too_long = statement_too_long(sql)
        if too_long is not None:
            return too_long
        admin = parse_admin(sql)
        if admin is not None:
            return self._admin_statement(*admin)
        try:
            translated = mysql_to_sqlite(sql)
        except MysqlSyntaxError as exc:
            return SqlResult(error=str(exc))
        # The deadline covers this statement only; the harness's own queries (hash) never expire.
        self._deadline = time.monotonic() + self.timeout_s
        self._expired = False
        _shim_refusal.message = None
        cursor = None
        try:
            cursor = conn.execute(translated)
            rows, truncated = read_bounded(cursor) if cursor.description else ([], False)
        except sqlite3.OperationalError as exc:
            if str(exc) == "interrupted":
                return SqlResult(error=timeout_message(self.timeout_s))
            return SqlResult(error=_sqlite_message(exc))
        except (sqlite3.Error, sqlite3.Warning, ValueError, OverflowError) as exc:
            return SqlResult(error=_sqlite_message(exc))
        except MemoryError:  # SQLITE_NOMEM past the hard heap limit, or Python itself
            return SqlResult(error=f"out of memory (SQLite may use {SQLITE_HARD_HEAP_LIMIT // 2**20} MiB in all)")
        finally:
            self._deadline = float("inf")
            if cursor is not None:
                cursor.close()  # also stops a statement whose output was cut short
        if self._expired:
            return SqlResult(error=timeout_message(self.timeout_s))
        return SqlResult(rows=rows, truncated=truncated)

    def _admin_statement(self, kind: str, table: str | None) -> SqlResult:
        """SHOW TABLES / DESCRIBE answered in MySQL's result shape, so inspecting looks alike.

        Table names match exactly, as on MySQL under Linux (SQLite itself ignores case).
        """
        conn = self._conn()
        tables = [name for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]
        if kind == "tables":
            rows, truncated = read_bounded((name,) for name in tables)
            return SqlResult(rows=rows, truncated=truncated)
        if table not in tables:
            return SqlResult(error=f"Table '{table}' doesn't exist")
        info = conn.execute(f"PRAGMA table_info({quote_ident(table)})").fetchall()
        # MySQL's DESCRIBE columns: Field, Type, Null, Key, Default, Extra
        return SqlResult(
            rows=[
                (
                    name,
                    (decl or "").split()[0].lower() if decl else "",
                    "NO" if notnull else "YES",
                    "PRI" if pk else "",
                    default,
                    "",
                )
                for _, name, decl, notnull, default, pk in info
            ]
        )

    def table_hash(self, table_name: str, columns: list[str]) -> str:
        """Per-row hashes by the same SQL expression as on MySQL; the final aggregate in Python.

        SQLite's group_concat only accepts ORDER BY from 3.44, so the sort/join/md5 step runs
        here; `combine_row_hashes` reproduces MySQL's group_concat(... ORDER BY ...) exactly.
        Only a table of the main database counts (not a view, not a TEMP table of that name),
        as on MySQL.
        """
        conn = self._conn()
        found = conn.execute(
            "SELECT type FROM main.sqlite_master WHERE name = ? COLLATE NOCASE AND type IN ('table', 'view')",
            (table_name,),
        ).fetchone()
        if found is None or found[0] != "table":
            kind = "does not exist" if found is None else f"is a {found[0]}, not a table"
            raise SqlExecutionError(f"'{table_name}' {kind}")
        cols = ", ".join(quote_ident(n) for n in storage_columns(columns))
        sql = f"SELECT substr(md5(concat_ws(',', {cols})), 1, 5) FROM main.{quote_ident(table_name)}"
        try:
            hashes = [row[0] for row in conn.execute(sql).fetchall()]
        except (sqlite3.Error, MemoryError) as exc:
            raise SqlExecutionError(str(exc) or "out of memory") from exc
        return combine_row_hashes(hashes)

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None
