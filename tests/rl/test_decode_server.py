"""The decode server (rl/decode_server.py): generate calls from many threads share one continuously
batched loop, each call draws what it draws alone and returns when its own replies are complete.
A tiny random Llama, whose flat logits leave no near-ties to rounding."""

from __future__ import annotations

import threading

import pytest

from rl.decode import DecodeEngine
from rl.decode_server import DecodeServer
from tests.doubles import tiny_llama

PROMPTS = [[5, 9, 12, 7], [3, 3, 8], [5, 9, 12, 7], [11, 2], [4, 4, 4, 4, 4, 6], [7, 1]]


@pytest.fixture(scope="module")
def model():
    return tiny_llama()


def _alone(model, sequence, cache, stream, max_new=8, temperature=1.0, eos=0):
    engine = DecodeEngine(model, eos_ids=[eos], pad_id=0)
    return engine.generate([sequence], [cache], max_new, temperature, 1.0, seed=None, streams=[stream])[0]


def _in_threads(calls):
    """Runs each zero-argument call in its own thread; their results (or exceptions) in order."""
    out: list = [None] * len(calls)

    def run(i):
        try:
            out[i] = calls[i]()
        except Exception as exc:  # noqa: BLE001 - the test reads it
            out[i] = exc

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(calls))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not any(t.is_alive() for t in threads), "a caller hung"
    return out


def test_calls_from_many_threads_draw_what_each_draws_alone(model):
    """Six callers with two sequences each (one with a cache from an earlier call), through a
    server of 3 rows: sequences wait for rows, take the rows others finish, and each draws the
    tokens it draws alone, with the same grown cache."""
    engine = DecodeEngine(model, eos_ids=[0], pad_id=0)
    engine.max_rows = 3
    server = DecodeServer(engine)
    first = _alone(model, [9, 9, 4], None, (1, 0))
    history = [9, 9, 4] + first.tokens + [17, 18]
    calls = [
        [
            (PROMPTS[i], None, (10 + i, 0)),
            (history if i == 2 else PROMPTS[-1 - i], first.cache if i == 2 else None, (10 + i, 1)),
        ]
        for i in range(6)
    ]
    served = _in_threads(
        [
            lambda c=c: server.decode([s for s, _, _ in c], [k for _, k, _ in c], 8, 1.0, 1.0, [t for _, _, t in c])
            for c in calls
        ]
    )
    for call, replies in zip(calls, served):
        assert not isinstance(replies, Exception), replies
        for (sequence, cache, stream), reply in zip(call, replies):
            alone = _alone(model, sequence, cache, stream)
            assert reply.tokens == alone.tokens
            assert reply.logprobs == pytest.approx(alone.logprobs, abs=1e-5)
            assert reply.cache.length == alone.cache.length
            assert (reply.cache.tensor - alone.cache.tensor).abs().max() < 1e-5


def test_a_call_joins_a_running_batch_and_the_first_returns_while_it_decodes(model):
    """Call A decodes alone; call B arrives at A's second step and is admitted into new rows of
    the running batch. A returns while B's rows are still decoding (no reply runs into an
    end-of-turn id here, so every reply is 10 tokens and A finishes first); both draw what they
    draw alone, and one serve loop did it all."""
    engine = DecodeEngine(model, eos_ids=[999], pad_id=0)
    server = DecodeServer(engine)
    forward, steps = engine._forward, [0]
    b_queued, a_returned = threading.Event(), threading.Event()
    seen = {}

    def call_b():
        return server.decode([PROMPTS[1], PROMPTS[3], PROMPTS[1]], [None] * 3, 10, 1.0, 1.0, [(2, 0), (2, 1), (2, 2)])

    def gated(ids, slots, kv, rows, width):
        steps[0] += 1
        if steps[0] == 2:  # B queues while A decodes
            threading.Thread(target=lambda: seen.setdefault("b", call_b())).start()
            for _ in range(500):
                if server._queue:
                    break
                b_queued.wait(0.01)
        if len(server._in_flight) == 3 and not a_returned.is_set():  # A delivered, B's 3 rows decoding
            a_returned.wait(10)  # hold B's rows until A's caller has looked
        return forward(ids, slots, kv, rows, width)

    engine._forward = gated

    def call_a():
        replies = server.decode([PROMPTS[0]], [None], 10, 1.0, 1.0, [(1, 0)])
        seen["a"], seen["b_rows_decoding"] = replies, len(server._in_flight)
        a_returned.set()
        return replies

    (a,) = _in_threads([call_a])
    for _ in range(600):
        if "b" in seen:
            break
        a_returned.wait(0.05)
    assert seen["b_rows_decoding"] == 3  # A came back while all of B's rows were in the batch
    assert a[0].tokens == _alone(model, PROMPTS[0], None, (1, 0), max_new=10, eos=999).tokens and len(a[0].tokens) == 10
    for sequence, stream, reply in zip([PROMPTS[1], PROMPTS[3], PROMPTS[1]], [(2, 0), (2, 1), (2, 2)], seen["b"]):
        assert reply.tokens == _alone(model, sequence, None, stream, max_new=10, eos=999).tokens
    assert server.loops == 1


