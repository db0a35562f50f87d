"""Which process owns a running run, and what happens to runs whose owner died without a word.

A flow's failure hook marks its run 'failed'; a process killed with SIGKILL (or by the OOM
killer, or a power cut) runs no hook, and its run would stay 'running' forever. So every flow
stamps its run row, right after registering it (:func:`register_and_claim`), with its owner: ``results["owner"] =
{"pid", "host", "started"}`` (``started``: the process's start time in clock ticks since boot,
from /proc, so that a recycled pid is not mistaken for the owner). The ``runs`` table has no
column for it, and the results document is empty while a run is running, so no migration is
needed.

Each ``hs`` command that opens the database calls :func:`reap_abandoned_runs` first: a run still
'running' whose owner was on this host and is gone is marked 'failed' with
``results["crashed"]`` saying so (the status column's CHECK constraint allows only running,
completed and failed; ``hs report training`` shows such runs as 'crashed'). Starting the same
command again resumes the run as before: its flow claims the row again, which sets it back to
'running' and drops the note. Runs owned by another host, or registered before owners were
recorded, are left alone: nothing here can tell whether they still run.

This module imports neither Prefect nor the models at import time: the CLI imports it for
commands that never start a flow.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path
from typing import Any


def _proc_stat(pid: int) -> tuple[str, int] | None:
    """(state, start time in clock ticks since boot) of process ``pid``; None where /proc cannot say."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[-1].split()  # the command name may contain spaces and ')'
    try:
        return fields[0], int(fields[19])  # field 3: state; field 22: starttime
    except (IndexError, ValueError):
        return None


def owner_record() -> dict[str, Any]:
    """This process as the owner of a run: pid, host and start time."""
    stat = _proc_stat(os.getpid())
    return {"pid": os.getpid(), "host": socket.gethostname(), "started": stat[1] if stat else None}


def owner_alive(owner: dict[str, Any]) -> bool | None:
    """True/False: the owner still runs / is gone; None: it ran on another host (cannot tell)."""
    if owner.get("host") != socket.gethostname() or not isinstance(owner.get("pid"), int):
        return None
    pid = owner["pid"]
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by another user: its /proc entry decides below
        pass
    stat = _proc_stat(pid)
    if stat is None:
        return True  # it exists and /proc cannot tell more
    state, started = stat
    if state in ("Z", "X"):
        return False  # exited; its parent has not reaped it yet
    recorded = owner.get("started")
    return recorded is None or started == recorded  # another start time: the pid was recycled


def claim_run(run_id: str, database_url: str | None) -> None:
    """Stamp run ``run_id`` as running in this process (call right after registering it)."""
    from db.engine import session_scope
    from db.models import Run
    from tasks.resources import get_engine

    with session_scope(get_engine(database_url)) as session:
        run = session.get(Run, run_id)
        if run is None:
            return
        results = {k: v for k, v in (run.results or {}).items() if k != "crashed"}
        run.results = {**results, "owner": owner_record()}
        run.status, run.finished_at = "running", None


def register_and_claim(cfg, register, database_url: str | None):
    """Register the run of `cfg` with `register` (a register-* task, called as (cfg, database_url,
    this flow run's id)) and claim it for this process; returns what `register` returned (the run
    id, or a document or object carrying it as `run_id`). Every flow's opening ends with it
    (flows/opening.py open_run; the warm start's own flow, flows/sft.py, calls it directly)."""
    from prefect.runtime import flow_run

    run = register(cfg, database_url, flow_run.get_id())
    claim_run(_run_id(run), database_url)
    return run


def _run_id(run) -> str:
    if isinstance(run, str):
        return run
    return run["run_id"] if isinstance(run, dict) else run.run_id


def abandoned(run) -> bool:
    """Run row `run` is still 'running' but its owner on this host is gone."""
    owner = (run.results or {}).get("owner") if isinstance(run.results, dict) else None
    return run.status == "running" and isinstance(owner, dict) and owner_alive(owner) is False


def crash_note(run) -> str | None:
    """The crash note of a run marked failed by :func:`reap_abandoned_runs`, else None."""
    note = (run.results or {}).get("crashed") if isinstance(run.results, dict) else None
    return note if isinstance(note, str) else None


def reap_abandoned_runs(url: str) -> list[str]:
    """Mark runs left 'running' by a process of this host that is gone; one note per run.

    Best effort: a database without the runs table (not migrated yet) or one that refuses the
    write is left as it is; this tidying never stops the command that called it.
    """
    from sqlalchemy import select
    from sqlalchemy.exc import SQLAlchemyError
    from sqlalchemy.pool import NullPool

    from db.engine import make_engine, session_scope
    from db.models import Run, utcnow

    notes: list[str] = []
    engine = make_engine(url, create_folder=False, poolclass=NullPool)
    try:
        with session_scope(engine) as session:
            for run in session.scalars(select(Run).where(Run.status == "running")).all():
                if not abandoned(run):
                    continue
                owner = run.results["owner"]
                when = utcnow().strftime("%Y-%m-%d %H:%M:%S UTC")
                note = (
                    f"its process {owner['pid']} on {owner['host']} ended without finishing it "
                    f"(killed?); marked crashed at {when}"
                )
                run.results = {**run.results, "crashed": note}
                run.status, run.finished_at = "failed", utcnow()
                notes.append(
                    f"run {run.id} ({run.kind}) was left 'running': {note}; start the same command again to resume it"
                )
    except SQLAlchemyError:
        return []
    finally:
        engine.dispose()
    return notes
