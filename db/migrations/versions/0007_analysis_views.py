"""Analysis views: the common research aggregates as plain SQL views, on SQLite and PostgreSQL.

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-30

The views read the tables and store nothing, so they are always up to date. Query them like
tables, with the same SQL on both backends, e.g. ``SELECT * FROM eval_scores WHERE run_id = '...'``.
Numbers read out of JSON columns and every ratio are floats (REAL on SQLite, double precision on
PostgreSQL); counts are integers. A JSON key that is missing, or whose value is not a number,
reads as NULL.

eval_task_outcomes
    One row per (run_id, seed, bench_task_id) over the trajectories of rollout groups with role
    'eval' (training, re-anchor and other roles are left out).
    run_id, seed, bench_task_id, task_type,
    rollouts (trajectories), successes (successful trajectories),
    solved (1 when successes > 0, else 0).

eval_scores
    One row per (run_id, seed), from eval_task_outcomes.
    run_id, seed, n_tasks,
    pass_at_k (percent of tasks solved at least once: 100 * mean of solved),
    avg_at_k (percent: 100 * mean over tasks of successes / rollouts).
    Mean and spread over seeds: ``SELECT run_id, AVG(pass_at_k) ... GROUP BY run_id``.

train_signals
    One row per train_steps row, with the signals read from its ``metrics`` JSON.
    run_id, step, mode,
    reward_mean ('train/reward_mean'), valid_group_ratio ('train/valid_group_ratio'),
    effective_token_ratio ('train/effective_token_ratio'),
    first_group_success ('train/first_group_success'),
    rescues_triggered ('rollout/rescues_triggered'), rescue_success ('rollout/rescue_success'),
    rollouts_spent ('rollout/rollouts_spent') -- all floats, NULL when the step did not log it.

reanchor_success
    One row per evaluation with routing 'reanchor' (paired validation of H0 and every sibling
    at a re-anchor of a training run).
    run_id, step (the re-anchor's training step, from metrics 'step'), harness_id,
    harness_name, success_rate (from metrics 'success_rate'),
    n_tasks (validation tasks), k (rollouts per harness and task).

sibling_edges
    Each non-base row of reanchor_success next to the base harness's row of the same run and
    step. The base harness is the one named by the run's config field 'harness' ('h0' when the
    config has no such field); it is matched on harnesses.name, so a run whose config names its
    base harness by a YAML path has no rows here.
    run_id, step, harness_id, harness_name, success_rate, base_success_rate,
    edge (success_rate - base_success_rate: positive when the sibling beats the base).

behaviour_frequencies
    One row per (run_id, tag) over the string elements of trajectories.behaviour_tags, all
    trajectories of the run (any role) counted.
    run_id, tag, n_tagged (trajectories carrying the tag), n_trajectories (all trajectories of
    the run), share (n_tagged / n_trajectories).

rank1_shares
    One row per (run_id, chosen harness) over router decisions with purpose 'rank1'.
    run_id, harness_id (first element of ``chosen``), harness_name (NULL when the harness is
    not in harnesses), n_tasks (decisions that chose it), share (n_tasks / all rank1 decisions
    of the run). Decisions with an empty ``chosen`` count in the denominator only.

On SQLite, views name the tables they read. A later migration that rebuilds one of those tables in
batch mode (copy, drop, rename) works because db/migrations/env.py turns on
``PRAGMA legacy_alter_table`` (the rename then leaves the views alone); without it the rename fails.
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Creation order; views that read other views come after them (dropped in reverse).
VIEWS = (
    "eval_task_outcomes",
    "eval_scores",
    "train_signals",
    "reanchor_success",
    "sibling_edges",
    "behaviour_frequencies",
    "rank1_shares",
)


class _SQLiteJSON:
    """JSON access expressions for SQLite (json1 functions)."""

    @staticmethod
    def _numeric(column: str, key: str, sql_type: str) -> str:
        path = f"'$.\"{key}\"'"
        return (
            f"CASE WHEN json_type({column}, {path}) IN ('integer', 'real') "
            f"THEN CAST(json_extract({column}, {path}) AS {sql_type}) END"
        )

    @classmethod
    def number(cls, column: str, key: str) -> str:
        return cls._numeric(column, key, "REAL")

    @classmethod
    def integer(cls, column: str, key: str) -> str:
        return cls._numeric(column, key, "INTEGER")

    @staticmethod
    def string(column: str, key: str) -> str:
        path = f"'$.\"{key}\"'"
        return f"CASE WHEN json_type({column}, {path}) = 'text' THEN json_extract({column}, {path}) END"

    @staticmethod
    def first_string(column: str) -> str:
        return f"CASE WHEN json_type({column}, '$[0]') = 'text' THEN json_extract({column}, '$[0]') END"

    @staticmethod
    def string_elements(table: str, column: str) -> tuple[str, str, str]:
        """(FROM item, WHERE condition, element text) iterating the strings of an array column."""
        return (
            f"{table} AS t, json_each(t.{column}) AS e",
            f"json_type(t.{column}) = 'array' AND e.type = 'text'",
            "e.value",
        )


class _PostgresJSON:
    """JSON access expressions for PostgreSQL (JSONB operators)."""

    @staticmethod
    def number(column: str, key: str) -> str:
        return (
            f"CASE WHEN jsonb_typeof({column} -> '{key}') = 'number' "
            f"THEN CAST({column} ->> '{key}' AS DOUBLE PRECISION) END"
        )

    @staticmethod
    def integer(column: str, key: str) -> str:
        # Truncated like SQLite's CAST, and accepting 4.0 as well as 4.
        return (
            f"CASE WHEN jsonb_typeof({column} -> '{key}') = 'number' "
            f"THEN CAST(TRUNC(CAST({column} ->> '{key}' AS NUMERIC)) AS INTEGER) END"
        )

    @staticmethod
    def string(column: str, key: str) -> str:
        return f"CASE WHEN jsonb_typeof({column} -> '{key}') = 'string' THEN {column} ->> '{key}' END"

    @staticmethod
    def first_string(column: str) -> str:
        return f"CASE WHEN jsonb_typeof({column} -> 0) = 'string' THEN {column} ->> 0 END"

    @staticmethod
    def string_elements(table: str, column: str) -> tuple[str, str, str]:
        array = f"CASE WHEN jsonb_typeof(t.{column}) = 'array' THEN t.{column} ELSE CAST('[]' AS JSONB) END"
        return (
            f"{table} AS t CROSS JOIN LATERAL jsonb_array_elements({array}) AS e(value)",
            "jsonb_typeof(e.value) = 'string'",
            "e.value #>> '{}'",
        )


TRAIN_SIGNALS = (
    ("reward_mean", "train/reward_mean"),
    ("valid_group_ratio", "train/valid_group_ratio"),
    ("effective_token_ratio", "train/effective_token_ratio"),
    ("first_group_success", "train/first_group_success"),
    ("rescues_triggered", "rollout/rescues_triggered"),
    ("rescue_success", "rollout/rescue_success"),
    ("rollouts_spent", "rollout/rollouts_spent"),
)


def view_definitions(dialect: str) -> dict[str, str]:
    """view name -> its SELECT, for ``dialect`` ('sqlite' or 'postgresql')."""
    j = _PostgresJSON if dialect == "postgresql" else _SQLiteJSON
    success = "CASE WHEN t.success THEN 1 ELSE 0 END"
    signals = ",\n       ".join(f"{j.number('metrics', key)} AS {name}" for name, key in TRAIN_SIGNALS)
    base_name = f"COALESCE({j.string('r.config', 'harness')}, 'h0')"
    tags_from, tags_where, tag = j.string_elements("trajectories", "behaviour_tags")
    chosen = j.first_string("chosen")
    return {
        "eval_task_outcomes": f"""
