"""The compiled decode-step sampler (rl/decode_kernel.py `sample`): the torch sampler's draw for
the same uniforms, any logits a diverging model could give answered with an id inside the
vocabulary, and the torch sampler kept where the kernel is off."""

from __future__ import annotations

import math

import pytest
import torch

from rl import decode_kernel
from rl.decode import sample_tokens

pytestmark = pytest.mark.skipif(not decode_kernel.available(), reason="no C++ compiler to build the decode kernels")


def _logits(rows: int, vocab: int, seed: int) -> torch.Tensor:
    """Rows shaped like a language model's: a few likely tokens over a long tail. (Almost flat rows,
    whose nucleus spans thousands of near-equal tokens, are drawn by tests/rl/test_decode.py; there
    the rounding of the nucleus' edge decides between neighbours, so no token-exact comparison.)"""
    generator = torch.Generator().manual_seed(seed)
    logits = torch.randn(rows, vocab, generator=generator) * 2.5
    logits[:, :50] += torch.rand(rows, 50, generator=generator) * torch.linspace(2, 14, rows)[:, None]
    return logits[:, torch.randperm(vocab, generator=generator)]


def _stable_reference(logits, temperature, top_p, uniforms):
    """The nucleus draw with ties ranked by lower id first (the kernel's rule; torch's topk leaves
    the order of ties open, and bf16 logits tie often)."""
    scaled = logits.double() / (temperature if temperature > 0 else 1.0)
    probs = torch.softmax(scaled, -1)
    if temperature <= 0:
        tokens = scaled.argmax(-1)
    else:
        ranked, order = probs.sort(dim=-1, descending=True, stable=True)
        above = ranked.cumsum(-1) - ranked
        kept = torch.where(above < top_p, ranked, torch.zeros_like(ranked)) if top_p < 1 else probs
        cumulative = kept.cumsum(-1)
        picked = torch.searchsorted(cumulative, (uniforms.double() * cumulative[:, -1])[:, None], right=True)
        picked = picked.squeeze(1).clamp(max=probs.shape[1] - 1)
        tokens = order.gather(1, picked[:, None]).squeeze(1) if top_p < 1 else picked
    return tokens, torch.log(probs.gather(1, tokens[:, None]).squeeze(1)).float()


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("temperature, top_p", [(1.0, 1.0), (0.8, 0.95), (0.7, 0.5), (1.3, 0.9), (0.0, 1.0)])
def test_the_kernel_draws_what_the_torch_sampler_draws(dtype, temperature, top_p):
    logits = _logits(64, 49152, seed=3).to(dtype)
    uniforms = torch.rand(64, generator=torch.Generator().manual_seed(4))
    got = decode_kernel.sample(logits, temperature, top_p, uniforms)
    assert got is not None
    tokens, logps = _stable_reference(logits, temperature, top_p, uniforms)
    assert torch.equal(got[0], tokens)
    torch.testing.assert_close(got[1], logps, atol=2e-5, rtol=1e-5)
    if dtype == torch.float32:  # no ties: rl/decode.py's torch sampler draws the same tokens too
        with decode_kernel.turned_off():
            assert torch.equal(sample_tokens(logits, temperature, top_p, uniforms=uniforms)[0], got[0])


def test_strided_rows_and_uniforms_at_their_ends_stay_inside_the_weighted_tokens():
    logits = torch.full((4, 2, 1000), -float("inf"))
    logits[:, 0, 10:20] = torch.randn(4, 10)  # only tokens 10-19 have weight; rows are every other of the buffer
    view = logits[:, 0]
    for top_p in (1.0, 0.9):
        tokens, logps = decode_kernel.sample(view, 1.0, top_p, torch.tensor([0.0, 1.0 - 2**-24, 0.5, 1.0]))
        assert ((tokens >= 10) & (tokens < 20)).all(), tokens
        assert torch.isfinite(logps).all()


def test_nan_and_infinite_logits_give_an_id_inside_the_vocabulary_and_never_crash():
    """What a diverging policy can emit: NaN, +inf, all -inf, huge values, one-token vocabularies."""
    vocab = 300
    rows = torch.randn(6, vocab)
    rows[0, 17] = float("nan")
    rows[1, 250] = float("inf")
    rows[2] = -float("inf")
    rows[3] = 3e38
    rows[4, ::2] = -3e38
    rows[5] = torch.arange(vocab) * 1e6
    for temperature, top_p in [(1.0, 1.0), (0.5, 0.9), (0.0, 1.0), (1e-30, 0.5)]:
        tokens, logps = decode_kernel.sample(rows, temperature, top_p, torch.rand(6))
        assert ((tokens >= 0) & (tokens < vocab)).all(), tokens
        assert tokens[0] == 17 and tokens[1] == 250 and math.isnan(logps[0]) and math.isnan(logps[1])
        assert tokens[4] % 2 == 1  # the -3e38 tokens hold no weight
    single = decode_kernel.sample(torch.randn(3, 1), 1.0, 0.9, torch.rand(3))
    assert single[0].tolist() == [0, 0, 0] and torch.allclose(single[1], torch.zeros(3))


def test_one_uniform_per_row_is_required_and_off_means_torch():
    logits = torch.randn(3, 50)
    with pytest.raises(ValueError, match="one per row"):
        decode_kernel.sample(logits, 1.0, 1.0, torch.rand(2))
    with decode_kernel.turned_off():
        assert decode_kernel.sample(logits, 1.0, 1.0, torch.rand(3)) is None
    assert decode_kernel.sample(logits.to(torch.float16), 1.0, 1.0, torch.rand(3)) is None  # a dtype it does not take
