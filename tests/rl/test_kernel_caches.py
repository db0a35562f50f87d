"""oneDNN's kernel caches stay bounded (cli/environment.py): bf16 matmuls of many shapes, the way
training and decoding meet them, leave far less memory behind in an `hs` process than under the
libraries' default of 1,024 entries. Measured with jemalloc's own count of allocated bytes, in
fresh processes (the cache sizes are read once, when oneDNN starts)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from cli.launch import allocator_environment, jemalloc_path
from rl.precision import cpu_has_fast_bf16

REPO = Path(__file__).resolve().parents[2]
SCRIPT = """
import sys
sys.path.insert(0, sys.argv[1])
from cli.environment import apply_defaults
apply_defaults()
import torch
from rl.memory import jemalloc_allocated
weights = [torch.randn(o, i, dtype=torch.bfloat16) for o, i in ((512, 256), (256, 512))]
before = jemalloc_allocated()
for rows in range(8, 8 + 4 * 400, 4):  # 400 row counts x 2 weight shapes
    for w in weights:
        torch.randn(rows, w.shape[1], dtype=torch.bfloat16) @ w.t()
print(jemalloc_allocated() - before)
"""


def _left_behind(capacity: str | None) -> int:
    """Bytes the script leaves allocated, on jemalloc as the `hs` entry starts it (cli/launch.py)."""
    env = {k: v for k, v in os.environ.items() if k not in ("ONEDNN_PRIMITIVE_CACHE_CAPACITY", "LRU_CACHE_CAPACITY")}
    env.update(HS_ALLOCATOR="jemalloc", OMP_NUM_THREADS="1")
    env = allocator_environment(env) or env  # None: jemalloc is preloaded already
    if capacity:
        env.update(ONEDNN_PRIMITIVE_CACHE_CAPACITY=capacity, LRU_CACHE_CAPACITY=capacity)
    command = [sys.executable, "-c", SCRIPT, str(REPO)]
    out = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    return int(out.stdout.split()[-1])


def test_the_kernel_caches_of_an_hs_process_are_bounded():
    if jemalloc_path() is None:
        pytest.skip("no jemalloc on this system: its allocated-bytes count is the measure")
    if not cpu_has_fast_bf16():  # hs runs in fp32 here (dtype auto), and bf16 is emulated far too slowly to probe
        pytest.skip("no AMX or AVX-512 bf16 on this CPU: hs processes here make no bf16 matmuls")
    unbounded = _left_behind("1024")  # the libraries' default
    if unbounded < 64 * 2**20:
        pytest.skip(f"bf16 matmuls here do not go through oneDNN's cached kernels ({unbounded / 2**20:.0f} MiB kept)")
    bounded = _left_behind(None)  # what apply_defaults gives every hs process
    assert bounded < unbounded / 2, (bounded, unbounded)
