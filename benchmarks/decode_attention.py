"""One decode step's attention per layer, against reading that layer's keys and values once.

The shape of the rollout engine's decode step (rl/decode.py): batch 32, one new token per row,
9 query heads folded onto 3 key/value heads of 64, in the engine's dtype here (`--dtype`), keys
and values in a buffer of 30 layers read in turn (so the caches are as cold as in a real step),
rows filled to between half the context and all of it. Rows: torch's CPU SDPA under the padding
mask (the engine's before issue 51), the same attention as two batched matmuls with an fp32
softmax, and the compiled kernel of rl/decode_kernel.py (the engine's on CPU), which reads only
each row's filled slots. Each row runs interleaved with the others for `--rounds` rounds;
medians per layer are printed beside the time to read the layer's filled keys and values once at
the measured bandwidth (benchmarks/machine.py).

Run: .venv/bin/python benchmarks/decode_attention.py [--contexts 512,1536] [--device cpu]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

from cli.environment import apply_defaults

apply_defaults()  # the environment of every hs process (OpenMP threads that sleep while waiting), before torch loads

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from machine import describe, interleaved, measure  # noqa: E402

from rl.decode_kernel import available as decode_kernel_available  # noqa: E402
from rl.decode_kernel import decode_attention  # noqa: E402
from rl.precision import resolve_dtype  # noqa: E402

BATCH, KV_HEADS, GROUP, HEAD_DIM, LAYERS = 32, 3, 3, 64, 30


def rows_for(context: int, device: str, dtype: torch.dtype = torch.bfloat16) -> tuple[dict, int]:
    """The attention variants at one context, and the bytes of one layer's keys and values."""
    kv = torch.randn(LAYERS, 2, BATCH, KV_HEADS, context + 8, HEAD_DIM, dtype=dtype, device=device)
    q = torch.randn(BATCH, KV_HEADS, GROUP, HEAD_DIM, dtype=dtype, device=device)
    lengths = torch.randint(context // 2, context + 1, (BATCH,), device=device)  # rows filled to different slots
    valid = torch.arange(context, device=device)[None, None, None, :] < lengths[:, None, None, None]
    bias = torch.zeros(BATCH, 1, 1, context, device=device).masked_fill(~valid, float("-inf"))
    layer = [0]

    def next_layer():
        layer[0] = (layer[0] + 1) % LAYERS
        return kv[layer[0], 0, :, :, :context], kv[layer[0], 1, :, :, :context]

    def sdpa():
        k, v = next_layer()
        return F.scaled_dot_product_attention(q, k, v, attn_mask=valid, scale=HEAD_DIM**-0.5)

    def matmuls():
        k, v = next_layer()
        flat = BATCH * KV_HEADS
        scores = torch.bmm(q.reshape(flat, GROUP, HEAD_DIM), k.reshape(flat, context, HEAD_DIM).transpose(1, 2))
        p = torch.softmax(scores.view(BATCH, KV_HEADS, GROUP, context).float() * HEAD_DIM**-0.5 + bias, -1)
        return torch.bmm(p.to(q.dtype).view(flat, GROUP, context), v.reshape(flat, context, HEAD_DIM))

    def kernel():
        k, v = next_layer()
        return decode_attention(q.reshape(BATCH, KV_HEADS * GROUP, HEAD_DIM), k, v, lengths, HEAD_DIM**-0.5)

    variants = {"torch SDPA (masked)": sdpa, "two batched matmuls": matmuls}
    if device == "cpu" and decode_kernel_available():
        variants["compiled kernel (the engine's)"] = kernel
    layer_bytes = 2 * KV_HEADS * int(lengths.sum()) * HEAD_DIM * kv.element_size()  # the filled slots' keys and values
    return variants, layer_bytes


def per_layer_ms(fn, device: str, calls: int = LAYERS * 2) -> dict:
    fn()
    times = []
    for _ in range(calls):
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        start = time.perf_counter()
        fn()
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    return {"ms": 1000 * statistics.median(times)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--contexts", default="512,1536")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--dtype", default="auto", help="auto: what the engine samples in here (bf16 where fast, else fp32)"
    )
    args = parser.parse_args()
    dtype = getattr(torch, resolve_dtype(args.dtype, args.device))
    machine = measure(args.device)
    print(describe(machine))
    print(f"keys and values in {dtype}")
    print(f"{'context':>7} {'row':32} {'ms per layer':>12} {'read once ms':>12} {'x read time':>11}")
    for context in (int(c) for c in args.contexts.split(",")):
        variants, layer_bytes = rows_for(context, args.device, dtype)
        timed = {name: (lambda f=f: per_layer_ms(f, args.device)) for name, f in variants.items()}
        results = interleaved(timed, args.rounds, progress=False)
        ideal = layer_bytes / machine["bandwidth"] * 1000
        for name, runs in results.items():
            ms = statistics.median(r["ms"] for r in runs)
            print(f"{context:7d} {name:32} {ms:12.2f} {ideal:12.2f} {ms / ideal:10.1f}x")


if __name__ == "__main__":
    main()
