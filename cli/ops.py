"""`hs rerun`, `hs rollout`, `hs deploy`: operating flows (re-run failed work, inspect one task, schedule)."""

from __future__ import annotations

from typing import Annotated, Optional

import typer
from rich.console import Console

from cli.errors import user_errors
from cli.options import DatabaseUrl, Sets


@user_errors
def rerun_cmd(
    flow_run_id: str = typer.Argument(..., help="The failed flow run's id (Prefect UI or `prefect flow-run ls`)"),
    here: Annotated[bool, typer.Option(help="Run it in this process even when it came from a deployment")] = False,
):
    """Retry a failed flow run in place: finished tasks are Cached (skipped), only unfinished ones execute."""
    from infra.rerun import rerun_flow_run

    result = rerun_flow_run(flow_run_id, here=here)
    console = Console()
    if result["where"] == "worker":
        console.print(
            f"flow run {flow_run_id} ({result['flow']}) is scheduled again; its deployment's worker will run it",
            highlight=False,
        )
        return
    console.print(f"flow run {flow_run_id} ({result['flow']}) re-ran here: {result['state']}", highlight=False)
    if result["state"] != "COMPLETED":
        Console(stderr=True).print(
            f"[red]error:[/red] re-run ended {result['state']}: {result.get('message')}",
            highlight=False,
            soft_wrap=True,
        )
        raise typer.Exit(1)


@user_errors
def rollout_cmd(
    task: str = typer.Option(..., "--task", help="Benchmark task id, e.g. dbbench/dev/0007 or repair/dev/0003"),
    harness: Annotated[str, typer.Option(help="Harness name or YAML path")] = "h0",
    model: Annotated[Optional[str], typer.Option(help="Policy: built-in model or checkpoint name")] = None,
    k: Annotated[int, typer.Option(help="Rollouts")] = 1,
    database_url: DatabaseUrl = None,
    set_: Sets = None,
):
    """Run one benchmark task under one harness, store it, and print each trajectory turn by turn.
    Sampling is seeded, so the same command is answered from the stored result; change k,
    the model or a --set field to sample anew."""
    from cli import views
    from cli.checks import reading
    from cli.preflight import eval_preflight
    from configs.schema import ConfigError, EvalConfig, load_config
    from db import store
    from flows.evaluate import evaluate

    parts = task.split("/")
    if len(parts) != 3:
        raise ConfigError(f"--task {task!r}: a benchmark task id looks like dbbench/dev/0007")
    overrides = {
        "name": f"rollout-{parts[0]}-{parts[1]}-{parts[2]}",
        "env.benchmark": parts[0],  # the task id names its benchmark
        "split": parts[1],
        "task_ids": [task],
        "harness": harness,
        "k": k,
        "seeds": 1,
        "policy.model": model,
        "checkpoint": model,
    }
    cfg = load_config(EvalConfig, None, overrides, set_)
    eval_preflight(cfg, database_url)  # an unknown task id fails here, in one line
    result = evaluate(cfg, database_url=database_url)
    console = Console()
    with reading(database_url) as session:
        ids = store.run_trajectory_ids(session, result["run_id"])
        for trajectory_id in ids:
            views.print_trajectory(console, store.get_trajectory(session, trajectory_id), False)
    console.print(
        f"run {result['run_id']} · {len(ids)} trajectories of {task} under {harness}; "
        "the same command shows the stored result again",
        highlight=False,
    )


@user_errors
def deploy_cmd(
    pool: Annotated[str, typer.Option(help="Process work pool (created when missing)")] = "harness-s",
    flow: Annotated[Optional[list[str]], typer.Option(help="Only these flows (default: all)")] = None,
    env: Annotated[
        Optional[list[str]],
        typer.Option(help="KEY=VALUE set in every flow run, e.g. HS_DATABASE_URL=postgresql+psycopg://..."),
    ] = None,
):
    """Register every flow as a deployment on a process work pool, so runs can be started (with a
    form of typed parameters) and scheduled from the Prefect UI; then start a worker:
    `prefect worker start --pool harness-s`."""
    from cli.environment import RUN_DEFAULTS
    from configs.schema import ConfigError
    from infra.deploy import deploy_all

    pairs = dict(RUN_DEFAULTS)
    for item in env or []:
        if "=" not in item:
            raise ConfigError(f"--env {item!r}: write KEY=VALUE")
        key, value = item.split("=", 1)
        pairs[key] = value
    deployed = deploy_all(pool, flow, env=pairs)
    console = Console()
    for name, deployment_id in deployed.items():
        console.print(f"deployment {name}/{name}  {deployment_id}", highlight=False)
    console.print(
        f"start a worker: prefect worker start --pool {pool}   (runs: prefect deployment run "
        f"'pipeline/pipeline', or the UI's Run button)",
        highlight=False,
        soft_wrap=True,
    )
