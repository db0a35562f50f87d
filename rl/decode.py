"""A lean batched decode loop for Llama-family models, with each session's keys/values kept
between turns (docs/method.md §7: a decode step under `model.generate` is overhead-bound here).

One `run` takes sessions at any turn of any episode. Each brings the tokens it has
(`token_ids`) and the keys/values it already computed for a prefix of them (`KVCache`, or None).
The engine:
1. gives every session one row of a key/value buffer and copies its cache in;
2. prefills only the tokens that are not cached yet (a new turn's observation, hint and
   chat-template text), in row chunks under a token budget, computing vocabulary logits only
   at each row's last position;
3. decodes all rows together, one token per step, writing keys/values in place (no
   concatenation), attending only to each row's own filled slots (on CPU with the compiled
   kernel of rl/decode_kernel.py, which reads no slot beyond a row's own; elsewhere SDPA under
   a mask), and dropping finished rows from the buffer once they are half of it;
4. when a row's reply is complete, asks the caller for its next turn (continuous batching: the
   caller steps the episode's environment and appends the observation). The appended tokens
   are prefilled into the same row at the next step while the other rows keep decoding, so
   nobody waits for the slowest reply of a turn. Without a next turn (`generate`), each
   session gets its grown cache back for a later call.

The sampler draws from softmax(logits / temperature) restricted to the top-p nucleus; the
nucleus is searched among the 64 largest logits first, then 1,024, and the full vocabulary is
sorted only for a row whose nucleus is wider still. On CPU the compiled sampler of
rl/decode_kernel.py makes the same draw in a few vector passes over each row. The recorded
log-prob of a sampled token is under softmax(logits / temperature), before top-p, as
`rl/policy.Generation` documents.

Positions are slots: a row's token t sits at slot t, so rotary positions need no padding
arithmetic, and a row's cache is the slots it filled. Supported: the Llama, Mistral, Qwen2 and
Qwen3 module layout of Hugging Face transformers (others raise UnsupportedModel; use the
`hf` engine for them).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

from rl import decode_kernel
from rl.decode_kernel import decode_attention
from rl.decode_kernel import sample as sample_kernel
from rl.kv_budget import CPU_KV_BUDGET_GIB, configured_kv_gib
from rl.policy import PolicyError
from rl.precision import cpu_has_amx

SUPPORTED = ("llama", "mistral", "qwen2", "qwen3")
NUCLEUS_PREFILTERS = (64, 1024, 1 << 30)  # top-k sizes tried in turn for the nucleus; the last is all


class UnsupportedModel(PolicyError):
    """The model's architecture is not one the lean engine implements."""


KERNEL_ROWS = 48  # up to this many rows, a projection on CPU runs the compiled kernel (docs/results.md)


def kernel_projects(weight: torch.Tensor) -> bool:
    """Whether `project` may run the compiled few-row kernel for this weight: on CPU, fp32, or bf16
    where the CPU has AVX-512 BF16 but no AMX (there oneDNN's bf16 matmuls run on the matrix tiles,
    and the kernel has not been measured against them: `HS_DECODE_NARROW=all` runs it anyway)."""
    if weight.device.type != "cpu" or not decode_kernel.linear_built(weight.dtype):
        return False
    return weight.dtype != torch.bfloat16 or not cpu_has_amx() or os.environ.get("HS_DECODE_NARROW") == "all"


def project(linear: torch.nn.Module, x: torch.Tensor) -> torch.Tensor:
    """`linear(x)`. For a few rows on CPU (a decode step) it runs rl/decode_linear.cpp where
    `kernel_projects` says so, the same result up to rounding: fp32 1.1-2.3x faster than MKL's sgemm
    at 4-32 rows on the AVX2 kind, bf16 1.2-1.6x oneDNN's at 1-48 rows on the AVX-512 BF16 kind
    (docs/results.md). Any other module (a LoRA layer, a quantised one) runs as it is, as does
    every projection where the kernel is not built. `HS_DECODE_NARROW=0` turns it off."""
    rows = x.numel() // x.shape[-1]
    if (
        type(linear) is torch.nn.Linear
        and rows <= KERNEL_ROWS
        and kernel_projects(linear.weight)
        and os.environ.get("HS_DECODE_NARROW", "1") != "0"
    ):
        out = decode_kernel.linear(x, linear.weight, linear.bias)
        if out is not None:
            return out
    return linear(x)


