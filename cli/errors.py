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
        from db.ids import RunIdTooLong
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
            RunIdTooLong,
            SandboxUnavailable,
            LookupError,
        ) as exc:
            Console(stderr=True).print(f"[red]error:[/red] {exc}", markup=True, highlight=False, soft_wrap=True)
            raise typer.Exit(2) from None

    return wrapper


RERUN_PLACEHOLDER = "FLOW_RUN_ID"


def run_flow(flow, /, *args, **kwargs):
    """Call a Prefect flow and return its result. When it fails, its exception is raised again
    with the failed flow run's id attached (``flow_run_id``), so that :func:`flow_failed` can
    print a `hs rerun` line that works as written."""
    state = flow(*args, return_state=True, **kwargs)
    try:
        return state.result()
    except Exception as exc:
        flow_run_id = getattr(getattr(state, "state_details", None), "flow_run_id", None)
        if flow_run_id is not None:
            try:
                exc.flow_run_id = str(flow_run_id)
            except AttributeError:  # an exception type without a __dict__
                pass
        raise


def flow_failed(what: str, exc: BaseException, hint: str = "") -> NoReturn:
    """A flow raised: Prefect has logged the traceback and rows already written stay; one line, exit 1.

    `hs rerun FLOW_RUN_ID` in the message or the hint names the failed flow run's real id when the
    flow was called through :func:`run_flow`. A run id too long for the database is a user error
    (exit 2, no hint: starting again would fail the same way)."""
    from rich.markup import escape

    from db.ids import RunIdTooLong

    console = Console(stderr=True)
    if isinstance(exc, RunIdTooLong):
        console.print(f"[red]error:[/red] {escape(str(exc))}", highlight=False, soft_wrap=True)
        raise typer.Exit(2) from None
    line = f"{what} failed: {exc}{'; ' + hint if hint else ''}"
    flow_run_id = getattr(exc, "flow_run_id", None)
    if flow_run_id:
        line = line.replace(RERUN_PLACEHOLDER, flow_run_id)
    console.print(f"[red]error:[/red] {escape(line)}", highlight=False, soft_wrap=True)
    raise typer.Exit(1) from None
