"""Question/edit templates for the generated DBBench training split (see train_split.py).

Each generator takes a profiled source table and returns a draft {type, description, sql}, or
None when the table does not suit the template; labels and hashes are computed afterwards by
executing the SQL, never by the template itself, so a template bug cannot produce a wrong
label that disagrees with the database. Wording is ours, varied so a policy cannot key on one
phrasing.
"""

from __future__ import annotations

import json
import random
import re
from collections import Counter
from dataclasses import dataclass

from envs.dbbench.backends import mysql_collation_key, quote_ident
from envs.dbbench.data import BenchTask

_NUMERIC = re.compile(r"^-?\d+(\.\d+)?$")
_MAX_VALUE_LEN = 60


# ---------------------------------------------------------------- table profiles


@dataclass
class Table:
    """A source table plus the column facts the templates need."""

    task: BenchTask
    numeric: list[int]  # columns whose every cell is a plain number
    text: list[int]  # columns with at least one clean (quotable, describable) value

    @property
    def name(self) -> str:
        return self.task.table_name

    @property
    def columns(self) -> list[str]:
        return self.task.columns

    @property
    def rows(self) -> list[list[str]]:
        return [[str(v) for v in row] for row in self.task.rows]

    def column(self, index: int) -> list[str]:
        return [row[index] for row in self.rows]

    def unique_rows(self, index: int) -> list[int]:
        """Rows whose value in this column is clean and unique under MySQL's collation."""
        keys = Counter(mysql_collation_key(v) for v in self.column(index))
        return [r for r, v in enumerate(self.column(index)) if clean(v) and keys[mysql_collation_key(v)] == 1]


def clean(value: str) -> bool:
    """A value we can quote in a description and an agent can type back exactly."""
    return (
        0 < len(value) <= _MAX_VALUE_LEN
        and value == value.strip()
        and not any(ch in value for ch in "\\\n\r\t'\"`")
        and value.lower() not in ("nan", "none", "null", "-", "—")
    )


def profile(task: BenchTask) -> Table | None:
    """Profile a table; None when unusable (an empty column name cannot be named in MySQL)."""
    if any(not name.strip() or "\\" in name for name in task.columns) or len(task.rows) < 3:
        return None
    table = Table(task, [], [])
    for i in range(len(task.columns)):
        values = table.column(i)
        if all(_NUMERIC.match(v) for v in values):
            table.numeric.append(i)
        elif sum(clean(v) for v in values) >= 2:
            table.text.append(i)
    return table


def distinct_tables(tasks: list[BenchTask]) -> list[Table]:
    """One profile per distinct table (name, columns, rows), in first-seen order."""
    seen: set[str] = set()
    tables: list[Table] = []
    for task in tasks:
        key = json.dumps([task.table_name, task.columns, task.rows], ensure_ascii=False)
        if key in seen:
            continue
        seen.add(key)
        table = profile(task)
        if table is not None:
            tables.append(table)
    return tables


# ---------------------------------------------------------------- helpers


def lit(value: str) -> str:
    """MySQL string literal (backslashes escaped too, since MySQL reads them as escapes)."""
    return "'" + value.replace("\\", "\\\\").replace("'", "''") + "'"


def fmt_number(value: float | int) -> str:
    """Label text of a computed number: integral -> '12', else at most 4 decimals."""
    if isinstance(value, int) or float(value).is_integer():
        return str(int(value))
    return f"{value:.4f}".rstrip("0").rstrip(".")


def fresh_number(rng: random.Random, values: list[str], avoid: str | None = None) -> str:
    """A plausible new number for a numeric column: in its range, with its precision.

    Decimals never end in 0, so an agent typing them unquoted stores the same text on MySQL
    (decimal literal) and SQLite (REAL -> TEXT).
    """
    nums = [float(v) for v in values]
    lo, hi = min(nums), max(nums)
    decimals = max((len(v.split(".")[1]) for v in values if "." in v), default=0)
    for _ in range(20):
        x = rng.uniform(lo, hi + 1) if decimals else rng.randint(int(lo), int(hi) + 2)
        text = f"{x:.{decimals}f}".rstrip("0").rstrip(".") if decimals else str(x)
        if text != avoid and text != "-0":
            return text
    return str(int(hi) + 1)


def pick_text(rng: random.Random, values: list[str], avoid: str | None = None) -> str | None:
    choices = sorted({v for v in values if clean(v) and v != avoid})
    return rng.choice(choices) if choices else None


