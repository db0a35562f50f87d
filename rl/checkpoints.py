"""The checkpoint registry: every trained policy is a Hugging Face model folder under one root.

Warm-start (SFT) and RL checkpoints share it, so any of them can be evaluated by name
(`hs eval --model NAME`) and trained further. Each folder holds `harness_s.json` with the
checkpoint's provenance; the database's `checkpoints` table holds the same record for queries.
Folders are written to a temporary name and renamed, so a crash never leaves half a checkpoint.
"""

from __future__ import annotations

import json
import os
import shutil
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
