"""W&B logging of every flow: offline by default (files under .hs/wandb, sync later with
`wandb sync .hs/wandb/offline-run-*`), online by setting, disabled in tests ($WANDB_MODE wins
over the config). One W&B run per platform run id (resumed on restart, so a resumed run keeps
one continuous history), its config the flow's whole config, its metrics namespaced
(train/, rollout/, reanchor/, eval/, evolve/, sft/, pipeline/)."""

from __future__ import annotations

import os
from pathlib import Path

_RUNS: dict[str, object] = {}


def log_metrics(run_id: str, mode: str, config: dict, metrics: dict, step: int) -> None:
    mode = os.environ.get("WANDB_MODE", mode)
    if mode == "disabled":
        return
    run = _RUNS.get(run_id)
    if run is None:
        import wandb

        folder = Path(os.environ.get("HS_HOME", ".hs")) / "wandb"
        folder.mkdir(parents=True, exist_ok=True)
        run = wandb.init(
            project=os.environ.get("WANDB_PROJECT", "harness-s"),
            id=run_id,
            name=run_id,
            resume="allow",
            mode=mode,
            dir=str(folder),
            config=config,
            settings=wandb.Settings(silent=True, console="off"),
        )
        _RUNS[run_id] = run
    run.log({k: v for k, v in metrics.items() if isinstance(v, (int, float))}, step=step)


def finish(run_id: str) -> None:
    run = _RUNS.pop(run_id, None)
    if run is not None:
        run.finish()


def log_summary(run_id: str, mode: str, config: dict, metrics: dict, step: int = 0) -> None:
    """A finished flow's figures in one go (its W&B run is closed afterwards)."""
    log_metrics(run_id, mode, config, metrics, step)
    finish(run_id)


def default_mode() -> str:
    """For flows whose config has no `wandb` field: $WANDB_MODE, else offline."""
    return os.environ.get("WANDB_MODE", "offline")
