"""Fault injection for re-run drills and tests: make chosen units of work fail a set number of times.

Set HS_FAULTS to the path of a JSON file {"<unit key>": <failures left>}. Every guarded unit
(an evaluation rollout group, key "<bench task id>:seed<seed>") appends its key to
"<HS_FAULTS>.log" each time it really executes (a cached result does not execute), then raises
InjectedFault while its count is above 0, counting down. Unset, it costs one environment lookup.
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

_LOCK = threading.Lock()


class InjectedFault(RuntimeError):
    """A failure requested through HS_FAULTS."""


def guard(key: str) -> None:
    path = os.environ.get("HS_FAULTS")
    if not path:
        return
    plan_file = Path(path)
    with _LOCK:
        with open(f"{plan_file}.log", "a") as log:
            log.write(key + "\n")
        plan = json.loads(plan_file.read_text()) if plan_file.exists() else {}
        left = int(plan.get(key, 0))
        if left <= 0:
            return
        plan[key] = left - 1
        plan_file.write_text(json.dumps(plan))
    raise InjectedFault(f"injected fault in {key} ({left - 1} more to come)")


def executions(path: str | Path) -> list[str]:
    """Keys of every guarded unit that executed, in order, for the plan at `path`."""
    log = Path(f"{path}.log")
    return log.read_text().split() if log.exists() else []
