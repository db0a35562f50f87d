"""Giving freed memory back to the operating system between phases.

(The `hs` entry runs on jemalloc where the system has it, cli/launch.py: it gives freed pages
back by itself after a second; `release_memory` then purges its arenas at once. What follows is
about glibc's allocator, the fallback.)

A phase that trained a model (the warm start, a GRPO run) frees gigabytes of tensors when it
ends, but glibc keeps most freed heap memory in its arenas, so the process's resident size
stays at the phase's peak (measured on the quickstart's warm start: 3.6 GiB resident after
the model and optimizer were deleted, 0.5 GiB after `malloc_trim`). `release_memory` collects
garbage and asks the C allocator to return free pages; elsewhere it only collects.

Within a phase the same holds for the tensors freed mid-phase (activations, logits, key/value
buffers), so the training flow releases after each collection and each update as well. Each
thread that allocates may get its own heap arena (up to 8 per core), which multiplies what stays
resident; `bound_heap` allows two, for the process that loads a model. (Fixing glibc's mmap
threshold at 1 MiB as well returned more, 0.5-0.8 GiB of the quickstart's 5.8 GiB peak, but
every fresh mapping is zero-filled page by page: the warm start took 36% longer.)
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import mmap
from functools import lru_cache


@lru_cache(maxsize=1)
def _libc():
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name) if name else None
    except OSError:
        return None
    return libc if libc is not None and hasattr(libc, "malloc_trim") else None


M_ARENA_MAX = -8  # a mallopt parameter (glibc malloc.h)


@lru_cache(maxsize=1)
def bound_heap() -> bool:
    """At most two heap arenas for the rest of this process (glibc; elsewhere nothing). True if applied."""
    libc = _libc()
    if libc is None or not hasattr(libc, "mallopt"):
        return False
    return bool(libc.mallopt(M_ARENA_MAX, 2))


def allocator_in_use() -> str:
    """ "jemalloc" when this process runs on it (preloaded by the `hs` entry, cli/launch.py), else "glibc"."""
    try:
        with open("/proc/self/maps") as maps:
            return "jemalloc" if "libjemalloc" in maps.read() else "glibc"
    except OSError:
        return "glibc"


@lru_cache(maxsize=1)
def _mallctl():
    try:
        mallctl = getattr(ctypes.CDLL(None), "mallctl", None)  # jemalloc's, when it is preloaded
    except OSError:
        return None
    return mallctl if allocator_in_use() == "jemalloc" else None


MALLCTL_ARENAS_ALL = 4096  # jemalloc's arena index meaning every arena


def jemalloc_allocated() -> int | None:
    """Bytes this process holds allocated through jemalloc (its `stats.allocated`, refreshed);
    None when it does not run on jemalloc."""
    mallctl = _mallctl()
    if mallctl is None:
        return None
    epoch = ctypes.c_uint64(1)
    mallctl(b"epoch", None, None, ctypes.byref(epoch), ctypes.c_size_t(ctypes.sizeof(epoch)))
    value = ctypes.c_size_t(0)
    size = ctypes.c_size_t(ctypes.sizeof(value))
    mallctl(b"stats.allocated", ctypes.byref(value), ctypes.byref(size), None, 0)
    return value.value


def release_memory(collect: bool = True) -> bool:
    """Collect garbage (unless `collect` is False: a full collection takes 0.3 s and more in a
    process holding a model and Prefect, and tensors are freed by reference counting anyway),
    then return free heap pages to the OS (jemalloc's arenas purged, or glibc's heap trimmed).
    True if returned."""
    if collect:
        gc.collect()
    mallctl = _mallctl()
    if mallctl is not None:
        return mallctl(f"arena.{MALLCTL_ARENAS_ALL}.purge".encode(), None, None, None, 0) == 0
    libc = _libc()
    if libc is None:
        return False
    libc.malloc_trim(0)
    return True


MADV_POPULATE_WRITE = 23  # madvise advice (Linux 5.14 and later): fault pages in, writable


def populate_for_writing(tensors) -> bool:
    """Make the pages of `tensors`, about to be written in full, the process's own in one madvise
    per tensor, before the writes: for a private file mapping (the trainer's moments set aside,
    rl/trainer.py) the kernel then copies the pages in one pass instead of taking a read and a
    copy-on-write fault per 4 KiB page (an AdamW step over 1 GiB of mapped moments: 1.65 s ->
    0.50 s measured). Only whole pages inside each tensor, so nothing beside it is touched; the
    edge pages fault as before. False where the kernel lacks the advice (the writes then fault
    the pages in themselves)."""
    libc = _libc()
    if libc is None or not hasattr(libc, "madvise"):
        return False
    page = mmap.PAGESIZE
    for t in tensors:
        low = -(-t.data_ptr() // page) * page
        high = (t.data_ptr() + t.nbytes) // page * page
        if high > low and libc.madvise(ctypes.c_void_p(low), ctypes.c_size_t(high - low), MADV_POPULATE_WRITE):
            return False
    return True


def checkpoint_activations(model, enabled: bool = True) -> None:
    """Recompute each decoder layer's activations during backward instead of keeping them
    (transformers' activation checkpointing, formerly named gradient checkpointing)."""
    if enabled:
        (getattr(model, "activation_checkpointing_enable", None) or model.gradient_checkpointing_enable)()
    else:
        (getattr(model, "activation_checkpointing_disable", None) or model.gradient_checkpointing_disable)()
