"""`hs db upgrade` and `hs db copy` (cli/db_copy.py): the trajectory database."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from cli.common import console
from cli.db_copy import copy_cmd
from cli.errors import user_errors

db_app = typer.Typer(help="Trajectory database.", no_args_is_help=True)


@db_app.command("upgrade")
@user_errors
def db_upgrade(
    url: Annotated[
        Optional[str],
        typer.Option(
            "--database-url", "--url", help="Database URL; default $HS_DATABASE_URL or .hs/hs.db (--url: the old name)"
        ),
    ] = None,
):
    """Create or migrate the trajectory database to the latest schema."""
    from cli.checks import open_database
    from db.engine import mask_url, upgrade

    target = open_database(url, write=True)
    upgrade(target)
    console().print(f"database at {mask_url(target)} is at the latest revision")


db_app.command("copy")(copy_cmd)
