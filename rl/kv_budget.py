"""HS_KV_CACHE_GIB, the bound on a decode loop's key/value buffer in GiB, read without torch so
that the `hs` entry (cli/launch.py) refuses a malformed value before any flow starts, and the
decode engine (rl/decode.py kv_budget_bytes) reads the same value the same way."""

from __future__ import annotations

import math
from collections.abc import Mapping

from rl.policy import PolicyError

KV_BUDGET_ENV = "HS_KV_CACHE_GIB"
CPU_KV_BUDGET_GIB = 1.0  # when unset, on CPU; a GPU has none (max_rows alone bounds the buffer)


def configured_kv_gib(environ: Mapping[str, str]) -> float | None:
    """The GiB HS_KV_CACHE_GIB asks for (0: no bound), None when it is unset or blank; a value
    that is not a finite number >= 0 is a one-line PolicyError saying what to set instead."""
    raw = environ.get(KV_BUDGET_ENV, "").strip()
    if not raw:
        return None
    try:
        gib = float(raw)
    except ValueError:
        gib = math.nan
    if not math.isfinite(gib) or gib < 0:
        raise PolicyError(f"{KV_BUDGET_ENV}={raw!r} is not a number of GiB: set it to e.g. 1.5, or 0 for no bound")
    return gib
