"""DBBench on MariaDB/MySQL, as upstream ran it: a fresh database and user per rollout.

The agent's statements run as a throwaway user granted only its own database and no stored
programs, views, triggers or events; a watchdog kills what runs past its budget; results are
read unbuffered and capped; the verifier hashes the table as that same user.
"""

from __future__ import annotations

import os
import re
import secrets
import threading
import time
from collections.abc import Callable
from urllib.parse import unquote, urlsplit

from envs.base import DataError
from envs.dbbench.backends import (
    DEFAULT_MYSQL_URL,
    MYSQL_COLLATION,
    STATEMENT_TIMEOUT_S,
    SqlBackend,
    SqlExecutionError,
    SqlResult,
    cell_text,
    quote_ident,
    read_bounded,
    statement_too_long,
    storage_columns,
    timeout_message,
)

# MySQL. What the throwaway rollout user may do on its own database: no views, routines,
# triggers or events, so nothing the agent defines can ever run as another user.
MYSQL_AGENT_PRIVILEGES = (
    "SELECT",
    "INSERT",
    "UPDATE",
    "DELETE",
    "CREATE",
    "DROP",
    "ALTER",
    "INDEX",
    "CREATE TEMPORARY TABLES",
    "LOCK TABLES",
)
# The watchdog sends KILL QUERY this long after the statement's own limit (so the server's
# max_statement_time normally answers first), and KILL CONNECTION after a further grace:
# MariaDB 10.11 does not stop `LOOP DO SLEEP(0.1); END LOOP` on KILL QUERY.
WATCHDOG_SLACK_S = 0.25
WATCHDOG_GRACE_S = 1.0
HASH_TIMEOUT_S = 30  # the verifier's own hash query (max_statement_time, lock_wait_timeout)
_MYSQL_TIMEOUT_CODES = frozenset({1969, 3024})  # max_statement_time, MySQL's max_execution_time
# No privilege governs CREATE/ALTER TABLE ... DATA|INDEX DIRECTORY = '/path' on MariaDB: any
# user with CREATE can make mysqld create directories and table files wherever it may write
# (only the server's --skip-symbolic-links turns it off). The session runs with
# NO_DIR_IN_CREATE, but the agent may change its sql_mode and may build a statement from
# strings (PREPARE, EXECUTE IMMEDIATE), and a lexer would have to agree with the server's
# sql_mode on what is a string; so these words are refused anywhere in the text. DBBench SQL
# and data never contain them.
_MYSQL_REFUSED_WORDS = re.compile(r"(?<![a-z0-9_$])(directory|prepare|execute)(?![a-z0-9_$])", re.IGNORECASE | re.ASCII)
_MYSQL_CONNECTION_LOST_CODES = frozenset({1927, 2006, 2013})  # killed, gone away, lost


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


class StatementWatchdog:
    """Stops an agent statement that runs past its budget, from separate admin connections.

    MariaDB's max_statement_time applies to each statement inside a stored program or an
    anonymous `BEGIN NOT ATOMIC ... END` block, so a loop of short SLEEPs never trips it (and
    the agent may switch it off). At `budget_s` this sends KILL QUERY; if the statement is
    still running `grace_s` later, KILL CONNECTION (the caller then reconnects). `kill(how)`
    issues the KILL; after the `with` block no KILL can arrive any more.
    """

    def __init__(self, kill: Callable[[str], None], budget_s: float, grace_s: float = WATCHDOG_GRACE_S) -> None:
        self._kill = kill
        self._budget_s = budget_s
        self._grace_s = grace_s
        self._lock = threading.Lock()
        self._finished = False
        self._timer: threading.Timer | None = None
        self.timed_out = False
        self.connection_killed = False

    def __enter__(self) -> StatementWatchdog:
        self._schedule(self._budget_s, self._on_budget)
        return self

    def __exit__(self, *exc: object) -> None:
        with self._lock:  # waits for a KILL in flight
            self._finished = True
            timer = self._timer
        if timer is not None:
            timer.cancel()

    def _schedule(self, delay_s: float, action: Callable[[], None]) -> None:
        self._timer = threading.Timer(delay_s, action)
        self._timer.daemon = True
        self._timer.start()

    def _on_budget(self) -> None:
        with self._lock:
            if self._finished:
                return
            self.timed_out = True
            self._kill("QUERY")
            self._schedule(self._grace_s, self._on_grace)

    def _on_grace(self) -> None:
        with self._lock:
            if self._finished:
                return
            self.connection_killed = True
            self._kill("CONNECTION")


