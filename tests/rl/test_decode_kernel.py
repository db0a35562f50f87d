"""The compiled decode-step attention (rl/decode_kernel.py): the same attention as SDPA under the
engine's mask, each row reading only its own slots, bad shapes refused, SDPA kept where it is off."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from rl import decode_kernel
from tests.doubles import tiny_llama

pytestmark = pytest.mark.skipif(not decode_kernel.available(), reason="no C++ compiler to build the decode kernel")


def _reference(q, k, v, lengths, scale):
    """fp32 SDPA with each query head over its key/value head, masked to the row's slots."""
    b, hq, d = q.shape
    group = hq // k.shape[1]
    keys = k.float().repeat_interleave(group, dim=1)
    values = v.float().repeat_interleave(group, dim=1)
    mask = torch.arange(k.shape[2])[None, None, None, :] < lengths[:, None, None, None]
    return F.scaled_dot_product_attention(q.float()[:, :, None], keys, values, attn_mask=mask, scale=scale)[:, :, 0]


@pytest.mark.parametrize(
    "dtype, dim, group, tol",
    [
        (torch.float32, 64, 3, 1e-5),
        (torch.bfloat16, 64, 3, 2e-2),
        (torch.float32, 48, 2, 1e-5),
        (torch.float32, 128, 1, 1e-5),
    ],
)
def test_the_kernel_computes_the_masked_attention_of_each_row_over_its_own_slots(dtype, dim, group, tol):
    torch.manual_seed(1)
    batch, kv_heads, width = 5, 2, 200  # lengths cross the kernel's 64-slot blocks, and one is a single slot
    buffer = torch.randn(2, batch + 1, kv_heads, width + 7, dim).to(dtype)
    k, v = buffer[0, 1:, :, :width], buffer[1, 1:, :, :width]  # strided views, as the engine passes them
    q = torch.randn(batch, kv_heads * group, dim).to(dtype)
    lengths = torch.tensor([1, 63, 64, 65, 200])
    got = decode_kernel.decode_attention(q, k, v, lengths, dim**-0.5)
    assert got is not None and got.dtype == dtype and got.shape == q.shape
    torch.testing.assert_close(got.float(), _reference(q, k, v, lengths, dim**-0.5), atol=tol, rtol=tol)


def test_slots_beyond_a_rows_length_are_never_read():
    """Non-finite junk past each row's length (what a padded buffer may hold) changes nothing."""
    torch.manual_seed(2)
    k, v = torch.randn(3, 3, 100, 64), torch.randn(3, 3, 100, 64)
    q, lengths = torch.randn(3, 9, 64), torch.tensor([10, 50, 99])
    clean = decode_kernel.decode_attention(q, k, v, lengths, 0.125)
    for row, n in enumerate(lengths.tolist()):
        k[row, :, n:], v[row, :, n:] = float("nan"), float("inf")
    assert torch.equal(decode_kernel.decode_attention(q, k, v, lengths, 0.125), clean)


def test_lengths_outside_the_buffer_or_mismatched_shapes_are_refused_before_any_read():
    k = v = torch.randn(2, 1, 16, 64)
    q = torch.randn(2, 3, 64)
    with pytest.raises(ValueError, match="each in"):
        decode_kernel.decode_attention(q, k, v, torch.tensor([4, 17]), 0.125)
    with pytest.raises(ValueError, match="each in"):
        decode_kernel.decode_attention(q, k, v, torch.tensor([-1, 3]), 0.125)
    with pytest.raises(ValueError, match="does not fit"):
        decode_kernel.decode_attention(torch.randn(2, 3, 32), k, v, torch.tensor([4, 4]), 0.125)


def test_queries_read_the_buffer_rows_they_name_in_place():
    """The engine feeds only its decoding rows: query b reads buffer row rows[b], the same
    attention as over those rows gathered; rows outside the buffer, or a row count that does not
    match the queries, are refused before any read."""
    torch.manual_seed(3)
    k, v = torch.randn(6, 3, 80, 64), torch.randn(6, 3, 80, 64)
    q, lengths, rows = torch.randn(3, 9, 64), torch.tensor([5, 80, 33]), torch.tensor([4, 0, 2])
    got = decode_kernel.decode_attention(q, k, v, lengths, 0.125, rows)
    assert torch.equal(got, decode_kernel.decode_attention(q, k[rows], v[rows], lengths, 0.125))
    for bad in (torch.tensor([4, 0, 6]), torch.tensor([4, -1, 2]), torch.tensor([4, 0])):
        with pytest.raises(ValueError, match="rows for 3 queries"):
            decode_kernel.decode_attention(q, k, v, lengths, 0.125, bad)
    with pytest.raises(ValueError, match="name each query's row"):
        decode_kernel.decode_attention(q, k, v, lengths, 0.125)


