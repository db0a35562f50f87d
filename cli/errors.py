"""Known user errors -> one line on stderr and exit status 2 (shared by every `hs` command module)."""

from __future__ import annotations

import functools
from typing import NoReturn

import typer
from rich.console import Console


def user_errors(fn):
    """Turn the platform's known user-facing errors into one line and exit status 2."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        from configs.schema import ConfigError
        from db.engine import DatabaseError
        from envs.base import DataError
        from harness_pool.spec import HarnessError
        from rl.policy import PolicyError
        from sandbox import SandboxUnavailable

        try:
            return fn(*args, **kwargs)
        except (
            ConfigError,
            DataError,
            DatabaseError,
            HarnessError,
            PolicyError,
            SandboxUnavailable,
            LookupError,
        ) as exc:
            Console(stderr=True).print(f"[red]error:[/red] {exc}", markup=True, highlight=False, soft_wrap=True)
            raise typer.Exit(2) from None

    return wrapper


def flow_failed(what: str, exc: BaseException, hint: str = "") -> NoReturn:
    """A flow raised: Prefect has logged the traceback and rows already written stay; one line, exit 1."""
    Console(stderr=True).print(
        f"[red]error:[/red] {what} failed: {exc}{'; ' + hint if hint else ''}", highlight=False, soft_wrap=True
    )
    raise typer.Exit(1) from None
