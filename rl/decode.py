"""A lean batched decode loop for Llama-family models, with each session's keys/values kept
between turns (DESIGN.md §4: a decode step under `model.generate` is overhead-bound here).

One `generate` call takes sessions at any turn of any episode. Each brings the tokens it has
(`token_ids`) and the keys/values it already computed for a prefix of them (`KVCache`, or None).
The engine:
1. gives every session one row of a preallocated key/value buffer and copies its cache in;
2. prefills only the tokens that are not cached yet (a new turn's observation, hint and
   chat-template text), in row chunks under a token budget, computing vocabulary logits only
   at each row's last position;
3. decodes all rows together, one token per step, writing keys/values in place (no
   concatenation), attending only to each row's own filled slots, and dropping finished rows
   from the batch once they are half of it;
4. hands each session back its grown cache.

The sampler draws from softmax(logits / temperature) restricted to the top-p nucleus; the
nucleus is searched among the 64 largest logits first, then 1,024, and the full vocabulary is
sorted only for a row whose nucleus is wider still. The recorded log-prob of a sampled token is under
softmax(logits / temperature), before top-p, as `rl/policy.Generation` documents.

Positions are slots: a row's token t sits at slot t, so rotary positions need no padding
arithmetic, and a row's cache is the slots it filled. Supported: the Llama, Mistral, Qwen2 and
Qwen3 module layout of Hugging Face transformers (others raise UnsupportedModel; use the
`hf` engine for them).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

from rl.policy import PolicyError

SUPPORTED = ("llama", "mistral", "qwen2", "qwen3")
NUCLEUS_PREFILTERS = (64, 1024, 1 << 30)  # top-k sizes tried in turn for the nucleus; the last is all


class UnsupportedModel(PolicyError):
    """The model's architecture is not one the lean engine implements."""


def require_supported(model) -> None:
    """One-line error naming the fix for a model the lean engine cannot run."""
    kind = getattr(model.config, "model_type", "?")
    if kind not in SUPPORTED:
        raise UnsupportedModel(f"the lean engine runs {', '.join(SUPPORTED)} models, not {kind!r}: "
                               "set policy.engine (or trainer.engine) to 'hf'")


@dataclass
class KVCache:
    """Keys and values of a session's first `length` tokens: [layers, 2, kv_heads, length, head_dim]."""

    tensor: torch.Tensor

    @property
    def length(self) -> int:
        return int(self.tensor.shape[3])


@dataclass
class Decoded:
    tokens: list[int]
    logprobs: list[float]
    cache: KVCache | None


def sample_tokens(logits: torch.Tensor, temperature: float, top_p: float,
                  generator: torch.Generator | None = None, uniforms: torch.Tensor | None = None
                  ) -> tuple[torch.Tensor, torch.Tensor]:
    """[B, V] logits -> (tokens [B], log-probs [B] under softmax(logits / temperature)).

    Each row's draw uses one uniform number: `uniforms` [B] when given (so a row's sample does
    not depend on where it sits in the batch), else fresh ones from `generator`."""
    logits = logits.float()
    if uniforms is None:
        uniforms = torch.rand(logits.shape[0], generator=generator, device=logits.device)
    if temperature <= 0:
        tokens = logits.argmax(-1)
        return tokens, (logits.gather(1, tokens[:, None]).squeeze(1) - torch.logsumexp(logits, -1))
    scaled = logits / temperature
    lse = torch.logsumexp(scaled, -1, keepdim=True)
    if top_p >= 1.0:
        tokens = _draw(torch.exp(scaled - lse), uniforms)
    else:
        tokens = torch.empty(scaled.shape[0], dtype=torch.long, device=scaled.device)
        pending = torch.arange(scaled.shape[0], device=scaled.device)
        for k in NUCLEUS_PREFILTERS:  # widen the search only for rows whose nucleus is wider
            k = min(k, scaled.shape[1])
            top, index = scaled[pending].topk(k, dim=-1)
            probs = torch.exp(top - lse[pending])
            covered = (probs.sum(-1) >= top_p) | (k == scaled.shape[1])
            rows = covered.nonzero().squeeze(1)
            if len(rows):
                kept = probs[rows]
                above = kept.cumsum(-1) - kept  # a token stays while the mass ranked above it is < top_p
                kept = torch.where(above < top_p, kept, torch.zeros_like(kept))
                tokens[pending[rows]] = index[rows].gather(1, _draw(kept, uniforms[pending[rows]])[:, None]).squeeze(1)
            pending = pending[~covered]
            if not len(pending):
                break
    return tokens, (scaled.gather(1, tokens[:, None]) - lse).squeeze(1)


