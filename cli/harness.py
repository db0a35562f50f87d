"""`hs harness check`: validate a harness or patch file before anything runs it."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from cli import views
from cli.common import console
from cli.errors import user_errors

harness_app = typer.Typer(help="Harness files: check, patch.", no_args_is_help=True)


@harness_app.command("check")
@user_errors
def harness_check(
    path: Path = typer.Argument(..., help="Harness YAML, or a patch YAML (with `edits:`)"),
    parent: Annotated[str, typer.Option(help="Parent harness a patch applies to")] = "h0",
):
    """Validate a harness file (schema, hook sandbox, benchmark): exit 0 with a summary, or 2 and
    one line naming what is wrong. A patch file is applied to --parent and the child checked."""
    import yaml

    from cli.checks import read_utf8
    from harness_pool.patch import apply_patch, parse_patch
    from harness_pool.spec import HarnessError, load_harness

    if not path.exists():
        raise HarnessError(f"{path}: no such file; give the path of a harness or patch YAML")
    text = read_utf8(path, HarnessError)
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError:
        data = None  # load_harness below reports the syntax error in one line
    if isinstance(data, dict) and "edits" in data:
        spec = apply_patch(load_harness(parent), parse_patch(data))
    else:
        spec = load_harness(path)
    views.print_harness_summary(console(), spec)
