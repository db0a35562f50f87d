"""SQL backends for DBBench rollouts: what both engines share, and the factory.

Upstream DBBench runs every task on MySQL with all columns TEXT and judges INSERT/UPDATE tasks
by a hash of the whole table. Both backends (sqlite_backend.py: in-memory SQLite, the default,
no server; mysql_backend.py: MariaDB/MySQL) build the same TEXT table, answer with the same
result format and compute the same hash, so a run can move from a laptop (SQLite) to a shared
MariaDB without changing what "success" means.

Every agent statement is hostile input: both backends bound its time (STATEMENT_TIMEOUT_S,
enforced from outside the statement), the rows and characters read back (MAX_RESULT_ROWS,
MAX_RESULT_CHARS) and the statement length (MAX_SQL_CHARS); SQLite also bounds memory and
database size, MySQL runs it as a user who can only touch its own tables. README.md, "Limits".
"""

from __future__ import annotations

import datetime
import decimal
import hashlib
import unicodedata
from abc import ABC, abstractmethod
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

DEFAULT_MYSQL_URL = "mysql://root@127.0.0.1:3306"
STATEMENT_TIMEOUT_S = 5.0
# Close to MySQL 8's default utf8mb4_0900_ai_ci (upstream's server): case- and accent-
# insensitive, no trailing-space padding. See README.md for the measured effect.
MYSQL_COLLATION = "utf8mb4_uca1400_nopad_ai_ci"

# What one agent statement may cost (README.md, "Limits"). A result is read row by row and
# reading stops at whichever cap comes first; the observation then says so.
MAX_RESULT_ROWS = 1_000
MAX_RESULT_CHARS = 1_000_000  # of the printed result, i.e. len(format_rows(rows))
MAX_SQL_CHARS = 100_000  # statement text; gold SQL is under 1,500 characters


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


@dataclass(frozen=True)
class SqlResult:
    """What one agent statement gave: rows ([] for a statement without a result set), or an error.

    `truncated` means `rows` is only the first part of the result: reading stopped at
    MAX_RESULT_ROWS rows or MAX_RESULT_CHARS printed characters.
    """

    rows: list[tuple] | None = None  # None when the statement failed
    error: str | None = None
    truncated: bool = False


def truncation_note(n_rows: int) -> str:
    return (
        f"[output truncated: showing the first {n_rows} rows; at most {MAX_RESULT_ROWS:,} rows "
        f"and {MAX_RESULT_CHARS:,} characters are shown]"
    )


def format_rows(rows: list[tuple], truncated: bool = False) -> str:
    """Observation text for a result, as upstream printed it: str() of the list of row tuples.

    A truncated result gets one more line saying so.
    """
    text = str(rows)
    return f"{text}\n{truncation_note(len(rows))}" if truncated else text


def _raw_length(row: Sequence) -> int:
    """Characters a row's text and blob cells print at least (checked before decoding them)."""
    return sum(len(v) for v in row if isinstance(v, (str, bytes, bytearray)))


def read_bounded(rows: Iterable[Sequence]) -> tuple[list[tuple], bool]:
    """Normalised rows until the result ends (False) or the next row would pass a cap (True).

    The size counted is the printed form (what format_rows shows). Each raw row is measured
    before it is decoded and printed, so an oversized row costs no more than the driver has
    already spent fetching it. The caller stops the statement when this returns True.
    """
    kept: list[tuple] = []
    size = 2  # "[]"
    for raw in rows:
        if len(kept) >= MAX_RESULT_ROWS or size + _raw_length(raw) > MAX_RESULT_CHARS:
            return kept, True
        row = tuple(normalise_value(v) for v in raw)
        size += len(repr(row)) + (2 if kept else 0)  # ", " between rows
        if size > MAX_RESULT_CHARS:
            return kept, True
        kept.append(row)
    return kept, False


def statement_too_long(sql: str) -> SqlResult | None:
    """An error result for SQL longer than MAX_SQL_CHARS, else None."""
    if len(sql) <= MAX_SQL_CHARS:
        return None
    return SqlResult(error=f"statement too long: {len(sql):,} characters (at most {MAX_SQL_CHARS:,})")


def timeout_message(timeout_s: float) -> str:
    return f"query timed out after {timeout_s:g} s"


class SqlBackend(ABC):
    """One rollout's private database holding one table; close() drops everything it created."""

    name: str

    @abstractmethod
    def create_table(self, table_name: str, columns: list[str], rows: list[list]) -> None:
        """Create the TEXT table and load the rows."""

    @abstractmethod
    def execute(self, sql: str) -> SqlResult:
        """Run one agent statement within the limits above; SQL errors come back in the result."""

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


def mysql_collation_key(text: str) -> str:
    """Accent- and case-insensitive key, no trailing-space padding (as utf8mb4_0900_ai_ci)."""
    decomposed = unicodedata.normalize("NFKD", text)
    return "".join(ch for ch in decomposed if not unicodedata.combining(ch)).casefold()


def mysql_collate(left: str, right: str) -> int:
    a, b = mysql_collation_key(left), mysql_collation_key(right)
    return (a > b) - (a < b)
