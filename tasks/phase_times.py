"""Wall time and peak memory by phase of one pipeline invocation (issue 51: where an evidence-scale
run's time and memory go).

The flows time their phases with `timed(phase)`; the pipeline starts a fresh tally with `reset()`
and stores `snapshot()` and `peaks()` in its results, which `hs run` prints. Phases do not nest:
each second of the run is counted in at most one of them, and "other" is the rest (run
registration, database writes outside the phases, Prefect's own work). A resumed run times only
what this invocation did. Memory is the resident set of this process and every process under it
(sandboxes, a temporary Prefect server), sampled every quarter second by a daemon thread and kept
at its highest per phase.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

PHASES = ("warm start", "pool", "re-anchors", "collections", "updates", "records", "evaluations")
SAMPLE_EVERY_S = 0.25
_seconds: dict[str, float] = {}
_peak_gib: dict[str, float] = {}
_state = {"phase": "other", "started": None, "sampler": None}
_lock = threading.Lock()


def reset() -> None:
    with _lock:
        _seconds.clear()
        _peak_gib.clear()
        _state["phase"], _state["started"] = "other", time.perf_counter()
    if _state["sampler"] is None:
        _state["sampler"] = threading.Thread(target=_sample_forever, name="phase-memory", daemon=True)
        _state["sampler"].start()


@contextmanager
def timed(phase: str) -> Iterator[None]:
    outer, _state["phase"] = _state["phase"], phase
    tallying = _state["started"] is not None  # a pipeline called reset(): read memory at the edges too
    if tallying:
        _record(tree_rss_gib())
    start = time.perf_counter()
    try:
        yield
    finally:
        if tallying:
            _record(tree_rss_gib())
        _seconds[phase] = _seconds.get(phase, 0.0) + time.perf_counter() - start
        _state["phase"] = outer


def tree_rss_gib() -> float:
    """Resident GiB of this process and all its descendants (0 where psutil cannot tell)."""
    import psutil

    try:
        me = psutil.Process()
        total = me.memory_info().rss
        for child in me.children(recursive=True):
            try:
                total += child.memory_info().rss
            except psutil.Error:  # it ended between the listing and the read
                pass
        return total / 2**30
    except psutil.Error:
        return 0.0


def _record(gib: float) -> None:
    with _lock:
        phase = _state["phase"]
        _peak_gib[phase] = max(_peak_gib.get(phase, 0.0), gib)


def _sample_forever() -> None:
    while True:
        _record(tree_rss_gib())
        time.sleep(SAMPLE_EVERY_S)


def snapshot() -> dict[str, float]:
    """Seconds per phase in PHASES order (phases that did not run left out), "other" and "total"."""
    out = {phase: round(_seconds[phase], 1) for phase in PHASES if phase in _seconds}
    if _state["started"] is not None:
        total = time.perf_counter() - _state["started"]
        out["other"] = round(max(total - sum(_seconds.values()), 0.0), 1)
        out["total"] = round(total, 1)
    return out


def peaks() -> dict[str, float]:
    """Peak resident GiB of the process tree per phase (PHASES order, then "other")."""
    order = [*PHASES, "other"]
    return {phase: round(_peak_gib[phase], 2) for phase in order if phase in _peak_gib}
