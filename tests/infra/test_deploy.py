"""Scheduling from the UI, for real: a `prefect server` on loopback, `hs deploy`, a process worker,
a flow run created through the server's REST API (what the UI's Run button calls), its result
table as an artifact on the run's page, and its trajectories in the database."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from sqlalchemy import func, select

from db.engine import make_engine, session_scope
from db.models import Run, Trajectory

REPO = Path(__file__).resolve().parents[2]
HS = str(Path(sys.executable).parent / "hs")
PREFECT = str(Path(sys.executable).parent / "prefect")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_healthy(api: str, proc: subprocess.Popen, log: Path, seconds: float = 150) -> None:
    deadline = time.time() + seconds
    while time.time() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"prefect server exited: {log.read_text()[-2000:]}")
        try:
            if httpx.get(f"{api}/health", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(1)
    pytest.fail(f"prefect server not healthy after {seconds} s: {log.read_text()[-2000:]}")


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)


@pytest.mark.slow
def test_deploy_then_trigger_through_the_api_runs_on_a_worker(tmp_path, data_dir):
    port = _free_port()
    api = f"http://127.0.0.1:{port}/api"
    env = {
        **os.environ,
        "PREFECT_HOME": str(tmp_path / "prefect"),
        "PREFECT_API_URL": api,
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        "PREFECT_WORKER_QUERY_SECONDS": "2",
        "PREFECT_UI_ENABLED": "false",
        "WANDB_MODE": "disabled",
    }
    env.pop("PREFECT_API_KEY", None)
    url = f"sqlite:///{tmp_path / 'hs.db'}"
    server_log, worker_log = tmp_path / "server.log", tmp_path / "worker.log"
    server = subprocess.Popen(
        [PREFECT, "server", "start", "--host", "127.0.0.1", "--port", str(port)],
        env=env,
        stdout=server_log.open("w"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    worker = None
    try:
        _wait_healthy(api, server, server_log)
        deployed = subprocess.run(
            [HS, "deploy", "--pool", "hs-test", "--env", f"HS_DATABASE_URL={url}"],
            env=env,
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert deployed.returncode == 0, deployed.stderr[-2000:]
        assert "deployment pipeline/pipeline" in deployed.stdout and "deployment evaluate/evaluate" in deployed.stdout

        dep = httpx.get(f"{api}/deployments/name/evaluate/evaluate", timeout=10).json()
        schema = dep["parameter_openapi_schema"]  # the typed form the UI renders
        assert "config" in schema["properties"] and "EvalConfig" in str(schema)
        assert dep["parameters"]["config"]["harness"] == "h0"  # prefilled from configs/eval_dbbench.yaml
        # its flow runs get the database, the sleeping OpenMP threads and the bounded kernel caches (cli/environment.py)
        assert dep["job_variables"]["env"] == {
            "OMP_WAIT_POLICY": "PASSIVE",
            "ONEDNN_PRIMITIVE_CACHE_CAPACITY": "256",
            "LRU_CACHE_CAPACITY": "256",
            "HS_DATABASE_URL": url,
        }

        params = {
            "config": {
                **dep["parameters"]["config"],
                "name": "ui",
                "limit": 2,
                "k": 1,
                "seeds": 1,
                "sampling": {"max_new_tokens": 8},
                "env": {"max_rounds": 1},
                "results_dir": str(tmp_path / "results"),
            }
        }
        created = httpx.post(f"{api}/deployments/{dep['id']}/create_flow_run", json={"parameters": params}, timeout=10)
        assert created.status_code in (200, 201), created.text
        flow_run_id = created.json()["id"]

        worker = subprocess.Popen(
            [PREFECT, "worker", "start", "--pool", "hs-test", "--type", "process"],
            env=env,
            cwd=REPO,
            stdout=worker_log.open("w"),
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        state, deadline = None, time.time() + 400
        while time.time() < deadline:
            state = httpx.get(f"{api}/flow_runs/{flow_run_id}", timeout=10).json()["state"]["type"]
            if state in ("COMPLETED", "FAILED", "CRASHED", "CANCELLED"):
                break
            time.sleep(3)
        assert state == "COMPLETED", worker_log.read_text()[-3000:]
        # its result table, as the UI shows it on the flow run's page (flows/artifacts.py)
        found = httpx.post(
            f"{api}/artifacts/filter", json={"artifacts": {"flow_run_id": {"any_": [flow_run_id]}}}, timeout=10
        ).json()
        (table,) = [a for a in found if a["type"] == "table"]
        rows = json.loads(table["data"])
        assert rows[0]["harness"] == "h0" and rows[0]["n tasks"] == 2 and rows[0]["Pass@1 (%)"].endswith(" ± 0.00")
    finally:
        if worker is not None:
            _stop(worker)
        _stop(server)

    with session_scope(make_engine(url)) as s:
        run = s.scalars(select(Run).where(Run.kind == "eval")).one()
        assert run.status == "completed" and run.prefect_flow_run_id == flow_run_id
        assert s.scalar(select(func.count()).select_from(Trajectory)) == 2
