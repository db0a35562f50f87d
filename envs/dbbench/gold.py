"""Gold replay: does the environment + verifier accept the reference solution of every task?

This is the check that the platform's reward is the benchmark's reward. SELECT-family tasks
answer with their label (checks the verifier's normalisation is self-consistent), INSERT/UPDATE
tasks run their gold SQL and must reproduce the recorded table hash (checks the backend builds
the same table and hashes it like upstream's MySQL). Figures and the causes of remaining
disagreements are in README.md.

Run: python -m envs.dbbench.gold dev --backend sqlite   (or: standard, --backend mysql)
"""

from __future__ import annotations

import argparse
import ast
from dataclasses import dataclass, field
from pathlib import Path

from envs.base import AnswerAction, SqlAction
from envs.dbbench.data import TASK_TYPES, BenchTask, load_split
from envs.dbbench.env import DbBenchEnv

TYPE_ORDER = TASK_TYPES


@dataclass(frozen=True)
class Disagreement:
    """A task whose gold solution the environment did not accept, and why."""

    task_id: str
    task_type: str
    reason: str


@dataclass
class GoldReport:
    """Per-type agreement counts of one gold replay."""

    split: str
    backend: str
    per_type: dict[str, tuple[int, int]] = field(default_factory=dict)  # type -> (agreed, total)
    disagreements: list[Disagreement] = field(default_factory=list)

    @property
    def agreed(self) -> int:
        return sum(agreed for agreed, _ in self.per_type.values())

    @property
    def total(self) -> int:
        return sum(total for _, total in self.per_type.values())

    @property
    def agreement(self) -> float:
        """Share of tasks whose gold was accepted, in [0, 1] (1.0 for an empty replay)."""
        return self.agreed / self.total if self.total else 1.0

    def record(self, task: BenchTask, ok: bool, reason: str) -> None:
        agreed, total = self.per_type.get(task.task_type, (0, 0))
        self.per_type[task.task_type] = (agreed + int(ok), total + 1)
        if not ok:
            self.disagreements.append(Disagreement(task.id, task.task_type, reason))

    def format_lines(self) -> list[str]:
        """Printable summary; the last line is exactly `agreement: X%` (one decimal)."""
        lines = [f"gold replay: dbbench/{self.split} on {self.backend}"]
        known = [t for t in TYPE_ORDER if t in self.per_type]
        for task_type in known + sorted(set(self.per_type) - set(known)):
            agreed, total = self.per_type[task_type]
            lines.append(f"  {task_type:<16} {agreed:>4}/{total:<4}")
        for item in self.disagreements:
            lines.append(f"  DISAGREE {item.task_id} [{item.task_type}]: {item.reason}")
        lines.append(f"agreement: {100.0 * self.agreement:.1f}%")
        return lines


def _cells(observation: str) -> list:
    """Cells of a printed SELECT result, in row order, as an agent would copy them into its answer."""
    rows = ast.literal_eval(observation)
    return [cell for row in rows for cell in row]


def replay_gold(
    task: BenchTask,
    backend: str = "sqlite",
    mysql_url: str | None = None,
    replay_select_sql: bool = False,
) -> tuple[bool, str]:
    """Play one task's gold solution through a real `DbBenchEnv`; (accepted, reason if not).

    `replay_select_sql=True` answers SELECT tasks with the result of their gold SQL instead of
    the label: meaningless for upstream tasks (their SQL is unreliable) but the right check
    for generated tasks, whose labels were computed from that SQL.
    """
    with DbBenchEnv(task, backend=backend, mysql_url=mysql_url) as env:
        env.reset()
        if task.is_mutation or replay_select_sql:
            if not task.gold_sql:
                return False, "no gold SQL"
            result = env.step(SqlAction(task.gold_sql))
            if result.error:
                return False, f"gold SQL failed: {result.observation[:200]}"
            if task.is_mutation:
                env.step(AnswerAction([]))
            else:
                try:
                    cells = _cells(result.observation)
                except (ValueError, SyntaxError):
                    return False, f"unparsable result: {result.observation[:200]}"
                env.step(AnswerAction(cells))
        else:
            env.step(AnswerAction(list(task.label)))
        verdict = env.verify()
    if verdict.success:
        return True, ""
    details = verdict.details
    if task.is_mutation:
        got = details.get("table_hash") or details.get("hash_error")
        return False, f"table hash {got} != answer_md5 {task.answer_md5}"
    return False, f"answer {details.get('answer')!r} != label {task.label!r}"


def check_gold(
    split: str,
    backend: str = "sqlite",
    data_dir: Path | str | None = None,
    limit: int | None = None,
    *,
    tasks: list[BenchTask] | None = None,
    generated_dir: Path | str | None = None,
    mysql_url: str | None = None,
    replay_select_sql: bool = False,
) -> GoldReport:
    """Replay the gold of a split (or of the given `tasks`) and count agreement per type."""
    if tasks is None:
        tasks = load_split(split, data_dir=data_dir, limit=limit, generated_dir=generated_dir)
    elif limit is not None:
        tasks = tasks[:limit]
    report = GoldReport(split=split, backend=backend)
    for task in tasks:
        ok, reason = replay_gold(task, backend, mysql_url, replay_select_sql)
        report.record(task, ok, reason)
    return report


def main(argv: list[str] | None = None) -> int:
    """CLI: print the report; exit status 1 when anything disagrees."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("split", choices=["dev", "standard", "train"])
    parser.add_argument("--backend", choices=["sqlite", "mysql"], default="sqlite")
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--limit", type=int, default=None)
    parser.add_argument("--replay-select-sql", action="store_true")
    args = parser.parse_args(argv)
    report = check_gold(args.split, args.backend, args.data_dir, args.limit, replay_select_sql=args.replay_select_sql)
    print("\n".join(report.format_lines()))
    return 0 if not report.disagreements else 1


if __name__ == "__main__":
    raise SystemExit(main())
