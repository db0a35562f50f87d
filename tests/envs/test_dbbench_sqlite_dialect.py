"""The lexical MySQL -> SQLite rewrite used by SqliteBackend."""

import pytest

from envs.dbbench.sqlite_dialect import MysqlSyntaxError, mysql_to_sqlite


@pytest.mark.parametrize(
    ("mysql", "sqlite"),
    [
        # numbers after a comparison compare numerically, as MySQL does against TEXT
        (
            "SELECT a FROM t WHERE x<107.7 AND y >= -5 AND z=16 LIMIT 3",
            "SELECT a FROM t WHERE x<CAST(107.7 AS NUMERIC) AND y >= CAST(-5 AS NUMERIC) "
            "AND z=CAST(16 AS NUMERIC) LIMIT 3",
        ),
        ("SELECT * FROM t WHERE a = '5' AND b IN (1, 2)", "SELECT * FROM t WHERE a = '5' AND b IN (1, 2)"),
        # digit-leading bare identifiers are quoted; numbers are not
        (
            "INSERT INTO 1952_British_Grand_Prix_0 (Pos) VALUES (22)",
            "INSERT INTO `1952_British_Grand_Prix_0` (Pos) VALUES (22)",
        ),
        ("SELECT 2.5e3, 1e5, 0x1F, 12 FROM t", "SELECT 2.5e3, 1e5, 0x1F, 12 FROM t"),
        ("SELECT t.1col FROM t", "SELECT t.`1col` FROM t"),
        # MySQL backslash escapes become the characters they stand for
        ("SELECT 'a\\nb'", "SELECT 'a\nb'"),
        ("SELECT 'it\\'s', 'it''s'", "SELECT 'it''s', 'it''s'"),
        ("SELECT 'back\\\\slash'", "SELECT 'back\\slash'"),
        ("SELECT '50\\%' ", "SELECT '50\\%' "),  # \% keeps its backslash (LIKE)
        ('SELECT "say \\"hi\\" it\'s"', "SELECT 'say \"hi\" it''s'"),  # "..." is a string in MySQL
        # quoted identifiers and comments are left alone; # comments become --
        ("SELECT `1a\\n` FROM t -- 1abc 'x", "SELECT `1a\\n` FROM t -- 1abc 'x"),
        ("SELECT 1 # note", "SELECT 1 -- note"),
        # unterminated quotes: untouched, SQLite reports the error
        ("SELECT 'oops", "SELECT 'oops"),
    ],
)
def test_mysql_to_sqlite(mysql, sqlite):
    assert mysql_to_sqlite(mysql) == sqlite


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT [Home team] FROM t",
        "SELECT * FROM 'Football Matches'",
        'SELECT COUNT(*) FROM "Tennis Matches"',
        "INSERT INTO 'x' VALUES (1)",
        'SELECT * FROM a JOIN "b" ON a.x = b.x',
    ],
)
def test_mysql_rejects_what_sqlite_would_accept(sql):
    with pytest.raises(MysqlSyntaxError, match="error in your SQL syntax"):
        mysql_to_sqlite(sql)


def test_strings_elsewhere_are_fine():
    assert mysql_to_sqlite("SELECT '[x]' FROM t WHERE a IN ('from')") == "SELECT '[x]' FROM t WHERE a IN ('from')"