class MysqlBackend(SqlBackend):
    """A fresh database `hs_rollout_<16 hex>` on a MariaDB/MySQL server, dropped on close().

    The agent's statements run on a second connection as a throwaway user granted only
    MYSQL_AGENT_PRIVILEGES on that database, so a rollout can neither read nor drop another
    rollout's table, nor define code (views, routines, triggers, events) that someone else
    would run. The verifier hashes the table on a fresh connection as that same user.
    """

    name = "mysql"

    def __init__(self, url: str | None = None, timeout_s: float = STATEMENT_TIMEOUT_S) -> None:
        import pymysql  # local import: SQLite-only users need no MySQL driver at import time
        import pymysql.cursors

        self._pymysql = pymysql
        self.url = url or os.environ.get("HS_MYSQL_URL") or DEFAULT_MYSQL_URL
        self._params = parse_mysql_url(self.url)
        self.timeout_s = timeout_s
        self.database = f"hs_rollout_{secrets.token_hex(8)}"
        self._user = self.database[:32]
        self._password = secrets.token_hex(12)
        self._agent = None
        self._admin = self._connect(**self._params)
        try:
            self._setup()
        except Exception:
            self.close()
            raise

    def _connect(self, **params: object):  # pymysql connection
        try:
            return self._pymysql.connect(charset="utf8mb4", autocommit=True, connect_timeout=5, **params)
        except self._pymysql.err.OperationalError as exc:
            raise DataError(
                f"Cannot reach MySQL/MariaDB at {self.url} ({exc.args[-1]}): start it "
                "(e.g. `service mariadb start`) or set HS_MYSQL_URL=mysql://user:pass@host:port"
            ) from exc

    def _setup(self) -> None:
        with self._admin.cursor() as cur:
            cur.execute("SET SESSION lock_wait_timeout = 30")  # close() must not wait a day on an agent's lock
            cur.execute(f"CREATE DATABASE {quote_ident(self.database)} CHARACTER SET utf8mb4 COLLATE {MYSQL_COLLATION}")
            cur.execute(f"CREATE USER '{self._user}'@'%%' IDENTIFIED BY %s", (self._password,))
            privileges = ", ".join(MYSQL_AGENT_PRIVILEGES)
            cur.execute(f"GRANT {privileges} ON {quote_ident(self.database)}.* TO '{self._user}'@'%'")
            cur.execute(f"USE {quote_ident(self.database)}")
        self._agent = self._open_agent()

    def _connect_as_agent(self, **extra: object):  # pymysql connection
        return self._connect(
            **{**self._params, "user": self._user, "password": self._password}, database=self.database, **extra
        )

    def _open_agent(self):  # pymysql connection
        # read_timeout is the last resort should neither KILL get through.
        conn = self._connect_as_agent(read_timeout=self.timeout_s + 30)
        with conn.cursor() as cur:
            # Non-strict mode, as the server that recorded upstream's answer_md5 evidently ran:
            # in strict mode `UPDATE ... WHERE text_col = 16` aborts on the first non-numeric
            # cell (error 1292) and two standard gold updates never apply. NO_DIR_IN_CREATE:
            # see _MYSQL_REFUSED_WORDS.
            cur.execute("SET SESSION sql_mode = 'NO_ENGINE_SUBSTITUTION,NO_DIR_IN_CREATE'")
            self._set_statement_time(cur, self.timeout_s)
        return conn

    def _set_statement_time(self, cur, seconds: float) -> None:  # pymysql cursor
        try:  # MariaDB's per-statement time limit; MySQL proper names it differently.
            cur.execute(f"SET SESSION max_statement_time = {seconds:g}")
        except self._pymysql.err.MySQLError:
            pass

    def _agent_connection(self):  # pymysql connection
        """The agent's connection, reopened if a KILL (or the agent itself) closed it."""
        if self._agent is not None and not self._agent.open:
            self._agent = None
        if self._agent is None:
            self._agent = self._open_agent()
        return self._agent

    def _kill(self, how: str, thread_id: int) -> None:
        """KILL QUERY/CONNECTION of one server thread, from a short-lived admin connection."""
        try:
            conn = self._pymysql.connect(
                charset="utf8mb4", autocommit=True, connect_timeout=3, read_timeout=5, write_timeout=5, **self._params
            )
        except self._pymysql.err.MySQLError:
            return  # the agent connection's read_timeout still ends the wait
        try:
            with conn.cursor() as cur:
                cur.execute(f"KILL {how} {int(thread_id)}")
        except self._pymysql.err.MySQLError:
            pass  # already gone (1094: unknown thread)
        finally:
            conn.close()

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

    def execute(self, sql: str) -> SqlResult:
        """Run the statement unbuffered under a StatementWatchdog; read at most the result caps.

        When the output is cut short the statement is stopped (KILL QUERY) and what is left is
        drained with the watchdog still running, so a huge result is never held in memory.
        """
        if self._admin is None:
            raise SqlExecutionError("backend is closed")
        too_long = statement_too_long(sql)
        if too_long is not None:
            return too_long
        refused = _MYSQL_REFUSED_WORDS.search(sql)
        if refused is not None:
            return SqlResult(
                error=f"'{refused.group(0)}' is not available here: table files stay in the server's "
                "data directory and statements cannot be built from strings"
            )
        try:
            conn = self._agent_connection()
        except DataError as exc:
            return SqlResult(error=f"the connection was lost and could not be reopened ({exc})")
        thread_id = conn.thread_id()
        rows: list[tuple] = []
        truncated, error, code = False, None, None
        watchdog = StatementWatchdog(lambda how: self._kill(how, thread_id), self.timeout_s + WATCHDOG_SLACK_S)
        started = time.monotonic()
        try:
            with watchdog:
                cur = conn.cursor(self._pymysql.cursors.SSCursor)
                try:
                    cur.execute(sql)
                    if cur.description:
                        rows, truncated = read_bounded(iter(cur.fetchone, None))
                    if truncated:
                        self._kill("QUERY", thread_id)  # nobody reads the rest: stop producing it
                    _drain(cur)
                except self._pymysql.err.MySQLError as exc:
                    if not truncated:  # after our own KILL the interruption is expected
                        error, code = _mysql_message(exc), exc.args[0] if exc.args else None
                except (ValueError, UnicodeError) as exc:
                    error = str(exc)
                finally:
                    try:
                        cur.close()
                    except Exception:  # noqa: BLE001 - the connection may already be gone
                        pass
        except BaseException:
            self._discard_agent()  # unknown protocol state: never reuse it
            raise
        elapsed = time.monotonic() - started
        if watchdog.connection_killed or not conn.open or code in _MYSQL_CONNECTION_LOST_CODES:
            self._discard_agent()
        # After a KILL or max_statement_time, BENCHMARK() returns 0 and SLEEP() 1 without an
        # error, so a statement that used its whole budget counts as timed out whatever it returned.
        if (watchdog.timed_out or code in _MYSQL_TIMEOUT_CODES or elapsed >= self.timeout_s) and not truncated:
            reset = "; the session was reset (TEMPORARY tables and variables are gone)"
            return SqlResult(error=timeout_message(self.timeout_s) + (reset if watchdog.connection_killed else ""))
        if error is not None:
            return SqlResult(error=error)
        return SqlResult(rows=rows, truncated=truncated)

    def _discard_agent(self) -> None:
        agent, self._agent = self._agent, None
        if agent is not None:
            try:
                agent.close()
            except Exception:  # noqa: BLE001 - closing a dead connection must not mask the real error
                pass

    def _drop_stored_programs(self) -> None:
        """Drop every routine, view, trigger and event in the rollout database (defence in depth:
        the agent user cannot create them, so normally there is nothing to drop)."""
        with self._admin.cursor() as cur:
            cur.execute(
                "SELECT ROUTINE_TYPE, ROUTINE_NAME FROM information_schema.ROUTINES WHERE ROUTINE_SCHEMA = %s "
                "UNION ALL SELECT 'VIEW', TABLE_NAME FROM information_schema.VIEWS WHERE TABLE_SCHEMA = %s "
                "UNION ALL SELECT 'TRIGGER', TRIGGER_NAME FROM information_schema.TRIGGERS WHERE TRIGGER_SCHEMA = %s "
                "UNION ALL SELECT 'EVENT', EVENT_NAME FROM information_schema.EVENTS WHERE EVENT_SCHEMA = %s",
                (self.database,) * 4,
            )
            found = cur.fetchall()
            # a PACKAGE BODY goes before its PACKAGE
            for kind, name in sorted(found, key=lambda item: item[0] != "PACKAGE BODY"):
                cur.execute(f"DROP {kind} IF EXISTS {quote_ident(self.database)}.{quote_ident(name)}")

    @staticmethod
    def _require_base_table(cur, table_name: str) -> None:  # pymysql cursor
        """Raise SqlExecutionError unless `table_name` is a BASE TABLE (exact name, as on Linux)."""
        cur.execute("SELECT TABLE_NAME, TABLE_TYPE FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE()")
        kind = dict(cur.fetchall()).get(table_name)
        if kind != "BASE TABLE":
            what = "does not exist" if kind is None else f"is a {kind.lower()}, not a base table"
            raise SqlExecutionError(f"'{table_name}' {what}")

    def table_hash(self, table_name: str, columns: list[str]) -> str:
        """Upstream's exact hash query, computed by the server as the rollout's own user.

        Never as root: whatever the agent left behind runs with the agent's rights only. The
        name must be a BASE TABLE (a view or a missing table raises SqlExecutionError).
        """
        if self._admin is None:
            raise SqlExecutionError("backend is closed")
        try:
            self._drop_stored_programs()
            conn = self._connect_as_agent(read_timeout=HASH_TIMEOUT_S + 10)
        except (DataError, self._pymysql.err.MySQLError) as exc:
            raise SqlExecutionError(f"cannot hash {table_name!r}: {exc}") from exc
        cols = ", ".join(quote_ident(n) for n in storage_columns(columns))
        sql = (
            "SELECT md5(group_concat(rowhash ORDER BY rowhash)) FROM "
            f"(SELECT substring(md5(concat_ws(',', {cols})), 1, 5) AS rowhash "
            f"FROM {quote_ident(table_name)}) AS sub"
        )
        try:
            with conn.cursor() as cur:
                cur.execute(f"SET SESSION lock_wait_timeout = {HASH_TIMEOUT_S}")
                self._set_statement_time(cur, HASH_TIMEOUT_S)
                self._require_base_table(cur, table_name)
                cur.execute(sql)
                (value,) = cur.fetchone()
        except self._pymysql.err.MySQLError as exc:
            raise SqlExecutionError(_mysql_message(exc)) from exc
        finally:
            conn.close()
        return value or ""

    def close(self) -> None:
        self._discard_agent()
        admin = getattr(self, "_admin", None)
        if admin is None:
            return
        try:
            with admin.cursor() as cur:
                # A statement the client gave up on may still run on the server: end it first.
                cur.execute("SELECT ID FROM information_schema.PROCESSLIST WHERE USER = %s", (self._user,))
                for (thread_id,) in cur.fetchall():
                    try:
                        cur.execute(f"KILL CONNECTION {int(thread_id)}")
                    except self._pymysql.err.MySQLError:
                        pass
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


def _drain(cur) -> None:  # pymysql SSCursor
    """Read and discard what is left of an unbuffered statement: rows, then further result sets.

    (SSCursor.close() can leave a later result set unread for the next statement to drain.)
    """
    while True:
        while cur.fetchone() is not None:
            pass
        if not cur.nextset():
            return


def _mysql_message(exc: Exception) -> str:
    """pymysql errors carry (code, message); show 'code: message' so the agent sees MySQL's own words."""
    if len(exc.args) >= 2:
        return f"{exc.args[0]}: {exc.args[1]}"
    return str(exc)