def test_turned_off_the_kernel_steps_aside_and_the_engine_samples_the_same_tokens():
    """HS_DECODE_KERNEL=0 keeps SDPA; both paths of a whole multi-turn sampling agree token for token."""
    from rl.decode import DecodeEngine

    model = tiny_llama()
    prompts = [[5, 9, 12, 7], [3, 3, 8], [11, 2, 6, 6, 6, 1, 9]]

    def sample():
        engine = DecodeEngine(model, eos_ids=[0], pad_id=0)
        return [d.tokens for d in engine.generate([list(p) for p in prompts], [None] * 3, 40, 1.0, 1.0, seed=4)]

    with_kernel = sample()
    with decode_kernel.turned_off():
        assert (
            decode_kernel.decode_attention(torch.randn(1, 1, 8), *[torch.randn(1, 1, 4, 8)] * 2, torch.tensor([2]), 1.0)
            is None
        )
        assert sample() == with_kernel
    assert decode_kernel.available()
    assert sum(len(t) for t in with_kernel) > 20  # long enough replies that the decode path really ran


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize(
    "rows, outputs, depth, bias",
    [
        (24, 576, 576, False),
        (5, 301, 45, True),
        (1, 2, 8, True),
        (33, 7, 1536, False),
        (8, 192, 40, True),
        (0, 9, 16, False),
    ],
)
def test_the_few_row_projection_is_the_linear_layers_product(dtype, rows, outputs, depth, bias):
    """rl/decode_linear.cpp: fp32 tiles of 3 outputs x 4 rows with K in chunks of 8, bf16 tiles of
    4 x 4 with K in chunks of 32, with every remainder (rows, outputs and depth not multiples of them)
    and a bias; the input a strided view of a wider buffer, as a decode step's hidden states can be.
    bf16 sums stay fp32 and each output is rounded once, so it is the fp32 product of the same bf16
    operands within bf16's rounding."""
    if not decode_kernel.linear_built(dtype):
        pytest.skip(f"the few-row kernel is not built for {dtype} on this CPU (bf16 needs AVX-512 BF16)")
    torch.manual_seed(2)
    linear = torch.nn.Linear(depth, outputs, bias=bias).to(dtype)
    x = torch.randn(rows, 1, depth + 5, dtype=dtype)[..., 3 : 3 + depth]
    out = decode_kernel.linear(x, linear.weight.detach(), None if linear.bias is None else linear.bias.detach())
    assert out.shape == (rows, 1, outputs) and out.is_contiguous() and out.dtype == dtype
    exact = torch.nn.functional.linear(
        x.double(), linear.weight.detach().double(), None if linear.bias is None else linear.bias.detach().double()
    )
    tolerance = 1e-5 if dtype == torch.float32 else 2**-8
    assert torch.allclose(out.double(), exact, atol=tolerance, rtol=tolerance)


def test_the_few_row_projection_steps_aside_for_what_it_does_not_compute():
    """fp16, an input of another dtype than the weight, a transposed (non-contiguous) weight, a
    weight of no inputs: None, so `project` runs the module; a mismatched width is refused before
    any read."""
    weight = torch.randn(12, 8)
    assert decode_kernel.linear(torch.randn(2, 8).half(), weight.half(), None) is None
    assert decode_kernel.linear(torch.randn(2, 8), weight.bfloat16(), None) is None
    assert decode_kernel.linear(torch.randn(2, 12), weight.t(), None) is None
    assert decode_kernel.linear(torch.randn(2, 0), torch.randn(12, 0), None) is None
    with pytest.raises(ValueError, match="input of 9 features"):
        decode_kernel.linear(torch.randn(2, 9), weight, None)


def test_the_kernels_helper_threads_serve_concurrent_callers_and_forked_children():
    """rl/decode_pool.cpp: projections large enough to be split over the helper threads, from four
    Python threads at once (one shares its call with the helpers, the others run theirs alone) and
    then in a forked child (whose parent's helpers do not exist there), each equal to the linear
    layer's product."""
    import multiprocessing
    import threading

    torch.manual_seed(3)
    weight, x = torch.randn(1536, 576), torch.randn(24, 576)
    expected = torch.nn.functional.linear(x, weight)
    if decode_kernel.linear(x, weight, None) is None:
        pytest.skip("the decode kernels are not built here (no C++ compiler)")
    failures = []

    def caller():
        for _ in range(50):
            if not torch.allclose(decode_kernel.linear(x, weight, None), expected, atol=1e-4):
                failures.append("wrong product")

    threads = [threading.Thread(target=caller) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not failures and not any(thread.is_alive() for thread in threads)

    child = multiprocessing.get_context("fork").Process(target=_forked_projection, args=(x, weight, expected))
    child.start()
    child.join(timeout=120)
    assert child.exitcode == 0


def _forked_projection(x, weight, expected):
    """In the child, no torch operation that OpenMP would split: after a fork, OpenMP's own threads
    are gone and its next parallel region waits for them forever (torch's as well as a kernel's)."""
    out = decode_kernel.linear(x, weight, None)
    close = out is not None and all(
        abs(a - b) <= 1e-4 for a, b in zip(out.flatten().tolist(), expected.flatten().tolist())
    )
    raise SystemExit(0 if close else 1)
