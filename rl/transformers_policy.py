"""Local transformers policy: batched sampling with exact token bookkeeping and log-probs.

Each session keeps the exact token sequence the model has seen. A new message is appended by
rendering the chat template for the whole conversation and tokenising only the text that the
rendering adds after what the session already holds (the closing of the assistant turn, the
new message, the next assistant header). So sampled tokens are never re-tokenised; if a
template is not prefix-stable the session is re-rendered from scratch and the reset counted.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, LogitsProcessor, LogitsProcessorList
from transformers.generation.logits_process import TopPLogitsWarper

from rl.memory import bound_heap
from rl.model_store import resolve_model
from rl.policy import ChatSession, Generation, PolicyError, Sampling, start_session
from rl.precision import resolve_dtype

_MODEL_CACHE: dict[tuple[str, str, str], tuple[object, object]] = {}


class _ScaleAndRecord(LogitsProcessor):
    """Divides logits by the temperature and keeps the log-prob of each sampled token.

    At step t the processor sees the token sampled at t-1 as input_ids[:, -1], so it only
    holds one [B, V] log-softmax at a time instead of all steps' logits.
    """

    def __init__(self, temperature: float):
        self.temperature = temperature
        self.prev: torch.Tensor | None = None
        self.picked: list[torch.Tensor] = []

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        if self.prev is not None:
            self.picked.append(self.prev.gather(1, input_ids[:, -1:]).squeeze(1))
        scaled = scores / self.temperature if self.temperature > 0 else scores
        self.prev = torch.log_softmax(scaled.float(), dim=-1)
        return scaled

    def finish(self, last_tokens: torch.Tensor) -> torch.Tensor:
        """[B, T] log-probs of the sampled tokens, T = number of generation steps."""
        if self.prev is not None:
            self.picked.append(self.prev.gather(1, last_tokens[:, None]).squeeze(1))
        return torch.stack(self.picked, dim=1)


def load_model(model_dir: Path, device: str, dtype: str, shared: bool = True):
    """(model, tokenizer); shared loads are cached per process, a private one (a trainer's, which
    changes its weights in place) is never handed to anyone else."""
    key = (str(model_dir), device, dtype)
    bound_heap()  # freed tensors go back to the OS within a phase, not only between phases (rl/memory.py)
    if not shared or key not in _MODEL_CACHE:
        tokenizer = AutoTokenizer.from_pretrained(model_dir)
        model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=getattr(torch, dtype)).to(device)
        model.eval()
        if not shared:
            return model, tokenizer
        _MODEL_CACHE[key] = (model, tokenizer)
    return _MODEL_CACHE[key]


def forget_shared_models() -> None:
    """Drop the per-process shared models (their memory goes once no policy refers to them)."""
    from rl.memory import release_memory

    _MODEL_CACHE.clear()
    release_memory()


def length_buckets(lengths: list[int], padded_token_budget: int) -> list[list[int]]:
    """Split a batch into chunks of similar length (indices into `lengths`).

    A batch is left-padded to its longest member, so one long episode in a batch of short ones
    multiplies the prefill cost. Sorted by length, a chunk closes when its padded size
    (members x longest) would exceed the budget or the longest is over twice the shortest.
    """
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    chunks: list[list[int]] = []
    for i in order:
        if chunks:
            chunk = chunks[-1]
            longest = lengths[chunk[0]]
            if (len(chunk) + 1) * longest <= padded_token_budget and longest <= 2 * max(lengths[i], 1):
                chunk.append(i)
                continue
        chunks.append([i])
    return chunks


class TransformersPolicy:
    """Policy backed by a local Hugging Face causal LM (CPU or one GPU)."""

    padded_token_budget = 16384  # prompt tokens (padding included) per generate call (hf engine)

    def __init__(
        self,
        model: str = "smollm2-135m",
        device: str = "cpu",
        dtype: str = "float32",
        max_context_tokens: int | None = None,
        shared: bool = True,
        engine: str = "lean",
    ):
        self.model_dir = resolve_model(model)
        self.name = model
        self.device = device
        self.engine = engine  # 'lean': rl/decode.py with keys/values kept across turns; 'hf': model.generate
        self.continuous_batching = engine == "lean"  # generate_continuous is available
        self.takes_streams = engine == "lean"  # generate(..., streams=): merged requests keep their own draws
        # lean: generate calls from many threads share one continuously batched decode loop
        # (rl/decode_server.py), so rl/batching.py passes them straight through
        self.serves_concurrent_calls = engine == "lean"
        self.text_lock = threading.RLock()  # tokenizers are not guaranteed thread-safe (rl/batching.py shares it)
        self._server = None
        self.dtype = resolve_dtype(dtype, device)  # 'auto' -> bf16 where the hardware is fast at it
        self.model, self.tokenizer = load_model(self.model_dir, device, self.dtype, shared)
        if engine == "lean":
            from rl.decode import require_supported

            require_supported(self.model)
        self.max_context_tokens = max_context_tokens or int(getattr(self.model.config, "max_position_embeddings", 2048))
        self.eos_ids = self._eos_ids()
        self.pad_id = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else self.eos_ids[0]

    def _eos_ids(self) -> list[int]:
        ids = {self.tokenizer.eos_token_id}
        gen_eos = self.model.generation_config.eos_token_id
        ids.update(gen_eos if isinstance(gen_eos, list) else [gen_eos])
        return sorted(i for i in ids if i is not None)

    # -- rendering -------------------------------------------------------------------------
    def _render(self, messages: list[dict[str, str]], generation_prompt: bool) -> str:
        return self.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=generation_prompt)

    def encode(self, text: str) -> list[int]:
        return self.tokenizer(text, add_special_tokens=False)["input_ids"]

    def decode(self, ids: list[int], skip_special: bool = False) -> str:
        return self.tokenizer.decode(ids, skip_special_tokens=skip_special, clean_up_tokenization_spaces=False)

    def start(self, messages: list[dict[str, str]]) -> ChatSession:
        return start_session(self, messages)

    def reset_context(self, session: ChatSession, messages: list[dict[str, str]]) -> None:
        text = self._render(messages, generation_prompt=True)
        ids = self.encode(text)
        session.messages = list(messages)
        session.token_ids = ids
        session.rendered_text = text
        session.pending_ids, session.pending_text = list(ids), text
        session.context_resets += 1
        session.cache = None  # the cached keys/values belong to the old context

    def extend(self, session: ChatSession, messages: list[dict[str, str]]) -> None:
        new_messages = session.messages + list(messages)
        full = self._render(new_messages, generation_prompt=True)
        if not full.startswith(session.rendered_text):
            self.reset_context(session, new_messages)
            return
        delta = full[len(session.rendered_text) :]
        ids = self.encode(delta)
        session.messages = new_messages
        session.token_ids = session.token_ids + ids
        session.rendered_text = full
        session.pending_ids = session.pending_ids + ids
        session.pending_text = session.pending_text + delta

    # -- sampling --------------------------------------------------------------------------
    @torch.inference_mode()
    def generate(
        self, sessions: list[ChatSession], sampling: Sampling, streams: list[tuple[int, int] | None] | None = None
    ) -> list[Generation]:
        """`streams` (lean engine): each session's sampling stream as (seed, index); by default
        (sampling.seed, position in this call)."""
        budget = self.max_context_tokens - sampling.max_new_tokens
        results = [
            Generation(text="", finish_reason="context_overflow", prompt_tokens=len(s.token_ids)) for s in sessions
        ]
        live = [i for i, s in enumerate(sessions) if len(s.token_ids) <= budget]
        if self.engine == "lean" and live:
            if streams is None:
                streams = [None if sampling.seed is None else (sampling.seed, i) for i in range(len(sessions))]
            for i, gen in zip(
                live, self._generate_lean([sessions[i] for i in live], sampling, [streams[i] for i in live])
            ):
                results[i] = gen
            return results
        for chunk in length_buckets([len(sessions[i].token_ids) for i in live], self.padded_token_budget):
            rows = [live[j] for j in chunk]
            for i, gen in zip(rows, self._generate_rows([sessions[i] for i in rows], sampling)):
                results[i] = gen
        return results

    def _generate_lean(
        self, sessions: list[ChatSession], sampling: Sampling, streams: list[tuple[int, int] | None]
    ) -> list[Generation]:
        """Through the decode server (rl/decode_server.py): each session's cached keys/values
        reused, the new ones kept; concurrent calls from other threads share its decode steps."""
        from rl.decode import DecodeEngine
        from rl.decode_server import DecodeServer

        start = time.perf_counter()
        with self.text_lock:
            if self._server is None or self._server.engine.model is not self.model:
                self._server = DecodeServer(DecodeEngine(self.model, self.eos_ids, self.pad_id))
            server = self._server
        decoded = server.decode(
            [s.token_ids for s in sessions],
            [s.cache for s in sessions],
            sampling.max_new_tokens,
            sampling.temperature,
            sampling.top_p,
            streams,
        )
        seconds = time.perf_counter() - start
        out = []
        with self.text_lock:
            for session, d in zip(sessions, decoded):
                out.append(self._finish_one(session, d.tokens, d.logprobs, seconds))
                session.cache = d.cache
        return out

    def generate_continuous(
        self, sessions: list[ChatSession], sampling: Sampling, on_reply: Callable[[int, Generation], bool]
    ) -> None:
        """Continuous batching (lean engine): sample a reply for every session; the moment session
        i's reply is complete, on_reply(i, generation) records it, steps the episode and says
        whether the session has another turn (already appended to it). That turn is prefilled
        into the same row at the next step while the other rows keep decoding, so no sequence
        waits for the slowest reply of its turn. A session past the context budget gets a
        'context_overflow' generation instead of a turn."""
        from rl.decode import DecodeEngine

        budget = self.max_context_tokens - sampling.max_new_tokens

        def overflow(session: ChatSession) -> Generation:
            return Generation(text="", finish_reason="context_overflow", prompt_tokens=len(session.token_ids))

        def next_turn(i: int, decoded) -> list[int] | None:
            session = sessions[i]
            generation = self._finish_one(session, decoded.tokens, decoded.logprobs, decoded.seconds)
            while on_reply(i, generation):
                if len(session.token_ids) <= budget:
                    return session.token_ids
                generation = overflow(session)
            return None

        live = []
        for i, session in enumerate(sessions):
            if len(session.token_ids) <= budget:
                live.append(i)
            elif on_reply(i, overflow(session)):
                raise PolicyError("an episode continued after its context overflowed")  # the contract ends it
        if not live:
            return
        engine = DecodeEngine(self.model, self.eos_ids, self.pad_id)
        engine.run(
            [sessions[i].token_ids for i in live],
            [sessions[i].cache for i in live],
            sampling.max_new_tokens,
            sampling.temperature,
            sampling.top_p,
            sampling.seed,
            next_turn=lambda j, decoded: next_turn(live[j], decoded),
            keep_cache=False,
        )
        for i in live:
            sessions[i].cache = None

    def _generate_rows(self, sessions: list[ChatSession], sampling: Sampling) -> list[Generation]:
        """One left-padded model.generate call over sessions of similar length."""
        start = time.perf_counter()
        width = max(len(s.token_ids) for s in sessions)
        input_ids = torch.full((len(sessions), width), self.pad_id, dtype=torch.long)
        attention = torch.zeros((len(sessions), width), dtype=torch.long)
        for row, s in enumerate(sessions):
            input_ids[row, width - len(s.token_ids) :] = torch.tensor(s.token_ids)
            attention[row, width - len(s.token_ids) :] = 1
        recorder = _ScaleAndRecord(sampling.temperature)
        processors = LogitsProcessorList([recorder])
        if sampling.temperature > 0 and sampling.top_p < 1.0:
            processors.append(TopPLogitsWarper(sampling.top_p))
        if sampling.seed is not None:
            torch.manual_seed(sampling.seed)
        out = self.model.generate(
            input_ids=input_ids.to(self.device),
            attention_mask=attention.to(self.device),
            do_sample=sampling.temperature > 0,
            temperature=1.0,
            top_k=0,
            top_p=1.0,
            max_new_tokens=sampling.max_new_tokens,
            logits_processor=processors,
            eos_token_id=self.eos_ids,
            pad_token_id=self.pad_id,
        )
        new_tokens = out[:, width:].cpu()
        logprobs = recorder.finish(out[:, -1]).cpu()
        seconds = time.perf_counter() - start
        return [
            self._finish_one(s, new_tokens[row].tolist(), logprobs[row].tolist(), seconds)
            for row, s in enumerate(sessions)
        ]

    def append_reply(self, session: ChatSession, text: str) -> Generation:
        """Teacher forcing: append `text` + end-of-turn as if the policy had sampled it."""
        eos = self.tokenizer.eos_token_id if self.tokenizer.eos_token_id is not None else self.eos_ids[0]
        return self._finish_one(session, self.encode(text) + [eos], [], 0.0)

    def _finish_one(self, session: ChatSession, tokens: list[int], logprobs: list[float], seconds: float) -> Generation:
        cut = next((j + 1 for j, t in enumerate(tokens) if t in self.eos_ids), None)
        finish = "stop" if cut is not None else "length"
        tokens = tokens[:cut] if cut is not None else tokens
        logprobs = logprobs[: len(tokens)]
        body = tokens[:-1] if finish == "stop" else tokens
        text = self.decode(body, skip_special=False)
        session.messages = session.messages + [{"role": "assistant", "content": text}]
        session.token_ids = session.token_ids + tokens
        session.rendered_text = session.rendered_text + self.decode(tokens)
        return Generation(
            text=text,
            token_ids=tokens,
            logprobs=logprobs,
            finish_reason=finish,
            prompt_tokens=len(session.token_ids) - len(tokens),
            seconds=seconds,
        )
