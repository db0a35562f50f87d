"""Agent SQL is hostile input: every statement stays bounded and isolated on both backends.

Each case runs through `DbBenchEnv` (reset, the statements, verify) and must
- answer every statement with an error or a bounded result (at most OBSERVATION_BOUND
  characters) and never raise out of `env.step`,
- return within WALL_BUDGET_S per statement (the 5 s statement limit plus a margin for the
  MySQL watchdog's KILL QUERY -> KILL CONNECTION escalation and a loaded machine): an isolation
  check, not a speed benchmark,
- leave nothing outside the episode changed: no sentinel file under tmp_path (for MySQL in a
  folder the server process could write to), and on MySQL a canary table in a separate
  database (made by root), another rollout's table, the user list and global settings unchanged.
The SQLite cases run in one child process that reports its peak RSS (bounded by
PEAK_RSS_BOUND_MB). README.md, "Limits", has the numbers these bounds follow from.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

import pytest

from envs.base import AnswerAction, SqlAction
from envs.dbbench.backends import quote_ident, storage_columns
from envs.dbbench.env import DbBenchEnv

REPO_ROOT = Path(__file__).resolve().parents[2]
STATEMENT_LIMIT_S = 5.0  # backends.STATEMENT_TIMEOUT_S
WALL_BUDGET_S = STATEMENT_LIMIT_S + 5.0
OBSERVATION_BOUND = 1_000_200  # 1,000,000 printed characters plus the truncation line
PEAK_RSS_BOUND_MB = 400
CHILD_AS_LIMIT = 2 * 2**30  # address-space cap of the child: a regression fails, it does not swap
CHILD_TIMEOUT_S = 240
TASK_INDEX = 20  # dev/0020: INSERT into `School Location Table` (28 rows, 4 columns)


@dataclass(frozen=True)
class Hostile:
    """Statements run in order in one episode; `expect` is what the last one must give.

    expect: "error" (an "Error: ..." observation), "timeout" (an error saying it timed out),
    "truncated" (a result ending in the truncation line), "result" (any bounded result).
    """

    id: str
    statements: tuple[str, ...]
    expect: str
    contains: str = ""  # the last observation must contain this
    forbidden: str = ""  # no observation may contain this
    verdict_fails: bool = False


def _recursive(n: int | None = None) -> str:
    limit = f" LIMIT {n}" if n else ""
    return f"WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c{limit})"


_BIG_TEXT = "replace(hex(zeroblob(499999)), '0', 'a') || 'b'"  # 999,999 characters
_HALF_TEXT = "replace(hex(zeroblob(250000)), '0', 'a') || 'b'"  # 500,001 characters

SQLITE_CASES = [
    # blob bombs: one value may hold at most 1,000,000 bytes
    Hostile("randomblob", ("SELECT randomblob(300000000)",), "error", "too big"),
    Hostile("zeroblob", ("SELECT zeroblob(500000000)",), "error", "too big"),
    Hostile("printf-precision", ("SELECT printf('%.*c', 1000000000, 'x')",), "error", "printf"),
    Hostile("replace-hex-zeroblob", ("SELECT replace(hex(zeroblob(400000)), '0', 'xxxxxxxxxx')",), "error", "too big"),
    Hostile("concat-flood", ("SELECT concat(" + ", ".join(["randomblob(999999)"] * 60) + ")",), "error", "too big"),
    Hostile(
        "group-concat-flood", (f"{_recursive(10_000_000)} SELECT group_concat('xxxxxxxxxxxxxxxxxxxx') FROM c",), "error"
    ),
    # the database (64 MiB) and TEMP tables (16 MiB) cannot grow without bound
    Hostile(
        "insert-select-growth",
        ("CREATE TABLE flood (a TEXT)", f"{_recursive()} INSERT INTO flood SELECT randomblob(900000) FROM c"),
        "error",
        "full",
    ),
    Hostile(
        "temp-table-growth",
        (f"CREATE TEMP TABLE flood AS {_recursive()} SELECT randomblob(900000) AS a FROM c",),
        "error",
        "full",
    ),
    # sorts and DISTINCT sets live in the heap: the hard heap limit or the deadline stops them
    Hostile("sort-flood", (f"{_recursive()} SELECT x, randomblob(1000) FROM c ORDER BY 2",), "error"),
    # result floods: at most 1,000 rows / 1,000,000 printed characters come back
    Hostile("row-flood", (f"{_recursive(5_000_000)} SELECT x FROM c",), "truncated", "showing the first 1000 rows"),
    Hostile("cell-flood", (f"{_recursive(300)} SELECT hex(randomblob(499000)) FROM c",), "truncated"),
    Hostile("wide-row", ("SELECT " + ", ".join(["randomblob(999999)"] * 60),), "truncated", "first 0 rows"),
    Hostile("statement-too-long", ("SELECT '" + "x" * 200_000 + "'",), "error", "too long"),
    # quadratic built-ins would run for minutes inside one VM step, out of the deadline's reach
    Hostile(
        "trim-quadratic",
        ("SELECT length(trim(hex(zeroblob(499999)), replace(hex(zeroblob(499999)), '0', 'x') || '0'))",),
        "result",
    ),
    Hostile(
        "instr-quadratic",
        (
            f"WITH v(h, n) AS (SELECT {_BIG_TEXT}, {_HALF_TEXT}) "
            "SELECT instr(h, n), instr(h || 'c', n), instr(h || 'd', n) FROM v",
        ),
        "result",
    ),
    Hostile(
        "replace-quadratic",
        (
            f"WITH v(h, n) AS (SELECT {_BIG_TEXT}, {_HALF_TEXT}) "
            "SELECT length(replace(h, n, '')), length(replace(h || 'c', n, '')), "
            "length(replace(h || 'd', n, '')) FROM v",
        ),
        "result",
    ),
    # the statement deadline still applies
    Hostile("recursive-count", (f"{_recursive()} SELECT count(*) FROM c",), "timeout"),
    Hostile("cross-join-count", (f"{_recursive(100_000)} SELECT count(*) FROM c AS a, c AS b",), "timeout"),
    Hostile(
        "collation-sort",
        (
            "CREATE TABLE big (a TEXT COLLATE MYSQL)",
            *[f"{_recursive(1_000_000)} INSERT INTO big SELECT x % 1000 FROM c"] * 5,
            "SELECT a FROM big ORDER BY a",
        ),
        "timeout",
    ),
    # files, limits and code outside the in-memory database
    Hostile("attach-file", ("ATTACH DATABASE '{sentinel}' AS outside",), "error"),
    Hostile("vacuum-into", ("VACUUM INTO ('{sentinel}')",), "error"),
    Hostile("vacuum-into-quoted", ("VACUUM INTO '{sentinel}'",), "error"),
    Hostile("load-extension", ("SELECT load_extension('{sentinel}')",), "error"),
    Hostile("pragma-writable-schema", ("PRAGMA writable_schema = ON",), "error", "not authorized"),
    Hostile("pragma-max-page-count", ("PRAGMA max_page_count = '1000000000'",), "error", "not authorized"),
    Hostile("pragma-soft-heap-limit", ("PRAGMA soft_heap_limit(0)",), "error", "not authorized"),
    Hostile("pragma-temp-store-file", ("PRAGMA temp_store = FILE",), "error", "not authorized"),
    Hostile("fts3-tokenizer-pointer", ("SELECT fts3_tokenizer('simple')",), "error", "not authorized"),
    Hostile("virtual-table", ("CREATE VIRTUAL TABLE v USING fts5(x)",), "error", "not authorized"),
]

# One child process runs every SQLite case through DbBenchEnv and prints one JSON line per
# case, then its peak RSS; a case missing from the output means the child died or hung there.
CHILD = r"""
import json, resource, sys, time
limit = int(sys.argv[1])
resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
from envs.base import SqlAction
from envs.dbbench.data import load_split
from envs.dbbench.env import DbBenchEnv

