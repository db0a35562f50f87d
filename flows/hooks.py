"""Flow hooks shared by the phase flows."""

from __future__ import annotations

from collections.abc import Callable

from db import store
from db.engine import session_scope
from db.models import Run
from tasks.resources import get_engine


def mark_failed_on_failure(config_type, run_id_of: Callable[[object], str]):
    """An on_failure hook for a flow called as (config, database_url): its run row is marked
    'failed' (rows already written stay). A flow that failed before it registered its run has
    nothing to mark: no row, or the row of an earlier execution that is not running (a finished
    run whose resumption was refused keeps its status)."""

    def mark_failed(flow, flow_run, state) -> None:
        params = flow_run.parameters or {}
        run_id = run_id_of(config_type.model_validate(params["config"]))
        with session_scope(get_engine(params.get("database_url"))) as session:
            run = session.get(Run, run_id)
            if run is not None and run.status == "running":
                store.finish_run(session, run_id, "failed")

    return mark_failed
