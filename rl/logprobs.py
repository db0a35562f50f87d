"""Per-token log-probabilities of a sequence under a causal LM, computed in position chunks.

Full-vocabulary logits for every position (B x T x V floats: 8 x 1024 x 49152 x 4 bytes =
1.6 GB for SmolLM2) are never held at once: the decoder's hidden states are projected to the
vocabulary `chunk` positions at a time, reduced to the log-prob of the actual next token, and
dropped. Gradients flow through the kept values only.
"""

from __future__ import annotations

import torch


def token_logprobs(model, input_ids: torch.Tensor, attention_mask: torch.Tensor, chunk: int = 128,
                   temperature: float = 1.0) -> torch.Tensor:
    """[B, T] ids -> [B, T] log p(ids[:, t] | ids[:, <t]); position 0 (no context) is 0.

    `model` is a Hugging Face causal LM exposing `get_decoder()` and `lm_head` (Llama, Qwen,
    Mistral families). `temperature` divides the logits, matching a sampler that did so.
    """
    hidden = model.get_decoder()(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
    head = model.get_output_embeddings()
    targets = input_ids[:, 1:]
    pieces = [torch.zeros((input_ids.shape[0], 1), dtype=torch.float32, device=input_ids.device)]
    for start in range(0, hidden.shape[1] - 1, chunk):
        stop = min(start + chunk, hidden.shape[1] - 1)
        logits = head(hidden[:, start:stop]).float()
        if temperature != 1.0:
            logits = logits / temperature
        logp = torch.log_softmax(logits, dim=-1)
        pieces.append(logp.gather(2, targets[:, start:stop, None]).squeeze(2))
    return torch.cat(pieces, dim=1)