spec = json.load(sys.stdin)
task = load_split("dev", spec["data_dir"], download=False)[spec["task_index"]]
for case in spec["cases"]:
    steps, raised = [], None
    with DbBenchEnv(task) as env:
        env.reset()
        for sql in case["statements"]:
            start = time.monotonic()
            try:
                result = env.step(SqlAction(sql))
            except BaseException as exc:  # reported: the parent asserts there is none
                raised = repr(exc)[:300]
                break
            text = result.observation
            steps.append({"seconds": time.monotonic() - start, "length": len(text), "error": result.error,
                          "head": text[:300], "tail": text[-300:]})
        try:
            env.verify()
        except BaseException as exc:
            raised = raised or "verify: " + repr(exc)[:300]
    print(json.dumps({"id": case["id"], "steps": steps, "raised": raised}), flush=True)
# VmHWM, not ru_maxrss: Linux carries ru_maxrss over exec from the (v)forking pytest process
peak_kb = next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM"))
print(json.dumps({"peak_rss_mb": peak_kb / 1024}), flush=True)
"""


@pytest.fixture(scope="module")
def sqlite_outcomes(data_dir, tmp_path_factory):
    sentinels = tmp_path_factory.mktemp("sqlite-sentinels")
    spec = {
        "data_dir": str(data_dir),
        "task_index": TASK_INDEX,
        "cases": [
            {"id": c.id, "statements": [s.format(sentinel=sentinels / f"{c.id}.db") for s in c.statements]}
            for c in SQLITE_CASES
        ],
    }
    proc = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(CHILD_AS_LIMIT)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO_ROOT,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
    )
    try:
        out, err = proc.communicate(json.dumps(spec), timeout=CHILD_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
    results, peak = {}, None
    for line in out.splitlines():
        record = json.loads(line)
        if "peak_rss_mb" in record:
            peak = record["peak_rss_mb"]
        else:
            results[record["id"]] = record
    return SimpleNamespace(results=results, peak_rss_mb=peak, stderr=err[-3000:], sentinels=sentinels)


def _check_last(case: Hostile, error: str | None, head: str, tail: str) -> None:
    if case.expect == "truncated":
        assert error is None and "[output truncated: showing the first" in tail, (head, tail)
    elif case.expect == "result":
        assert error is None, head
    else:
        assert error == "sql_error" and head.startswith("Error: "), head
        if case.expect == "timeout":
            assert "timed out" in head, head
    if case.contains:
        assert case.contains in head + tail, (head, tail)


def _check_steps(case: Hostile, steps: list[dict]) -> None:
    assert len(steps) == len(case.statements)
    for step in steps:
        assert step["seconds"] < WALL_BUDGET_S, f"a statement took {step['seconds']:.1f} s"
        assert step["length"] <= OBSERVATION_BOUND, f"observation of {step['length']:,} characters"
        if case.forbidden:
            assert case.forbidden not in step["head"] + step["tail"]
    last = steps[-1]
    _check_last(case, last["error"], last["head"], last["tail"])


@pytest.mark.serial
@pytest.mark.parametrize("case", SQLITE_CASES, ids=lambda c: c.id)
def test_sqlite_hostile_statement(case, sqlite_outcomes):
    outcome = sqlite_outcomes.results.get(case.id)
    assert outcome is not None, f"no result: the child died or hung here\n{sqlite_outcomes.stderr}"
    assert outcome["raised"] is None, outcome["raised"]
    _check_steps(case, outcome["steps"])
    assert not (sqlite_outcomes.sentinels / f"{case.id}.db").exists()


@pytest.mark.serial  # shares the module's SQLite run with the hostile statements: one run, not one per pass
def test_sqlite_hostile_statements_peak_rss(sqlite_outcomes):
    assert sqlite_outcomes.peak_rss_mb is not None, f"the child did not finish\n{sqlite_outcomes.stderr}"
    assert sqlite_outcomes.peak_rss_mb < PEAK_RSS_BOUND_MB
    assert list(sqlite_outcomes.sentinels.iterdir()) == []


def test_sqlite_linear_shims_match_builtins():
    """instr/replace/trim are replaced by linear versions: same answers as SQLite's own."""
    import sqlite3

    from envs.dbbench.sqlite_backend import SqliteBackend

    exprs = [
        "replace('a-b-c', '-', '')",
        "replace(12.0, '.', ',')",
        "replace(123, 2, 'x')",
        "replace('abc', '', NULL)",
        "replace(NULL, 'a', 'b')",
        "replace('aaa', 'aa', 'b')",
        "replace('ééé', 'é', 'e')",
        "replace(1.5e20, 'e', 'E')",
        "instr('abc', 'c')",
        "instr('abc', '')",
        "instr('héllo', 'l')",
        "instr(x'010203', x'03')",
        "instr(NULL, 'a')",
        "instr(12345, 34)",
        "trim('xxaxx', 'x')",
        "ltrim('xyaxy', 'yx')",
        "rtrim('aé é', ' é')",
        "trim('abc', '')",
        "trim(NULL, 'a')",
        "trim(10.50, '0')",
    ]
    plain = sqlite3.connect(":memory:")
    with SqliteBackend() as db:
        for expr in exprs:
            assert db.execute(f"SELECT {expr}").rows == plain.execute(f"SELECT {expr}").fetchall(), expr
        # SQLite's own ALTER TABLE uses the built-in printf, which agents cannot call
        db.create_table("t", ["a"], [["1"]])
        assert db.execute("ALTER TABLE t ADD COLUMN b TEXT").error is None
        assert db.execute("SELECT * FROM t").rows == [("1", None)]
    plain.close()


