"""Re-run a failed flow run in place, so that only its unfinished tasks execute.

Prefect cannot re-execute one task run. What it can do, and what the UI's "Retry" does, is move
a failed flow run back to Scheduled and run it again under the same flow run id: every task
whose result persisted under its cache key (inputs + source) is then Cached and skipped, and
rows are keyed deterministically, so nothing is duplicated. A run that came from a deployment
is handed back to its work pool (a worker picks it up); any other run, or `here=True`, runs in
this process with the parameters it was started with. A flow run that Prefect still shows as
RUNNING, but whose owning process this project's database knows to be gone (flows/ownership.py),
is marked Crashed first and then re-run.
"""

from __future__ import annotations

from uuid import UUID

RERUNNABLE = ("FAILED", "CRASHED", "CANCELLED")


def rerun_flow_run(flow_run_id: str, here: bool = False) -> dict:
    """Returns {flow, flow_run_id, where: 'worker'|'here', state}; raises LookupError (one line) for
    an unknown id or a run that did not fail."""
    from prefect import get_client
    from prefect.exceptions import ObjectNotFound
    from prefect.states import Crashed, Scheduled

    from flows.registry import load_flow
    from infra.deploy import check_api

    try:
        run_uuid = UUID(flow_run_id)
    except ValueError:
        raise LookupError(
            f"'{flow_run_id}' is not a flow run id: copy the UUID from the Prefect UI or `prefect flow-run ls`"
        ) from None
    with get_client(sync_client=True) as client:
        check_api(client)
        try:
            run = client.read_flow_run(run_uuid)
        except ObjectNotFound:
            raise LookupError(
                f"no flow run {flow_run_id} in the Prefect API at {client.api_url}: point "
                "PREFECT_API_URL at the server that ran it"
            ) from None
        state = run.state.type.value if run.state else "UNKNOWN"
        if state == "RUNNING" and owner_is_gone(flow_run_id):
            # killed without a word (kill -9, OOM): Prefect still says RUNNING, the run row knows better
            client.set_flow_run_state(run.id, Crashed(message="its process ended without finishing it"), force=True)
            state = "CRASHED"
        if state not in RERUNNABLE:
            raise LookupError(f"flow run {flow_run_id} is {state}; only a failed, crashed or cancelled run is re-run")
        flow_name = client.read_flow(run.flow_id).name
        flow_fn = load_flow(flow_name)
        client.set_flow_run_state(run.id, Scheduled(name="AwaitingRetry"), force=True)
        if run.deployment_id is not None and not here:
            return {"flow": flow_name, "flow_run_id": flow_run_id, "where": "worker", "state": "SCHEDULED"}
        run = client.read_flow_run(run_uuid)
    from prefect.flow_engine import run_flow

    final = run_flow(flow_fn, flow_run=run, parameters=run.parameters, return_type="state")
    return {
        "flow": flow_name,
        "flow_run_id": flow_run_id,
        "where": "here",
        "state": final.type.value,
        "message": final.message,
    }


def owner_is_gone(flow_run_id: str, database_url: str | None = None) -> bool:
    """True when this project's run row of `flow_run_id` says its process died (flows/ownership.py)."""
    from sqlalchemy import select
    from sqlalchemy.exc import SQLAlchemyError
    from sqlalchemy.pool import NullPool

    from db.engine import database_url as default_url
    from db.engine import make_engine, session_scope, sqlite_file
    from db.models import Run
    from flows.ownership import abandoned, crash_note

    url = database_url or default_url(create_home=False)
    path = sqlite_file(url)
    if path is not None and not path.exists():
        return False
    engine = make_engine(url, create_folder=False, poolclass=NullPool)
    try:
        with session_scope(engine) as session:
            run = session.scalars(select(Run).where(Run.prefect_flow_run_id == flow_run_id)).first()
            if run is None:
                return False
            return crash_note(run) is not None or abandoned(run)
    except SQLAlchemyError:
        return False
    finally:
        engine.dispose()
