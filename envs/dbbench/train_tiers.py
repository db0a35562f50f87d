"""Easy and medium templates of the graded DBBench training split (hard = train_templates).

The small policy solves none of the real tasks, so the curriculum starts below them:

- easy: the description nearly spells the statement. INSERT gives the table in backticks and
  every value in column order next to its column; UPDATE names one cell (table, column, new
  value, and a key value that identifies exactly one row); SELECT asks one equality condition
  naming both columns (a one-row lookup or a count).
- medium: the same families worded in prose (no backticks, columns named as words), plus
  SUM/MIN/MAX/AVG of one numeric column (optionally one equality condition) and which of two
  rows has the higher/lower number.

Like train_templates, a generator returns a draft {type, description, sql} or None; labels and
hashes come from executing the SQL (train_split.materialise), never from the template.
"""

from __future__ import annotations

import random
from collections import Counter

from envs.dbbench.backends import quote_ident
from envs.dbbench.train_templates import (
    Table,
    cast,
    clean,
    fresh_number,
    insert_sql,
    join_and,
    lit,
    new_row,
    pick_text,
    unambiguous,
)

AGG_FNS = ("SUM", "MIN", "MAX", "AVG")


def _nameable(table: Table) -> bool:
    """Names we can put between backticks in a description without escaping anything."""
    return not any("`" in name for name in [table.name, *table.columns])


def _key_columns(table: Table, candidates: list[int]) -> list[int]:
    """Columns naming rows, most name-like first found: unique in every row and textual, then
    unique in every row, then any column with at least one unique value."""
    named = [i for i in candidates if len(table.unique_rows(i)) == len(table.rows)]
    return [i for i in named if i in table.text] or named or [i for i in candidates if table.unique_rows(i)]


def _one_cell(rng: random.Random, table: Table) -> tuple[int, str, int, str] | None:
    """(key column, key value, target column, new value): one cell of one uniquely keyed row."""
    keys = _key_columns(table, list(range(len(table.columns))))
    if not keys or len(table.columns) < 2:
        return None
    key = rng.choice(keys)
    row = table.rows[rng.choice(table.unique_rows(key))]
    target = rng.choice([i for i in range(len(table.columns)) if i != key])
    values = table.column(target)
    if target in table.numeric:
        value = fresh_number(rng, values, row[target])
    else:
        value = pick_text(rng, values, row[target])
    if value is None or value == row[target]:
        return None
    return key, row[key], target, value


def _update_sql(table: Table, key: int, key_value: str, target: int, value: str) -> str:
    return (
        f"UPDATE {quote_ident(table.name)} SET {quote_ident(table.columns[target])} = {lit(value)} "
        f"WHERE {quote_ident(table.columns[key])} = {lit(key_value)}"
    )


def _lookup_cell(rng: random.Random, table: Table) -> tuple[int, str, int] | None:
    """(key column, key value, target column) of a cell in a row a unique value identifies."""
    keys = _key_columns(table, list(range(len(table.columns))))
    if not keys:
        return None
    key = rng.choice(keys)
    row = table.rows[rng.choice(table.unique_rows(key))]
    targets = [i for i in range(len(table.columns)) if i != key and clean(row[i])]
    if not targets:
        return None
    return key, row[key], rng.choice(targets)


def _lookup_sql(table: Table, key: int, key_value: str, target: int) -> str:
    return (
        f"SELECT {quote_ident(table.columns[target])} FROM {quote_ident(table.name)} "
        f"WHERE {quote_ident(table.columns[key])} = {lit(key_value)}"
    )


def _count_condition(rng: random.Random, table: Table) -> tuple[int, str] | None:
    """(column, value) for an equality count; mostly a repeated value, so the answer is not always 1."""
    candidates = [
        (i, v)
        for i in range(len(table.columns))
        for v in sorted(set(table.column(i)))
        if clean(v) and unambiguous(table, i, v)
    ]
    repeated = [(i, v) for i, v in candidates if table.column(i).count(v) > 1]
    pool = repeated if repeated and rng.random() < 0.7 else candidates
    return rng.choice(pool) if pool else None


def _count_sql(table: Table, column: int, value: str) -> str:
    return f"SELECT COUNT(*) FROM {quote_ident(table.name)} WHERE {quote_ident(table.columns[column])} = {lit(value)}"


# ---------------------------------------------------------------- easy


