"""Option types that several `hs` commands share, declared once."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

DatabaseUrl = Annotated[
    Optional[str], typer.Option("--database-url", help="Database URL; default $HS_DATABASE_URL or .hs/hs.db")
]
Sets = Annotated[
    Optional[list[str]], typer.Option("--set", help="Override any config field: a.b=value (e.g. train.updates=5)")
]
BenchmarkOption = Annotated[
    Optional[str],
    typer.Option(
        "--benchmark", help="Benchmark: dbbench, textworld, bfcl or repair (sets env.benchmark; default: the config's)"
    ),
]
