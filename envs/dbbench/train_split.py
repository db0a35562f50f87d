"""Build the generated DBBench training split (no upstream training split exists offline).

Tasks are drafted by `train_templates` over the distinct real tables of dev + standard:
INSERT rows with fresh values, UPDATEs keyed on existing values, and templated SELECT-family
questions; every label and answer_md5 is then computed by executing the draft's SQL in
`SqliteBackend`, the code path the environment uses. Records keep the upstream JSONL format
(plus "source": "harness-s-train", "tier": null, "origin": the source task id), so
`load_split("train")` needs no special case. The mix is about 1/3 INSERT, 1/3 UPDATE, 1/3
SELECT family, as in the test split. Same seed -> byte-identical file.

Departure to keep in mind: the tables (not the questions) of the validation and test files
are reused, since they are the only real DBBench tables available offline; no generated
description equals an upstream one (checked here and in tests).

Run: python -m envs.dbbench.train_split .hs/data/dbbench/train.jsonl --seed 0
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

from envs.base import DataError
from envs.dbbench.backends import SqliteBackend
from envs.dbbench.data import MUTATION_TYPES, load_split
from envs.dbbench.train_templates import Table, distinct_tables, fmt_number, generators

SOURCE = "harness-s-train"
MIN_TASKS = 300
SELECT_TYPES = (
    "other", "counting", "comparison", "ranking",
    "aggregation-SUM", "aggregation-MIN", "aggregation-MAX", "aggregation-AVG",
)
# The standard split's mix inside its SELECT third (17/17/17/17/8/8/8/8).
SELECT_WEIGHTS = (17, 17, 17, 17, 8, 8, 8, 8)
_ATTEMPTS_PER_TASK = 60


def normalise_description(text: str) -> str:
    """Comparison key for 'same description': case and spacing do not make a question new."""
    return " ".join(text.split()).casefold()


def plan_types(rng: random.Random, n_tasks: int) -> list[str]:
    """Type of each task: thirds of INSERT / UPDATE / SELECT family, shuffled."""
    plan = []
    for i in range(n_tasks):
        if i % 3 == 0:
            plan.append("INSERT")
        elif i % 3 == 1:
            plan.append("UPDATE")
        else:
            plan.append(rng.choices(SELECT_TYPES, weights=SELECT_WEIGHTS)[0])
    rng.shuffle(plan)
    return plan


def _label_from_rows(rows: list[tuple], max_rows: int) -> list[str] | None:
    """Label list from a result: one cell per row of a one-column result; None if unusable."""
    if not rows or len(rows) > max_rows or any(len(row) != 1 or row[0] is None for row in rows):
        return None
    label = [fmt_number(v) if isinstance(v, (int, float)) else str(v) for (v,) in rows]
    return label if len(set(label)) == len(label) else None


def materialise(draft: dict, table: Table) -> dict | None:
    """Execute a draft on the real table and turn it into an upstream-format record."""
    task = table.task
    with SqliteBackend() as db:
        db.create_table(task.table_name, task.columns, task.rows)
        before = db.table_hash(task.table_name, task.columns)
        rows, error = db.execute(draft["sql"])
        if error is not None:
            raise RuntimeError(f"generated SQL failed ({error}): {draft['sql']}")  # a template bug
        after = db.table_hash(task.table_name, task.columns)
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
            f"The name of this table is {task.table_name}, and the headers of this table are "
            f"{','.join(task.columns)}."
        ),
        "source": SOURCE,
        "tier": None,
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


def build_train_split(
    out_path: Path,
    seed: int = 0,
    n_tasks: int = 400,
    data_dir: Path | str | None = None,
) -> list[dict]:
    """Generate `n_tasks` (>= 300) training records, write them as JSONL, and return them."""
    if n_tasks < MIN_TASKS:
        raise ValueError(f"n_tasks must be >= {MIN_TASKS}, got {n_tasks}")
    sources = load_split("dev", data_dir) + load_split("standard", data_dir)
    seen = {normalise_description(t.description) for t in sources}
    tables = distinct_tables(sources)
    rng = random.Random(seed)
    makers = generators()
    records: list[dict] = []
    for task_type in plan_types(rng, n_tasks):
        for _ in range(_ATTEMPTS_PER_TASK):
            table = rng.choice(tables)
            draft = makers[task_type](rng, table)
            if draft is None or normalise_description(draft["description"]) in seen:
                continue
            record = materialise(draft, table)
            if record is not None:
                seen.add(normalise_description(record["description"]))
                records.append(record)
                break
    if len(records) < MIN_TASKS:
        raise DataError(f"only {len(records)} training tasks could be generated: lower the bar or add tables")
    out_path = Path(out_path)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    with out_path.open("w", encoding="utf-8", newline="\n") as handle:
        for record in records:
            handle.write(json.dumps(record, ensure_ascii=False) + "\n")
    return records


def main(argv: list[str] | None = None) -> int:
    """CLI for building the split without the `hs` app."""
    parser = argparse.ArgumentParser(description="Build the generated DBBench training split.")
    parser.add_argument("out", type=Path)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--n-tasks", type=int, default=400)
    parser.add_argument("--data-dir", default=None)
    args = parser.parse_args(argv)
    records = build_train_split(args.out, args.seed, args.n_tasks, args.data_dir)
    print(f"wrote {len(records)} tasks to {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
