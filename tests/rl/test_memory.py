"""rl/memory.py: tensors freed within a phase give their pages back to the operating system."""

from __future__ import annotations

import subprocess
import sys

import pytest

PATTERN = r"""
import psutil, torch
from rl.memory import bound_heap, release_memory
assert bound_heap()
big = torch.ones(24 << 20, dtype=torch.uint8)
del big  # a large free: glibc's mmap threshold rises to 24 MiB, so 8 MiB tensors come from the heap
blocks = [torch.ones(8 << 20, dtype=torch.uint8) for _ in range(80)]  # 640 MiB of 8 MiB tensors
kept = blocks[1::2]  # every other one freed: holes in the heap that stay resident
del blocks
before = psutil.Process().memory_info().rss
assert release_memory(collect=False)
print(before, psutil.Process().memory_info().rss)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's allocator")
def test_release_memory_returns_tensors_freed_mid_phase():
    out = subprocess.run([sys.executable, "-c", PATTERN], capture_output=True, text=True, check=True)
    before, after = map(int, out.stdout.split())
    assert before - after > 200 << 20, (before >> 20, after >> 20)  # the 320 MiB of holes leave the resident set
