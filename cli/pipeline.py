"""`hs run` and `hs quickstart`: the whole method as one Prefect pipeline (flows/pipeline.py)."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from cli.errors import flow_failed, run_flow, user_errors
from cli.options import DatabaseUrl, Sets
from cli.preflight import pipeline_preflight

QUICKSTART = Path(__file__).resolve().parents[1] / "configs" / "quickstart.yaml"


@user_errors
def run_cmd(
    config: Path = typer.Argument(..., help="Pipeline YAML (configs/pipeline_dbbench_smol.yaml)"),
    database_url: DatabaseUrl = None,
    set_: Sets = None,
):
    """Evolve (or reuse) a pool, train with harness rescue, evaluate under H0 / Rank-1 / outside
    harnesses; starting the same command again skips every finished phase and task."""
    run_pipeline(config, database_url, set_)


@user_errors
def quickstart_cmd(database_url: DatabaseUrl = None, set_: Sets = None):
    """The whole method at tiny budgets on CPU with embedded defaults (configs/quickstart.yaml)."""
    run_pipeline(QUICKSTART, database_url, set_)


def run_pipeline(path: Path, database_url: str | None, sets: list[str] | None) -> dict:
    from configs.pipeline import PipelineConfig
    from configs.schema import ConfigError, load_config

    cfg = load_config(PipelineConfig, path, None, sets)
    pipeline_preflight(cfg, database_url)
    console = Console()
    if cfg.evolve is None or cfg.baseline == "harnessx":  # the pool it starts from exists: plan, hold to the caps
        console.print(planned_budget(cfg), highlight=False)
    if cfg.baseline:  # a baseline of another shape (flows/baselines/)
        from flows.baselines import baseline_flow

        flow, what = baseline_flow(cfg.baseline), cfg.baseline
    else:
        from flows.pipeline import pipeline

        flow, what = pipeline, "pipeline"
    try:
        result = run_flow(flow, cfg, database_url=database_url)  # a failure names its flow run for hs rerun
    except ConfigError:  # found once the pool was evolved (a budget cap): one line, like before the start
        raise
    except Exception as exc:  # noqa: BLE001 - Prefect has logged the traceback; every finished phase and task persists
        flow_failed(what, exc, "start the same command again (or `hs rerun FLOW_RUN_ID`) to resume")
    print_results(console, cfg.name, result)
    return result


def planned_budget(cfg) -> str:
    """What the run plans to spend; a one-line ConfigError when that can exceed a `budget:` cap."""
    from configs.budget import describe
    from tasks.budget import hold_to_budget
    from tasks.pipeline import training_config

    plan = hold_to_budget(cfg, training_config(cfg, cfg.pool_version))
    return describe(plan, cfg) + " (evaluation and the pool's evolution not counted)"


def print_results(console: Console, name: str, result: dict) -> None:
    from analysis import pipeline_results as shown

    table = Table(title=shown.title(name, result))
    for col in shown.columns(result):
        table.add_column(col, justify="left" if col in ("evaluation", "harness") else "right")
    for row in shown.rows(result):
        table.add_row(*row)
    console.print(table)
    for line in shown.training_lines(result):
        console.print(line, highlight=False, soft_wrap=True)