def test_sqlite_result_caps_and_step_never_raises(dev_tasks, monkeypatch):
    task = dev_tasks[TASK_INDEX]
    with DbBenchEnv(task) as env:
        env.reset()
        text = env.step(SqlAction(f"{_recursive(1500)} SELECT x FROM c")).observation
        assert text.endswith(
            "[output truncated: showing the first 1000 rows; at most 1,000 rows and 1,000,000 characters are shown]"
        )
        assert text.startswith("[(1,), (2,)") and "(1000,)]\n" in text
        assert env.step(SqlAction(f"{_recursive(1000)} SELECT x FROM c")).observation.endswith("(1000,)]")

        def explode(sql):
            raise MemoryError

        monkeypatch.setattr(env.db, "execute", explode)
        result = env.step(SqlAction("SELECT 1"))
        assert result.error == "sql_error" and result.observation.startswith("Error: ")
        assert "memory" in result.observation
        assert env.step(AnswerAction([])).done


# ---------------------------------------------------------------- MySQL / MariaDB

MYSQL_CASES = [
    # code the agent defines must never run as anyone else (it cannot define any now)
    Hostile(
        "invoker-function-view",
        (
            "CREATE FUNCTION hs_escape() RETURNS INT SQL SECURITY INVOKER MODIFIES SQL DATA "
            "BEGIN INSERT INTO `{canary}`.`canary` VALUES ('escaped'); RETURN 1; END",
            "DROP TABLE `{table}`",
            "CREATE SQL SECURITY INVOKER VIEW `{table}` AS SELECT {view_columns}",
        ),
        "error",
        "denied",
        verdict_fails=True,
    ),
    Hostile("definer-view", ("CREATE VIEW hs_view AS SELECT * FROM `{table}`",), "error", "denied"),
    Hostile(
        "trigger",
        (
            "CREATE TRIGGER hs_trigger BEFORE INSERT ON `{table}` FOR EACH ROW "
            "INSERT INTO `{canary}`.`canary` VALUES ('trigger')",
        ),
        "error",
        "denied",
    ),
    Hostile(
        "event",
        ("CREATE EVENT hs_event ON SCHEDULE EVERY 1 SECOND DO INSERT INTO `{canary}`.`canary` VALUES ('event')",),
        "error",
        "denied",
    ),
    Hostile(
        "procedure-sleep-loop",
        ("CREATE PROCEDURE hs_loop() BEGIN LOOP DO SLEEP(0.1); END LOOP; END", "CALL hs_loop()"),
        "error",
    ),
    # wall-clock limit, also for what max_statement_time misses
    Hostile("compound-sleep-loop", ("BEGIN NOT ATOMIC LOOP DO SLEEP(0.1); END LOOP; END",), "timeout"),
    Hostile(
        "compound-busy-loop",
        ("BEGIN NOT ATOMIC DECLARE i INT DEFAULT 0; LOOP SET i = i + 1; END LOOP; END",),
        "timeout",
    ),
    Hostile("sleep", ("SELECT SLEEP(30)",), "timeout"),
    Hostile("sleep-without-server-limit", ("SET SESSION max_statement_time = 0", "SELECT SLEEP(30)"), "timeout"),
    Hostile("benchmark", ("SELECT BENCHMARK(10000000000, md5('x'))",), "timeout"),
    # result floods
    Hostile(
        "recursive-cte-rows",
        (
            "SET STATEMENT max_recursive_iterations = 10000000 FOR WITH RECURSIVE c(x) AS "
            "(SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 1000000) SELECT x FROM c",
        ),
        "truncated",
        "showing the first 1000 rows",
    ),
    Hostile("sequence-rows", ("SELECT seq FROM seq_1_to_100000000",), "truncated"),
    Hostile("cross-join-rows", ("SELECT * FROM `{table}` a, `{table}` b, `{table}` c",), "truncated"),
    Hostile("big-cell", ("SELECT REPEAT('x', 10000000)",), "truncated", "first 0 rows"),
    Hostile(
        "group-concat-cell",
        ("SET SESSION group_concat_max_len = 100000000", "SELECT group_concat(REPEAT('x', 1000000)) FROM seq_1_to_12"),
        "truncated",
    ),
    # other databases, files, users and the server itself
    Hostile("read-mysql-user", ("SELECT user, host, password FROM mysql.user",), "error", "denied"),
    Hostile("read-other-rollout", ("SELECT * FROM `{other}`.`secret`",), "error", "denied", forbidden="top-secret"),
    Hostile("write-canary", ("INSERT INTO `{canary}`.`canary` VALUES ('pwned')",), "error", "denied"),
    Hostile("load-file", ("SELECT LOAD_FILE('/etc/passwd')",), "result", forbidden="root:"),
    Hostile("into-outfile", ("SELECT 'x' INTO OUTFILE '{sentinel}'",), "error", "denied"),
    Hostile("into-dumpfile", ("SELECT 'x' INTO DUMPFILE '{sentinel}'",), "error", "denied"),
    Hostile(
        "load-data-infile",
        ("LOAD DATA INFILE '/etc/passwd' INTO TABLE `{table}`",),
        "error",
        "denied",
        forbidden="root:",
    ),
    Hostile(
        "load-data-local", ("LOAD DATA LOCAL INFILE '/etc/passwd' INTO TABLE `{table}`",), "error", forbidden="root:"
    ),
    # no privilege governs DATA/INDEX DIRECTORY: mysqld would create directories and files there
    Hostile("data-directory", ("CREATE TABLE hs_outside (a INT) DATA DIRECTORY = '{sentinel_dir}'",), "error"),
    Hostile(
        "index-directory-after-sql-mode",
        (
            "SET SESSION sql_mode = ''",
            "CREATE TABLE hs_outside (a INT, KEY (a)) ENGINE = MyISAM "
            "DATA DIRECTORY = '{sentinel_dir}' INDEX DIRECTORY = '{sentinel_dir}'",
        ),
        "error",
    ),
    Hostile(
        "data-directory-prepared",
        (
            "SET SESSION sql_mode = ''",
            "SET @s = CONCAT('CREATE TABLE hs_outside (a INT) DATA DIREC', 'TORY = ''{sentinel_dir}''')",
            "PREPARE hs_statement FROM @s",
            "EXECUTE hs_statement",
        ),
        "error",
    ),
    Hostile(
        "data-directory-execute-immediate",
        (
            "BEGIN NOT ATOMIC SET sql_mode = ''; EXECUTE IMMEDIATE "
            "CONCAT('CREATE TABLE hs_outside (a INT) DATA DIREC', 'TORY = ''{sentinel_dir}'''); END",
        ),
        "error",
    ),
    Hostile("create-user", ("CREATE USER '{evil_user}'@'%' IDENTIFIED BY 'x'",), "error", "denied"),
    Hostile("grant", ("GRANT ALL PRIVILEGES ON *.* TO CURRENT_USER()",), "error", "denied"),
    Hostile("set-global", ("SET GLOBAL max_connections = 1",), "error", "denied"),
    Hostile("kill-other-connection", ("KILL {admin_thread}",), "error"),
    Hostile("shutdown", ("SHUTDOWN",), "error", "denied"),
]


