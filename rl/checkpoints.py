"""The checkpoint registry: every trained policy is a Hugging Face model folder under one root.

Warm-start (SFT) and RL checkpoints share it, so any of them can be evaluated by name
(`hs eval --model NAME`) and trained further. Each folder holds `harness_s.json` with the
checkpoint's provenance; the database's `checkpoints` table holds the same record for queries.
Folders are written to a temporary name and renamed, so a crash never leaves half a checkpoint.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from functools import lru_cache
from pathlib import Path

META_FILE = "harness_s.json"


def registry_dir() -> Path:
    return Path(os.environ.get("HS_CHECKPOINT_DIR", Path(os.environ.get("HS_HOME", ".hs")) / "checkpoints"))


def checkpoint_path(name: str) -> Path:
    return registry_dir() / name


def is_complete(name: str) -> bool:
    path = checkpoint_path(name)
    return (path / META_FILE).exists() and (path / "config.json").exists()


def save_checkpoint(model, tokenizer, name: str, meta: dict) -> Path:
    """Write model + tokenizer + provenance atomically; returns the folder."""
    target = checkpoint_path(name)
    tmp = target.with_name(target.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    model.save_pretrained(tmp, safe_serialization=True)
    tokenizer.save_pretrained(tmp)
    (tmp / META_FILE).write_text(json.dumps(meta, indent=2, sort_keys=True, default=str))
    shutil.rmtree(target, ignore_errors=True)
    tmp.rename(target)
    return target


def read_meta(name: str) -> dict:
    return json.loads((checkpoint_path(name) / META_FILE).read_text())


WEIGHT_FILES = ("*.safetensors", "*.bin")


def weights_digest(folder: Path) -> str | None:
    """sha256 (hex) over a model folder's weight files, in name order; None when it holds none.

    A checkpoint's name comes from its config, so a warm start rebuilt on another machine kind (other
    rounding, other weights) keeps its name: runs record this digest of the weights they start from,
    so a comparison can tell whether its methods really share a starting point."""
    files = sorted(f for pattern in WEIGHT_FILES for f in Path(folder).glob(pattern) if f.is_file())
    if not files:
        return None
    return _digest(tuple((str(f), st.st_size, st.st_mtime_ns) for f in files for st in [f.stat()]))


@lru_cache(maxsize=64)
def _digest(files: tuple[tuple[str, int, int], ...]) -> str:  # keyed by size and mtime: a rewrite hashes again
    h = hashlib.sha256()
    for name, _, _ in files:
        with open(name, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 22), b""):
                h.update(block)
    return h.hexdigest()
