"""rl/memory.py: freed tensors give their pages back to the operating system within a phase."""

from __future__ import annotations

import subprocess
import sys

import pytest

PATTERN = r"""
import sys, psutil, torch
from rl.memory import bound_heap
if sys.argv[1] == "bounded":
    assert bound_heap()
big = torch.ones(24 << 20, dtype=torch.uint8)
del big  # a large free: glibc's mmap threshold rises to 24 MiB (unless bounded)
blocks = [torch.ones(8 << 20, dtype=torch.uint8) for _ in range(80)]  # 640 MiB of 8 MiB tensors
kept = blocks[1::2]  # every other one freed: holes in the heap that glibc cannot hand back
del blocks
print(psutil.Process().memory_info().rss)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's allocator")
def test_bound_heap_returns_freed_tensors_to_the_os():
    def rss(mode: str) -> int:
        out = subprocess.run([sys.executable, "-c", PATTERN, mode], capture_output=True, text=True, check=True)
        return int(out.stdout.strip().splitlines()[-1])

    default, bounded = rss("default"), rss("bounded")
    assert default - bounded > 200 << 20, (default >> 20, bounded >> 20)  # the 320 MiB freed stay resident by default