def require_supported(model) -> None:
    """One-line error naming the fix for a model the lean engine cannot run."""
    kind = getattr(model.config, "model_type", "?")
    if kind not in SUPPORTED:
        raise UnsupportedModel(
            f"the lean engine runs {', '.join(SUPPORTED)} models, not {kind!r}: "
            "set policy.engine (or trainer.engine) to 'hf'"
        )


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
    seconds: float = 0.0  # from the row's turn starting (its prefill) to its last token


def sample_tokens(
    logits: torch.Tensor,
    temperature: float,
    top_p: float,
    generator: torch.Generator | None = None,
    uniforms: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """[B, V] logits -> (tokens [B], log-probs [B] under softmax(logits / temperature)).

    Each row's draw uses one uniform number: `uniforms` [B] when given (so a row's sample does
    not depend on where it sits in the batch), else fresh ones from `generator`."""
    if uniforms is None:
        uniforms = torch.rand(logits.shape[0], generator=generator, device=logits.device)
    drawn = sample_kernel(logits, temperature, top_p, uniforms)  # the same draw, compiled (CPU)
    if drawn is not None:
        return drawn
    logits = logits.float()
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


def folded_mask(mask: torch.Tensor, group: int, dtype: torch.dtype) -> torch.Tensor:
    """A boolean mask [b, 1, n, S] as `grouped_attention` uses it: additive (0 or -inf) over the
    folded query positions [b, 1, group * n, S] (one query broadcasts). A forward builds it once
    for all its layers; SDPA would otherwise convert the boolean mask in every layer (2-10% of a
    prefill on the AVX2 kind, docs/results.md)."""
    if group > 1 and mask.shape[2] > 1:
        mask = mask.repeat(1, 1, group, 1)
    return torch.zeros(mask.shape, dtype=dtype, device=mask.device).masked_fill_(~mask, float("-inf"))


def grouped_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor, scale: float
) -> torch.Tensor:
    """Attention of q [b, Hq, n, D] over k, v [b, Hkv, S, D] (Hq a multiple of Hkv), mask [b, 1, n, S]
    boolean or already `folded_mask`.

    The query heads that share a key/value head are folded into that head's query positions, so
    one attention runs per key/value head and the keys and values are never expanded. Query head
    h reads key/value head h // (Hq / Hkv), as in Hugging Face's repeat_kv. Measured here (bf16,
    batch 32, one query, context 512): 0.8 ms per layer against 6.2 ms for SDPA's enable_gqa.
    """
    b, hq, n, d = q.shape
    hkv = k.shape[1]
    group = hq // hkv
    folded = q.reshape(b, hkv, group * n, d)
    if mask.dtype == torch.bool:
        mask = folded_mask(mask, group, q.dtype)
    out = F.scaled_dot_product_attention(folded, k, v, attn_mask=mask, scale=scale)
    return out.reshape(b, hq, n, d)


def kv_budget_bytes(device: torch.device) -> int | None:
    """The bound on a decode loop's key/value buffer: HS_KV_CACHE_GIB when set (0: none), else
    CPU_KV_BUDGET_GIB on CPU and none on a GPU (where `max_rows` alone bounds it)."""
    gib = configured_kv_gib(os.environ)
    if gib is None:
        gib = CPU_KV_BUDGET_GIB if torch.device(device).type == "cpu" else 0.0
    return int(gib * 2**30) if gib > 0 else None