def easy_insert(rng: random.Random, table: Table) -> dict | None:
    """INSERT: table in backticks, all values in column order, the columns listed alongside."""
    row = new_row(rng, table) if _nameable(table) else None
    if row is None:
        return None
    values = ", ".join(f"'{v}'" for v in row)
    columns = ", ".join(f"`{c}`" for c in table.columns)
    description = rng.choice(
        (
            "Insert a row into `{t}` with values ({vals}) for the columns ({cols}).",
            "Add one row to `{t}`: the values ({vals}) go into the columns ({cols}), in that order.",
        )
    ).format(t=table.name, vals=values, cols=columns)
    return {"type": "INSERT", "description": description, "sql": insert_sql(table, row)}


def easy_update(rng: random.Random, table: Table) -> dict | None:
    """UPDATE of exactly one cell: table, column, new value and the row's unique key are named."""
    picked = _one_cell(rng, table) if _nameable(table) else None
    if picked is None:
        return None
    key, key_value, target, value = picked
    description = rng.choice(
        (
            "In `{t}`, set `{c}` to '{v}' in the row where `{k}` is '{kv}'.",
            "In `{t}`, change the `{c}` of the row whose `{k}` is '{kv}' to '{v}'.",
        )
    ).format(t=table.name, c=table.columns[target], v=value, k=table.columns[key], kv=key_value)
    return {"type": "UPDATE", "description": description, "sql": _update_sql(table, key, key_value, target, value)}


def easy_lookup(rng: random.Random, table: Table) -> dict | None:
    """'other': one cell of the single row whose key column holds a given value."""
    picked = _lookup_cell(rng, table) if _nameable(table) else None
    if picked is None:
        return None
    key, key_value, target = picked
    description = rng.choice(
        (
            "In `{t}`, what is `{c}` where `{k}` is '{kv}'?",
            "In `{t}`, what is the value of `{c}` in the row where `{k}` is '{kv}'?",
        )
    ).format(t=table.name, c=table.columns[target], k=table.columns[key], kv=key_value)
    return {"type": "other", "description": description, "sql": _lookup_sql(table, key, key_value, target)}


def easy_counting(rng: random.Random, table: Table) -> dict | None:
    """'counting': rows whose column equals a given value."""
    picked = _count_condition(rng, table) if _nameable(table) else None
    if picked is None:
        return None
    column, value = picked
    description = rng.choice(
        (
            "How many rows of `{t}` have `{k}` equal to '{v}'?",
            "In `{t}`, count the rows where `{k}` is '{v}'.",
        )
    ).format(t=table.name, k=table.columns[column], v=value)
    return {"type": "counting", "description": description, "sql": _count_sql(table, column, value)}


# ---------------------------------------------------------------- medium


def medium_insert(rng: random.Random, table: Table) -> dict | None:
    """INSERT worded in prose; values still in column order, each next to its column's name."""
    row = new_row(rng, table)
    if row is None:
        return None
    template, style = rng.choice(
        (
            ("A new entry belongs in the {t} table: its {pairs}. Add it.", "{c} is '{v}'"),
            ("Please add another {t} record, with {pairs}.", "'{v}' as the {c}"),
            ("Put one more row into {t}, giving it {pairs}.", "the {c} '{v}'"),
        )
    )
    pairs = join_and([style.format(c=c, v=v) for c, v in zip(table.columns, row)])
    return {"type": "INSERT", "description": template.format(t=table.name, pairs=pairs), "sql": insert_sql(table, row)}


def medium_update(rng: random.Random, table: Table) -> dict | None:
    """UPDATE of one cell of one row, worded in prose."""
    picked = _one_cell(rng, table)
    if picked is None:
        return None
    key, key_value, target, value = picked
    description = rng.choice(
        (
            "The {t} entry whose {k} is '{kv}' has the wrong {c}: it should be '{v}'.",
            "Please change the {c} to '{v}' for the {t} record with {k} '{kv}'.",
            "Our {t} table needs one fix: for {k} '{kv}', the {c} is now '{v}'.",
        )
    ).format(t=table.name, c=table.columns[target], v=value, k=table.columns[key], kv=key_value)
    return {"type": "UPDATE", "description": description, "sql": _update_sql(table, key, key_value, target, value)}


