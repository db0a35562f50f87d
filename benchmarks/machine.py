"""The machine a benchmark ran on, measured in the same run, and rows run interleaved.

A figure from these 2-core shared machines moves by a third from one run to the next (issue 51),
so every benchmark prints, with its rows: the CPU (model, cores, the flags that decide bf16
speed), the memory read bandwidth and the bf16 / fp32 matmul peaks measured just then; and runs
its rows interleaved (A, B, A, B, ...) for a few rounds and reports each row's median, so a noisy
neighbour slows both sides of a ratio alike. Importing it gives the benchmark the environment of
every `hs` process (cli/environment.py), so the figures are what `hs` gets.
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable
from contextlib import contextmanager
from unittest import mock

from cli.environment import apply_defaults
from rl.memory import allocator_in_use  # ctypes only: torch is not loaded before apply_defaults

apply_defaults()

FLAGS = ("amx_bf16", "amx_tile", "avx512_bf16", "avx512f", "avx2")  # what bf16 matmul speed depends on


def cpu_description() -> dict:
    """Model name, cores this process may use and the relevant CPU flags, from /proc/cpuinfo."""
    model, flags = "?", set()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name") and model == "?":
                    model = line.split(":", 1)[1].strip()
                elif line.startswith("flags"):
                    flags = set(line.split(":", 1)[1].split())
    except OSError:
        pass
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return {"cpu": model, "cores": cores, "flags": [f for f in FLAGS if f in flags]}


def read_bandwidth(device: str = "cpu", repeats: int = 5) -> float:
    """Bytes/s of reading a 1 GiB tensor once (a sum), the median of `repeats` after a warm-up."""
    import torch

    x = torch.ones(2**28, dtype=torch.float32, device=device)
    x.sum().item()
    times = []
    for _ in range(repeats):
        _sync(device)
        start = time.perf_counter()
        x.sum().item()
        times.append(time.perf_counter() - start)
    return x.numel() * 4 / statistics.median(times)


def matmul_peak(
    dtype: str = "bfloat16", device: str = "cpu", n: int = 2048, repeats: int = 20, budget_s: float = 10.0
) -> float:
    """FLOP/s of an n^3 matmul: the best of `repeats` after warm-up (a peak is what the matrix
    units reach at best; AMX needs a warm-up and a shared machine is noisy). A CPU without bf16
    instructions multiplies bf16 at about 1 GFLOP/s (17 s for one 2048^3 product): a 256^3 probe
    sizes n so one product takes at most a tenth of `budget_s`, and repeats stop once it is spent."""
    import torch

    probe = torch.randn(256, 256, dtype=getattr(torch, dtype), device=device)
    (probe @ probe).sum().item()
    start = time.perf_counter()
    (probe @ probe).sum().item()
    rate = 2 * 256**3 / max(time.perf_counter() - start, 1e-9)
    while n > 256 and 2 * n**3 / rate > budget_s / 10:  # one product within a tenth of the budget
        n //= 2
    a = torch.randn(n, n, dtype=getattr(torch, dtype), device=device)
    (a @ a).sum().item()
    best, spent = float("inf"), time.perf_counter()
    for _ in range(repeats):
        if time.perf_counter() - spent > budget_s:
            break
        _sync(device)
        start = time.perf_counter()
        (a @ a).sum().item()
        best = min(best, time.perf_counter() - start)
    return 2 * n**3 / best


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        import torch

        torch.cuda.synchronize()


def measure(device: str = "cpu") -> dict:
    """Everything `describe` prints: CPU, threads, bandwidth, bf16 and fp32 peaks."""
    import torch

    out = cpu_description()
    out["threads"] = torch.get_num_threads()
    out["device"] = device
    if device.startswith("cuda"):
        out["gpu"] = torch.cuda.get_device_name(device)
    out["bandwidth"] = read_bandwidth(device)
    out["bf16_peak"] = matmul_peak("bfloat16", device)
    out["fp32_peak"] = matmul_peak("float32", device)
    return out


def describe(m: dict) -> str:
    """One line naming the machine and its measured limits."""
    where = m.get("gpu") or f"{m['cpu']}, {m['cores']} cores, {m['threads']} threads"
    flags = " ".join(m["flags"]) or "none of " + " ".join(FLAGS)
    return (
        f"machine: {where}; flags {flags}; read bandwidth {m['bandwidth'] / 1e9:.1f} GB/s; "
        f"matmul peak bf16 {m['bf16_peak'] / 1e12:.3g} TFLOP/s, fp32 {m['fp32_peak'] / 1e12:.3g} TFLOP/s; "
        f"this process's allocator {allocator_in_use()}"
    )


def interleaved(rows: dict[str, Callable[[], dict]], rounds: int = 3, progress: bool = True) -> dict[str, list[dict]]:
    """Run every row once per round, in order (A, B, A, B, ...); each row's results by round."""
    results: dict[str, list[dict]] = {name: [] for name in rows}
    for r in range(rounds):
        for name, run in rows.items():
            results[name].append(run())
            if progress:
                print(f"  round {r + 1}/{rounds}: {name} done", flush=True)
    return results


def median(results: list[dict], key: str) -> float:
    return statistics.median(float(r[key]) for r in results)


def spread(results: list[dict], key: str) -> str:
    """min-max of a row's rounds, to show how much the machine moved it."""
    values = [float(r[key]) for r in results]
    return f"{min(values):.3g}-{max(values):.3g}"


def kernel_projects_model(model) -> bool:
    """Whether a decode step computes this model's projections with the compiled few-row kernel
    (rl/decode.py `project`, rl/decode_linear.cpp)."""
    from rl.decode import kernel_projects

    return kernel_projects(next(model.parameters()))


@contextmanager
def kernels_on_openmp():
    """Inside the block the decode kernels split their work with OpenMP's parallel regions, as before
    rl/decode_pool.cpp (HS_DECODE_POOL=0, read on every kernel call)."""
    with mock.patch.dict(os.environ, {"HS_DECODE_POOL": "0"}):
        yield


@contextmanager
def nn_linear_projections():
    """Inside the block a decode step's projections run as `nn.Linear` computes them (HS_DECODE_NARROW=0)."""
    with mock.patch.dict(os.environ, {"HS_DECODE_NARROW": "0"}):
        yield