def test_calls_with_other_sampling_settings_wait_their_turn_and_stay_exact(model):
    server = DecodeServer(DecodeEngine(model, eos_ids=[0], pad_id=0))
    settings = [(8, 1.0), (5, 0.7), (8, 1.0), (5, 0.0)]
    served = _in_threads(
        [
            lambda i=i, n=n, t=t: server.decode([PROMPTS[i]], [None], n, t, 1.0, [(i, 0)])
            for i, (n, t) in enumerate(settings)
        ]
    )
    for i, ((n, t), replies) in enumerate(zip(settings, served)):
        assert replies[0].tokens == _alone(model, PROMPTS[i], None, (i, 0), max_new=n, temperature=t).tokens


def test_a_failing_step_fails_the_calls_in_it_and_the_server_serves_the_next(model):
    engine = DecodeEngine(model, eos_ids=[999], pad_id=0)
    server = DecodeServer(engine)
    logits, calls = engine._logits, [0]

    def failing(hidden):
        calls[0] += 1
        if calls[0] == 3:
            raise RuntimeError("out of memory in the step")
        return logits(hidden)

    engine._logits = failing
    served = _in_threads(
        [
            lambda i=i: server.decode([PROMPTS[i], PROMPTS[i + 1]], [None, None], 6, 1.0, 1.0, [(i, 0), (i, 1)])
            for i in range(3)
        ]
    )
    failed = [r for r in served if isinstance(r, RuntimeError)]
    assert failed and all(str(r) == "out of memory in the step" for r in failed)
    again = server.decode([PROMPTS[0]], [None], 6, 1.0, 1.0, [(0, 0)])
    assert again[0].tokens == _alone(model, PROMPTS[0], None, (0, 0), max_new=6, eos=999).tokens
    assert not server._in_flight and not server._queue


