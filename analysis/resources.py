"""The resource table of a comparison (the paper's resource table): rollouts spent on search and on
training, per method, side by side, and the wall time the runs took.

- search: the rollouts of the evolution that froze the method's pool (when that run is in the
  database); a baseline counts its own (its results' `budget`: selections, evolution rounds);
- training: the rollouts of the groups the updates were formed from (first groups and rescues),
  or the rollouts a fine-tuning baseline collected to fine-tune on;
- validation: the re-anchors' paired validation (every harness on the validation tasks);
- hours: the training run's and the evolution run's wall time (row timestamps).
API and editor tokens are not counted yet: the offline editors and voters spend none.
"""

from __future__ import annotations

import pandas as pd
from sqlalchemy.orm import Session

from analysis.runs import Method
from db import store
from db.models import Run
from rl.modes import TRAIN_ROLES, Role

RESOURCE_COLUMNS = [
    "method",
    "search_rollouts",
    "training_rollouts",
    "validation_rollouts",
    "total_rollouts",
    "total_vs_main",
    "search_hours",
    "training_hours",
]


def _hours(run: Run | None) -> float | None:
    if run is None or run.finished_at is None or run.created_at is None:
        return None
    return (run.finished_at - run.created_at).total_seconds() / 3600


def _evolution_run(session: Session, run: Run) -> str | None:
    """The evolution run behind a pipeline's pool, when this database holds it."""
    results = run.results or {}
    budget = results.get("budget") or {}
    if budget.get("evolution_run_id"):
        return budget["evolution_run_id"]
    benchmark = (run.config.get("train") or {}).get("env", {}).get("benchmark", "dbbench")
    return store.pool_run_id(session, benchmark, results.get("pool_version"))


def resource_table(session: Session, methods: list[Method]) -> pd.DataFrame:
    rows = []
    for m in methods:
        run = session.get(Run, m.run_id)
        if run is None:
            continue
        evolution = _evolution_run(session, run) if run.kind == "pipeline" else None
        budget = (run.results or {}).get("budget") if run.kind == "pipeline" else None
        if budget:  # a baseline counted its own search, collections and segments
            search = budget.get("search_rollouts")
            training, validation = budget.get("training_rollouts", 0), budget.get("validation_rollouts", 0)
        else:
            search = store.rollouts_of_runs(session, [evolution]) if evolution else None
            roles = store.rollouts_by_role(session, m.train_run_id) if m.train_run_id else {}
            training = sum(n for role, n in roles.items() if role in TRAIN_ROLES)
            validation = roles.get(Role.REANCHOR, 0)
        rows.append(
            {
                "method": m.label,
                "search_rollouts": search,
                "training_rollouts": training,
                "validation_rollouts": validation,
                "total_rollouts": (search or 0) + training + validation,
                "search_hours": _hours(session.get(Run, evolution)) if evolution else None,
                "training_hours": _hours(session.get(Run, m.train_run_id)) if m.train_run_id else None,
            }
        )
    df = pd.DataFrame(rows, columns=RESOURCE_COLUMNS)
    if len(df) and df["total_rollouts"].iloc[0]:
        df["total_vs_main"] = df["total_rollouts"] / float(df["total_rollouts"].iloc[0])
    return df
