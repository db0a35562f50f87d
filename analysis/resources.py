"""The resource table of a comparison (the paper's resource table): rollouts spent on search and on
training, per method, side by side, and the wall time the runs took.

- search: the rollouts of the evolution that froze the method's pool (when that run is in the
  database); a baseline counts its own (its results' `budget`: selections, evolution rounds);
- training: the rollouts of the groups the updates were formed from (first groups and rescues),
  or the rollouts a fine-tuning baseline collected to fine-tune on;
- validation: the re-anchors' paired validation (every harness on the validation tasks);
- editor_tokens: the API tokens (prompt + completion) the evolution spent on an LLM: its
  editor's proposals, as its candidates recorded them, and its LLM diagnoses, as the diagnosed
  trajectories recorded them (offline operators and rule diagnosis spend none; "-" when the
  evolution run is not in this database);
- caps and within_caps: the pipeline config's `budget:` caps (configs/budget.py), and whether
  the method's own search (without the shared pool's evolution) and its training stayed within;
- hours: wall time from the runs' row timestamps: search = the evolution runs and a baseline's
  harness selections; training = the training runs (every segment), else a baseline's
  collections and fine-tuning runs;
- start_weights: the first 12 hex digits of the sha256 of the weights the method started from (its
  training run's `init_weights`, else its "before" evaluation's `weights`, else its first harness
  selection's: WHALE, HarnessForge), None where the run predates that record. A warm start rebuilt
  on another machine keeps its name but not its weights, so methods whose digests differ differ in
  their starting point too.
"""

from __future__ import annotations

import pandas as pd
from sqlalchemy.orm import Session

from analysis.runs import Method
from db import store
from db.models import Run
from envs.registry import DEFAULT_BENCHMARK
from rl.modes import TRAIN_ROLES, Role

RESOURCE_COLUMNS = [
    "method",
    "search_rollouts",
    "training_rollouts",
    "validation_rollouts",
    "total_rollouts",
    "total_vs_main",
    "editor_tokens",
    "caps",
    "within_caps",
    "search_hours",
    "training_hours",
    "start_weights",
]


def _hours(run: Run | None) -> float | None:
    if run is None or run.finished_at is None or run.created_at is None:
        return None
    return (run.finished_at - run.created_at).total_seconds() / 3600


def _sum_hours(session: Session, run_ids: list[str]) -> float | None:
    hours = [h for h in (_hours(session.get(Run, r)) for r in run_ids) if h is not None]
    return sum(hours) if hours else None


def _evolution_runs(session: Session, run: Run) -> list[str]:
    """The evolution runs behind a pipeline's pool (HarnessX: its rounds), those this database holds."""
    results = run.results or {}
    if results.get("evolutions"):
        return [r for r in results["evolutions"] if session.get(Run, r) is not None]
    budget = results.get("budget") or {}
    if budget.get("evolution_run_id"):
        return [budget["evolution_run_id"]]
    benchmark = (run.config.get("train") or {}).get("env", {}).get("benchmark", DEFAULT_BENCHMARK)
    found = store.pool_run_id(session, benchmark, results.get("pool_version"))
    return [found] if found else []


def _run_of_starting_weights(session: Session, m: Method) -> Run | None:
    """An evaluation that ran the starting weights: the 'before' one, else a search baseline's first
    harness selection (its first search ranks the harnesses with the policy it starts from)."""
    if m.eval_run("before"):
        return session.get(Run, m.eval_run("before"))
    searches = [run for run in (session.get(Run, r) for r in m.search_runs) if run is not None]
    return min(searches, key=lambda run: run.created_at, default=None)


def start_weights(session: Session, m: Method) -> str | None:
    """The digest of the weights the method started from (see the module's docstring), 12 hex digits."""
    first = session.get(Run, m.train_run_ids[0]) if m.train_run_ids else None
    digest = (first.config or {}).get("init_weights") if first is not None else None
    if digest is None and (start := _run_of_starting_weights(session, m)) is not None:
        digest = (start.config or {}).get("weights")
    return digest[:12] if digest else None


def _caps(run: Run) -> dict[str, int]:
    """{'search': cap, 'training': cap}, those the pipeline config set."""
    caps = (run.config or {}).get("budget") or {}
    return {k: caps[f"{k}_rollouts"] for k in ("search", "training") if caps.get(f"{k}_rollouts") is not None}


def _within(caps: dict[str, int], spent: dict[str, int]) -> bool | None:
    return all(spent[k] <= cap for k, cap in caps.items()) if caps else None


def resource_table(session: Session, methods: list[Method]) -> pd.DataFrame:
    rows = []
    for m in methods:
        run = session.get(Run, m.run_id)
        if run is None:
            continue
        evolutions = _evolution_runs(session, run) if run.kind == "pipeline" else []
        budget = (run.results or {}).get("budget") if run.kind == "pipeline" else None
        if budget:  # a baseline counted its own search, collections and segments
            search = budget.get("search_rollouts")
            training, validation = budget.get("training_rollouts", 0), budget.get("validation_rollouts", 0)
        else:
            search = store.rollouts_of_runs(session, evolutions) if evolutions else None
            roles = store.rollouts_by_role(session, m.train_run_id) if m.train_run_id else {}
            training = sum(n for role, n in roles.items() if role in TRAIN_ROLES)
            validation = roles.get(Role.REANCHOR, 0)
        caps = _caps(run) if run.kind == "pipeline" else {}
        own_search = (budget or {}).get("selection_rollouts", (budget or {}).get("search_rollouts")) or 0
        search_hours = _sum_hours(session, [*evolutions, *m.search_runs])
        training_hours = _sum_hours(session, list(m.train_run_ids or m.collection_runs))
        rows.append(
            {
                "method": m.label,
                "search_rollouts": search,
                "training_rollouts": training,
                "validation_rollouts": validation,
                "total_rollouts": (search or 0) + training + validation,
                "editor_tokens": store.editor_tokens(session, evolutions) if evolutions else None,
                "caps": ", ".join(f"{k} {v:,}" for k, v in caps.items()) or None,
                "within_caps": _within(caps, {"search": own_search, "training": training}),
                "search_hours": search_hours,
                "training_hours": training_hours,
                "start_weights": start_weights(session, m),
            }
        )
    df = pd.DataFrame(rows, columns=RESOURCE_COLUMNS)
    for count in ("search_rollouts", "training_rollouts", "validation_rollouts", "total_rollouts", "editor_tokens"):
        df[count] = df[count].astype("Int64")  # counts stay integers beside a method's missing '-'
    if len(df) and df["total_rollouts"].iloc[0]:
        df["total_vs_main"] = df["total_rollouts"] / float(df["total_rollouts"].iloc[0])
    return df
