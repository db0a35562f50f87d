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
    import socket

    import uvicorn

    from cli.checks import database_target
    from configs.schema import ConfigError
    from db.engine import check_database, mask_url
    from ui.app import create_app

    url, _ = database_target(database_url)
    check_database(url, must_exist=True, create_folder=False)
    with socket.socket() as probe:
        try:
            probe.bind((host, port))
        except OSError as exc:
            raise ConfigError(
                f"cannot serve on {host}:{port} ({exc.strerror}): pass another --port or --host"
            ) from None
    typer.echo(f"harness-s explorer on http://{host}:{port}/ (database {mask_url(url)}, read-only); Ctrl-C stops it")
    uvicorn.run(create_app(url), host=host, port=port, log_level="warning")
