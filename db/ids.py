"""Deterministic ids, so that re-running the same unit of work replaces its rows.

An id is a hash of what identifies the row (run, step, bench task, harness, seed, sample
index, ...), never of a clock or a random number.
"""

from __future__ import annotations

import hashlib

SEPARATOR = "\x1f"  # ASCII unit separator: cannot occur in the readable parts we hash
ID_LENGTH = 32
# The longest run id run_id() makes. The columns that hold run ids are wider (db.models.RUN_ID):
# names derived from a run id, such as "sft-<id>" or the checkpoint "<id>-u<N>", fit there too.
RUN_ID_MAX = 200


class RunIdTooLong(ValueError):
    """A run id longer than the database holds; the message is one line saying how to shorten it."""


def stable_id(*parts: object) -> str:
    """First 32 hex chars of sha256 over the ``"\\x1f"``-joined ``str()`` of ``parts``.

    >>> stable_id("run-a", 0, "dbbench/dev/0007") == stable_id("run-a", "0", "dbbench/dev/0007")
    True
    """
    if not parts:
        raise ValueError("stable_id needs at least one part")
    text = SEPARATOR.join(str(part) for part in parts)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:ID_LENGTH]


def run_id(
    kind: str,
    cfg,
    *extra: object,
    tag: str = "",
    digits: int = 12,
    exclude: frozenset[str] = frozenset(),
    identity: bool = True,
) -> str:
    """A run's id (or a checkpoint's name) from its config: ``<cfg.name>[-<tag>]-<hash>``, the
    hash being the first ``digits`` hex chars of ``stable_id(kind, cfg.identity(exclude), *extra)``
    (without the identity when ``identity`` is false: an id derived from another run's id alone).
    Same config, same run: starting the same command again resumes it. An id longer than
    ``RUN_ID_MAX`` raises :class:`RunIdTooLong` (one line), before any row is written.

    >>> class Cfg:
    ...     name = "eval"
    ...     def identity(self, exclude=frozenset()):
    ...         return "{}"
    >>> run_id("eval", Cfg()) == "eval-" + stable_id("eval", "{}")[:12]
    True
    """
    parts = (cfg.identity(exclude), *extra) if identity else extra
    prefix = f"{cfg.name}-{tag}" if tag else cfg.name
    made = f"{prefix}-{stable_id(kind, *parts)[:digits]}"
    if len(made) > RUN_ID_MAX:
        raise RunIdTooLong(
            f"run id '{_shown(made)}' is {len(made)} characters, over the {RUN_ID_MAX} the database holds: "
            f"shorten the run name '{_shown(cfg.name)}' by at least {len(made) - RUN_ID_MAX} characters "
            "(--set name=..., or the name of the pipeline it belongs to)"
        )
    return made


def _shown(text: str, width: int = 48) -> str:
    return text if len(text) <= width else text[: width - 3] + "..."


__all__ = ["stable_id", "run_id", "ID_LENGTH", "RUN_ID_MAX", "RunIdTooLong"]
