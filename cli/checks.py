"""Preflight checks shared by `hs` commands: each turns a bad state into one line (exit status 2)
before anything is written, Prefect starts or a model loads.

- :func:`open_database`: the trajectory database a command uses. Commands that only read need an
  existing one and create nothing; commands that write may create the file, and the default
  ``.hs`` folder, but never a folder named in an explicit URL. Runs left 'running' by a process
  that is gone are marked crashed first (flows/ownership.py), with a one-line note.
- :func:`reading`: a session on that database for a command that only reads.
- :func:`check_output_folder`: a file a command is about to write can be written.
- :func:`check_training_split`: every line of the generated training split parses as a task.
- :func:`read_utf8`: a user's text file, or one line naming the first undecodable byte.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console

if TYPE_CHECKING:
    from sqlalchemy.orm import Session


def database_target(url: str | None) -> tuple[str, bool]:
    """The database a command uses (``url``, else $HS_DATABASE_URL, else .hs/hs.db) and whether it
    was given explicitly."""
    from db.engine import ENV_DATABASE_URL, database_url, normalize_url

    explicit = (url or os.environ.get(ENV_DATABASE_URL, "")).strip()
    return (normalize_url(explicit) if explicit else database_url(create_home=False)), bool(explicit)


def open_database(url: str | None, *, write: bool, option: str | None = None) -> str:
    """Check the database a command uses (``url``, else $HS_DATABASE_URL, else .hs/hs.db) and mark
    runs abandoned by a dead process crashed; returns the URL. Raises DatabaseError (one line);
    its fix names ``option``, the command's flag for ``url``, when the command has no --database-url."""
    from db.engine import check_database
    from flows.ownership import reap_abandoned_runs

    target, explicit = database_target(url)  # the default's folder is made below if allowed
    check_database(target, must_exist=not write, create_folder=write and not explicit, option=option)
    console = Console(stderr=True)
    for note in reap_abandoned_runs(target):
        console.print(f"[yellow]note:[/yellow] {note}", highlight=False, soft_wrap=True)
    return target


@contextmanager
def reading(url: str | None) -> Iterator[Session]:
    """A session on the database a read-only command uses (checked by :func:`open_database`)."""
    from db.engine import session_scope
    from tasks.resources import get_engine

    with session_scope(get_engine(open_database(url, write=False))) as session:
        yield session


def check_output_folder(path: Path, what: str, fix: str) -> None:
    """The folder of ``path`` exists or can be made, and a file can be created in it."""
    from db.engine import folder_problem
    from envs.base import DataError

    problem = folder_problem(Path(path).parent, create=True)
    if problem is not None:
        raise DataError(f"cannot write {what} to {path}: {problem}, or {fix}")


def check_training_split(benchmark: str, data_dir: str | None, missing_ok: bool = False) -> None:
    """The benchmark's generated training split holds only task records (`Benchmark.check_training_split`;
    a benchmark whose splits ship ready, or that checks its own index, has none).

    The flows read the whole file only after Prefect has started (and a model may have loaded);
    a damaged line is reported here instead, with its number. A missing file raises the data
    module's one-line error unless ``missing_ok`` (the pipeline builds it when missing).
    """
    from envs.registry import benchmark as registered

    check = registered(benchmark).check_training_split
    if check is not None:
        check(data_dir, missing_ok)


def read_utf8(path: Path, error: type[Exception]) -> str:
    """The text of ``path``; ``error`` (one line) when it is not a readable UTF-8 file."""
    if not path.is_file():
        raise error(f"{path}: not a file; give the path of a YAML file")
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise error(f"{path}: cannot read it ({exc.strerror or type(exc).__name__})") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise error(
            f"{path}: not UTF-8 text (byte 0x{data[exc.start]:02x} on line {line}); save the file as UTF-8"
        ) from None


def check_sandbox(benchmark_name: str, harnesses, editors_write_hooks: bool = False) -> None:
    """Model-written code (this benchmark's actions, a harness's code hooks, or hooks an editor may
    write) runs only in the sandbox: SandboxUnavailable, one line, when it cannot be had here."""
    from envs.registry import benchmark
    from sandbox import sandbox_mode

    if editors_write_hooks or benchmark(benchmark_name).runs_model_code or any(h.code_hooks for h in harnesses):
        sandbox_mode()
