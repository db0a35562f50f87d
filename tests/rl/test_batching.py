"""BatchingPolicy: concurrent callers are merged into shared generate calls, each gets its own replies."""

from __future__ import annotations

import threading
import time

import pytest

from rl.batching import BatchingPolicy
from rl.policy import ChatSession, Generation, Sampling


class SlowEcho:
    """Test double of the Policy contract: replies with each session's first message after a delay
    (standing in for a model call) and records the batch size of every call."""

    name = "echo"
    max_context_tokens = 100

    def __init__(self, delay: float = 0.2, fail: bool = False):
        self.delay, self.fail, self.batches = delay, fail, []

    def start(self, messages):
        return ChatSession(messages=list(messages))

    def extend(self, session, messages):
        session.messages += messages

    def reset_context(self, session, messages):
        session.messages = list(messages)

    def generate(self, sessions, sampling):
        self.batches.append(len(sessions))
        time.sleep(self.delay)
        if self.fail:
            raise RuntimeError("model exploded")
        return [Generation(text=s.messages[0]["content"]) for s in sessions]


def _run_threads(policy, n_threads: int, per_thread: int, sampling=Sampling()):
    out, errors = {}, []

    def worker(t: int):
        sessions = [policy.start([{"role": "user", "content": f"{t}-{i}"}]) for i in range(per_thread)]
        try:
            out[t] = [g.text for g in policy.generate(sessions, sampling)]
        except RuntimeError as exc:
            errors.append(str(exc))

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(n_threads)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout=10)
    return out, errors


def test_concurrent_calls_are_merged_and_answers_go_back_to_their_callers():
    inner = SlowEcho()
    policy = BatchingPolicy(inner, window_s=0.05)
    out, errors = _run_threads(policy, n_threads=6, per_thread=3)
    assert not errors
    assert out == {t: [f"{t}-{i}" for i in range(3)] for t in range(6)}
    assert sum(inner.batches) == 18 and len(inner.batches) < 6 and max(inner.batches) >= 6


def test_batch_size_cap_and_incompatible_sampling_are_not_merged():
    inner = SlowEcho(delay=0.1)
    policy = BatchingPolicy(inner, window_s=0.05, max_sessions=4)
    out, _ = _run_threads(policy, n_threads=4, per_thread=2)
    assert max(inner.batches) <= 4 and sum(inner.batches) == 8 and len(out) == 4

    inner2 = SlowEcho(delay=0.1)
    policy2 = BatchingPolicy(inner2, window_s=0.05)
    results = {}

    def call(temp):
        s = policy2.start([{"role": "user", "content": str(temp)}])
        results[temp] = policy2.generate([s], Sampling(temperature=temp))[0].text

    threads = [threading.Thread(target=call, args=(t,)) for t in (0.5, 1.0)]
    [t.start() for t in threads]
    [t.join(timeout=10) for t in threads]
    assert results == {0.5: "0.5", 1.0: "1.0"} and inner2.batches == [1, 1]


def test_a_failing_model_call_reaches_every_caller_without_hanging():
    policy = BatchingPolicy(SlowEcho(fail=True), window_s=0.05)
    out, errors = _run_threads(policy, n_threads=3, per_thread=1)
    assert out == {} and errors == ["model exploded"] * 3
    with pytest.raises(RuntimeError):
        policy.generate([policy.start([{"role": "user", "content": "x"}])], Sampling())


class StreamEcho(SlowEcho):
    """SlowEcho that takes sampling streams, as the lean transformers backend does."""

    takes_streams = True

    def generate(self, sessions, sampling, streams=None):
        self.streams = streams
        return super().generate(sessions, sampling)


def test_merged_requests_keep_their_own_seeds_as_streams():
    inner = StreamEcho()
    policy = BatchingPolicy(inner, window_s=0.3)
    sessions = {t: [policy.start([{"role": "user", "content": f"{t}-{i}"}]) for i in range(2)] for t in (1, 2)}
    threads = [threading.Thread(target=policy.generate, args=(sessions[t], Sampling(seed=100 + t))) for t in (1, 2)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout=10)
    assert inner.batches == [4]  # one merged call
    assert sorted(inner.streams) == [(101, 0), (101, 1), (102, 0), (102, 1)]  # each request's seed, its own indices


def test_requests_with_equal_contents_stay_two_callers():
    """Two rollouts can ask for the same thing (same first prompt, same seed). Found in a pool report:
    the leader's batch was full, so the other stayed queued, but removing the leader by equality
    took the other out of the queue instead; it later ran again and failed (list.remove)."""
    from rl.batching import _Request

    policy = BatchingPolicy(SlowEcho(), max_sessions=64)
    sessions = [ChatSession(messages=[{"role": "user", "content": "same"}]) for _ in range(40)]
    waiting, leader = _Request(list(sessions), Sampling(seed=7)), _Request(list(sessions), Sampling(seed=7))
    policy._pending = [waiting, leader]
    assert policy._take_batch(leader) == [leader]  # 80 sessions do not fit one call of 64
    assert len(policy._pending) == 1 and policy._pending[0] is waiting


class ServingEcho(SlowEcho):
    """SlowEcho that batches concurrent calls itself, as the lean transformers backend does
    (rl/decode_server.py)."""

    serves_concurrent_calls = True


def test_a_backend_that_batches_concurrent_calls_itself_gets_each_call_unmerged():
    inner = ServingEcho(delay=0.05)
    policy = BatchingPolicy(inner, window_s=0.05)
    out, errors = _run_threads(policy, n_threads=4, per_thread=2)
    assert not errors and out == {t: [f"{t}-{i}" for i in range(2)] for t in range(4)}
    assert inner.batches == [2, 2, 2, 2]
