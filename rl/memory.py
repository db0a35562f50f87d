"""Giving freed memory back to the operating system between phases.

A phase that trained a model (the warm start, a GRPO run) frees gigabytes of tensors when it
ends, but glibc keeps most freed heap memory in its arenas, so the process's resident size
stays at the phase's peak (measured on the quickstart's warm start: 3.6 GiB resident after
the model and optimizer were deleted, 0.5 GiB after `malloc_trim`). `release_memory` collects
garbage and asks the C allocator to return free pages; elsewhere it only collects.

Within a phase the same holds for every tensor freed mid-phase (activations, logits, key/value
buffers): glibc's mmap threshold rises to 32 MiB after the first large free, so later tensors
below it come from the heap arenas (up to 8 per core, one per thread that allocates), and their
pages stay resident. `bound_heap` fixes the threshold at 1 MiB (a tensor of 1 MiB or more is its
own mapping, unmapped when freed) and allows two arenas; the process that loads a model calls it.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
from functools import lru_cache


@lru_cache(maxsize=1)
def _libc():
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name) if name else None
    except OSError:
        return None
    return libc if libc is not None and hasattr(libc, "malloc_trim") else None


M_MMAP_THRESHOLD, M_ARENA_MAX = -3, -8  # mallopt parameters (glibc malloc.h)
MMAP_THRESHOLD_BYTES = 1 << 20


@lru_cache(maxsize=1)
def bound_heap() -> bool:
    """Large allocations always mapped (returned to the OS when freed) and at most two heap arenas,
    for the rest of this process (glibc; elsewhere nothing). True if applied."""
    libc = _libc()
    if libc is None or not hasattr(libc, "mallopt"):
        return False
    return bool(libc.mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES)) and bool(libc.mallopt(M_ARENA_MAX, 2))


def release_memory() -> bool:
    """Collect garbage, then return free heap pages to the OS (glibc). True if trimmed."""
    gc.collect()
    libc = _libc()
    if libc is None:
        return False
    libc.malloc_trim(0)
    return True


def checkpoint_activations(model, enabled: bool = True) -> None:
    """Recompute each decoder layer's activations during backward instead of keeping them
    (transformers' activation checkpointing, formerly named gradient checkpointing)."""
    if enabled:
        (getattr(model, "activation_checkpointing_enable", None) or model.gradient_checkpointing_enable)()
    else:
        (getattr(model, "activation_checkpointing_disable", None) or model.gradient_checkpointing_disable)()