@pytest.fixture(scope="module")
def mysql_world(mysql_url):
    """Root's view of the server: another rollout holding a secret, the users and globals."""
    import pymysql

    from envs.dbbench.mysql_backend import MysqlBackend, parse_mysql_url

    root = pymysql.connect(charset="utf8mb4", autocommit=True, **parse_mysql_url(mysql_url))
    other = MysqlBackend(mysql_url)
    other.create_table("secret", ["v"], [["top-secret"]])
    world = SimpleNamespace(url=mysql_url, root=root, other=other)

    def query(sql, args=None):
        with root.cursor() as cur:
            cur.execute(sql, args)
            return cur.fetchall()

    def state():
        return {
            "other": query(f"SELECT v FROM `{other.database}`.`secret`"),
            "users": set(query("SELECT user, host FROM mysql.user WHERE user NOT LIKE 'hs\\_rollout\\_%'")),
            "globals": query("SELECT @@GLOBAL.max_connections, @@GLOBAL.max_statement_time, @@GLOBAL.event_scheduler"),
        }

    def kill_sessions(user):
        for (thread_id,) in query("SELECT ID FROM information_schema.PROCESSLIST WHERE USER = %s", (user,)):
            try:
                query(f"KILL CONNECTION {int(thread_id)}")
            except pymysql.err.MySQLError:
                pass

    world.query, world.state, world.kill_sessions = query, state, kill_sessions
    world.before = state()
    try:
        yield world
    finally:
        other.close()
        root.close()