def medium_lookup(rng: random.Random, table: Table) -> dict | None:
    """'other': a one-row lookup worded in prose."""
    picked = _lookup_cell(rng, table)
    if picked is None:
        return None
    key, key_value, target = picked
    description = rng.choice(
        (
            "According to the {t} table, what is the {c} for the {k} '{kv}'?",
            "Which {c} does {t} list for the entry with {k} '{kv}'?",
            "Tell me the {c} of '{kv}' ({k}) in {t}.",
        )
    ).format(t=table.name, c=table.columns[target], k=table.columns[key], kv=key_value)
    return {"type": "other", "description": description, "sql": _lookup_sql(table, key, key_value, target)}


def medium_counting(rng: random.Random, table: Table) -> dict | None:
    """'counting': an equality count worded in prose."""
    picked = _count_condition(rng, table)
    if picked is None:
        return None
    column, value = picked
    description = rng.choice(
        (
            "How many entries in {t} have '{v}' as their {k}?",
            "In the {t} table, how many records list the {k} as '{v}'?",
            "Count how often {t} has a {k} of '{v}'.",
        )
    ).format(t=table.name, k=table.columns[column], v=value)
    return {"type": "counting", "description": description, "sql": _count_sql(table, column, value)}


def medium_comparison(rng: random.Random, table: Table) -> dict | None:
    """'comparison': which of two uniquely named rows has the higher/lower number."""
    keys = [i for i in _key_columns(table, table.text) if len(table.unique_rows(i)) >= 2]
    if not keys or not table.numeric:
        return None
    key, num = rng.choice(keys), rng.choice(table.numeric)
    a, b = rng.sample(table.unique_rows(key), 2)
    if float(table.rows[a][num]) == float(table.rows[b][num]):
        return None
    high = rng.random() < 0.5
    k, n, names = table.columns[key], table.columns[num], (table.rows[a][key], table.rows[b][key])
    description = rng.choice(
        (
            "In {t}, which {k} has the {hl} {n}: '{a}' or '{b}'?",
            "Of the {t} entries '{a}' and '{b}' ({k}), which one's {n} is {hl}?",
        )
    ).format(t=table.name, k=k, n=n, hl="higher" if high else "lower", a=names[0], b=names[1])
    sql = (
        f"SELECT {quote_ident(k)} FROM {quote_ident(table.name)} "
        f"WHERE {quote_ident(k)} IN ({lit(names[0])}, {lit(names[1])}) "
        f"ORDER BY {cast(n)} {'DESC' if high else 'ASC'} LIMIT 1"
    )
    return {"type": "comparison", "description": description, "sql": sql}


_MEDIUM_AGG_WORDS = {
    "SUM": ("total",),
    "MIN": ("lowest", "smallest"),
    "MAX": ("highest", "largest"),
    "AVG": ("average",),
}


def medium_aggregation(rng: random.Random, table: Table, fn: str) -> dict | None:
    """'aggregation-FN' of one numeric column, over all rows or over one equality condition."""
    if not table.numeric:
        return None
    num = rng.choice(table.numeric)
    where, scope = "", ""
    if table.text and rng.random() < 0.5:
        col = rng.choice(table.text)
        counts = Counter(table.column(col))
        repeated = sorted(v for v, c in counts.items() if c > 1 and clean(v) and unambiguous(table, col, v))
        if not repeated:
            return None
        value = rng.choice(repeated)
        where = f" WHERE {quote_ident(table.columns[col])} = {lit(value)}"
        scope = f" among the rows whose {table.columns[col]} is '{value}'"
    description = rng.choice(
        (
            "What is the {w} {n} in the {t} table{s}?",
            "Across {t}, what is the {w} value of {n}{s}?",
        )
    ).format(w=rng.choice(_MEDIUM_AGG_WORDS[fn]), n=table.columns[num], t=table.name, s=scope)
    sql = f"SELECT {fn}({cast(table.columns[num])}) FROM {quote_ident(table.name)}{where}"
    return {"type": f"aggregation-{fn}", "description": description, "sql": sql}


def easy_generators() -> dict:
    """Task type -> generator(rng, table) for the easy tier."""
    return {"INSERT": easy_insert, "UPDATE": easy_update, "other": easy_lookup, "counting": easy_counting}


def medium_generators() -> dict:
    """Task type -> generator(rng, table) for the medium tier."""
    makers = {
        "INSERT": medium_insert,
        "UPDATE": medium_update,
        "other": medium_lookup,
        "counting": medium_counting,
        "comparison": medium_comparison,
    }
    for fn in AGG_FNS:
        makers[f"aggregation-{fn}"] = lambda rng, tab, fn=fn: medium_aggregation(rng, tab, fn)
    return makers
