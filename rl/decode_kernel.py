"""The decode step's attention, sampler and projections as small compiled kernels (issue 51: decode
near its memory limit).

torch's CPU SDPA, given a decode step (one query per row over a buffer padded to the longest
row), spends 2.5-3x the time of reading the keys and values once and reads every row to the
padded width (docs/results.md). `rl/decode_attention.cpp` reads each row's own filled slots
once, with the query heads of a key/value head together and an online softmax. The torch sampler
(rl/decode.py) makes a dozen passes over the [rows, vocabulary] logits (10-22 ms a step at 32 x
49,152 on 2 cores); `rl/decode_sampler.cpp` draws the same token in a few vector passes per row. MKL's fp32 sgemm
runs a decode step's projections (8-32 rows against a weight of 192-49,152 outputs) at 10-30%
of the matmul peak on the AVX2 kind; `rl/decode_linear.cpp` computes them from the weight in its
own layout, tiles of dot products kept in registers, 1.1-2.3x faster there at 4-32 rows; in bf16,
on CPUs with AVX-512 BF16, with vdpbf16ps, 1.2-1.6x oneDNN's at 1-48 rows. The kernels split their
work over helper threads of their own (`rl/decode_pool.cpp`), not OpenMP's sleeping ones. No package
that installs from PyPI for this torch does either on CPU, so the sources ship here and are
compiled together on first use with the system's C++ compiler (about 3 s) for this machine's CPU
(`-march=native`), into a cache keyed by the sources, the flags and the CPU (`HS_KERNEL_CACHE`,
default ~/.cache/harness-s/kernels). They are plain C functions called through ctypes on the
tensors' memory: no torch headers, no Python module build.

Where they cannot be used (no compiler, a GPU tensor, a dtype other than float32/bfloat16, or
`HS_DECODE_KERNEL=0`) `decode_attention` and `sample` return None and the engine keeps SDPA and
the torch sampler.
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
from contextlib import contextmanager, nullcontext
from functools import lru_cache
from pathlib import Path

import torch

from rl.precision import cpuinfo

SOURCES = tuple(
    Path(__file__).with_name(name)
    for name in ("decode_attention.cpp", "decode_sampler.cpp", "decode_linear.cpp", "decode_pool.cpp")
)
HEADERS = (Path(__file__).with_name("decode_pool.h"),)  # included by the sources: part of the cache key
FLAGS = (
    "-std=c++20",
    "-O3",
    "-march=native",
    "-mprefer-vector-width=512",
    "-ffast-math",
    "-fopenmp",
    "-shared",
    "-fPIC",
)
DTYPES = {torch.float32: 0, torch.bfloat16: 1}
PROFILER_NAME = "hs::decode_attention"
SAMPLER_PROFILER_NAME = "hs::sample"
LINEAR_PROFILER_NAME = "hs::decode_linear"
LINEAR_ENTRIES = {torch.float32: "hs_decode_linear", torch.bfloat16: "hs_decode_linear_bf16"}
NOT_BUILT = 2  # what an entry returns where the compiler's target lacks its instructions
_I64P = ctypes.POINTER(ctypes.c_int64)
log = logging.getLogger(__name__)


def _profiled(name: str):
    """A profiler range named `name` while a profiler records (what the benchmarks count), else
    nothing: entering a range costs about 10 us, a tenth of a small projection."""
    return torch.profiler.record_function(name) if torch._C._autograd._profiler_enabled() else nullcontext()


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
        sources = [str(source) for source in SOURCES]
        subprocess.run([compiler, *FLAGS, *sources, "-o", str(out)], check=True, capture_output=True, timeout=300)
        os.replace(out, target)


@lru_cache(maxsize=1)
def _library():
    """The compiled kernels (a ctypes library), or None where they cannot be built or are turned off."""
    if os.environ.get("HS_DECODE_KERNEL", "1") == "0":
        return None
    compiler = shutil.which(os.environ.get("CXX", "g++"))
    if compiler is None:
        log.warning(
            "no C++ compiler (g++): the decode step keeps torch's SDPA and sampler; install g++ for the faster kernels"
        )
        return None
    key = hashlib.sha256(
        "\0".join(
            [*(source.read_text() for source in SOURCES + HEADERS), " ".join(FLAGS), compiler, _cpu_signature()]
        ).encode()
    ).hexdigest()[:16]
    target = _cache_dir() / f"decode_kernels-{key}.so"
    try:
        if not target.exists():
            _build(compiler, target)
        library = ctypes.CDLL(str(target))
    except (OSError, subprocess.SubprocessError) as error:
        detail = getattr(error, "stderr", b"") or b""
        log.warning(
            "decode kernels not built (%s %s): the decode step keeps torch's SDPA and sampler", error, detail[-300:]
        )
        return None
    attention, sample = library.hs_decode_attention, library.hs_sample
    attention.argtypes = [ctypes.c_int, ctypes.c_void_p, _I64P, ctypes.c_void_p, ctypes.c_void_p, _I64P, _I64P, _I64P]
    attention.argtypes += [ctypes.c_int64] * 4 + [ctypes.c_float, ctypes.c_void_p]
    sample.argtypes = [ctypes.c_int, ctypes.c_void_p] + [ctypes.c_int64] * 3 + [ctypes.c_float] * 2
    sample.argtypes += [ctypes.c_void_p] * 3
    for entry in LINEAR_ENTRIES.values():
        function = getattr(library, entry)
        function.argtypes = [ctypes.c_void_p, ctypes.c_int64] + [ctypes.c_void_p] * 3 + [ctypes.c_int64] * 4
        function.restype = ctypes.c_int
    attention.restype = sample.restype = ctypes.c_int
    return library


def available() -> bool:
    return _library() is not None


@contextmanager
def turned_off():
    """SDPA and the torch sampler in place of the kernels inside the block (as HS_DECODE_KERNEL=0 does
    for a process)."""
    before = os.environ.get("HS_DECODE_KERNEL")
    os.environ["HS_DECODE_KERNEL"] = "0"
    _library.cache_clear()
    linear_built.cache_clear()
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("HS_DECODE_KERNEL")
        else:
            os.environ["HS_DECODE_KERNEL"] = before
        _library.cache_clear()
        linear_built.cache_clear()


def decode_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    lengths: torch.Tensor,
    scale: float,
    rows: torch.Tensor | None = None,
) -> torch.Tensor | None:
    """Attention of q [B, Hq, D] (one query per row) over k, v [R, Hkv, S, D], query b reading
    buffer row rows[b] (row b without `rows`; then R == B), its slots [0, lengths[b]); query head h
    reads key/value head h // (Hq / Hkv). Returns [B, Hq, D], or None where the kernel does not
    apply (the caller then uses SDPA)."""
    library = _library()
    if library is None or q.device.type != "cpu" or q.dtype not in DTYPES or not (q.dtype == k.dtype == v.dtype):
        return None
    b, hq, d = q.shape
    if k.shape != v.shape or k.stride() != v.stride() or k.shape[3] != d or hq % k.shape[1]:
        raise ValueError(f"decode_attention: q {tuple(q.shape)} does not fit k/v {tuple(k.shape)}, {tuple(v.shape)}")
    if rows is None and k.shape[0] != b:
        raise ValueError(f"decode_attention: {b} queries for {k.shape[0]} key/value rows; name each query's row")
    if q.stride(2) != 1 or k.stride(3) != 1:
        return None
    lengths = lengths.to(device="cpu", dtype=torch.int64).contiguous()
    if lengths.numel() != b or (b and (int(lengths.min()) < 0 or int(lengths.max()) > k.shape[2])):
        raise ValueError(f"decode_attention: {lengths.numel()} lengths for {b} rows, each in [0, {k.shape[2]}]")
    row_map = None
    if rows is not None:
        rows = rows.to(device="cpu", dtype=torch.int64).contiguous()
        if rows.numel() != b or (b and (int(rows.min()) < 0 or int(rows.max()) >= k.shape[0])):
            raise ValueError(f"decode_attention: {rows.numel()} rows for {b} queries, each in [0, {k.shape[0]})")
        row_map = ctypes.cast(rows.data_ptr(), _I64P)
    out = torch.empty((b, hq, d), dtype=q.dtype)
    q_strides = (ctypes.c_int64 * 2)(q.stride(0), q.stride(1))
    kv_strides = (ctypes.c_int64 * 3)(k.stride(0), k.stride(1), k.stride(2))
    with _profiled(PROFILER_NAME):  # what benchmarks/rollout_throughput.py counts as attention
        status = library.hs_decode_attention(
            DTYPES[q.dtype], q.data_ptr(), q_strides, k.data_ptr(), v.data_ptr(), kv_strides,
            ctypes.cast(lengths.data_ptr(), _I64P), row_map, b, hq, k.shape[1], d, float(scale), out.data_ptr(),
        )  # fmt: skip
    return out if status == 0 else None


def applies(device: torch.device, dtype: torch.dtype) -> bool:
    """Whether decode_attention runs the compiled kernel for tensors of this device and dtype."""
    return device.type == "cpu" and dtype in DTYPES and _library() is not None


def sample(
    logits: torch.Tensor, temperature: float, top_p: float, uniforms: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor] | None:
    """rl/decode.py's `sample_tokens` for [B, V] CPU logits and one uniform per row: (tokens [B],
    log-probs [B] under softmax(logits / temperature)), or None where the kernel does not apply."""
    library = _library()
    if library is None or logits.device.type != "cpu" or logits.dtype not in DTYPES or logits.dim() != 2:
        return None
    if logits.stride(1) != 1:
        logits = logits.contiguous()
    rows, vocab = logits.shape
    uniforms = uniforms.to(device="cpu", dtype=torch.float32).contiguous()
    if uniforms.shape != (rows,):
        raise ValueError(f"sample: {tuple(uniforms.shape)} uniforms for {rows} rows of logits; give one per row")
    tokens, logps = torch.empty(rows, dtype=torch.int64), torch.empty(rows, dtype=torch.float32)
    with _profiled(SAMPLER_PROFILER_NAME):
        status = library.hs_sample(
            DTYPES[logits.dtype], logits.data_ptr(), rows, vocab, logits.stride(0), float(temperature), float(top_p),
            uniforms.data_ptr(), tokens.data_ptr(), logps.data_ptr(),
        )  # fmt: skip
    return (tokens, logps) if status == 0 else None


@lru_cache(maxsize=None)
def linear_built(dtype: torch.dtype) -> bool:
    """Whether the few-row projection kernel is built for this dtype here (bf16 needs AVX-512 BF16)."""
    library = _library()
    if library is None or dtype not in LINEAR_ENTRIES:
        return False
    return getattr(library, LINEAR_ENTRIES[dtype])(None, 0, None, None, None, 0, 0, 0, 0) != NOT_BUILT


def linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor | None:
    """x [..., K] @ weight [N, K]^T + bias on CPU, fp32 or bf16 (where AVX-512 BF16 is), for a decode
    step's few rows; None where the kernel does not apply (another dtype or device, a weight not
    contiguous, no compiler)."""
    library = _library()
    if (
        library is None
        or x.device.type != "cpu"
        or x.dtype != weight.dtype
        or not linear_built(weight.dtype)
        or not weight.is_contiguous()
        or (bias is not None and (bias.dtype != weight.dtype or not bias.is_contiguous()))
    ):
        return None
    depth = weight.shape[1]
    if x.shape[-1] != depth:
        raise ValueError(f"linear: input of {x.shape[-1]} features for a weight of {tuple(weight.shape)}")
    if depth == 0:
        return None
    rows = x.numel() // depth
    flat = x if x.is_contiguous() else x.reshape(rows, depth).contiguous()  # rows `depth` apart
    out = torch.empty((*x.shape[:-1], weight.shape[0]), dtype=weight.dtype)
    with _profiled(LINEAR_PROFILER_NAME):
        status = getattr(library, LINEAR_ENTRIES[weight.dtype])(
            flat.data_ptr(), depth, weight.data_ptr(), None if bias is None else bias.data_ptr(),
            out.data_ptr(), weight.shape[0], rows, weight.shape[0], depth,
        )  # fmt: skip
    return out if status == 0 else None