@pytest.fixture
def canary(mysql_world):
    """A database made by root, outside every rollout, with one row: (name, its current rows)."""
    name = f"hs_isolation_canary_{secrets.token_hex(4)}"
    mysql_world.query(f"CREATE DATABASE `{name}`")
    mysql_world.query(f"CREATE TABLE `{name}`.`canary` (v TEXT)")
    mysql_world.query(f"INSERT INTO `{name}`.`canary` VALUES ('intact')")

    def rows():
        return (
            mysql_world.query(f"SELECT v FROM `{name}`.`canary`"),
            mysql_world.query("SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = %s", (name,)),
        )

    try:
        yield SimpleNamespace(name=name, rows=rows, before=rows())
    finally:
        mysql_world.query(f"DROP DATABASE IF EXISTS `{name}`")


def _guarded(fn, user: str, world) -> tuple[object, float]:
    """(fn(), seconds); past the budget the rollout user's sessions are killed so the test ends."""
    box: dict = {}

    def target():
        start = time.monotonic()
        try:
            box["value"] = fn()
        except BaseException as exc:  # noqa: BLE001 - reported below
            box["raised"] = exc
        box["seconds"] = time.monotonic() - start

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(WALL_BUDGET_S + 5)
    if thread.is_alive():
        world.kill_sessions(user)
        thread.join(10)
        pytest.fail(f"still running after {WALL_BUDGET_S + 5:.0f} s: the wall-clock limit did not hold")
    if "raised" in box:
        raise box["raised"]
    return box["value"], box["seconds"]


