"""Shared fixtures: real data directory, one model load per test session, a Prefect test API."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
os.environ.setdefault("HS_DATA_DIR", str((REPO.parent / "shared" / "data").resolve()))
os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "120")
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("WANDB_MODE", "disabled")


@pytest.fixture(scope="session")
def data_dir() -> Path:
    path = Path(os.environ["HS_DATA_DIR"])
    if not (path / "dbbench" / "dev.jsonl").exists():
        pytest.skip(f"DBBench data not found under {path}: set HS_DATA_DIR")
    return path


@pytest.fixture(scope="session")
def smol_policy():
    """The real SmolLM2-135M-Instruct, loaded once for the whole test session."""
    from rl.transformers_policy import TransformersPolicy

    return TransformersPolicy("smollm2-135m")


@pytest.fixture(scope="session")
def prefect_api():
    from prefect.testing.utilities import prefect_test_harness

    with prefect_test_harness(server_startup_timeout=120):
        yield


@pytest.fixture(scope="session")
def train_dir(data_dir, tmp_path_factory) -> Path:
    """A generated DBBench training split (seed 0) in a temporary HS_GENERATED_DIR."""
    from envs.dbbench.train_split import build_train_split

    root = tmp_path_factory.mktemp("generated")
    build_train_split(root / "dbbench" / "train.jsonl", seed=0, n_tasks=400, data_dir=data_dir)
    os.environ["HS_GENERATED_DIR"] = str(root)
    return root