def join_and(parts: list[str]) -> str:
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]


def cast(col: str) -> str:
    """Numeric view of a TEXT column that both MySQL/MariaDB and SQLite accept."""
    return f"CAST({quote_ident(col)} AS DOUBLE)"


# ---------------------------------------------------------------- INSERT / UPDATE


_INSERT_TEMPLATES = (
    "Add a new row to the {t} table with {pairs}.",
    "Insert a record into '{t}' where {pairs}.",
    "Please record a new entry in table {t}: {pairs}.",
    "The {t} table is missing one row; put it in with {pairs}.",
    "Create a row in {t} holding {pairs}.",
)
_PAIR_STYLES = ("{c} = '{v}'", "'{v}' for {c}", "{c} set to '{v}'", "{c} '{v}'")


def new_row(rng: random.Random, table: Table) -> list[str] | None:
    """A new row: fresh numbers in numeric columns, recombined existing values elsewhere."""
    row: list[str] = []
    for i in range(len(table.columns)):
        values = table.column(i)
        value = fresh_number(rng, values) if i in table.numeric else pick_text(rng, values)
        if value is None:
            return None
        row.append(value)
    return None if row in table.rows else row


def insert_sql(table: Table, row: list[str]) -> str:
    """The gold INSERT naming every column, values in column order, all as string literals."""
    cols = ", ".join(quote_ident(c) for c in table.columns)
    return f"INSERT INTO {quote_ident(table.name)} ({cols}) VALUES ({', '.join(lit(v) for v in row)})"


def gen_insert(rng: random.Random, table: Table) -> dict | None:
    """A new row, its values named column by column in one of several phrasings."""
    row = new_row(rng, table)
    if row is None:
        return None
    style = rng.choice(_PAIR_STYLES)
    pairs = [style.format(c=c, v=v) for c, v in zip(table.columns, row)]
    description = rng.choice(_INSERT_TEMPLATES).format(t=table.name, pairs=join_and(pairs))
    return {"type": "INSERT", "description": description, "sql": insert_sql(table, row)}


# (template, how one assignment is phrased inside it)
_UPDATE_ONE = (
    ("In the {t} table, change {sets} for the row whose {k} is '{kv}'.", "{c} to '{v}'"),
    ("Update {t}: set {sets} where {k} equals '{kv}'.", "{c} to '{v}'"),
    ("For the entry with {k} '{kv}' in {t}, the record should now show {sets}.", "{c} '{v}'"),
    ("Correct the {t} table so that the row with {k} = '{kv}' has {sets}.", "{c} = '{v}'"),
    ("The {t} row for {k} '{kv}' is out of date: make it {sets}.", "{c} = '{v}'"),
)
_UPDATE_MANY = (
    ("Set {sets} in every row of {t} whose {k} is '{kv}'.", "{c} to '{v}'"),
    ("For all rows of the {t} table with {k} equal to '{kv}', change {sets}.", "the {c} to '{v}'"),
)


def gen_update(rng: random.Random, table: Table) -> dict | None:
    """Change 1-3 cells of the row(s) matching an existing value of a key column."""
    keys = [i for i in range(len(table.columns)) if table.unique_rows(i)]
    if not keys or len(table.columns) < 2:
        return None
    key = rng.choice(keys)
    many = rng.random() < 0.2
    if many:
        counts = Counter(table.column(key))
        repeated = sorted(v for v, n in counts.items() if n > 1 and clean(v) and unambiguous(table, key, v))
        if not repeated:
            return None
        key_value = rng.choice(repeated)
    else:
        key_value = table.column(key)[rng.choice(table.unique_rows(key))]
    row = table.rows[table.column(key).index(key_value)]
    others = [i for i in range(len(table.columns)) if i != key]
    targets = sorted(rng.sample(others, k=min(len(others), rng.choice((1, 1, 2, 3)))))
    sets: list[tuple[str, str]] = []
    for i in targets:
        values = table.column(i)
        value = fresh_number(rng, values, row[i]) if i in table.numeric else pick_text(rng, values, row[i])
        if value is not None:
            sets.append((table.columns[i], value))
    if not sets:
        return None
    template, style = rng.choice(_UPDATE_MANY if many else _UPDATE_ONE)
    description = template.format(
        t=table.name,
        k=table.columns[key],
        kv=key_value,
        sets=join_and([style.format(c=c, v=v) for c, v in sets]),
    )
    assignments = ", ".join(f"{quote_ident(c)} = {lit(v)}" for c, v in sets)
    sql = (
        f"UPDATE {quote_ident(table.name)} SET {assignments} WHERE {quote_ident(table.columns[key])} = {lit(key_value)}"
    )
    return {"type": "UPDATE", "description": description, "sql": sql}