SELECT g.run_id AS run_id,
       g.seed AS seed,
       t.bench_task_id AS bench_task_id,
       b.task_type AS task_type,
       COUNT(*) AS rollouts,
       SUM({success}) AS successes,
       CASE WHEN SUM({success}) > 0 THEN 1 ELSE 0 END AS solved
FROM trajectories AS t
JOIN rollout_groups AS g ON g.id = t.group_id
JOIN bench_tasks AS b ON b.id = t.bench_task_id
WHERE g.role = 'eval'
GROUP BY g.run_id, g.seed, t.bench_task_id, b.task_type""",
        "eval_scores": """
SELECT run_id,
       seed,
       COUNT(*) AS n_tasks,
       100.0 * AVG(CAST(solved AS DOUBLE PRECISION)) AS pass_at_k,
       100.0 * AVG(CAST(successes AS DOUBLE PRECISION) / rollouts) AS avg_at_k
FROM eval_task_outcomes
GROUP BY run_id, seed""",
        "train_signals": f"""
SELECT run_id,
       step,
       mode,
       {signals}
FROM train_steps""",
        "reanchor_success": f"""
SELECT e.run_id AS run_id,
       {j.integer("e.metrics", "step")} AS step,
       e.harness_id AS harness_id,
       h.name AS harness_name,
       {j.number("e.metrics", "success_rate")} AS success_rate,
       e.n_bench_tasks AS n_tasks,
       e.k AS k
