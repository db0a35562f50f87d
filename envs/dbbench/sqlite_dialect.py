"""Rewrite the MySQL lexical features that SQLite reads differently, before SQLite parses them.

DBBench is a MySQL benchmark: its gold SQL (and any agent that learned MySQL) relies on
1. backslash escapes inside string literals ('Formby\\nUrban District' is a newline in MySQL,
   two characters in SQLite): two gold statements in standard change the table hash this way;
2. bare identifiers that start with a digit (`INSERT INTO 1952_British_Grand_Prix_0 ...` is
   legal MySQL, a syntax error in SQLite);
3. `#` line comments, and double-quoted strings (MySQL reads "Name" as the string 'Name',
   SQLite as the column Name);
4. comparing a TEXT column with a bare number (`WHERE Points > 20`): MySQL compares as
   numbers, SQLite converts the number to text and compares strings ('9' > '20'). A number
   right after a comparison operator is written `CAST(20 AS NUMERIC)`, whose NUMERIC affinity
   makes SQLite convert well-formed numeric text in the column and compare numbers. (Not
   covered: IN lists, BETWEEN, a number on the left, and MySQL's prefix reading of text such
   as '1,234' -> 1; see README.md.)
5. syntax MySQL rejects but SQLite accepts is refused with a MySQL-like syntax error, so an
   agent is not taught habits that fail on MySQL: [bracket] identifiers, and a quoted string
   used as a table name (`FROM 'My Table'`, `FROM "My Table"`).
The rewrite is lexical only (strings, quoted identifiers and comments are tracked so nothing
inside them is touched); it does not try to translate MySQL functions or semantics.
"""

from __future__ import annotations

import re

# MySQL's string escapes; \% and \_ keep their backslash (they matter to LIKE patterns).
_ESCAPES = {"0": "\0", "'": "'", '"': '"', "b": "\b", "n": "\n", "r": "\r", "t": "\t", "Z": "\x1a", "\\": "\\"}
_KEEP_BACKSLASH = "%_"
_WORD = re.compile(r"[0-9A-Za-z_$\u0080-\uffff]+")
# Words starting with a digit that MySQL reads as numbers, not identifiers.
_NUMBER = re.compile(r"^(\d+|\d+[eE]\d*|0x[0-9A-Fa-f]+|0b[01]+)$")
# A complete numeric literal (checked to not run into identifier characters).
_NUMERIC_LITERAL = re.compile(r"(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?")
_OPERATOR_CHARS = "<>=!"
_COMPARISONS = frozenset({"=", "<", ">", "<=", ">=", "<>", "!=", "<=>"})


def _read_mysql_string(sql: str, start: int) -> tuple[str, int]:
    """Decode a MySQL quoted string starting at `start` (the quote); return (text, index after it)."""
    quote = sql[start]
    out: list[str] = []
    i = start + 1
    while i < len(sql):
        ch = sql[i]
        if ch == "\\" and i + 1 < len(sql):
            nxt = sql[i + 1]
            out.append("\\" + nxt if nxt in _KEEP_BACKSLASH else _ESCAPES.get(nxt, nxt))
            i += 2
        elif ch == quote and i + 1 < len(sql) and sql[i + 1] == quote:
            out.append(quote)
            i += 2
        elif ch == quote:
            return "".join(out), i + 1
        else:
            out.append(ch)
            i += 1
    raise _Unterminated


class MysqlSyntaxError(ValueError):
    """SQL that MySQL would reject although SQLite would run it; the message is for the agent."""


_TABLE_KEYWORDS = frozenset({"from", "join", "into", "update", "table"})


def _refuse(sql: str, i: int, why: str) -> MysqlSyntaxError:
    return MysqlSyntaxError(f"You have an error in your SQL syntax near '{sql[i : i + 40]}': {why}")


class _Unterminated(Exception):
    """An unclosed quote: leave the SQL as written and let SQLite report the error."""


def _skip_until(sql: str, start: int, end_marker: str) -> int:
    """Index just past `end_marker` (or the end of the text) for comments and quoted identifiers."""
    found = sql.find(end_marker, start)
    return len(sql) if found < 0 else found + len(end_marker)


def mysql_to_sqlite(sql: str) -> str:
    """Return `sql` rewritten for SQLite with MySQL's lexical meaning (see module docstring).

    Raises MysqlSyntaxError for SQL that MySQL rejects but SQLite would accept.
    """
    try:
        return _rewrite(sql)
    except _Unterminated:
        return sql