def test_a_loop_that_fails_before_taking_anything_fails_the_waiting_call_and_does_not_spin(model):
    """A serving loop that raises while nothing is in flight (here: measuring room for the queue)
    fails the queued calls it was to serve, instead of restarting on them forever with their
    callers waiting; the server then serves the next call."""
    engine = DecodeEngine(model, eos_ids=[999], pad_id=0)
    server = DecodeServer(engine)
    serve = engine.serve

    def broken(*args, take, deliver):
        take(lambda lengths: 1 // 0)  # the room measure raises before any item is taken

    engine.serve = broken
    failed = _in_threads([lambda: server.decode([PROMPTS[0]], [None], 6, 1.0, 1.0, [(0, 0)])])
    assert isinstance(failed[0], ZeroDivisionError) and server.loops == 1
    engine.serve = serve
    again = server.decode([PROMPTS[1]], [None], 6, 1.0, 1.0, [(0, 1)])
    assert again[0].tokens == _alone(model, PROMPTS[1], None, (0, 1), max_new=6, eos=999).tokens
    assert not server._in_flight and not server._queue


def test_the_buffer_gives_back_the_width_of_a_long_sequence_once_it_is_done(model):
    """A serving batch lives on while sequences come and go: once the long one is done, the
    short ones' rows keep only the slots they can still need, and draw the same."""
    engine = DecodeEngine(model, eos_ids=[999], pad_id=0)
    forward, widths = engine._forward, []

    def recording(ids, slots, kv, rows, width):
        widths.append(kv[0].shape[3])
        return forward(ids, slots, kv, rows, width)

    engine._forward = recording
    long, short = list(range(1, 60)), [3, 3, 8]
    seqs, turns = [long, short], [[], []]

    def next_turn(i, decoded):
        turns[i].append(decoded.tokens)
        if i == 0 or len(turns[1]) == 3:
            return None
        seqs[1] = seqs[1] + decoded.tokens + [17, 18]
        return seqs[1]

    engine.run([long, short], [None, None], 4, 1.0, 1.0, seed=3, next_turn=next_turn)
    assert max(widths) >= 59 + 4 and widths[-1] <= (59 + 4) // 2
    alone, seq = [], list(short)

    def next_alone(i, decoded):
        nonlocal seq
        alone.append(decoded.tokens)
        if len(alone) == 3:
            return None
        seq = seq + decoded.tokens + [17, 18]
        return seq

    DecodeEngine(model, eos_ids=[999], pad_id=0).run(
        [short], [None], 4, 1.0, 1.0, seed=None, next_turn=next_alone, streams=[(3, 1)]
    )
    assert turns[1] == alone


def _buffer_shapes(engine):
    """Records the key/value buffer's (rows, width) at every forward of `engine`; the list."""
    forward, seen = engine._forward, []

    def recording(ids, slots, kv, rows, width):
        seen.append((kv[0].shape[1], kv[0].shape[3]))
        return forward(ids, slots, kv, rows, width)

    engine._forward = recording
    return seen


def test_the_server_takes_sequences_only_while_they_fit_the_byte_budget(model):
    """Six callers through a server whose budget holds 3 rows of 24 slots: queued sequences take
    rows only while rows x width stays within it, and each draws what it draws alone."""
    engine = DecodeEngine(model, eos_ids=[0], pad_id=0)
    slot = engine.slot_bytes
    engine.kv_budget = 3 * 24 * slot
    seen = _buffer_shapes(engine)
    server = DecodeServer(engine)
    calls = [(PROMPTS[i], (20 + i, 0)) for i in range(len(PROMPTS))]
    got = _in_threads([lambda p=p, s=s: server.decode([p], [None], 8, 1.0, 1.0, [s])[0].tokens for p, s in calls])
    assert got == [_alone(model, p, None, s).tokens for p, s in calls]
    assert max(rows * width for rows, width in seen) * slot <= engine.kv_budget


def test_a_long_sequence_after_a_batch_finishes_gets_a_buffer_within_the_budget(model):
    """Three short sequences fill the 3 rows of a budget of 3 x 24 slots; a 33-token sequence
    (41 slots: alone it fits, beside the finished rows it does not) waits and, once no row is
    live, takes a buffer of its own instead of widening the finished rows with it. It draws what
    it draws alone."""
    engine = DecodeEngine(model, eos_ids=[999], pad_id=0)  # no early end: every reply takes 8 tokens
    slot = engine.slot_bytes
    engine.kv_budget = 3 * 24 * slot
    seen = _buffer_shapes(engine)
    long = list(range(1, 34))
    queue = [(0, PROMPTS[0], None, (30, 0)), (1, PROMPTS[1], None, (30, 1)), (2, PROMPTS[3], None, (30, 2))]
    queue.append((3, long, None, (30, 3)))
    got: dict[int, list[int]] = {}

    def take(room):
        n = room([len(sequence) for _, sequence, _, _ in queue])
        taken = queue[:n]
        del queue[:n]
        return taken

    engine.serve(8, 1.0, 1.0, take=take, deliver=lambda ticket, decoded: got.__setitem__(ticket, decoded.tokens))
    assert sorted(got) == [0, 1, 2, 3]
    assert got[3] == _alone(model, long, None, (30, 3), eos=999).tokens
    assert max(rows * width for rows, width in seen) * slot <= engine.kv_budget