FROM evaluations AS e
LEFT JOIN harnesses AS h ON h.id = e.harness_id
WHERE e.routing = 'reanchor'""",
        "sibling_edges": f"""
SELECT s.run_id AS run_id,
       s.step AS step,
       s.harness_id AS harness_id,
       s.harness_name AS harness_name,
       s.success_rate AS success_rate,
       b.success_rate AS base_success_rate,
       s.success_rate - b.success_rate AS edge
FROM reanchor_success AS s
JOIN runs AS r ON r.id = s.run_id
JOIN reanchor_success AS b
  ON b.run_id = s.run_id AND b.step = s.step AND b.harness_name = {base_name}
WHERE s.harness_name <> {base_name}""",
        "behaviour_frequencies": f"""
SELECT tagged.run_id AS run_id,
       tagged.tag AS tag,
       tagged.n_tagged AS n_tagged,
       everything.n_trajectories AS n_trajectories,
       CAST(tagged.n_tagged AS DOUBLE PRECISION) / everything.n_trajectories AS share
FROM (SELECT t.run_id AS run_id, {tag} AS tag, COUNT(DISTINCT t.id) AS n_tagged
      FROM {tags_from}
      WHERE {tags_where}
      GROUP BY t.run_id, {tag}) AS tagged
JOIN (SELECT run_id, COUNT(*) AS n_trajectories
      FROM trajectories
      GROUP BY run_id) AS everything
  ON everything.run_id = tagged.run_id""",
        "rank1_shares": f"""
SELECT chosen.run_id AS run_id,
       chosen.harness_id AS harness_id,
       h.name AS harness_name,
       chosen.n_tasks AS n_tasks,
       CAST(chosen.n_tasks AS DOUBLE PRECISION) / decided.n_decisions AS share
FROM (SELECT run_id, harness_id, COUNT(*) AS n_tasks
      FROM (SELECT run_id, {chosen} AS harness_id
            FROM router_decisions
            WHERE purpose = 'rank1') AS first_choice
      WHERE harness_id IS NOT NULL
      GROUP BY run_id, harness_id) AS chosen
JOIN (SELECT run_id, COUNT(*) AS n_decisions
      FROM router_decisions
      WHERE purpose = 'rank1'
      GROUP BY run_id) AS decided
  ON decided.run_id = chosen.run_id
LEFT JOIN harnesses AS h ON h.id = chosen.harness_id""",
    }


def upgrade() -> None:
    definitions = view_definitions(op.get_bind().dialect.name)
    for name in VIEWS:
        op.execute(f"CREATE VIEW {name} AS{definitions[name]}")


def downgrade() -> None:
    for name in reversed(VIEWS):
        op.execute(f"DROP VIEW IF EXISTS {name}")
