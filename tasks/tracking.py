"""W&B logging of training signals: offline by default (files under .hs/wandb, sync later with
`wandb sync`), disabled in tests ($WANDB_MODE=disabled wins over the config). One W&B run per
training run id, resumed on restart, so a resumed run keeps one continuous history."""

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
        run = wandb.init(project=os.environ.get("WANDB_PROJECT", "harness-s"), id=run_id, name=run_id,
                         resume="allow", mode=mode, dir=str(folder), config=config,
                         settings=wandb.Settings(silent=True, console="off"))
        _RUNS[run_id] = run
    run.log({k: v for k, v in metrics.items() if isinstance(v, (int, float))}, step=step)


def finish(run_id: str) -> None:
    run = _RUNS.pop(run_id, None)
    if run is not None:
        run.finish()
