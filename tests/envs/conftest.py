"""Shared fixtures for the envs tests: the pinned DBBench data and the local MariaDB."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

from envs.dbbench.backends import DEFAULT_MYSQL_URL
from envs.dbbench.data import load_split
from envs.dbbench.mysql_backend import parse_mysql_url

REPO_ROOT = Path(__file__).resolve().parents[2]


def _find_data_dir() -> Path | None:
    """$HS_DATA_DIR, else the shared data folder next to the checkout (how CI lays out the checkout)."""
    for candidate in (os.environ.get("HS_DATA_DIR"), REPO_ROOT.parent / "shared" / "data", REPO_ROOT / "data"):
        if candidate and (Path(candidate) / "dbbench" / "dev.jsonl").is_file():
            return Path(candidate)
    return None


@pytest.fixture(scope="session")
def data_dir() -> Path:
    found = _find_data_dir()
    if found is None:
        pytest.skip("DBBench data not found: set HS_DATA_DIR to a folder holding dbbench/dev.jsonl")
    return found


@pytest.fixture(scope="session")
def dev_tasks(data_dir: Path):
    return load_split("dev", data_dir=data_dir, download=False)


@pytest.fixture(scope="session")
def mysql_url() -> str:
    """The MariaDB URL, or skip when nothing listens there (tests marked `mysql`)."""
    url = os.environ.get("HS_MYSQL_URL") or DEFAULT_MYSQL_URL
    params = parse_mysql_url(url)
    try:
        with socket.create_connection((params["host"], params["port"]), timeout=2):
            pass
    except OSError as exc:
        pytest.skip(
            f"MariaDB/MySQL not reachable at {params['host']}:{params['port']} ({exc}); start it or set HS_MYSQL_URL"
        )
    return url