class DecodeEngine:
    """Batched sampling over a Hugging Face Llama-family causal LM, caches kept per session.

    The key/value buffer is bounded twice: by `max_rows`, and by `kv_budget` bytes (rows x width;
    kv_budget_bytes). A sequence waits for a row until it fits under both; a running row whose next
    turn would widen the buffer past the budget waits, its slots kept, until finished rows are
    dropped. Only when nothing else can run does the buffer pass the budget (one sequence longer
    than all of it runs alone). Waiting changes no draw: each row samples from its own stream."""

    prefill_token_budget = 8192  # rows x new tokens per prefill forward
    # Rows decoding at once; more sequences wait and take the rows that finish. Bounds the key/value
    # buffer (64 rows x 1,600 slots of SmolLM2-135M in bf16: 2.4 GB; 400 rows grew past 12 GB).
    max_rows = 64

    def __init__(self, model, eos_ids: list[int], pad_id: int):
        require_supported(model)
        self.model = model
        self.eos = set(eos_ids)
        self.pad_id = pad_id
        param = next(model.parameters())
        self.kv_budget = kv_budget_bytes(param.device)
        layers, kv_heads, head_dim = self._geometry()
        self.slot_bytes = layers * 2 * kv_heads * head_dim * param.element_size()  # one slot of one row, every layer

    # -- the model, slot-addressed ---------------------------------------------------------
    def _geometry(self):
        cfg = self.model.config
        attn = self.model.get_decoder().layers[0].self_attn
        return cfg.num_hidden_layers, cfg.num_key_value_heads, attn.head_dim

    def _forward(
        self, ids: torch.Tensor, slots: torch.Tensor, kv, rows: slice | torch.Tensor, visible: int
    ) -> torch.Tensor:
        """Hidden states [b, n, hidden] of tokens `ids` [b, n] at `slots` [b, n] of buffer rows
        `rows` (`kv[layer]` is that layer's [2, rows, kv_heads, width, head_dim]: a list per layer or
        one tensor); their keys/values are written there, each query sees its row's slots <= its own."""
        decoder = self.model.get_decoder()
        b, n = ids.shape
        x = decoder.embed_tokens(ids)
        cos, sin = decoder.rotary_emb(x, slots)
        keys = torch.arange(visible, device=ids.device)
        mask = keys[None, None, None, :] <= slots[:, None, :, None]  # [b, 1, n, visible]
        index = torch.arange(rows.start, rows.stop, device=ids.device) if isinstance(rows, slice) else rows
        batch_rows = index[:, None].expand(b, n)
        lengths = slots[:, 0] + 1 if n == 1 else None  # a decode step: each row reads its own filled slots
        for layer_index, layer in enumerate(decoder.layers):
            attn = layer.self_attn
            h = layer.input_layernorm(x)
            q = project(attn.q_proj, h).view(b, n, -1, attn.head_dim)
            k = project(attn.k_proj, h).view(b, n, -1, attn.head_dim)
            v = project(attn.v_proj, h).view(b, n, -1, attn.head_dim)
            if hasattr(attn, "q_norm"):  # Qwen3 normalises each head before the rotation
                q, k = attn.q_norm(q), attn.k_norm(k)
            q, k = apply_rotary_pos_emb(q.transpose(1, 2), k.transpose(1, 2), cos, sin)
            layer_kv = kv[layer_index]
            layer_kv[0][batch_rows, :, slots] = k.transpose(1, 2)
            layer_kv[1][batch_rows, :, slots] = v
            out = None
            if lengths is not None:  # the kernel reads the buffer's rows in place, by index or range
                whole = isinstance(rows, slice)
                keys_, values = (layer_kv[0, rows], layer_kv[1, rows]) if whole else (layer_kv[0], layer_kv[1])
                out = decode_attention(q[:, :, 0], keys_, values, lengths, attn.scaling, None if whole else index)
            if out is None:
                if isinstance(rows, slice):  # a view of contiguous rows; an index gathers a copy
                    keys_, values = layer_kv[0, rows, :, :visible], layer_kv[1, rows, :, :visible]
                else:
                    keys_, values = layer_kv[0, rows][:, :, :visible], layer_kv[1, rows][:, :, :visible]
                if mask.dtype == torch.bool:  # once per forward, for every layer
                    mask = folded_mask(mask, q.shape[1] // keys_.shape[1], q.dtype)
                out = grouped_attention(q, keys_, values, mask, attn.scaling)
            else:
                out = out[:, :, None]
            x = x + project(attn.o_proj, out.transpose(1, 2).reshape(b, n, -1))
            mlp, h = layer.mlp, layer.post_attention_layernorm(x)
            x = x + project(mlp.down_proj, mlp.act_fn(project(mlp.gate_proj, h)) * project(mlp.up_proj, h))
        return decoder.norm(x)

    def _logits(self, hidden: torch.Tensor) -> torch.Tensor:
        return project(self.model.get_output_embeddings(), hidden)

    # -- one batched call ------------------------------------------------------------------
    def generate(
        self,
        sequences: list[list[int]],
        caches: list[KVCache | None],
        max_new_tokens: int,
        temperature: float,
        top_p: float,
        seed: int | None,
        keep_cache: bool = True,
        streams: list[tuple[int, int] | None] | None = None,
    ) -> list[Decoded]:
        """Sample up to `max_new_tokens` after each sequence (stopping at an end-of-turn id)."""
        return self.run(
            sequences, caches, max_new_tokens, temperature, top_p, seed, keep_cache=keep_cache, streams=streams
        )

    @torch.inference_mode()
    def run(
        self,
        sequences: list[list[int]],
        caches: list[KVCache | None],
        max_new_tokens: int,
        temperature: float,
        top_p: float,
        seed: int | None,
        next_turn=None,
        keep_cache: bool = True,
        streams: list[tuple[int, int] | None] | None = None,
    ) -> list[Decoded]:
        """Sample a reply after each sequence; with `next_turn`, keep going (continuous batching).

        next_turn(i, decoded) is called the moment sequence i's reply is complete. It returns
        the sequence's next state (the old one + the reply + what the caller appended, or a
        new context) to sample another reply after it in the same row, or None when sequence i
        is finished; the row's keys/values stay in place between its turns. A row's draws come
        from its own stream, seeded by (seed, i, turn), so a sample does not depend on which
        other rows share the batch. `streams` names each sequence's stream as (seed, index)
        instead (None: unseeded), so that requests merged into one call (rl/batching.py) draw
        what they would have drawn alone. At most `max_rows` sequences hold a row at once; the
        others wait and each takes the next row that finishes, so its draws are the same.
        Returns each sequence's last reply (with its cache when `keep_cache`)."""
        if streams is None:
            streams = [None if seed is None else (seed, i) for i in range(len(sequences))]
        batch = _Batch(self, max_new_tokens)
        waiting = list(range(len(sequences)))  # each takes a row when one is free under the bounds
        results: list[Decoded | None] = [None] * len(sequences)

        def admit_waiting() -> None:
            n = batch.room([len(sequences[i]) for i in waiting])
            if n:
                batch.admit([(i, sequences[i], caches[i], streams[i]) for i in waiting[:n]])
                del waiting[:n]

        admit_waiting()
        while batch.live():
            logits, rows = batch.step()
            tokens, logps = sample_tokens(logits, temperature, top_p, uniforms=batch.uniforms(rows))
            for row, token, logp in zip(rows, tokens.tolist(), logps.tolist()):
                if not batch.record(row, token, logp):
                    continue
                decoded = batch.reply(row)
                following = next_turn(batch.who[row], decoded) if next_turn is not None else None
                if following is None:
                    decoded.cache = batch.cache_of(row) if keep_cache else None
                    results[batch.who[row]] = decoded
                    batch.retire(row)  # its row serves the next waiting sequence, if there is room
                else:
                    batch.continue_with(row, following)
            if waiting:
                admit_waiting()
            batch.compact()
        return results  # type: ignore[return-value]

    @torch.inference_mode()
    def serve(
        self,
        max_new_tokens: int,
        temperature: float,
        top_p: float,
        take: Callable[
            [Callable[[list[int]], int]], list[tuple[int, list[int], KVCache | None, tuple[int, int] | None]]
        ],
        deliver: Callable[[int, Decoded], None],
    ) -> None:
        """Continuous batching across callers (rl/decode_server.py). Before every step, take(room)
        returns new (ticket, sequence, cache, stream) items, which take rows at once: room(lengths)
        says how many sequences of those lengths, in that order, fit under the bounds now;
        each complete reply goes to deliver(ticket, decoded) with its grown cache, and its row is
        free for the next item. A row draws from its own stream, so a sequence samples what it
        would sample alone. Returns when no row is live and take() brought nothing."""
        batch = _Batch(self, max_new_tokens)
        while True:
            items = take(batch.room)
            if items:
                batch.admit(items)
            if not batch.live():
                return
            logits, rows = batch.step()
            tokens, logps = sample_tokens(logits, temperature, top_p, uniforms=batch.uniforms(rows))
            for row, token, logp in zip(rows, tokens.tolist(), logps.tolist()):
                if batch.record(row, token, logp):
                    decoded = batch.reply(row)
                    decoded.cache = batch.cache_of(row)
                    ticket = batch.who[row]
                    batch.retire(row)
                    batch.streams.pop(ticket, None)
                    deliver(ticket, decoded)
            batch.compact(drop_rows=False)

    def _prefill_chunks(self, news: list[int]) -> list[tuple[int, int]]:
        """Consecutive row ranges (rows sorted by new tokens, most first) under the token budget,
        a range closing when its longest is over twice the next row's count."""
        chunks, start = [], 0
        while start < len(news):
            stop = start + 1
            while (
                stop < len(news)
                and (stop - start + 1) * news[start] <= self.prefill_token_budget
                and news[start] <= 2 * max(news[stop], 1)
            ):
                stop += 1
            chunks.append((start, stop))
            start = stop
        return chunks


PREFILL, DECODE, DONE = "prefill", "decode", "done"


def _stream_seed(seed: int, index: int, turn: int) -> int:
    return hash((seed, index, turn)) & 0x7FFF_FFFF_FFFF_FFFF  # int tuples hash the same in every process


class _Batch:
    """The rows of one `DecodeEngine.run`: a key/value buffer per layer [2, rows, kv_heads, width,
    head_dim] that grows when a row needs more slots, and per row the sequence it serves. Growing,
    compacting and copying rows go one layer at a time, so they hold one layer's copy beside the
    buffer at most, not a second whole buffer.

    A row is PREFILL (its sequence has tokens without keys/values yet), DECODE (its last sampled
    token is fed next) or DONE (free: dropped at the next compaction, or serving the next sequence
    in a serving loop). Each step feeds every DECODE row one token in one forward (on CPU with the
    kernel only those rows; elsewhere the whole buffer, the others riding along), then prefills the
    PREFILL rows."""

    # the per-row lists, in step with the buffer's rows
    ROW_FIELDS = ("who", "seq", "filled", "state", "reply_tokens", "reply_logps", "turn", "draws", "started")

    def __init__(self, engine: DecodeEngine, max_new_tokens: int):
        self.engine, self.max_new = engine, max_new_tokens
        # the caller's index (or ticket) -> its stream, set on admission
        self.streams: dict[int, tuple[int, int] | None] = {}
        param = next(engine.model.parameters())
        self.device, self.dtype = param.device, param.dtype
        self.kv: list[torch.Tensor] = []
        self.who: list[int] = []  # the caller's index of the sequence each row serves
        self.seq: list[list[int]] = []  # the row's sequence before the current reply
        self.filled: list[int] = []  # slots holding real keys/values
        self.state: list[str] = []
        self.reply_tokens: list[list[int]] = []
        self.reply_logps: list[list[float]] = []
        self.turn: list[int] = []
        self.draws: list[list[float] | None] = []
        self.started: list[float] = []
        self.copy_of: dict[int, int] = {}  # row -> the row whose first prefill it shares

    # -- rows in and out --------------------------------------------------------------------
    def admit_all(
        self, sequences: list[list[int]], caches: list[KVCache | None], tickets: list[int] | None = None
    ) -> None:
        """One row per sequence (serving the caller's index, or `tickets[i]`). Identical sequences
        with the same cache (a group's K rollouts at their first turn) are prefilled once: the
        distinct ones come first, most new tokens first."""
        cached = [min(c.length, len(s) - 1) if c is not None else 0 for s, c in zip(sequences, caches)]
        first: dict[tuple, int] = {}
        source = {
            i: first.setdefault((tuple(s), id(c) if cached[i] else None), i)
            for i, (s, c) in enumerate(zip(sequences, caches))
        }
        distinct = sorted(
            (i for i in source if source[i] == i), key=lambda i: len(sequences[i]) - cached[i], reverse=True
        )
        order = distinct + [i for i in source if source[i] != i]
        row_of = {i: row for row, i in enumerate(order)}
        now = time.perf_counter()
        for i in order:
            self.who.append(i if tickets is None else tickets[i])
            self.seq.append(list(sequences[i]))
            self.filled.append(cached[i])
            self.state.append(PREFILL)
            self.reply_tokens.append([])
            self.reply_logps.append([])
            self.turn.append(0)
            self.draws.append(None)
            self.started.append(now)
        self.copy_of = {row_of[i]: row_of[source[i]] for i in order if source[i] != i}
        layers, kv_heads, head_dim = self.engine._geometry()
        width = max(len(s) for s in sequences) + self.max_new
        self.kv = [
            torch.zeros((2, len(order), kv_heads, width, head_dim), dtype=self.dtype, device=self.device)
            for _ in range(layers)
        ]
        for row, i in enumerate(order):
            if cached[i] and row not in self.copy_of:
                self._write_cache(row, caches[i], cached[i])

    def admit(self, items: list[tuple[int, list[int], KVCache | None, tuple[int, int] | None]]) -> None:
        """Sequences that arrive while other rows decode (DecodeEngine.serve), as (ticket,
        sequence, cache, stream): each takes a finished row, else a new row at the end. Identical
        first-turn sequences among them are prefilled once, as in admit_all."""
        for ticket, _, _, stream in items:
            self.streams[ticket] = stream
        need = max(len(s) for _, s, _, _ in items) + self.max_new
        if self.kv and not self.live() and need > self.kv[0].shape[3] and not self._fits(len(self.state), need):
            self._forget_rows()  # `room` let the first in because nothing is live: it gets a buffer of its own
        if not self.kv:
            self.admit_all([s for _, s, _, _ in items], [c for _, _, c, _ in items], [t for t, _, _, _ in items])
            return
        rows = [row for row, state in enumerate(self.state) if state == DONE][: len(items)]
        if len(rows) < len(items):  # grown by half at least (up to max_rows): fewer copies of the buffer
            width = max(self.kv[0].shape[3], need)
            spare = min(len(self.state) // 2, min(self.engine.max_rows, self._budget_rows(width)) - len(self.state))
            rows += self._add_rows(max(len(items) - len(rows), spare))[: len(items) - len(rows)]
        self._ensure_width(need)
        first: dict[tuple, int] = {}
        for row, (ticket, sequence, cache, _) in zip(rows, items):
            cached = min(cache.length, len(sequence) - 1) if cache is not None else 0
            source = first.setdefault((tuple(sequence), id(cache) if cached else None), row)
            if source != row:
                self.copy_of[row] = source  # its keys/values are copied from the source's prefill
            elif cached:
                self._write_cache(row, cache, cached)
            self._start(row, ticket, sequence, cached)

    def _forget_rows(self) -> None:
        """Drop the buffer and every (finished) row, so that the next admitted sequences size a new
        buffer by themselves rather than widening rows no one uses past the byte budget."""
        self.kv = []
        for name in self.ROW_FIELDS:
            setattr(self, name, [])
        self.copy_of = {}

    def _add_rows(self, n: int) -> list[int]:
        """n finished rows at the end of the buffer (grown one layer at a time); their indices."""
        start = len(self.state)
        for i, layer in enumerate(self.kv):
            self.kv[i] = torch.cat([layer, layer.new_zeros((2, n) + tuple(layer.shape[2:]))], dim=1)
            del layer
        for _ in range(n):
            self.who.append(-1)
            self.seq.append([])
            self.filled.append(0)
            self.state.append(DONE)
            self.reply_tokens.append([])
            self.reply_logps.append([])
            self.turn.append(0)
            self.draws.append(None)
            self.started.append(0.0)
        return list(range(start, start + n))

    def live(self) -> bool:
        return any(state != DONE for state in self.state)

    def _fits(self, rows: int, width: int) -> bool:
        """rows x width slots stay within the engine's byte budget (always, without one)."""
        budget = self.engine.kv_budget
        return budget is None or rows * width * self.engine.slot_bytes <= budget

    def room(self, lengths: list[int]) -> int:
        """How many sequences of these lengths (in order) can take a row now: the buffer stays
        within `max_rows` and the engine's byte budget at the width they need. When no row is
        live, the first always fits (one sequence longer than the budget still runs, alone)."""
        engine = self.engine
        busy = sum(state != DONE for state in self.state)
        if engine.kv_budget is not None and busy and self._width_wanted():
            return 0  # the running rows' next turns come first
        width = self.kv[0].shape[3] if self.kv else 0
        n = 0
        for length in lengths:
            width = max(width, length + self.max_new)
            rows = max(len(self.state), busy + n + 1)
            if busy + n + 1 > engine.max_rows:
                break
            if not self._fits(rows, width) and busy + n > 0:
                break
            n += 1
        return n

    def _budget_rows(self, width: int) -> int:
        """Rows that fit the byte budget at `width` (max_rows when there is no budget)."""
        if self.engine.kv_budget is None:
            return self.engine.max_rows
        return max(1, self.engine.kv_budget // max(width * self.engine.slot_bytes, 1))

    def record(self, row: int, token: int, logp: float) -> bool:
        """Append a sampled token to the row's reply; True when the reply is complete."""
        self.reply_tokens[row].append(token)
        self.reply_logps[row].append(logp)
        self.state[row] = DECODE
        return token in self.engine.eos or len(self.reply_tokens[row]) == self.max_new

    def reply(self, row: int) -> Decoded:
        return Decoded(self.reply_tokens[row], self.reply_logps[row], None, time.perf_counter() - self.started[row])

    def cache_of(self, row: int) -> KVCache:
        """Keys/values of everything the row holds but its last sampled token (never fed back)."""
        return KVCache(torch.stack([layer[:, row, :, : self.filled[row]] for layer in self.kv]))

    def _write_cache(self, row: int, cache: KVCache, length: int) -> None:
        for layer, cached in zip(self.kv, cache.tensor):
            layer[:, row, :, :length] = cached[:, :, :length].to(self.device)

    def _start(self, row: int, who: int, sequence: list[int], cached: int) -> None:
        """The row serves `who`'s sequence at its first turn, its first `cached` slots filled."""
        self.who[row], self.seq[row], self.filled[row], self.state[row] = who, list(sequence), cached, PREFILL
        self.reply_tokens[row], self.reply_logps[row], self.draws[row] = [], [], None
        self.turn[row], self.started[row] = 0, time.perf_counter()

    def retire(self, row: int) -> None:
        self.state[row] = DONE
        self.seq[row], self.reply_tokens[row], self.reply_logps[row], self.draws[row] = [], [], [], None

    def continue_with(self, row: int, following: list[int]) -> None:
        """The row's next turn: `following` extends its sequence and reply (its keys/values stay
        and only the appended tokens are prefilled), or replaces them (all are prefilled again;
        a query never reads a slot beyond its own, so stale ones are overwritten first)."""
        held = self.seq[row] + self.reply_tokens[row]
        if not (len(following) > len(held) - 1 and following[: len(held)] == held):
            self.filled[row] = 0
        self.seq[row] = list(following)
        self.reply_tokens[row], self.reply_logps[row], self.draws[row] = [], [], None
        self.turn[row] += 1
        self.state[row] = PREFILL
        self.started[row] = time.perf_counter()

    def compact(self, drop_rows: bool = True) -> None:
        """Once the live rows need half the buffer's width or less, drop the slots beyond, keeping
        a quarter more than they need (a serving batch lives on while its longest sequences come
        and go); with `drop_rows`, once finished rows are half the buffer or more, drop them so they
        stop costing compute. A serving loop keeps them instead, for the sequences that arrive next
        (its steps do not feed them where the kernel reads rows by index)."""
        keep = [row for row, state in enumerate(self.state) if state != DONE]
        need = max((len(self.seq[row]) + self.max_new for row in keep), default=0)
        if keep and need * 2 <= self.kv[0].shape[3]:
            for i, layer in enumerate(self.kv):  # one layer at a time
                self.kv[i] = layer[..., : need + need // 4, :].clone()
                del layer
        # a turn waiting to widen the buffer: drop the finished rows once that lets it fit the budget
        wanted = self._width_wanted() if self.engine.kv_budget is not None and len(keep) < len(self.state) else 0
        unblocks = wanted and self._fits(len(keep), wanted)
        if not drop_rows or not keep or (len(keep) * 2 > len(self.state) and not unblocks):
            return
        index = torch.tensor(keep, device=self.device)
        for i, layer in enumerate(self.kv):
            self.kv[i] = layer[:, index]  # the old layer is freed before the next is copied
        for name in self.ROW_FIELDS:
            values = getattr(self, name)
            setattr(self, name, [values[row] for row in keep])

    # -- sampling inputs ---------------------------------------------------------------------
    def uniforms(self, rows: list[int]) -> torch.Tensor:
        """Each row's next uniform from its own stream for this turn."""
        for row in rows:
            if self.draws[row] is None:
                generator, stream = None, self.streams[self.who[row]]
                if stream is not None:
                    generator = torch.Generator().manual_seed(_stream_seed(*stream, self.turn[row]))
                self.draws[row] = torch.rand(self.max_new, generator=generator).tolist()
        return torch.tensor([self.draws[row][len(self.reply_tokens[row])] for row in rows], device=self.device)

    # -- one step of the model ---------------------------------------------------------------
    def step(self) -> tuple[torch.Tensor, list[int]]:
        """Logits [n, V] for the next token of every live row, and those rows in that order."""
        hidden, rows = [], []
        decoding = [row for row, state in enumerate(self.state) if state == DECODE]
        if decoding:
            engine = self.engine
            if decode_kernel.applies(self.kv[0].device, self.kv[0].dtype):
                # only the decoding rows: the kernel reads their buffer rows in place
                fed = decoding
                where = (
                    slice(fed[0], fed[-1] + 1)
                    if fed[-1] - fed[0] + 1 == len(fed)
                    else torch.tensor(fed, device=self.device)
                )
            else:  # every row, so attention reads a view of the buffer, not a gathered copy
                fed, where = list(range(len(self.state))), slice(0, len(self.state))
            # PREFILL rows fed along write their junk where their prefill writes next; DONE rows at slot 0
            slots = [self.filled[row] if self.state[row] != DONE else 0 for row in fed]
            ids = torch.tensor(
                [self.reply_tokens[row][-1] if self.state[row] == DECODE else engine.pad_id for row in fed],
                device=self.device,
            )[:, None]
            out = engine._forward(ids, torch.tensor(slots, device=self.device)[:, None], self.kv, where, max(slots) + 1)
            if len(fed) != len(decoding):  # every row was fed (fed[r] == r): keep the decoding ones
                out = out[torch.tensor(decoding, device=self.device)]
            hidden.append(out[:, -1])
            rows += decoding
            for row in decoding:
                self.filled[row] += 1
        prefilling = self._within_budget([row for row, state in enumerate(self.state) if state == PREFILL], rows)
        if prefilling:
            hidden.append(self._prefill(prefilling))
            rows += prefilling
        return self.engine._logits(torch.cat(hidden)), rows

    def _within_budget(self, prefilling: list[int], decoding: list[int]) -> list[int]:
        """The PREFILL rows that run this step: all, unless their turns would widen the buffer past
        the byte budget; then those that fit the present width, and the others wait (their slots
        kept) until finished rows are dropped. With no row decoding and none fitting, all run."""
        if self.engine.kv_budget is None or not prefilling:
            return prefilling
        width = self.kv[0].shape[3]
        need = max(len(self.seq[row]) + self.max_new for row in prefilling)
        if need <= width or self._fits(len(self.state), need):
            return prefilling
        fitting = [row for row in prefilling if len(self.seq[row]) + self.max_new <= width]
        return fitting if fitting or decoding else prefilling

    def _width_wanted(self) -> int:
        """The widest turn waiting for the buffer to widen (0: none waits)."""
        width = self.kv[0].shape[3] if self.kv else 0
        needs = [len(self.seq[r]) + self.max_new for r, s in enumerate(self.state) if s == PREFILL]
        return max((n for n in needs if n > width), default=0)

    def _prefill(self, rows: list[int]) -> torch.Tensor:
        """Feed each row's tokens that have no keys/values yet; the last one's hidden state per
        row [len(rows), hidden], in the order of `rows`."""
        engine, device = self.engine, self.device
        distinct = sorted(
            (row for row in rows if row not in self.copy_of),
            key=lambda row: len(self.seq[row]) - self.filled[row],
            reverse=True,
        )
        news = [len(self.seq[row]) - self.filled[row] for row in distinct]
        chunks = engine._prefill_chunks(news)
        # padding sits after a row's last token, in slots that decoding overwrites before reading
        self._ensure_width(
            max(
                [len(self.seq[row]) + self.max_new for row in rows]
                + [self.filled[distinct[r]] + news[a] for a, b in chunks for r in range(a, b)]
            )
        )
        last: dict[int, torch.Tensor] = {}
        for a, b in chunks:
            chunk = distinct[a:b]
            n = news[a]
            ids = torch.full((len(chunk), n), engine.pad_id, dtype=torch.long)
            slots = torch.zeros((len(chunk), n), dtype=torch.long)
            for j, row in enumerate(chunk):
                fresh = self.seq[row][self.filled[row] :]
                ids[j, : len(fresh)] = torch.tensor(fresh)
                slots[j] = torch.arange(self.filled[row], self.filled[row] + n)
            contiguous = chunk == list(range(chunk[0], chunk[0] + len(chunk)))
            where = slice(chunk[0], chunk[0] + len(chunk)) if contiguous else torch.tensor(chunk, device=device)
            out = engine._forward(ids.to(device), slots.to(device), self.kv, where, int(slots.max()) + 1)
            ends = torch.tensor([news[r] - 1 for r in range(a, b)], device=device)
            for j, h in zip(chunk, out[torch.arange(len(chunk), device=device), ends]):
                last[j] = h
        copies = [row for row in rows if row in self.copy_of]
        if copies:
            targets = torch.tensor(copies, device=device)
            sources = torch.tensor([self.copy_of[row] for row in copies], device=device)
            for layer in self.kv:
                layer[:, targets] = layer[:, sources]
            for row in copies:
                last[row] = last[self.copy_of[row]]
        self.copy_of = {}
        for row in rows:
            self.filled[row] = len(self.seq[row])
        return torch.stack([last[row] for row in rows])

    def _ensure_width(self, need: int) -> None:
        width = self.kv[0].shape[3]
        if need <= width:
            return
        # by half at least (fewer copies of the buffer), as far as the byte budget allows
        budget_width = (
            self.engine.kv_budget // max(len(self.state) * self.engine.slot_bytes, 1) if self.engine.kv_budget else None
        )
        wider = width + width // 2 if budget_width is None else min(width + width // 2, budget_width)
        for i, layer in enumerate(self.kv):  # one layer at a time: the old one is freed as the next grows
            grown = layer.new_zeros(layer.shape[:3] + (max(need, wider), layer.shape[4]))
            grown[..., :width, :] = layer
            self.kv[i] = grown
            del layer, grown