def unambiguous(table: Table, column: int, value: str) -> bool:
    """Exact and collation matches select the same rows, so SQLite and MySQL agree trivially."""
    key = mysql_collation_key(value)
    return all((v == value) == (mysql_collation_key(v) == key) for v in table.column(column))


# ---------------------------------------------------------------- SELECT family


def _pick_key(rng: random.Random, table: Table) -> tuple[int, list[int]] | None:
    """A column naming rows uniquely (for 'which X ...' questions) and its unique rows."""
    keys = [i for i in table.text if len(table.unique_rows(i)) >= 3]
    if not keys:
        return None
    key = rng.choice(keys)
    return key, table.unique_rows(key)


def gen_lookup(rng: random.Random, table: Table) -> dict | None:
    """'other': read one cell of the row identified by a unique value."""
    picked = _pick_key(rng, table)
    if picked is None:
        return None
    key, rows = picked
    row = table.rows[rng.choice(rows)]
    targets = [i for i in range(len(table.columns)) if i != key and clean(row[i])]
    if not targets:
        return None
    target = rng.choice(targets)
    k, c, kv = table.columns[key], table.columns[target], row[key]
    description = rng.choice(
        (
            "What is the {c} of the entry whose {k} is '{kv}'?",
            "Which {c} is listed for {k} '{kv}'?",
            "Look up the {c} recorded for '{kv}' in the {k} column.",
            "For the row with {k} equal to '{kv}', what does the {c} column say?",
        )
    ).format(c=c, k=k, kv=kv)
    sql = f"SELECT {quote_ident(c)} FROM {quote_ident(table.name)} WHERE {quote_ident(k)} = {lit(kv)}"
    return {"type": "other", "description": description, "sql": sql}


def gen_counting(rng: random.Random, table: Table) -> dict | None:
    """'counting': rows with a given value, or rows above a numeric threshold."""
    t = quote_ident(table.name)
    if table.numeric and rng.random() < 0.4:
        col = rng.choice(table.numeric)
        name, threshold = table.columns[col], rng.choice(table.column(col))
        word, op = rng.choice((("greater than", ">"), ("less than", "<"), ("at least", ">=")))
        description = rng.choice(
            (
                "How many rows have a {c} {w} {x}?",
                "Count the entries whose {c} is {w} {x}.",
                "In how many records is {c} {w} {x}?",
            )
        ).format(c=name, w=word, x=threshold)
        return {
            "type": "counting",
            "description": description,
            "sql": f"SELECT COUNT(*) FROM {t} WHERE {cast(name)} {op} {threshold}",
        }
    if not table.text:
        return None
    col = rng.choice(table.text)
    values = sorted({v for v in table.column(col) if clean(v) and unambiguous(table, col, v)})
    if not values:
        return None
    value, name = rng.choice(values), table.columns[col]
    description = rng.choice(
        (
            "How many rows have {c} equal to '{v}'?",
            "Count the entries whose {c} is '{v}'.",
            "How many times does '{v}' appear in the {c} column?",
            "What is the number of records with '{v}' as their {c}?",
        )
    ).format(c=name, v=value)
    return {
        "type": "counting",
        "description": description,
        "sql": f"SELECT COUNT(*) FROM {t} WHERE {quote_ident(name)} = {lit(value)}",
    }


