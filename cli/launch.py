"""The `hs` console entry: the process restarts itself once on jemalloc, then runs the CLI.

glibc's allocator keeps freed tensor memory resident: once a large free raises its mmap threshold,
the activations and logits of a training step come from heap arenas whose freed middle pages stay
in the resident set until `malloc_trim`, so a GRPO update peaked at 5.0-5.5 GiB where jemalloc,
which gives freed pages back after a short decay, peaked at 3.7 GiB on the same update
(docs/results.md, issue 51). Where the system has jemalloc (Debian: `apt-get install
libjemalloc2`) the entry execs the same command again with it preloaded, before torch loads;
its child processes (a temporary Prefect server, data-parallel ranks) inherit it, sandboxes do
not (they start with an empty environment). `HS_ALLOCATOR=glibc` keeps glibc's.
"""

from __future__ import annotations

import glob
import os
import sys

JEMALLOC_GLOBS = (
    "/usr/lib/*-linux-gnu/libjemalloc.so.2",
    "/usr/lib/libjemalloc.so.2",
    "/usr/local/lib/libjemalloc.so.2",
)
# Freed pages go back after about a second (and a background thread does it while the process
# waits on I/O), instead of jemalloc's default 10 s, so a phase's peak does not carry into the next.
JEMALLOC_CONF = "background_thread:true,dirty_decay_ms:1000,muzzy_decay_ms:0"


def jemalloc_path() -> str | None:
    for pattern in JEMALLOC_GLOBS:
        found = sorted(glob.glob(pattern))
        if found:
            return found[0]
    return None


def allocator_environment(environ: dict[str, str]) -> dict[str, str] | None:
    """The environment to exec again with, or None to run as is (already preloaded, turned
    off with HS_ALLOCATOR=glibc, or no jemalloc on this system)."""
    wanted = environ.get("HS_ALLOCATOR", "jemalloc").strip().lower()
    if wanted not in ("jemalloc", "glibc"):
        raise SystemExit(f"HS_ALLOCATOR={wanted!r} is not known: use jemalloc (the default) or glibc")
    preloaded = environ.get("LD_PRELOAD", "")
    if wanted == "glibc" or "jemalloc" in preloaded or not sys.platform.startswith("linux"):
        return None
    path = jemalloc_path()
    if path is None:
        return None
    env = dict(environ)
    env["LD_PRELOAD"] = f"{path}:{preloaded}" if preloaded else path
    env.setdefault("MALLOC_CONF", JEMALLOC_CONF)
    return env


def refuse_bad_settings(environ: dict[str, str]) -> None:
    """Environment settings that are read deep inside a flow, checked here first: a malformed one
    stops `hs` with one line and exit status 2 before any work starts."""
    from rl.kv_budget import configured_kv_gib  # torch-free
    from rl.policy import PolicyError

    try:
        configured_kv_gib(environ)
    except PolicyError as exc:
        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None


def main() -> None:  # pragma: no cover - console entry point (exercised by tests/cli/test_launch.py)
    refuse_bad_settings(dict(os.environ))
    env = allocator_environment(dict(os.environ))
    if env is not None:
        os.execve(sys.executable, [sys.executable, *sys.orig_argv[1:]], env)
    from cli.main import app

    app()


if __name__ == "__main__":  # pragma: no cover
    main()
