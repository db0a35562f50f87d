"""Cross-group batching: concurrent rollout groups share one generate call per round trip.

Each rollout group is its own Prefect task, so several groups run in worker threads at once.
Sampling cost on CPU and GPU grows far slower than batch size (docs/method.md §7: 1 sequence 10 tok/s,
32 sequences 84 tok/s on 2 cores), so instead of each group calling the model alone, callers
queue their sessions; whichever caller finds the model idle becomes the leader, waits a few
milliseconds for others to join, and runs one batched call for every compatible request.

Seeds: with the lean engine each request keeps its own sampling streams (its seed, and each
session's place in the request), so a group draws the same uniforms whichever groups share its
batch. Its texts can still differ in rare tokens, because a row's logits change by rounding
with the batch's shape. Backends without streams sample a merged batch from the leader's seed.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

from rl.policy import ChatSession, Generation, Policy, Sampling


@dataclass(eq=False)  # identity: two requests with the same sessions and seed are still two callers
class _Request:
    sessions: list[ChatSession]
    sampling: Sampling
    result: list[Generation] | None = None
    error: BaseException | None = None
    done: bool = False
    key: tuple = field(init=False)

    def __post_init__(self) -> None:
        s = self.sampling
        self.key = (s.temperature, s.top_p, s.max_new_tokens)


class BatchingPolicy:
    """Wraps a Policy so that generate calls from several threads are merged into one."""

    continuous_batching = False  # merged per turn; the wrapped policy's continuous mode would bypass the merge
    takes_streams = False  # its generate merges requests itself

    def __init__(self, inner: Policy, window_s: float = 0.02, max_sessions: int = 64):
        self.inner = inner
        self.name = inner.name
        self.max_context_tokens = inner.max_context_tokens
        self.window_s = window_s
        self.max_sessions = max_sessions
        self._cond = threading.Condition()
        self._pending: list[_Request] = []
        self._busy = False
        # tokenizers are not guaranteed thread-safe: one lock with the backend's own where it has one
        self._text_lock = getattr(inner, "text_lock", None) or threading.Lock()
        self.calls = 0
        self.merged_requests = 0

    def __getattr__(self, name: str):  # model, tokenizer, ... of the wrapped backend
        return getattr(self.inner, name)

    def start(self, messages):
        with self._text_lock:
            return self.inner.start(messages)

    def extend(self, session, messages):
        with self._text_lock:
            self.inner.extend(session, messages)

    def reset_context(self, session, messages):
        with self._text_lock:
            self.inner.reset_context(session, messages)

    def generate(self, sessions: list[ChatSession], sampling: Sampling) -> list[Generation]:
        if getattr(self.inner, "serves_concurrent_calls", False):  # it batches across threads itself
            return self.inner.generate(sessions, sampling)
        request = _Request(list(sessions), sampling)
        with self._cond:
            self._pending.append(request)
            while not request.done and self._busy:
                self._cond.wait()
            if request.done:
                return self._outcome(request)
            self._busy = True
        try:
            time.sleep(self.window_s)
            batch = self._take_batch(request)
            self._run(batch)
        finally:
            with self._cond:
                self._busy = False
                self._cond.notify_all()
        return self._outcome(request)

    def _take_batch(self, leader: _Request) -> list[_Request]:
        with self._cond:
            batch, size = [leader], len(leader.sessions)
            for req in list(self._pending):
                if req is leader or req.key != leader.key or size + len(req.sessions) > self.max_sessions:
                    continue
                batch.append(req)
                size += len(req.sessions)
            for req in batch:
                self._pending.remove(req)
            return batch

    def _run(self, batch: list[_Request]) -> None:
        sessions = [s for req in batch for s in req.sessions]
        extra = {}
        if getattr(self.inner, "takes_streams", False):  # each request draws as if it ran alone
            extra["streams"] = [
                None if req.sampling.seed is None else (req.sampling.seed, j)
                for req in batch
                for j in range(len(req.sessions))
            ]
        try:
            with self._text_lock:
                outputs = self.inner.generate(sessions, batch[0].sampling, **extra)
        except BaseException as exc:  # noqa: BLE001 - every waiting caller sees the failure, not a hang
            for req in batch:
                req.error, req.done = exc, True
            return
        self.calls += 1
        self.merged_requests += len(batch)
        start = 0
        for req in batch:
            req.result = outputs[start : start + len(req.sessions)]
            start += len(req.sessions)
            req.done = True

    @staticmethod
    def _outcome(request: _Request) -> list[Generation]:
        if request.error is not None:
            raise request.error
        return request.result or []