def gen_comparison(rng: random.Random, table: Table) -> dict | None:
    """'comparison': which of two rows is larger, or which rows pass a threshold."""
    picked = _pick_key(rng, table)
    if picked is None or not table.numeric:
        return None
    key, rows = picked
    num = rng.choice(table.numeric)
    k, n, t = table.columns[key], table.columns[num], quote_ident(table.name)
    if rng.random() < 0.5:
        a, b = rng.sample(rows, 2)
        va, vb = float(table.rows[a][num]), float(table.rows[b][num])
        if va == vb:
            return None
        high = rng.random() < 0.5
        names = (table.rows[a][key], table.rows[b][key])
        description = rng.choice(
            (
                "Which has the {hl} {n}, '{a}' or '{b}'?",
                "Between {k} '{a}' and '{b}', which one shows the {hl} {n}?",
                "Compare '{a}' and '{b}': whose {n} is {hl}?",
            )
        ).format(hl="higher" if high else "lower", n=n, k=k, a=names[0], b=names[1])
        order = "DESC" if high else "ASC"
        sql = (
            f"SELECT {quote_ident(k)} FROM {t} WHERE {quote_ident(k)} IN ({lit(names[0])}, {lit(names[1])}) "
            f"ORDER BY {cast(n)} {order} LIMIT 1"
        )
        return {"type": "comparison", "description": description, "sql": sql}
    threshold = rng.choice(table.column(num))
    word, op = rng.choice((("more than", ">"), ("less than", "<")))
    description = rng.choice(
        (
            "Which {k} entries have a {n} {w} {x}?",
            "List every {k} whose {n} is {w} {x}.",
        )
    ).format(k=k, n=n, w=word, x=threshold)
    sql = f"SELECT {quote_ident(k)} FROM {t} WHERE {cast(n)} {op} {threshold}"
    return {"type": "comparison", "description": description, "sql": sql, "max_rows": 4}


def gen_ranking(rng: random.Random, table: Table) -> dict | None:
    """'ranking': the top/bottom row (or top 2-3) by a numeric column, ties excluded."""
    picked = _pick_key(rng, table)
    if picked is None or not table.numeric:
        return None
    key, _ = picked
    num = rng.choice(table.numeric)
    k, n = table.columns[key], table.columns[num]
    high = rng.random() < 0.5
    ordered = sorted((float(v) for v in table.column(num)), reverse=high)
    size = rng.choice((1, 1, 1, 2, 3))
    if len(ordered) <= size or ordered[size - 1] == ordered[size]:
        return None  # a tie at the cut would make the label ambiguous
    if not all(clean(table.rows[r][key]) for r in range(len(table.rows))):
        return None
    word = "highest" if high else "lowest"
    if size == 1:
        template = rng.choice(
            (
                "Which {k} has the {w} {n}?",
                "Name the {k} with the {w} {n}.",
                "Sorting by {n}, which {k} comes out {w}?",
            )
        )
    else:
        template = rng.choice(
            (
                "List the {s} {k} entries with the {w} {n}.",
                "Which {s} {k} values have the {w} {n}?",
            )
        )
    description = template.format(k=k, n=n, w=word, s=size)
    sql = (
        f"SELECT {quote_ident(k)} FROM {quote_ident(table.name)} "
        f"ORDER BY {cast(n)} {'DESC' if high else 'ASC'} LIMIT {size}"
    )
    return {"type": "ranking", "description": description, "sql": sql}


_AGG_WORDS = {
    "SUM": ("total", "sum of all"),
    "MIN": ("smallest", "minimum"),
    "MAX": ("largest", "maximum"),
    "AVG": ("average", "mean"),
}


def gen_aggregation(rng: random.Random, table: Table, fn: str) -> dict | None:
    """'aggregation-FN' over a numeric column, optionally filtered on a repeated value."""
    if not table.numeric:
        return None
    num = rng.choice(table.numeric)
    n, t = table.columns[num], quote_ident(table.name)
    where, scope = "", ""
    if table.text and rng.random() < 0.5:
        col = rng.choice(table.text)
        counts = Counter(table.column(col))
        repeated = sorted(v for v, c in counts.items() if c > 1 and clean(v) and unambiguous(table, col, v))
        if repeated:
            value = rng.choice(repeated)
            where = f" WHERE {quote_ident(table.columns[col])} = {lit(value)}"
            scope = f" for rows whose {table.columns[col]} is '{value}'"
    word = rng.choice(_AGG_WORDS[fn])
    description = rng.choice(
        (
            "What is the {w} {n}{s}?",
            "Compute the {w} {n}{s}.",
            "Give the {w} value of {n}{s}.",
        )
    ).format(w=word, n=n, s=scope)
    sql = f"SELECT {fn}({cast(n)}) FROM {t}{where}"
    return {"type": f"aggregation-{fn}", "description": description, "sql": sql}


def generators() -> dict:
    """Task type -> generator(rng, table)."""
    table = {
        "INSERT": gen_insert,
        "UPDATE": gen_update,
        "other": gen_lookup,
        "counting": gen_counting,
        "comparison": gen_comparison,
        "ranking": gen_ranking,
    }
    for fn in _AGG_WORDS:
        table[f"aggregation-{fn}"] = lambda rng, tab, fn=fn: gen_aggregation(rng, tab, fn)
    return table
