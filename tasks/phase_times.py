"""Wall time by phase of one pipeline invocation (issue 51: where an evidence-scale run's time goes).

The flows time their phases with `timed(phase)`; the pipeline starts a fresh tally with `reset()`
and stores `snapshot()` in its results, which `hs run` prints. Phases do not nest: each second
of the run is counted in at most one of them, and "other" in the snapshot is the rest (run
registration, database writes outside the phases, Prefect's own work). A resumed run times
only what this invocation did.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

PHASES = ("warm start", "pool", "re-anchors", "collections", "updates", "records", "evaluations")
_seconds: dict[str, float] = {}
_started: list[float] = []


def reset() -> None:
    _seconds.clear()
    _started[:] = [time.perf_counter()]


@contextmanager
def timed(phase: str) -> Iterator[None]:
    start = time.perf_counter()
    try:
        yield
    finally:
        _seconds[phase] = _seconds.get(phase, 0.0) + time.perf_counter() - start


def snapshot() -> dict[str, float]:
    """Seconds per phase in PHASES order (phases that did not run left out), "other" and "total"."""
    out = {phase: round(_seconds[phase], 1) for phase in PHASES if phase in _seconds}
    if _started:
        total = time.perf_counter() - _started[0]
        out["other"] = round(max(total - sum(_seconds.values()), 0.0), 1)
        out["total"] = round(total, 1)
    return out