@pytest.fixture
def host_dir(tmp_path):
    """An empty folder under tmp_path that the MariaDB server process could write to.

    pytest's temporary folders are private to the test user: without this a file statement
    would fail because mysqld cannot reach the path, not for lack of rights.
    """
    path = tmp_path / "host"
    path.mkdir()
    opened = [
        (folder, folder.stat().st_mode)
        for folder in path.parents
        if str(folder).startswith("/tmp/") and folder.stat().st_uid == os.getuid()
    ]
    for folder, mode in opened:
        folder.chmod(mode | 0o711)  # traversable, not listable
    path.chmod(0o777)
    try:
        yield path
    finally:
        for folder, mode in opened:
            folder.chmod(mode)


@pytest.mark.serial
@pytest.mark.mysql
@pytest.mark.parametrize("case", MYSQL_CASES, ids=lambda c: c.id)
def test_mysql_hostile_statement(case, mysql_world, canary, dev_tasks, host_dir):
    task = dev_tasks[TASK_INDEX]
    sentinel_dir = host_dir
    fields = {
        "table": task.table_name,
        "canary": canary.name,
        "other": mysql_world.other.database,
        "sentinel": host_dir / "sentinel.txt",
        "sentinel_dir": sentinel_dir,
        "admin_thread": mysql_world.root.thread_id(),
        "evil_user": f"hs_evil_{secrets.token_hex(4)}",
        "view_columns": ", ".join(f"hs_escape() AS {quote_ident(c)}" for c in storage_columns(task.columns)),
    }
    env = DbBenchEnv(task, "mysql", mysql_url=mysql_world.url)
    env.reset()
    user = env.db.database[:32]
    steps = []
    try:
        for statement in case.statements:
            result, seconds = _guarded(lambda s=statement: env.step(SqlAction(s.format(**fields))), user, mysql_world)
            text = result.observation
            steps.append(
                {
                    "seconds": seconds,
                    "length": len(text),
                    "error": result.error,
                    "head": text[:300],
                    "tail": text[-300:],
                }
            )
        verdict, _ = _guarded(env.verify, user, mysql_world)
    finally:
        mysql_world.kill_sessions(user)  # nothing the episode started may outlive it
        env.close()
    # isolation first: nothing outside the episode changed
    assert canary.rows() == canary.before
    assert mysql_world.state() == mysql_world.before
    assert mysql_world.query("SELECT COUNT(*) FROM mysql.user WHERE user = %s", (fields["evil_user"],)) == ((0,),)
    assert not fields["sentinel"].exists() and list(sentinel_dir.iterdir()) == []
    mysql_world.root.ping(reconnect=False)  # the KILL of another connection did not land
    _check_steps(case, steps)
    if case.verdict_fails:
        assert not verdict.success and "hash_error" in verdict.details


