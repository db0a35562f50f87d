"""cli/launch.py: the `hs` entry restarts itself once on jemalloc (or keeps glibc when told)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from cli.launch import allocator_environment, jemalloc_path

# Run as `python -c`: the entry re-executes this very code; the second pass, already preloaded,
# reports what the process runs on instead of starting the CLI.
PROBE = """
import os, sys
from cli.launch import allocator_environment, main
from rl.memory import allocator_in_use, release_memory
if allocator_environment(dict(os.environ)) is None:
    print(allocator_in_use(), os.environ.get("LD_PRELOAD", "-"), release_memory(collect=False))
    sys.exit(0)
main()
"""


def probe(**env: str) -> subprocess.CompletedProcess:
    environ = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", "MALLOC_CONF", "HS_ALLOCATOR")}
    return subprocess.run(
        [sys.executable, "-c", PROBE], env={**environ, **env}, capture_output=True, text=True, timeout=120
    )


@pytest.mark.skipif(jemalloc_path() is None, reason="no jemalloc on this system (apt-get install libjemalloc2)")
def test_the_entry_restarts_once_on_jemalloc_and_purges_it():
    out = probe()
    assert out.returncode == 0, out.stderr
    allocator, preload, purged = out.stdout.split()
    assert allocator == "jemalloc" and preload == jemalloc_path() and purged == "True"


def test_hs_allocator_glibc_keeps_glibc():
    out = probe(HS_ALLOCATOR="glibc")
    assert out.returncode == 0, out.stderr
    assert out.stdout.split()[:2] == ["glibc", "-"]


def test_an_unknown_allocator_is_one_line_that_names_the_choices():
    out = probe(HS_ALLOCATOR="tcmalloc")
    assert out.returncode != 0 and out.stdout == ""
    assert out.stderr.strip() == "HS_ALLOCATOR='tcmalloc' is not known: use jemalloc (the default) or glibc"


def test_an_existing_preload_is_kept_behind_jemalloc():
    if jemalloc_path() is None:
        pytest.skip("no jemalloc on this system")
    env = allocator_environment({"LD_PRELOAD": "/opt/other.so"})
    assert env["LD_PRELOAD"] == f"{jemalloc_path()}:/opt/other.so" and "dirty_decay_ms" in env["MALLOC_CONF"]
    assert allocator_environment({"LD_PRELOAD": jemalloc_path()}) is None


def test_a_malformed_kv_budget_stops_the_entry_with_one_line_before_any_work():
    def hs_help(value: str) -> subprocess.CompletedProcess:
        env = {**os.environ, "HS_KV_CACHE_GIB": value}
        return subprocess.run(
            [sys.executable, "-m", "cli.launch", "--help"], env=env, capture_output=True, text=True, timeout=120
        )

    out = hs_help("lots")
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.strip() == (
        "error: HS_KV_CACHE_GIB='lots' is not a number of GiB: set it to e.g. 1.5, or 0 for no bound"
    )
    good = hs_help("0.5")
    assert good.returncode == 0 and "harness-s" in good.stdout
