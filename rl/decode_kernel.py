"""The decode step's attention as a small compiled kernel (issue 51: decode near its memory limit).

torch's CPU SDPA, given a decode step (one query per row over a buffer padded to the longest
row), spends 2.5-3x the time of reading the keys and values once and reads every row to the
padded width (docs/results.md). `rl/decode_attention.cpp` reads each row's own filled slots
once, with the query heads of a key/value head together and an online softmax. No package that
installs from PyPI for this torch does that on CPU, so the source ships here and is compiled on
first use with the system's C++ compiler (about 2 s) for this machine's CPU (`-march=native`),
into a cache keyed by the source, the flags and the CPU (`HS_KERNEL_CACHE`, default
~/.cache/harness-s/kernels). It is a plain C function called through ctypes on the tensors'
memory: no torch headers, no Python module build.

Where it cannot be used (no compiler, a GPU tensor, a dtype other than float32/bfloat16, or
`HS_DECODE_KERNEL=0`) `decode_attention` returns None and the engine keeps SDPA.
"""

from __future__ import annotations

import ctypes
import hashlib
import logging
import os
import platform
import shutil
import subprocess
import tempfile
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path

import torch

from rl.precision import cpuinfo

SOURCE = Path(__file__).with_name("decode_attention.cpp")
FLAGS = ("-O3", "-march=native", "-mprefer-vector-width=512", "-ffast-math", "-fopenmp", "-shared", "-fPIC")
DTYPES = {torch.float32: 0, torch.bfloat16: 1}
PROFILER_NAME = "hs::decode_attention"
_I64P = ctypes.POINTER(ctypes.c_int64)
log = logging.getLogger(__name__)


def _cpu_signature() -> str:
    lines = cpuinfo().splitlines()
    keep = [line for line in lines if line.startswith(("model name", "flags"))]
    return "\n".join(dict.fromkeys(keep)) or platform.processor()  # one line of each kind: every core says the same


def _cache_dir() -> Path:
    default = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "harness-s" / "kernels"
    return Path(os.environ.get("HS_KERNEL_CACHE", default))


def _build(compiler: str, target: Path) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as tmp:  # atomic: concurrent builders each rename
        out = Path(tmp) / target.name
        subprocess.run([compiler, *FLAGS, str(SOURCE), "-o", str(out)], check=True, capture_output=True, timeout=300)
        os.replace(out, target)


@lru_cache(maxsize=1)
def _library():
    """The compiled kernel's entry point, or None where it cannot be built or is turned off."""
    if os.environ.get("HS_DECODE_KERNEL", "1") == "0":
        return None
    compiler = shutil.which(os.environ.get("CXX", "g++"))
    if compiler is None:
        log.warning("no C++ compiler (g++): the decode step keeps torch's SDPA; install g++ for the faster kernel")
        return None
    key = hashlib.sha256(
        "\0".join([SOURCE.read_text(), " ".join(FLAGS), compiler, _cpu_signature()]).encode()
    ).hexdigest()[:16]
    target = _cache_dir() / f"decode_attention-{key}.so"
    try:
        if not target.exists():
            _build(compiler, target)
        library = ctypes.CDLL(str(target))
    except (OSError, subprocess.SubprocessError) as error:
        detail = getattr(error, "stderr", b"") or b""
        log.warning("decode kernel not built (%s %s): the decode step keeps torch's SDPA", error, detail[-300:])
        return None
    entry = library.hs_decode_attention
    entry.restype = ctypes.c_int
    entry.argtypes = [ctypes.c_int, ctypes.c_void_p, _I64P, ctypes.c_void_p, ctypes.c_void_p, _I64P, _I64P]
    entry.argtypes += [ctypes.c_int64] * 4 + [ctypes.c_float, ctypes.c_void_p]
    return entry


def available() -> bool:
    return _library() is not None


@contextmanager
def turned_off():
    """SDPA in place of the kernel inside the block (as HS_DECODE_KERNEL=0 does for a process)."""
    before = os.environ.get("HS_DECODE_KERNEL")
    os.environ["HS_DECODE_KERNEL"] = "0"
    _library.cache_clear()
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("HS_DECODE_KERNEL")
        else:
            os.environ["HS_DECODE_KERNEL"] = before
        _library.cache_clear()


def decode_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, lengths: torch.Tensor, scale: float
) -> torch.Tensor | None:
    """Attention of q [B, Hq, D] (one query per row) over k, v [B, Hkv, S, D], row b reading its
    slots [0, lengths[b]); query head h reads key/value head h // (Hq / Hkv). Returns [B, Hq, D],
    or None where the kernel does not apply (the caller then uses SDPA)."""
    entry = _library()
    if entry is None or q.device.type != "cpu" or q.dtype not in DTYPES or not (q.dtype == k.dtype == v.dtype):
        return None
    b, hq, d = q.shape
    if k.shape != v.shape or k.stride() != v.stride() or k.shape[0] != b or k.shape[3] != d or hq % k.shape[1]:
        raise ValueError(f"decode_attention: q {tuple(q.shape)} does not fit k/v {tuple(k.shape)}, {tuple(v.shape)}")
    if q.stride(2) != 1 or k.stride(3) != 1:
        return None
    lengths = lengths.to(device="cpu", dtype=torch.int64).contiguous()
    if lengths.numel() != b or (b and (int(lengths.min()) < 0 or int(lengths.max()) > k.shape[2])):
        raise ValueError(f"decode_attention: {lengths.numel()} lengths for {b} rows, each in [0, {k.shape[2]}]")
    out = torch.empty((b, hq, d), dtype=q.dtype)
    q_strides = (ctypes.c_int64 * 2)(q.stride(0), q.stride(1))
    kv_strides = (ctypes.c_int64 * 3)(k.stride(0), k.stride(1), k.stride(2))
    with torch.profiler.record_function(PROFILER_NAME):  # what benchmarks/rollout_throughput.py counts as attention
        status = entry(
            DTYPES[q.dtype], q.data_ptr(), q_strides, k.data_ptr(), v.data_ptr(), kv_strides,
            ctypes.cast(lengths.data_ptr(), _I64P), b, hq, k.shape[1], d, float(scale), out.data_ptr(),
        )  # fmt: skip
    return out if status == 0 else None
