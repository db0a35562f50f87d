"""Helpers several `hs` command modules share."""

from __future__ import annotations

from rich.console import Console


def console() -> Console:
    """A console per command, so a table takes the terminal's width (COLUMNS) when it runs, not at import."""
    return Console()


def known_benchmark(name: str) -> str:
    """``name`` if the platform has that benchmark, else a ConfigError listing those it has."""
    from configs.schema import ConfigError
    from envs.registry import names

    if name not in names():
        raise ConfigError(f"unknown benchmark '{name}': the platform has {', '.join(names())}")
    return name
