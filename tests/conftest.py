"""Shared fixtures: real data directory, one model load per test session, a Prefect test API,
empty databases on SQLite and PostgreSQL, a headless system Chromium."""

from __future__ import annotations

import gc
import os
import secrets
import shutil
import warnings
from collections.abc import Iterator
from functools import lru_cache
from pathlib import Path

import psycopg
import pytest

from cli.environment import apply_defaults

REPO = Path(__file__).resolve().parents[1]
apply_defaults({"HS_DATA_DIR": str((REPO.parent / "shared" / "data").resolve()), "WANDB_MODE": "disabled"})


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
def prefect_api_url(prefect_api) -> str:
    """The test API's address, for `hs` subprocesses: with it in PREFECT_API_URL they use this API
    instead of each starting (about 10 s) and stopping a temporary server of its own."""
    from prefect.settings import PREFECT_API_URL

    return PREFECT_API_URL.value()


@pytest.fixture(scope="session")
def train_dir(data_dir, tmp_path_factory) -> Path:
    """A generated DBBench training split (seed 0) in a temporary HS_GENERATED_DIR."""
    from envs.dbbench.train_split import build_train_split

    root = tmp_path_factory.mktemp("generated")
    build_train_split(root / "dbbench" / "train.jsonl", seed=0, n_tasks=400, data_dir=data_dir)
    os.environ["HS_GENERATED_DIR"] = str(root)
    return root


REPAIR_FILES = ("toolz/recipes.py", "toolz/itertoolz.py")  # a dev module and a training module


@pytest.fixture(scope="session")
def repair_generated(tmp_path_factory) -> Path:
    """A real repair task set: one injected bug in each of two toolz modules (built once per run)."""
    from envs.repair.data import build

    folder = tmp_path_factory.mktemp("repair")
    build(generated_dir=folder, projects=("toolz",), files=REPAIR_FILES, max_per_file=1)
    return folder


# Databases: a fresh SQLite file, and a fresh PostgreSQL database per test (marked ``postgres`` and
# skipped with the reason when 127.0.0.1:5432 does not answer; ``hs_test_<hex>``, dropped afterwards).
PG_HOST, PG_USER = "127.0.0.1", "postgres"
PG_PORT = int(os.environ.get("HS_TEST_POSTGRES_PORT", "5432"))  # to rehearse the skip path
PG_ADMIN_DSN = f"host={PG_HOST} port={PG_PORT} user={PG_USER} dbname=postgres connect_timeout=3"


@lru_cache(maxsize=1)
def _postgres_unavailable() -> str | None:
    try:
        with psycopg.connect(PG_ADMIN_DSN, autocommit=True) as connection:
            connection.execute("SELECT 1")
    except psycopg.Error as exc:
        first_line = str(exc).strip().splitlines()[0] if str(exc).strip() else repr(exc)
        return f"PostgreSQL at {PG_HOST}:{PG_PORT} is unreachable ({first_line})"
    return None


@pytest.fixture
def sqlite_url(tmp_path) -> str:
    return f"sqlite:///{tmp_path / 'hs.db'}"


@pytest.fixture
def postgres_url() -> Iterator[str]:
    reason = _postgres_unavailable()
    if reason:
        pytest.skip(reason)
    name = f"hs_test_{secrets.token_hex(6)}"
    with psycopg.connect(PG_ADMIN_DSN, autocommit=True) as connection:
        connection.execute(f'CREATE DATABASE "{name}"')
    try:
        yield f"postgresql+psycopg://{PG_USER}@{PG_HOST}:{PG_PORT}/{name}"
    finally:
        # Engines a test made and dropped still hold pooled connections to this database: close them
        # now, quietly, rather than let the garbage collector warn inside whichever test runs next.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ResourceWarning)
            gc.collect()
        with psycopg.connect(PG_ADMIN_DSN, autocommit=True) as connection:
            connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def db_url(request) -> str:
    """The URL of an empty database, once per backend."""
    return request.getfixturevalue(f"{request.param}_url")


@pytest.fixture
def browser():
    """Debian's chromium driven by its chromium-driver through Selenium, headless."""
    if not (shutil.which("chromium") and shutil.which("chromedriver")):
        pytest.skip("no system Chromium: apt-get install chromium chromium-driver (.ci/run does)")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium")
    for flag in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--window-size=1400,1000",
    ):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(shutil.which("chromedriver")), options=options)
    driver.set_page_load_timeout(30)
    yield driver
    driver.quit()
