"""Continuous batching across threads: one decode loop serves every concurrent generate call.

Rollout groups run in worker threads (Prefect's thread task runner), each stepping its own
episodes turn by turn. Merged per turn (rl/batching.py), every group waits for the slowest reply
of the merged batch, and the batch drains to a few rows before the next one starts. Here one
thread owns the decode loop (`DecodeEngine.serve`): a call's sequences take rows as soon as rows
are free, and each call returns as soon as its own replies are complete, while the other calls'
rows keep decoding. A call's K rollouts of one task at their first turn are prefilled once.

Draws: each sequence samples from its own stream (the call's (seed, index)), as in a merged call,
so a group draws the same uniforms whichever calls share its steps. Calls with other sampling
settings (temperature, top-p, reply length) wait until the running ones drain (first come, first
served). A failing step fails the calls whose sequences were in it; queued calls still run.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from rl.decode import Decoded, DecodeEngine, KVCache


@dataclass(eq=False)
class _Call:
    key: tuple[int, float, float]  # max_new_tokens, temperature, top_p
    results: list[Decoded | None]
    left: int
    error: BaseException | None = None
    done: threading.Event = field(default_factory=threading.Event)


@dataclass
class _Item:
    ticket: int
    sequence: list[int]
    cache: KVCache | None
    stream: tuple[int, int] | None
    call: _Call
    index: int


class DecodeServer:
    """Serves `decode` calls from any number of threads with one continuously batched loop."""

    def __init__(self, engine: DecodeEngine):
        self.engine = engine
        self._lock = threading.Lock()
        self._queue: list[_Item] = []
        self._in_flight: dict[int, _Item] = {}
        self._tickets = itertools.count()
        self._running = False
        self.loops = 0  # serve loops started: one per spell of work (and one per sampling setting)

    def decode(
        self,
        sequences: list[list[int]],
        caches: list[KVCache | None],
        max_new_tokens: int,
        temperature: float,
        top_p: float,
        streams: list[tuple[int, int] | None],
    ) -> list[Decoded]:
        """Each sequence's reply (with its grown cache), once all of this call's are complete."""
        if not sequences:
            return []
        call = _Call((max_new_tokens, temperature, top_p), [None] * len(sequences), len(sequences))
        with self._lock:
            for i, (sequence, cache, stream) in enumerate(zip(sequences, caches, streams, strict=True)):
                self._queue.append(_Item(next(self._tickets), sequence, cache, stream, call, i))
            if not self._running:
                self._running = True
                threading.Thread(target=self._loop, name="decode-server", daemon=True).start()
        call.done.wait()
        if call.error is not None:
            raise call.error
        return call.results  # type: ignore[return-value]

    def _loop(self) -> None:
        while True:
            with self._lock:
                if not self._queue:
                    self._running = False
                    return
                key = self._queue[0].call.key
                self.loops += 1
            try:
                self.engine.serve(*key, take=lambda room: self._take(key, room), deliver=self._deliver)
            except BaseException as exc:  # noqa: BLE001 - every caller in the failed step hears of it, none hangs
                self._fail_in_flight(exc, key)

    def _take(self, key: tuple, room: Callable[[list[int]], int]) -> list[tuple]:
        """The queued sequences with these sampling settings that fit the engine's rows and
        key/value budget now (room(lengths): how many of them), first come first served."""
        taken = []
        with self._lock:
            head = list(itertools.takewhile(lambda item: item.call.key == key, self._queue))
            fits = room([len(item.sequence) for item in head if item.call.error is None]) if head else 0
            while self._queue and len(taken) < fits and self._queue[0].call.key == key:
                item = self._queue.pop(0)
                if item.call.error is not None:  # its call already failed: nobody waits for it
                    continue
                self._in_flight[item.ticket] = item
                taken.append((item.ticket, item.sequence, item.cache, item.stream))
        return taken

    def _deliver(self, ticket: int, decoded: Decoded) -> None:
        with self._lock:
            item = self._in_flight.pop(ticket)
            call = item.call
            call.results[item.index] = decoded
            call.left -= 1
            finished = call.left == 0 and call.error is None
        if finished:
            call.done.set()

    def _fail_in_flight(self, exc: BaseException, key: tuple) -> None:
        """The calls with sequences in the failed loop hear of it. If it failed before taking any
        (nothing in flight), the first queued call it was to serve does: else the loop would
        start again on the same queue forever, its callers waiting."""
        with self._lock:
            calls = {item.call for item in self._in_flight.values()}
            if not calls and self._queue and self._queue[0].call.key == key:
                calls = {self._queue[0].call}
            self._in_flight.clear()
            self._queue = [item for item in self._queue if item.call not in calls]
            for call in calls:
                call.error = exc
        for call in calls:
            call.done.set()
