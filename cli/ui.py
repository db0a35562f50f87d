"""`hs ui`: the read-only trajectory explorer (ui/) over the current trajectory database."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from cli.errors import user_errors


@user_errors
def ui_cmd(
    port: Annotated[int, typer.Option(help="Port to serve on")] = 8765,
    host: Annotated[str, typer.Option(help="Address to bind (127.0.0.1: this machine only)")] = "127.0.0.1",
    database_url: Annotated[
        Optional[str], typer.Option(help="Database to explore (default $HS_DATABASE_URL, else .hs/hs.db)")
    ] = None,
):
    """Browse runs, updates, groups and trajectories in the browser (read-only)."""
    import os

    import uvicorn

    from db.engine import ENV_DATABASE_URL, check_database, mask_url, normalize_url
    from db.engine import database_url as default_url
    from ui.app import create_app

    explicit = (database_url or os.environ.get(ENV_DATABASE_URL, "")).strip()
    url = normalize_url(explicit) if explicit else default_url(create_home=False)
    check_database(url, must_exist=True, create_folder=False)
    typer.echo(f"harness-s explorer on http://{host}:{port}/ (database {mask_url(url)}, read-only); Ctrl-C stops it")
    uvicorn.run(create_app(url), host=host, port=port, log_level="warning")
