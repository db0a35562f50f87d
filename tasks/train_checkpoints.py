"""A training run's resume state and registry checkpoints, and what they let it do next.

Resume: after every update the trainer state (weights + optimizer) and the count of finished
updates are written atomically under `state_dir/<run id>/` (tasks/step_record.py save_progress
calls `write_progress`). Starting the same command again loads them (tasks/train_handle.py) and
continues at the next update; the data order and sampling seeds depend only on (seed, step)
(tasks/run_identity.py), and rows have deterministic ids, so a step that was cut short is redone
and its rows replaced, never duplicated.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from sqlalchemy import select

from configs.schema import TrainConfig
from db import store
from db.engine import database_url as default_url
from db.engine import mask_url, session_scope
from db.journal import journal_path, restore_steps
from db.models import Checkpoint, TrainStep
from rl.checkpoints import checkpoint_path, save_checkpoint
from rl.modes import TRAIN_ROLES
from rl.precision import precision_record
from tasks.resources import get_engine
from tasks.run_identity import init_checkpoint


# -- the resume state -------------------------------------------------------------------------
def state_dir(cfg: TrainConfig, run_id: str) -> Path:
    return Path(cfg.state_dir).expanduser() / run_id


def read_progress(cfg: TrainConfig, run_id: str) -> dict:
    """{'updates': finished updates, 'state': trainer state file} ({'updates': 0} for a new run)."""
    progress = state_dir(cfg, run_id) / "progress.json"
    if not progress.exists():
        return {"updates": 0}
    return {"state": "trainer.pt", **json.loads(progress.read_text())}


def completed_updates(cfg: TrainConfig, run_id: str) -> int:
    return read_progress(cfg, run_id)["updates"]


def trainer_state_name(updates: int) -> str:
    """The trainer state file after `updates` updates, under the run's state folder."""
    return f"trainer-u{updates}.pt"


def write_progress(folder: Path, run_id: str, updates: int, state: str) -> None:
    """Point progress.json at the trainer state `state` (already written), then remove older states."""
    # The pointer switches atomically, so a kill at any moment leaves a consistent (count, state) pair.
    tmp = folder / "progress.json.tmp"
    tmp.write_text(json.dumps({"updates": updates, "state": state, "run_id": run_id}))
    tmp.replace(folder / "progress.json")
    for old in folder.glob("trainer-u*"):
        if old.name not in (state, Path(state).stem):
            shutil.rmtree(old) if old.is_dir() else old.unlink()


def check_recorded_updates(cfg: TrainConfig, run_id: str, database_url: str | None, restore: bool = True) -> int:
    """A run resumes from its trainer state on disk; the updates that state has finished must be
    in the current database too (it may have been switched or deleted since). Missing rows are
    written back from the step files saved beside the state (db/journal.py) when `restore`;
    a step with no file is a one-line LookupError saying how to fix it. Returns rows written."""
    done = completed_updates(cfg, run_id)
    if done == 0:
        return 0
    folder = state_dir(cfg, run_id)
    with session_scope(get_engine(database_url)) as session:
        held = set(session.scalars(select(TrainStep.step).where(TrainStep.run_id == run_id)))
        missing = sorted(set(range(done)) - held)
        unsaved = [s for s in missing if not journal_path(folder, s).exists()]
        if unsaved:
            where = mask_url(database_url or default_url(create_home=False))
            raise LookupError(
                f"run {run_id}: its trainer state in {folder} has {done} finished updates, but {where} holds no "
                f"rows for {len(unsaved)} of them (updates {unsaved[0]}..{unsaved[-1]}) and no saved copy is there: "
                f"copy them from the database they were written to (hs db copy --from OLD_URL --to {where}), or "
                f"delete {folder} to train this run again"
            )
        if missing and restore:
            return sum(restore_steps(session, folder).values())
    return 0


# -- the rollout budget -----------------------------------------------------------------------
def spent_training_rollouts(run_id: str, before_step: int, database_url: str | None) -> int:
    """The rollouts the run's finished updates were formed from (first groups and rescues)."""
    with session_scope(get_engine(database_url)) as session:
        roles = store.rollouts_by_role(session, run_id, before_step)
    return sum(n for role, n in roles.items() if role in TRAIN_ROLES)


def budget_allows(cfg: TrainConfig, run_id: str, step: int, database_url: str | None) -> bool:
    """Whether update `step`, at its most expensive (every group dead and rescued), keeps the run
    within rollout_budget; always true without one."""
    if cfg.rollout_budget is None:
        return True
    return spent_training_rollouts(run_id, step, database_url) + cfg.max_update_rollouts() <= cfg.rollout_budget


# -- registry checkpoints ---------------------------------------------------------------------
def rl_checkpoint_name(run_id: str, updates: int) -> str:
    return f"{run_id}-u{updates}"


def register_rl_checkpoint(
    cfg: TrainConfig, run_id: str, model, tokenizer, updates: int, database_url: str | None
) -> str:
    """The trained weights after `updates` updates, saved and registered as checkpoint
    `<run id>-u<updates>` (its parent the run's starting weights). Returns its name."""
    name, parent = rl_checkpoint_name(run_id, updates), init_checkpoint(cfg)
    meta = {
        "name": name,
        "kind": "rl",
        "run_id": run_id,
        "parent": parent,
        "step": updates,
        "mode": cfg.mode,
        "config": cfg.model_dump(mode="json"),
        "precision": precision_record(cfg.trainer.device, update=cfg.trainer.dtype, rollouts=cfg.trainer.rollout_dtype),
    }
    save_checkpoint(model, tokenizer, name, meta)
    with session_scope(get_engine(database_url)) as session:
        session.merge(
            Checkpoint(
                id=name,
                run_id=run_id,
                kind="rl",
                parent_id=parent,
                base_model=parent,
                path=str(checkpoint_path(name).resolve()),
                step=updates,
                provenance={k: meta[k] for k in ("mode", "config", "precision")},
                metrics={},
            )
        )
    return name
