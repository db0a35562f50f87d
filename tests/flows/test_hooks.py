"""The on_failure hook marks the failed execution's run, and only a run that was running."""

from __future__ import annotations

from types import SimpleNamespace

from configs.schema import EvalConfig
from db import store
from db.engine import make_engine, session_scope
from db.models import Run
from flows.hooks import mark_failed_on_failure
from tasks.evaluation import run_id_for
from tasks.resources import get_engine


def test_only_a_running_run_is_marked_failed(tmp_path):
    url = f"sqlite:///{tmp_path / 'hs.db'}"
    hook = mark_failed_on_failure(EvalConfig, run_id_for)
    running, finished, absent = (EvalConfig(name=name) for name in ("running", "finished", "absent"))
    with session_scope(get_engine(url)) as s:  # migrated on first use
        store.upsert_run(s, id=run_id_for(running), kind="eval", name="running", status="running", config={})
        store.upsert_run(s, id=run_id_for(finished), kind="eval", name="finished", status="completed", config={})
    for cfg in (running, finished, absent):  # what Prefect passes: the flow, its flow run, the state
        hook(None, SimpleNamespace(parameters={"config": cfg.model_dump(mode="json"), "database_url": url}), None)
    with session_scope(make_engine(url)) as s:
        assert s.get(Run, run_id_for(running)).status == "failed"
        assert s.get(Run, run_id_for(finished)).status == "completed"  # e.g. a refused resumption
        assert s.get(Run, run_id_for(absent)) is None
