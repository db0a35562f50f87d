"""The trajectory database: typed models, engine/sessions, Alembic migrations, store helpers.

- ``db.models``: the ORM tables (runs, harnesses, bench_tasks, rollout_groups, trajectories,
  turns, evaluations).
- ``db.engine``: ``database_url``, ``make_engine``, ``session_scope``, ``upgrade``,
  ``check_database`` / ``DatabaseError``.
- ``db.store``: idempotent writes and small queries used by the flows' tasks.
- ``db.ids``: ``stable_id`` for deterministic row ids, ``run_id`` for run ids from configs.

This package never imports Prefect.
"""