def _numeric_literal(sql: str, i: int) -> str | None:
    """The numeric literal starting at i (optionally signed), or None if it is not one."""
    start = i + 1 if sql[i] in "+-" else i
    match = _NUMERIC_LITERAL.match(sql, start)
    if match is None or match.end() == start:
        return None
    end = match.end()
    if end < len(sql) and _WORD.match(sql, end):
        return None  # e.g. 1952_British_Grand_Prix_0: an identifier, not a number
    return sql[i:end]


def _rewrite(sql: str) -> str:
    out: list[str] = []
    last = ""  # the last significant token emitted, to spot "<comparison> <number>"
    i = 0
    while i < len(sql):
        ch = sql[i]
        if last in _COMPARISONS and (ch.isdigit() or ch in "+-.") and _numeric_literal(sql, i):
            number = _numeric_literal(sql, i)
            out.append(f"CAST({number} AS NUMERIC)")
            i += len(number)  # type: ignore[arg-type]
            last = number  # type: ignore[assignment]
            continue
        if ch.isspace():
            out.append(ch)
            i += 1
            continue
        start = i
        if ch in "'\"":
            if last.lower() in _TABLE_KEYWORDS:
                raise _refuse(sql, i, "a quoted string is not a table name in MySQL; quote names with `backticks`")
            text, i = _read_mysql_string(sql, i)
            # MySQL (without ANSI_QUOTES) reads "..." as a string too, never as an identifier.
            out.append("'" + text.replace("'", "''").replace("\0", "") + "'")
        elif ch == "`":
            i = _quoted_identifier_end(sql, i)
            out.append(sql[start:i])
        elif sql.startswith("--", i) or sql.startswith("/*", i):
            i = _skip_until(sql, i + 2, "\n" if ch == "-" else "*/")
            out.append(sql[start:i])
            continue  # comments are not significant tokens
        elif ch == "#":
            i = _skip_until(sql, i, "\n")
            out.append("--" + sql[start + 1 : i])
            continue
        elif ch == "[":
            raise _refuse(sql, i, "[brackets] are not identifier quotes in MySQL; use `backticks`")
        elif ch in _OPERATOR_CHARS:
            while i < len(sql) and sql[i] in _OPERATOR_CHARS:
                i += 1
            out.append(sql[start:i])
        elif _WORD.match(sql, i):
            word = _WORD.match(sql, i).group(0)  # type: ignore[union-attr]
            digit_led = word[0].isdigit() and not _NUMBER.match(word)
            out.append(f"`{word}`" if digit_led and not _is_number_tail(out) else word)
            i += len(word)
        else:
            out.append(ch)
            i += 1
        last = out[-1]
    return "".join(out)


def _quoted_identifier_end(sql: str, start: int) -> int:
    """Index after a `backtick` identifier (doubled backticks stay inside)."""
    end = sql.find("`", start + 1)
    while end >= 0 and sql[end + 1 : end + 2] == "`":
        end = sql.find("`", end + 2)
    if end < 0:
        raise _Unterminated
    return end + 1


def _is_number_tail(out: list[str]) -> bool:
    """True when the word follows 'digits.' (the fraction of a decimal literal, e.g. 2.5e3)."""
    if len(out) < 2:
        return False
    return out[-1] == "." and out[-2].isdigit()


# ---------------------------------------------------------------- MySQL admin statements

_NAME = r"(`(?:[^`]|``)+`|[0-9A-Za-z_$]+)"
_SHOW_TABLES = re.compile(r"^\s*SHOW\s+TABLES\s*;?\s*$", re.IGNORECASE)
_DESCRIBE = re.compile(rf"^\s*(?:DESCRIBE|DESC|EXPLAIN|SHOW\s+COLUMNS\s+(?:FROM|IN))\s+{_NAME}\s*;?\s*$", re.IGNORECASE)


def parse_admin(sql: str) -> tuple[str, str | None] | None:
    """Recognise the MySQL statements agents use to inspect a table, which SQLite lacks.

    Returns ("tables", None) for SHOW TABLES, ("columns", name) for DESCRIBE/DESC/EXPLAIN
    <table> and SHOW COLUMNS FROM <table>, else None (the statement goes to SQLite as is).
    """
    if _SHOW_TABLES.match(sql):
        return "tables", None
    match = _DESCRIBE.match(sql)
    if match is None:
        return None
    name = match.group(1)
    if name.startswith("`"):
        name = name[1:-1].replace("``", "`")
    return "columns", name
