"""Per-token log-probabilities of a sequence under a causal LM, computed in position chunks.

Full-vocabulary logits for every position (B x T x V floats: 8 x 1024 x 49152 x 4 bytes =
1.6 GB for SmolLM2) are never held at once: the decoder's hidden states are projected to the
vocabulary `chunk` positions at a time, reduced to the log-prob of the actual next token, and
dropped. Gradients flow through the kept values only: when they are needed, each chunk's logits
are recomputed from its hidden states during backward (activation checkpointing), since autograd
would otherwise keep every chunk's log-softmax (fp32, chunk x V) until the backward: 275 MB for
1,400 loss tokens of SmolLM2, the largest part of an update's saved activations.
"""

from __future__ import annotations

import torch
from torch.utils.checkpoint import checkpoint


def token_logprobs(
    model,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    chunk: int = 128,
    temperature: float = 1.0,
    needed: torch.Tensor | None = None,
) -> torch.Tensor:
    """[B, T] ids -> [B, T] log p(ids[:, t] | ids[:, <t]); position 0 (no context) is 0.

    `model` is a Hugging Face causal LM exposing `get_decoder()` and `lm_head` (Llama, Qwen,
    Mistral families). `temperature` divides the logits, matching a sampler that did so.
    `needed` [B, T] bool: only those positions are projected to the vocabulary (the others are
    0). A GRPO or SFT loss needs only its loss tokens: with 96 sampled tokens per 256 of a
    turn, that skips most of the vocabulary projection and its log-softmax.
    """
    hidden = model.get_decoder()(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
    head = model.get_output_embeddings()
    targets = input_ids[:, 1:]
    if needed is None:
        pieces = [torch.zeros((input_ids.shape[0], 1), dtype=torch.float32, device=input_ids.device)]
        for start in range(0, hidden.shape[1] - 1, chunk):
            stop = min(start + chunk, hidden.shape[1] - 1)
            pieces.append(_projected(head, hidden[:, start:stop], targets[:, start:stop], temperature))
        return torch.cat(pieces, dim=1)
    where = needed[:, 1:].to(torch.bool)
    states, wanted = hidden[:, :-1][where], targets[where]  # [N, H], [N]: the predicting states
    rows = chunk * input_ids.shape[0]  # the same bound on logits held at once as the dense path
    picked = (
        torch.cat(
            [
                _projected(head, states[a : a + rows], wanted[a : a + rows], temperature)
                for a in range(0, len(wanted), rows)
            ]
        )
        if len(wanted)
        else states.new_zeros(0).float()
    )
    out = torch.zeros(input_ids.shape, dtype=torch.float32, device=input_ids.device)
    out[:, 1:] = out[:, 1:].masked_scatter(where, picked)
    return out


def _projected(head, states: torch.Tensor, targets: torch.Tensor, temperature: float) -> torch.Tensor:
    """log p(targets) from hidden `states` [..., H]; with gradients, the logits are recomputed in backward."""
    if torch.is_grad_enabled() and states.requires_grad:
        return checkpoint(_head_picked, head, states, targets, temperature, use_reentrant=False)
    return _head_picked(head, states, targets, temperature)


def _head_picked(head, states: torch.Tensor, targets: torch.Tensor, temperature: float) -> torch.Tensor:
    return _picked(head(states), targets, temperature)


def _picked(logits: torch.Tensor, targets: torch.Tensor, temperature: float) -> torch.Tensor:
    """log softmax(logits / temperature) at `targets` (logits [..., V], targets [...])."""
    logits = logits.float()
    if temperature != 1.0:
        logits = logits / temperature
    return torch.log_softmax(logits, dim=-1).gather(-1, targets[..., None]).squeeze(-1)
