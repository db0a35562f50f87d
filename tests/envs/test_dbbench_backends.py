"""SQLite and MariaDB backends build the same tables and hash them identically."""

import time

import pymysql
import pytest

from envs.base import DataError
from envs.dbbench.backend_parity import compare_backends
from envs.dbbench.backends import SqlResult, combine_row_hashes, row_hash
from envs.dbbench.data import load_split
from envs.dbbench.mysql_backend import MysqlBackend, parse_mysql_url
from envs.dbbench.sqlite_backend import SqliteBackend


def _insert_sql(task) -> str:
    """A row mixing text and NULLs (concat_ws must skip the NULLs on both backends)."""
    values = ", ".join(f"'new {i}'" if i % 2 else "NULL" for i in range(len(task.columns)))
    return f"INSERT INTO `{task.table_name}` VALUES ({values})"


def test_python_hash_matches_sqlite_query(dev_tasks):
    task = dev_tasks[20]
    with SqliteBackend() as db:
        db.create_table(task.table_name, task.columns, task.rows)
        expected = combine_row_hashes([row_hash(row) for row in task.rows])
        assert db.table_hash(task.table_name, task.columns) == expected


def test_sqlite_functions_and_collation():
    with SqliteBackend() as db:
        db.create_table("1st table", ["a b", "c"], [["Montréal", "1"], [None, "2"]])
        result = db.execute("SELECT concat_ws(',', `a b`, NULL, c), md5('a') FROM `1st table` ORDER BY c")
        assert result.error is None
        assert result.rows == [
            ("Montréal,1", "0cc175b9c0f1b6a831c399e269772661"),
            ("2", "0cc175b9c0f1b6a831c399e269772661"),
        ]
        # MySQL's default collation: case- and accent-insensitive equality
        assert db.execute("SELECT c FROM `1st table` WHERE `a b` = 'MONTREAL'") == SqlResult(rows=[("1",)])


def test_sqlite_guards():
    table_rows = [[str(i)] for i in range(3000)]  # enough VM steps for the progress handler to run
    with SqliteBackend(timeout_s=0.2) as db:
        db.create_table("t", ["a"], table_rows)
        assert db.execute("ATTACH DATABASE 'x.db' AS x").rows is None
        result = db.execute("WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c")
        assert result.rows is None and "timed out" in result.error
        # the time limit is per agent statement: inspecting, then thinking for long, then
        # hashing must not trip it
        assert db.execute("DESCRIBE t").error is None
        time.sleep(0.3)
        assert db.table_hash("t", ["a"]) == combine_row_hashes([row_hash(row) for row in table_rows])


INSPECT = [
    "SHOW TABLES",
    "DESCRIBE `1st table`",
    "DESC `1st table`;",
    "SHOW COLUMNS FROM `1st table`",
    "EXPLAIN `1st table`",
    "DESCRIBE `1ST TABLE`",
]


def test_sqlite_answers_mysql_inspection_statements():
    with SqliteBackend() as db:
        db.create_table("1st table", ["a b", "c"], [["x", "1"]])
        assert db.execute("SHOW TABLES") == SqlResult(rows=[("1st table",)])
        described = [("a b", "text", "YES", "", None, ""), ("c", "text", "YES", "", None, "")]
        assert db.execute("DESCRIBE `1st table`") == SqlResult(rows=described)
        assert db.execute("describe `1ST TABLE`").rows is None  # table names are case-sensitive, as on MySQL


@pytest.mark.mysql
def test_inspection_statements_match_mariadb(mysql_url):
    outcomes = []
    for backend in (SqliteBackend(), MysqlBackend(mysql_url)):
        with backend as db:
            db.create_table("1st table", ["a b", "c"], [["x", "1"]])
            outcomes.append([db.execute(sql).rows for sql in INSPECT])
    assert outcomes[0] == outcomes[1]


@pytest.mark.mysql
def test_upstream_select_queries_behave_alike(data_dir, mysql_url):
    """116 of the 120 upstream SELECT queries agree; README.md explains the other 4."""
    tasks = load_split("dev", data_dir=data_dir) + load_split("standard", data_dir=data_dir)
    report = compare_backends(tasks, mysql_url)
    assert report.total == 120 and report.same >= 116, "\n".join(report.format_lines(verbose=True))


@pytest.mark.mysql
def test_sqlite_and_mariadb_hash_agree(dev_tasks, mysql_url):
    for task in [dev_tasks[i] for i in (5, 20, 21, 31, 40, 59)]:
        hashes = []
        for backend in (SqliteBackend(), MysqlBackend(mysql_url)):
            with backend as db:
                db.create_table(task.table_name, task.columns, task.rows)
                before = db.table_hash(task.table_name, task.columns)
                error = db.execute(_insert_sql(task)).error
                assert error is None, error
                hashes.append((before, db.table_hash(task.table_name, task.columns)))
        assert hashes[0] == hashes[1], task.id
        assert hashes[0][0] != hashes[0][1]


@pytest.mark.mysql
def test_mariadb_matches_sqlite_semantics(mysql_url):
    with MysqlBackend(mysql_url) as db:
        db.create_table("1st table", ["a b", "c"], [["Montréal", "1"], ["Québec", "2"]])
        assert db.execute("SELECT c FROM `1st table` WHERE `a b` = 'MONTREAL'") == SqlResult(rows=[("1",)])
        # non-strict mode: a numeric comparison on TEXT still updates (upstream's behaviour)
        assert db.execute("UPDATE `1st table` SET c = '9' WHERE `a b` = 5") == SqlResult(rows=[])
        result = db.execute("SELEC 1")
        assert result.rows is None and result.error.startswith("1064:")


@pytest.mark.mysql
def test_mariadb_rollout_is_private_and_dropped(mysql_url):
    first, second = MysqlBackend(mysql_url), MysqlBackend(mysql_url)
    try:
        result = second.execute(f"SELECT 1 FROM `{first.database}`.x")
        assert result.rows is None and "denied" in result.error.lower()
    finally:
        first.close()
        second.close()
    conn = pymysql.connect(**parse_mysql_url(mysql_url))
    try:
        with conn.cursor() as cur:
            cur.execute("SHOW DATABASES LIKE %s", (first.database,))
            assert cur.fetchall() == ()
            cur.execute("SELECT COUNT(*) FROM mysql.user WHERE user = %s", (first.database,))
            assert cur.fetchone() == (0,)
    finally:
        conn.close()


def test_unreachable_mysql_is_a_data_error():
    with pytest.raises(DataError, match="HS_MYSQL_URL"):
        MysqlBackend("mysql://root@127.0.0.1:1")
