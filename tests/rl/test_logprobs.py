import torch
from transformers import LlamaConfig, LlamaForCausalLM

from rl.logprobs import token_logprobs


def _tiny_model():
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=97,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
    )
    return LlamaForCausalLM(config).eval()


def test_chunked_logprobs_equal_full_logits_and_carry_gradients():
    model = _tiny_model()
    ids = torch.randint(0, 97, (3, 21))
    attn = torch.ones_like(ids)
    with torch.no_grad():
        full = torch.log_softmax(model(input_ids=ids, attention_mask=attn).logits[:, :-1].float(), -1)
        expected = full.gather(2, ids[:, 1:, None]).squeeze(2)
    for chunk in (1, 5, 64):
        got = token_logprobs(model, ids, attn, chunk=chunk)
        assert got.shape == ids.shape and torch.all(got[:, 0] == 0)
        assert torch.allclose(got[:, 1:], expected, atol=1e-5)
    got = token_logprobs(model, ids, attn, chunk=4)
    got.sum().backward()
    assert model.lm_head.weight.grad is not None and model.lm_head.weight.grad.abs().sum() > 0


def test_temperature_scaling_matches_the_sampler():
    model = _tiny_model()
    ids = torch.randint(0, 97, (1, 9))
    with torch.no_grad():
        logits = model(input_ids=ids).logits[:, :-1] / 0.7
        expected = torch.log_softmax(logits, -1).gather(2, ids[:, 1:, None]).squeeze(2)
        got = token_logprobs(model, ids, torch.ones_like(ids), chunk=3, temperature=0.7)
    assert torch.allclose(got[:, 1:], expected, atol=1e-5)


def test_only_the_needed_positions_are_projected_and_they_equal_the_dense_result():
    model = _tiny_model()
    ids = torch.randint(0, 97, (3, 17))
    attn = torch.ones_like(ids)
    attn[2, 11:] = 0
    needed = torch.rand(3, 17) > 0.6
    needed[:, 0] = True  # position 0 has no context: still 0
    dense = token_logprobs(model, ids, attn, chunk=4)
    sparse = token_logprobs(model, ids, attn, chunk=1, needed=needed)
    keep = needed.clone()
    keep[:, 0] = False
    assert torch.allclose(sparse[keep], dense[keep], atol=1e-6)
    assert torch.all(sparse[~keep] == 0)
    sparse.sum().backward()
    assert model.lm_head.weight.grad is not None and model.lm_head.weight.grad.abs().sum() > 0
    none = token_logprobs(model, ids, attn, needed=torch.zeros_like(needed))
    assert torch.all(none == 0)


def test_with_gradients_no_vocabulary_sized_activation_is_kept_and_the_gradients_are_the_full_ones():
    """Each chunk's logits are recomputed in backward: nothing [.., V] but the head's weight is
    saved for it, and every parameter's gradient equals the one through the full logits."""
    model = _tiny_model()
    ids = torch.randint(0, 97, (2, 19))
    attn = torch.ones_like(ids)
    needed = torch.rand(ids.shape) < 0.6
    full = torch.log_softmax(model(input_ids=ids, attention_mask=attn).logits[:, :-1].float(), -1)
    (full.gather(2, ids[:, 1:, None]).squeeze(2) * needed[:, 1:]).sum().backward()
    expected = {n: p.grad.clone() for n, p in model.named_parameters()}
    model.zero_grad(set_to_none=True)
    saved: list[tuple[int, ...]] = []

    def keep(t):
        saved.append(tuple(t.shape))
        return t

    for kwargs in ({"needed": needed}, {}):  # the loss-token path and the dense one
        saved.clear()
        with torch.autograd.graph.saved_tensors_hooks(keep, lambda t: t):
            got = token_logprobs(model, ids, attn, chunk=4, **kwargs)
        assert not [s for s in saved if s[-1] == 97 and s != (97, 32)], saved
        (got * needed).sum().backward()
        for name, p in model.named_parameters():
            assert torch.allclose(p.grad, expected[name], atol=1e-5), name
        model.zero_grad(set_to_none=True)
