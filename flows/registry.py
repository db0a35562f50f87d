"""Every top-level flow by its Prefect name: what `hs deploy` registers and `hs rerun` re-runs."""

from __future__ import annotations

from importlib import import_module

FLOWS: dict[str, tuple[str, str]] = {  # Prefect flow name -> (module, function)
    "pipeline": ("flows.pipeline", "pipeline"),
    "evolve": ("flows.evolve", "evolve"),
    "train": ("flows.train", "train"),
    "evaluate": ("flows.evaluate", "evaluate"),
    "sft": ("flows.sft", "sft"),
    "pool-report": ("flows.pool_report", "pool_report"),
    "frozen-evolution": ("flows.baselines.frozen_evolution", "frozen_evolution"),
    "whale": ("flows.baselines.whale", "whale"),
    "harness-forge": ("flows.baselines.harness_forge", "harness_forge"),
    "harnessx": ("flows.baselines.harnessx", "harnessx"),
}


def load_flow(name: str):
    if name not in FLOWS:
        raise LookupError(f"flow '{name}' is not a harness-s flow; known: {', '.join(FLOWS)}")
    module, attr = FLOWS[name]
    return getattr(import_module(module), attr)


def entrypoint(name: str) -> str:
    """'flows/x.py:function', relative to the repository root (Prefect's deployment entrypoint)."""
    module, attr = FLOWS[name]
    return f"{module.replace('.', '/')}.py:{attr}"