def _draw(weights: torch.Tensor, uniforms: torch.Tensor) -> torch.Tensor:
    """One index per row with probability proportional to `weights` [B, N], by inverse CDF on
    that row's uniform (multinomial draws one exponential per entry: 50 ms at 32 x 49k here)."""
    cumulative = weights.cumsum(-1)
    u = uniforms[:, None].to(cumulative.dtype) * cumulative[:, -1:]
    return torch.searchsorted(cumulative, u, right=True).squeeze(1).clamp(max=weights.shape[1] - 1)


class DecodeEngine:
    """Batched sampling over a Hugging Face Llama-family causal LM, caches kept per session."""

    prefill_token_budget = 8192  # rows x new tokens per prefill forward

    def __init__(self, model, eos_ids: list[int], pad_id: int):
        require_supported(model)
        self.model = model
        self.eos = set(eos_ids)
        self.pad_id = pad_id

    # -- the model, slot-addressed ---------------------------------------------------------
    def _geometry(self):
        cfg = self.model.config
        attn = self.model.get_decoder().layers[0].self_attn
        return cfg.num_hidden_layers, cfg.num_key_value_heads, attn.head_dim

    def _forward(self, ids: torch.Tensor, slots: torch.Tensor, kv: torch.Tensor, rows: slice,
                 visible: int) -> torch.Tensor:
        """Hidden states [b, n, hidden] of tokens `ids` [b, n] at `slots` [b, n] of buffer rows
        `rows`; their keys/values are written there, each query sees its row's slots <= its own."""
        decoder = self.model.get_decoder()
        b, n = ids.shape
        x = decoder.embed_tokens(ids)
        cos, sin = decoder.rotary_emb(x, slots)
        keys = torch.arange(visible, device=ids.device)
        mask = (keys[None, None, None, :] <= slots[:, None, :, None])  # [b, 1, n, visible]
        batch_rows = torch.arange(rows.start, rows.stop, device=ids.device)[:, None].expand(b, n)
        for layer_index, layer in enumerate(decoder.layers):
            attn = layer.self_attn
            h = layer.input_layernorm(x)
            q = attn.q_proj(h).view(b, n, -1, attn.head_dim)
            k = attn.k_proj(h).view(b, n, -1, attn.head_dim)
            v = attn.v_proj(h).view(b, n, -1, attn.head_dim)
            if hasattr(attn, "q_norm"):  # Qwen3 normalises each head before the rotation
                q, k = attn.q_norm(q), attn.k_norm(k)
            q, k = apply_rotary_pos_emb(q.transpose(1, 2), k.transpose(1, 2), cos, sin)
            layer_kv = kv[layer_index]
            layer_kv[0][batch_rows, :, slots] = k.transpose(1, 2)
            layer_kv[1][batch_rows, :, slots] = v
            out = F.scaled_dot_product_attention(q, layer_kv[0, rows, :, :visible], layer_kv[1, rows, :, :visible],
                                                 attn_mask=mask, scale=attn.scaling, enable_gqa=True)
            x = x + attn.o_proj(out.transpose(1, 2).reshape(b, n, -1))
            x = x + layer.mlp(layer.post_attention_layernorm(x))
        return decoder.norm(x)

    def _logits(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.model.get_output_embeddings()(hidden)

    # -- one batched call ------------------------------------------------------------------
    @torch.inference_mode()
    def generate(self, sequences: list[list[int]], caches: list[KVCache | None], max_new_tokens: int,
                 temperature: float, top_p: float, seed: int | None, keep_cache: bool = True) -> list[Decoded]:
        """Sample up to `max_new_tokens` after each sequence (stopping at an end-of-turn id)."""
        param = next(self.model.parameters())
        device = param.device
        n_layers, kv_heads, head_dim = self._geometry()
        cached = [min(c.length, len(s) - 1) if c is not None else 0 for s, c in zip(sequences, caches)]
        # identical sequences with the same cache (a group's K rollouts at their first turn) are
        # prefilled once and copied: the buffer holds the distinct ones first, longest first
        first: dict[tuple, int] = {}
        copy_of = {i: first.setdefault((tuple(s), id(c) if cached[i] else None), i)
                   for i, (s, c) in enumerate(zip(sequences, caches))}
        distinct = sorted((i for i in copy_of if copy_of[i] == i), key=lambda i: len(sequences[i]) - cached[i],
                          reverse=True)
        order = distinct + [i for i in copy_of if copy_of[i] != i]
        news = [len(sequences[i]) - cached[i] for i in distinct]
        chunks = self._prefill_chunks(news)
        width = max(len(s) for s in sequences) + max_new_tokens
        width = max([width] + [cached[order[r]] + news[a] for a, b in chunks for r in range(a, b)])
        # zeros, not empty: a masked slot still enters p @ V, and 0 x NaN from stale memory is NaN
        kv = torch.zeros((n_layers, 2, len(order), kv_heads, width, head_dim), dtype=param.dtype, device=device)
        for row, i in enumerate(distinct):
            if cached[i]:
                kv[:, :, row, :, :cached[i]] = caches[i].tensor[:, :, :, :cached[i]].to(device)
        generator = None
        if seed is not None:
            generator = torch.Generator(device=device)
            generator.manual_seed(seed)

        hidden = torch.cat([self._prefill_chunk(sequences, cached, order, news, a, b, kv) for a, b in chunks])
        row_of = {i: row for row, i in enumerate(order)}
        copies = [row_of[copy_of[i]] for i in order[len(distinct):]]
        if copies:
            source = torch.tensor(copies, device=device)
            kv[:, :, len(distinct):] = kv[:, :, source]
            hidden = torch.cat([hidden, hidden[source]])
        lengths = [len(sequences[i]) for i in order]
        tokens_out: list[list[int]] = [[] for _ in order]
        logprobs_out: list[list[float]] = [[] for _ in order]
        filled = [0] * len(order)  # slots whose keys/values are real, per row of `order`
        saved: dict[int, KVCache] = {}
        rows = list(range(len(order)))  # the rows of `order` in the buffer, in buffer-row order
        done = [False] * len(order)
        logits = self._logits(hidden)
        for step in range(1, max_new_tokens + 1):
            # one uniform per session, in the caller's order: a sample does not depend on buffer rows
            uniforms = torch.rand(len(order), generator=generator, device=device)[[order[row] for row in rows]]
            tokens, logps = sample_tokens(logits, temperature, top_p, uniforms=uniforms)
            for j, (row, token, logp) in enumerate(zip(rows, tokens.tolist(), logps.tolist())):
                if done[row]:
                    continue  # a finished row rides along until the next compaction; its samples are dropped
                tokens_out[row].append(token)
                logprobs_out[row].append(logp)
                filled[row] = lengths[row] + step - 1
                done[row] = token in self.eos or step == max_new_tokens
            going = [not done[row] for row in rows]
            if not any(going):
                break
            if sum(going) * 2 <= len(rows):  # compact: finished rows stop costing compute
                if keep_cache:
                    for j, row in enumerate(rows):
                        if done[row]:
                            saved[row] = KVCache(kv[:, :, j, :, :filled[row]].clone())
                keep = torch.tensor(going, device=device)
                kv, tokens = kv[:, :, keep].contiguous(), tokens[keep]
                rows = [row for row in rows if not done[row]]
            slots = torch.tensor([lengths[row] + step - 1 for row in rows], device=device)[:, None]
            hidden = self._forward(tokens[:, None], slots, kv, slice(0, len(rows)), int(slots.max()) + 1)
            logits = self._logits(hidden[:, -1])
        if keep_cache:
            for j, row in enumerate(rows):
                saved.setdefault(row, KVCache(kv[:, :, j, :, :filled[row]].clone()))
        results: list[Decoded | None] = [None] * len(sequences)
        for row, i in enumerate(order):
            results[i] = Decoded(tokens_out[row], logprobs_out[row], saved.get(row))
        return results  # type: ignore[return-value]

    def _prefill_chunks(self, news: list[int]) -> list[tuple[int, int]]:
        """Consecutive row ranges (rows sorted by new tokens, most first) under the token budget,
        a range closing when its longest is over twice the next row's count."""
        chunks, start = [], 0
        while start < len(news):
            stop = start + 1
            while (stop < len(news) and (stop - start + 1) * news[start] <= self.prefill_token_budget
                   and news[start] <= 2 * max(news[stop], 1)):
                stop += 1
            chunks.append((start, stop))
            start = stop
        return chunks

    def _prefill_chunk(self, sequences, cached, order, news, start, stop, kv) -> torch.Tensor:
        """Feed the uncached tokens of rows start..stop; the last real position's hidden state [b, H]."""
        device = kv.device
        n = news[start]
        ids = torch.full((stop - start, n), self.pad_id, dtype=torch.long)
        slots = torch.zeros((stop - start, n), dtype=torch.long)
        for r in range(start, stop):
            i = order[r]
            fresh = sequences[i][cached[i]:]
            ids[r - start, :len(fresh)] = torch.tensor(fresh)
            # padding sits after the row's last token; decoding overwrites those slots before reading them
            slots[r - start] = torch.arange(cached[i], cached[i] + n)
        hidden = self._forward(ids.to(device), slots.to(device), kv, slice(start, stop), int(slots.max()) + 1)
        last = torch.tensor([news[r] - 1 for r in range(start, stop)], device=device)
        return hidden[torch.arange(stop - start, device=device), last]
