"""Build the generated DBBench training split (no upstream training split exists offline).

Tasks are drafted over the distinct real tables of dev + standard in three difficulty tiers
(`data.TIERS`), because the small policy solves none of the real tasks:

- easy (`train_tiers`): the description nearly spells the SQL: INSERT with the table in
  backticks and the values in column order beside their columns, UPDATE of one named cell of
  one uniquely keyed row, SELECT with one equality condition naming both columns (lookup, count);
- medium (`train_tiers`): the same families in prose, plus SUM/MIN/MAX/AVG of one column and
  two-row comparisons;
- hard (`train_templates`): the test split's mix and wording variety (multi-cell and multi-row
  UPDATEs, thresholds, top-k ranking, ...).

Every label and answer_md5 is computed by executing the draft's SQL in `SqliteBackend`, the
code path the environment uses. Records keep the upstream JSONL format (plus "source":
"harness-s-train", "tier", "origin": the source task id), so `load_split("train", tiers=...)`
needs no special case. Inside each tier the mix is about 1/3 INSERT, 1/3 UPDATE, 1/3 SELECT
family, as in the test split; tasks are written tier by tier, easiest first. Same seed and
tiers -> byte-identical file.

Departure to keep in mind: the tables (not the questions) of the validation and test files
are reused, since they are the only real DBBench tables available offline; no generated
description equals an upstream one or another generated one (checked here and in tests).

Run: python -m envs.dbbench.train_split .hs/data/dbbench/train.jsonl --seed 0 --tiers easy,medium,hard
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

from envs.base import DataError
from envs.dbbench.data import MUTATION_TYPES, SELECT_TYPES, TIERS, check_tiers, load_split, parse_tiers
from envs.dbbench.sqlite_backend import SqliteBackend
from envs.dbbench.train_templates import Table, distinct_tables, fmt_number, generators
from envs.dbbench.train_tiers import AGG_FNS, easy_generators, medium_generators

SOURCE = "harness-s-train"
MIN_TASKS = 300
# The standard split's mix inside its SELECT third (17/17/17/17/8/8/8/8).
SELECT_WEIGHTS = (17, 17, 17, 17, 8, 8, 8, 8)
# SELECT-family types and weights inside each tier's SELECT third.
TIER_SELECT_MIX = {
    "easy": (("other", "counting"), (1, 1)),
    "medium": (("other", "counting", "comparison", *(f"aggregation-{fn}" for fn in AGG_FNS)), (2, 2, 2, 1, 1, 1, 1)),
    "hard": (SELECT_TYPES, SELECT_WEIGHTS),
}
_ATTEMPTS_PER_TASK = 60


def normalise_description(text: str) -> str:
    """Comparison key for 'same description': case and spacing do not make a question new."""
    return " ".join(text.split()).casefold()


def plan_types(rng: random.Random, n_tasks: int, tier: str = "hard") -> list[str]:
    """Type of each task of one tier: thirds of INSERT / UPDATE / SELECT family, shuffled."""
    select_types, weights = TIER_SELECT_MIX[tier]
    plan = []
    for i in range(n_tasks):
        if i % 3 == 0:
            plan.append("INSERT")
        elif i % 3 == 1:
            plan.append("UPDATE")
        else:
            plan.append(rng.choices(select_types, weights=weights)[0])
    rng.shuffle(plan)
    return plan


def tier_sizes(n_tasks: int, tiers: tuple[str, ...]) -> list[int]:
    """Tasks per tier: an even split, the remainder going to the first tier."""
    share, rest = divmod(n_tasks, len(tiers))
    return [share + (rest if i == 0 else 0) for i in range(len(tiers))]


def tier_generators(tier: str) -> dict:
    """Task type -> generator(rng, table) of one tier."""
    return {"easy": easy_generators, "medium": medium_generators, "hard": generators}[tier]()


def _label_from_rows(rows: list[tuple], max_rows: int) -> list[str] | None:
    """Label list from a result: one cell per row of a one-column result; None if unusable."""
    if not rows or len(rows) > max_rows or any(len(row) != 1 or row[0] is None for row in rows):
        return None
    label = [fmt_number(v) if isinstance(v, (int, float)) else str(v) for (v,) in rows]
    return label if len(set(label)) == len(label) else None


def materialise(draft: dict, table: Table, tier: str | None = None) -> dict | None:
    """Execute a draft on the real table and turn it into an upstream-format record."""
    task = table.task
    with SqliteBackend() as db:
        db.create_table(task.table_name, task.columns, task.rows)
        before = db.table_hash(task.table_name, task.columns)
        result = db.execute(draft["sql"])
        if result.error is not None:
            raise RuntimeError(f"generated SQL failed ({result.error}): {draft['sql']}")  # a template bug
        after = db.table_hash(task.table_name, task.columns)
    if result.truncated:
        return None  # a label needs the whole result
    rows = result.rows
    record = {
        "description": draft["description"],
        "label": None,
        "create": task.record.get("create", {}),
        "table": task.record["table"],
        "evaluation": "",
        "example": "",
        "type": [draft["type"]],
        "heads": list(task.columns),
        "add_description": (
            f"The name of this table is {task.table_name}, and the headers of this table are {','.join(task.columns)}."
        ),
        "source": SOURCE,
        "tier": tier,
        "origin": task.id,
    }
    if draft["type"] in MUTATION_TYPES:
        if after == before:
            return None  # the edit changed nothing: not a task
        record["label"] = [draft["sql"]]
        record["answer_md5"] = f"[('{after}',)]"
    else:
        label = _label_from_rows(rows or [], draft.get("max_rows", 3))
        if label is None:
            return None
        record["label"] = label
        record["sql"] = {"query": draft["sql"], "length": len(draft["sql"])}
    return record


def generate_tier(tier: str, n_tasks: int, seed: int, tables: list[Table], seen: set[str]) -> list[dict]:
    """Up to `n_tasks` records of one tier; adds their descriptions to `seen` (never reused).

    Each tier draws from its own generator seeded by (seed, tier), so a tier's tasks do not
    depend on which other tiers were requested (short of a description collision).
    """
    rng = random.Random(f"{seed}:{tier}")
    makers = tier_generators(tier)
    records: list[dict] = []
    for task_type in plan_types(rng, n_tasks, tier):
        for _ in range(_ATTEMPTS_PER_TASK):
            table = rng.choice(tables)
            draft = makers[task_type](rng, table)
            if draft is None or normalise_description(draft["description"]) in seen:
                continue
            record = materialise(draft, table, tier)
            if record is not None:
                seen.add(normalise_description(record["description"]))
                records.append(record)
                break
    return records


def build_train_split(
    out_path: Path,
    seed: int = 0,
    n_tasks: int = 400,
    data_dir: Path | str | None = None,
    tiers: tuple[str, ...] | str = TIERS,
) -> list[dict]:
    """Generate `n_tasks` (>= 300) records over `tiers`, write them as JSONL, and return them.

    `n_tasks` is split evenly over the tiers (remainder to the easiest); `tiers` is a tuple of
    names from `TIERS` or a comma-separated string, and is always generated easiest first.
    """
    if n_tasks < MIN_TASKS:
        raise ValueError(f"n_tasks must be >= {MIN_TASKS}, got {n_tasks}")
    tiers = check_tiers(tiers)
    sources = load_split("dev", data_dir) + load_split("standard", data_dir)
    seen = {normalise_description(t.description) for t in sources}
    tables = distinct_tables(sources)
    records: list[dict] = []
    for tier, size in zip(tiers, tier_sizes(n_tasks, tiers)):
        records += generate_tier(tier, size, seed, tables, seen)
    if len(records) < MIN_TASKS:
        raise DataError(f"only {len(records)} training tasks could be generated: lower the bar or add tables")
    out_path = Path(out_path)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    with out_path.open("w", encoding="utf-8", newline="\n") as handle:
        for record in records:
            handle.write(json.dumps(record, ensure_ascii=False) + "\n")
    return records


def _tiers_arg(text: str) -> tuple[str, ...]:
    try:
        return parse_tiers(text)
    except DataError as exc:  # argparse prints ArgumentTypeError as a usage error
        raise argparse.ArgumentTypeError(str(exc)) from exc


def main(argv: list[str] | None = None) -> int:
    """CLI for building the split without the `hs` app."""
    parser = argparse.ArgumentParser(description="Build the generated DBBench training split.")
    parser.add_argument("out", type=Path)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--n-tasks", type=int, default=400)
    parser.add_argument("--data-dir", default=None)
    parser.add_argument(
        "--tiers", type=_tiers_arg, default=TIERS, help=f"comma-separated subset of {','.join(TIERS)} (default: all)"
    )
    args = parser.parse_args(argv)
    records = build_train_split(args.out, args.seed, args.n_tasks, args.data_dir, tiers=args.tiers)
    print(f"wrote {len(records)} tasks to {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
