"""`hs db copy --to URL`: the whole trajectory database into another one (db/copy.py)."""

from __future__ import annotations

from typing import Annotated, Optional

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn
from rich.table import Table

from cli.errors import user_errors


@user_errors
def copy_cmd(
    to: Annotated[
        str,
        typer.Option(
            "--to",
            help="Target database URL (migrated first), e.g. postgresql+psycopg://postgres@127.0.0.1:5432/harness_s",
        ),
    ],
    from_: Annotated[
        Optional[str], typer.Option("--from", help="Source; default $HS_DATABASE_URL or .hs/hs.db")
    ] = None,
    run: Annotated[
        Optional[list[str]],
        typer.Option(
            help="Only this pipeline or training run (id or name) with its training and evaluation runs, or "
            "this pool-report or editor run (hs editor); repeat for more. Harnesses and bench tasks are always copied."
        ),
    ] = None,
    turns: Annotated[
        bool, typer.Option(help="Also copy the turns (token ids, texts); --no-turns keeps a report's export small")
    ] = True,
):
    """Copy every row into another database; run it again and nothing is duplicated. With --run,
    only those runs: `hs db copy --run main-harness-s --run main-grpo --no-turns --to sqlite:///rows.db`
    is an export `hs report` reads."""
    from cli.checks import open_database, reading
    from db.copy import copy_database
    from db.engine import mask_url

    source = open_database(from_, write=False, option="--from")
    runs = None
    if run:
        from analysis.runs import export_runs

        with reading(source) as session:
            runs = export_runs(session, list(run))
    target = open_database(to, write=True, option="--to")
    console = Console()
    with Progress(
        TextColumn("[bold]{task.description:>22}"), BarColumn(), MofNCompleteColumn(), console=console, transient=True
    ) as bar:
        bars: dict[str, int] = {}

        def on_rows(table: str, done: int, total: int) -> None:
            if table not in bars:
                bars[table] = bar.add_task(table, total=max(total, 1))
            bar.update(bars[table], completed=done if total else 1)

        try:
            copied = copy_database(source, target, on_rows, runs=runs, turns=turns)
        except ValueError as exc:
            raise typer.BadParameter(str(exc)) from None
    summary = Table("table", "rows copied", title=f"{mask_url(source)} -> {mask_url(target)}")
    for name, n in copied.items():
        summary.add_row(name, f"{n:,}")
    console.print(summary)
    console.print(
        f"copied {sum(copied.values()):,} rows in {len(copied)} tables; running it again changes nothing",
        highlight=False,
    )
