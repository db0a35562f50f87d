"""`hs report`, `hs traj`, `hs profiles`: reading what the database holds (analysis/, db/store.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from cli import views
from cli.common import console
from cli.errors import user_errors
from cli.options import DatabaseUrl

traj_app = typer.Typer(help="Inspect stored trajectories.", no_args_is_help=True)
report_app = typer.Typer(
    help="Reports from the database: the RQ1-RQ6 report (--run), or a subcommand.",
    no_args_is_help=True,
    invoke_without_command=True,
)
profiles_app = typer.Typer(help="Behaviour profiles of siblings (induced at every re-anchor).", no_args_is_help=True)


@report_app.callback()
@user_errors
def report(
    ctx: typer.Context,
    run: Annotated[Optional[str], typer.Option(help="The method's pipeline (or training) run: id or name")] = None,
    baseline: Annotated[
        Optional[list[str]],
        typer.Option(help="A run to compare with (pipeline or training run, id or name); repeat for several"),
    ] = None,
    pool_report: Annotated[
        Optional[list[str]],
        typer.Option(
            "--pool-report",
            help="A pool-report run (hs pool report ... --set name=NAME), id or name; repeat for the same pool "
            "under several policies (phenomena on its task sample, in the order given)",
        ),
    ] = None,
    out: Annotated[Path, typer.Option(help="Folder for report.md and the PNG figures")] = Path("reports/latest"),
    database_url: DatabaseUrl = None,
):
    """RQ1-RQ6 and the three phenomena as one markdown report with figures.

    hs report --run ID --baseline RUN [--pool-report NAME ...] --out DIR"""
    if ctx.invoked_subcommand is not None:
        return
    if run is None:
        raise typer.BadParameter("give --run (a pipeline or training run id or name), or a subcommand such as training")
    from analysis.report import build_report, write_report
    from cli.checks import check_output_folder, reading
    from db.engine import mask_url

    check_output_folder(out / "report.md", "the report", "pass --out with a writable folder")
    with reading(database_url) as session:
        built = build_report(session, run, list(baseline or []), list(pool_report or []))
    command = " ".join(
        [
            "hs report",
            f"--run {run}",
            *[f"--baseline {b}" for b in baseline or []],
            *[f"--pool-report {p}" for p in pool_report or []],
            *([f"--database-url {mask_url(database_url)}"] if database_url else []),
            f"--out {out}",
        ]
    )
    path = write_report(built, out, command, decompress_step(database_url))
    console().print(
        f"wrote {path} ({len(list(out.glob('*.png')))} figures) comparing " + ", ".join(m.label for m in built.methods),
        highlight=False,
        soft_wrap=True,
    )


def decompress_step(database_url: str | None) -> str:
    """`xz -dk FILE.xz` when the report reads a SQLite file kept beside its compressed copy (a
    committed export such as reports/dbbench-main/rows.db.xz, whose rows.db is not committed)."""
    from sqlalchemy.engine import make_url

    from db.engine import normalize_url, sqlite_file

    path = sqlite_file(database_url) if database_url else None
    if path is None or not path.with_name(path.name + ".xz").is_file():
        return ""
    return f"xz -dk {make_url(normalize_url(database_url)).database}.xz"


@report_app.command("editor")
@user_errors
def report_editor(
    run_id: Annotated[str, typer.Argument(help="Editor comparison run id (hs editor compare prints it)")],
    database_url: DatabaseUrl = None,
):
    """The editor comparison of a run: static-check and validation shares, fixed/broken per patch,
    best-patch success per editor, with intervals."""
    from cli.checks import open_database
    from cli.editor import print_comparison
    from tasks.editor_compare import editor_table

    print_comparison(editor_table(run_id, open_database(database_url, write=False)))


@report_app.command("training")
@user_errors
def report_training(
    run_ids: Annotated[Optional[list[str]], typer.Argument(help="Training run ids; none: list them")] = None,
    database_url: DatabaseUrl = None,
):
    """Training runs side by side: valid groups, effective tokens, rescues, rollouts, H0 validation."""
    from analysis.training import summarise_training
    from cli.checks import reading
    from db import store

    with reading(database_url) as session:
        if not run_ids:
            views.print_runs(console(), store.training_runs(session))
            return
        rows = {run_id: summarise_training(*store.training_history(session, run_id)) for run_id in run_ids}
    views.print_training_summary(console(), rows)


@traj_app.command("list")
@user_errors
def traj_list(
    run: Annotated[Optional[str], typer.Option(help="Run id")] = None,
    task: Annotated[Optional[str], typer.Option(help="Benchmark task id, e.g. dbbench/dev/0003")] = None,
    success: Annotated[Optional[bool], typer.Option("--success/--failed", help="Filter by outcome")] = None,
    limit: Annotated[int, typer.Option(help="Rows")] = 30,
    database_url: DatabaseUrl = None,
):
    """List trajectories, newest first."""
    from cli.checks import reading
    from db import store

    with reading(database_url) as session:
        rows = store.list_trajectories(session, run_id=run, bench_task_id=task, success=success, limit=limit)
        views.print_trajectory_table(console(), rows)


@traj_app.command("show")
@user_errors
def traj_show(
    trajectory_id: str,
    tokens: Annotated[bool, typer.Option(help="Also print token ids with their loss mask")] = False,
    database_url: DatabaseUrl = None,
):
    """Show one trajectory turn by turn; masked (non-policy) spans are dimmed, policy text is green."""
    from cli.checks import reading
    from db import store

    with reading(database_url) as session:
        views.print_trajectory(console(), store.get_trajectory(session, trajectory_id), tokens)


@profiles_app.command("show")
@user_errors
def profiles_show(
    harness: str = typer.Argument(..., help="Harness name or id prefix"),
    version: Annotated[Optional[int], typer.Option(help="Profile version (re-anchor step); default newest")] = None,
    run: Annotated[Optional[str], typer.Option(help="Training run id; default the newest with profiles")] = None,
    database_url: DatabaseUrl = None,
):
    """A sibling's prefer/avoid entries with their evidence, as induced at one re-anchor."""
    from cli.checks import reading
    from db import store

    with reading(database_url) as session:
        views.print_profile(console(), store.newest_profile(session, harness, run, version))
