"""Deterministic ids, so that re-running the same unit of work replaces its rows.

An id is a hash of what identifies the row (run, step, bench task, harness, seed, sample
index, ...), never of a clock or a random number.
"""

from __future__ import annotations

import hashlib

SEPARATOR = "\x1f"  # ASCII unit separator: cannot occur in the readable parts we hash
ID_LENGTH = 32


def stable_id(*parts: object) -> str:
    """First 32 hex chars of sha256 over the ``"\\x1f"``-joined ``str()`` of ``parts``.

    >>> stable_id("run-a", 0, "dbbench/dev/0007") == stable_id("run-a", "0", "dbbench/dev/0007")
    True
    """
    if not parts:
        raise ValueError("stable_id needs at least one part")
    text = SEPARATOR.join(str(part) for part in parts)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:ID_LENGTH]


__all__ = ["stable_id", "ID_LENGTH"]