@pytest.mark.mysql
def test_mysql_rollout_user_privileges(mysql_url):
    from envs.dbbench.mysql_backend import MysqlBackend

    with MysqlBackend(mysql_url) as db:
        with db._admin.cursor() as cur:
            cur.execute(f"SHOW GRANTS FOR '{db.database[:32]}'@'%'")
            grants = " ".join(row[0] for row in cur.fetchall())
    assert "ALL PRIVILEGES" not in grants
    for allowed in (
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
    ):
        assert allowed in grants
    for denied in ("CREATE VIEW", "SHOW VIEW", "CREATE ROUTINE", "ALTER ROUTINE", "EXECUTE", "TRIGGER", "EVENT"):
        assert denied not in grants


@pytest.mark.mysql
@pytest.mark.parametrize("defence", ["drop-stored-programs", "base-table-check", "hash-as-agent-user"])
def test_mysql_hash_never_runs_agent_code_as_root(defence, mysql_world, canary, dev_tasks, monkeypatch):
    """Even where the rollout user could define views and routines (a server granting more),
    scoring cannot write as root: each of the three defences holds with the other two off."""
    task = dev_tasks[TASK_INDEX]
    env = DbBenchEnv(task, "mysql", mysql_url=mysql_world.url)
    env.reset()
    user = env.db.database[:32]
    try:
        if defence != "drop-stored-programs":
            monkeypatch.setattr(env.db, "_drop_stored_programs", lambda: None)
        if defence != "base-table-check":
            monkeypatch.setattr(env.db, "_require_base_table", lambda cur, name: None)
        if defence != "hash-as-agent-user":  # the old way: hash on root's connection
            monkeypatch.setattr(
                env.db, "_connect_as_agent", lambda **extra: env.db._connect(**env.db._params, database=env.db.database)
            )
        mysql_world.query(
            f"GRANT CREATE VIEW, CREATE ROUTINE, ALTER ROUTINE, EXECUTE ON `{env.db.database}`.* TO '{user}'@'%'"
        )
        columns = ", ".join(f"hs_escape() AS {quote_ident(c)}" for c in storage_columns(task.columns))
        # database privileges reach an open session at its next USE
        for sql in (
            f"USE `{env.db.database}`",
            f"CREATE FUNCTION hs_escape() RETURNS INT SQL SECURITY INVOKER MODIFIES SQL DATA "
            f"BEGIN INSERT INTO `{canary.name}`.`canary` VALUES ('escaped'); RETURN 1; END",
            f"DROP TABLE `{task.table_name}`",
            f"CREATE SQL SECURITY INVOKER VIEW `{task.table_name}` AS SELECT {columns}",
        ):
            assert env.step(SqlAction(sql)).error is None, sql
        verdict = env.verify()
    finally:
        mysql_world.kill_sessions(user)
        env.close()
    assert not verdict.success and "hash_error" in verdict.details
    assert canary.rows() == canary.before
