"""Do SQLite and MariaDB answer the same SQL alike? Measured on upstream's SELECT queries.

Gold replay (gold.py) only exercises the INSERT/UPDATE statements. Agents write SELECTs too,
so this runs every upstream `sql.query` of the SELECT-family tasks (written by many hands,
often not valid MySQL) on both backends and counts how often the outcomes agree: same rows
in the same order (values compared as text), or an error on both. Figures and the known
remaining differences are in README.md.

Run: python -m envs.dbbench.backend_parity [-v]   (needs the local MariaDB)
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from pathlib import Path

from envs.dbbench.backends import SqlBackend, format_rows
from envs.dbbench.data import BenchTask, load_split
from envs.dbbench.mysql_backend import MysqlBackend
from envs.dbbench.sqlite_backend import SqliteBackend


@dataclass
class ParityReport:
    """Outcome agreement between the two backends over a set of queries."""

    same: int = 0
    total: int = 0
    differences: list[tuple[str, str, str, str]] = field(default_factory=list)  # id, sql, sqlite, mysql

    def format_lines(self, verbose: bool = False) -> list[str]:
        lines = []
        if verbose:
            for task_id, sql, lite, maria in self.differences:
                lines += [f"{task_id}: {sql}", f"  sqlite: {lite}", f"  mysql:  {maria}"]
        lines.append(f"same outcome on sqlite and mysql: {self.same}/{self.total}")
        return lines


def _outcome(backend: SqlBackend, task: BenchTask) -> tuple[tuple[list[tuple], bool] | None, str]:
    """(rows as text, truncated) or None on error, plus a short printable form."""
    with backend as db:
        db.create_table(task.table_name, task.columns, task.rows)
        result = db.execute(task.gold_sql or "")
    if result.rows is None:
        return None, f"Error: {result.error}"[:160]
    as_text = [tuple(str(v) for v in row) for row in result.rows]
    return (as_text, result.truncated), format_rows(result.rows, result.truncated)[:160]


def compare_backends(tasks: list[BenchTask], mysql_url: str | None = None) -> ParityReport:
    """Run each SELECT task's upstream SQL on both backends and compare the outcomes."""
    report = ParityReport()
    for task in tasks:
        if task.is_mutation or not task.gold_sql:
            continue
        lite, lite_text = _outcome(SqliteBackend(), task)
        maria, maria_text = _outcome(MysqlBackend(mysql_url), task)
        report.total += 1
        if lite == maria:  # equal rows, or None == None when both failed
            report.same += 1
        else:
            report.differences.append((task.id, task.gold_sql[:120], lite_text, maria_text))
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Compare SQLite and MariaDB on upstream SELECT queries.")
    parser.add_argument("-v", "--verbose", action="store_true", help="print every difference")
    parser.add_argument("--data-dir", type=Path, default=None)
    args = parser.parse_args(argv)
    tasks = load_split("dev", args.data_dir) + load_split("standard", args.data_dir)
    print("\n".join(compare_backends(tasks).format_lines(args.verbose)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
