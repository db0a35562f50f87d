"""The lean decode loop (rl/decode.py): its sampler, and with the real SmolLM2 that keeping keys
and values across turns changes nothing but the speed."""

from __future__ import annotations

import copy

import pytest
import torch

from rl.decode import sample_tokens
from rl.logprobs import token_logprobs
from rl.policy import Sampling
from tests.doubles import tiny_llama


def test_the_nucleus_keeps_exactly_the_tokens_whose_mass_ranked_above_is_below_top_p():
    probs = torch.tensor([[0.5, 0.3, 0.15, 0.05]])
    logits = torch.log(probs).repeat(4000, 1)
    generator = torch.Generator().manual_seed(0)
    tokens, logps = sample_tokens(logits, 1.0, 0.8, generator)
    counts = torch.bincount(tokens, minlength=4).float() / len(tokens)
    # mass above token 1 is 0.5 < 0.8: kept; above token 2 it is 0.8: cut
    assert counts[2] == 0 and counts[3] == 0
    assert counts[0] == pytest.approx(0.5 / 0.8, abs=0.03) and counts[1] == pytest.approx(0.3 / 0.8, abs=0.03)
    # the recorded log-prob is under softmax(logits / T), before the nucleus
    assert torch.allclose(logps, torch.log(probs[0])[tokens], atol=1e-6)


def test_a_wide_nucleus_falls_back_to_the_full_vocabulary_and_greedy_takes_the_argmax():
    torch.manual_seed(0)
    flat = torch.randn(3, 5000) * 0.01  # the nucleus of an almost flat row needs thousands of tokens
    generator = torch.Generator().manual_seed(1)
    tokens, logps = sample_tokens(flat, 0.7, 0.9, generator)
    assert torch.allclose(logps, torch.log_softmax(flat / 0.7, -1).gather(1, tokens[:, None]).squeeze(1), atol=1e-5)
    drawn = sample_tokens(flat.repeat(400, 1), 1.0, 0.9, generator)[0]
    assert len(set(drawn.tolist())) > 1000  # far beyond the 1,024-token prefilter's share of the mass
    greedy, _ = sample_tokens(flat, 0.0, 0.9, None)
    assert torch.equal(greedy, flat.argmax(-1))


def _episode(policy, sampling_seed: int, keep_cache: bool, temperature: float = 1.0, top_p: float = 0.95):
    """Three turns of two different conversations (two copies of one, as a group starts), with
    observations appended between turns. Returns the sessions, each turn's generations and
    where each reply starts in its session's token sequence."""
    sessions = [policy.start([{"role": "user", "content": "Count the rows of table orders."}]) for _ in range(2)]
    sessions.append(policy.start([{"role": "user", "content": "Which tables exist? Answer with SQL."}]))
    generations, starts = [], []
    for turn in range(3):
        if not keep_cache:
            for s in sessions:
                s.cache = None
        starts.append([len(s.token_ids) for s in sessions])
        generations.append(policy.generate(sessions, Sampling(temperature, top_p, 12, seed=sampling_seed + turn)))
        for s in sessions:
            policy.extend(s, [{"role": "user", "content": f"Observation {turn}: [(42,)]"}])
    return sessions, generations, starts


@pytest.mark.slow
def test_reusing_keys_and_values_across_turns_samples_the_same_tokens(smol_policy):
    """Greedy, so that the comparison is exact: a sampled token can flip between two code paths
    whenever the uniform lands within float rounding of a boundary of the cumulative
    distribution (seen here: two adjacent tail tokens of probability 1e-6). Sampled episodes
    are checked against teacher forcing in the next test."""
    sessions, reused, starts = _episode(smol_policy, 7, keep_cache=True, temperature=0.0)
    # the cache covers everything up to the last reply but its final token (never fed back yet)
    assert [s.cache.length for s in sessions] == [at + len(g.token_ids) - 1 for at, g in zip(starts[-1], reused[-1])]
    _, fresh, _ = _episode(smol_policy, 7, keep_cache=False, temperature=0.0)
    for turn_a, turn_b in zip(reused, fresh):
        for a, b in zip(turn_a, turn_b):
            assert a.token_ids == b.token_ids
            assert max(abs(x - y) for x, y in zip(a.logprobs, b.logprobs)) < 1e-4
    # sampled, the two copies of one conversation are drawn independently
    _, sampled, _ = _episode(smol_policy, 7, keep_cache=True)
    assert any(turn[0].token_ids != turn[1].token_ids for turn in sampled)


@pytest.mark.slow
@pytest.mark.parametrize("dtype,mean_tol,max_tol", [("float32", 1e-4, 1e-3), ("bfloat16", 0.05, 0.5)])
def test_recorded_logprobs_match_teacher_forcing_of_the_rollout_model(smol_policy, dtype, mean_tol, max_tol):
    """The engine's recorded log-probs of a multi-turn episode against one forward pass of the
    same model over each whole token sequence. bf16 differs by rounding between code paths; fp32
    by summation order, which depends on the CPU's kernels (mean 1.7e-5 on an AVX2-only EPYC,
    under 1e-5 with AVX-512). A real misalignment (wrong position or cache slot) is ~0.1-1."""
    policy = copy.copy(smol_policy)
    if dtype != "float32":
        policy.model = copy.deepcopy(smol_policy.model).to(getattr(torch, dtype))
    sessions, generations, starts = _episode(policy, 11, keep_cache=True)
    gaps = []
    with torch.inference_mode():
        for index, session in enumerate(sessions):
            ids = torch.tensor([session.token_ids])
            forced = token_logprobs(policy.model, ids, torch.ones_like(ids))[0].float()
            for turn, at in zip(generations, starts):
                gen, start = turn[index], at[index]
                assert session.token_ids[start : start + len(gen.token_ids)] == gen.token_ids
                gaps.append((forced[start : start + len(gen.token_ids)] - torch.tensor(gen.logprobs)).abs())
    gaps = torch.cat(gaps)
    assert gaps.mean() < mean_tol and gaps.max() < max_tol


def test_a_model_the_lean_engine_cannot_run_is_a_one_line_policy_error_naming_the_fix():
    from transformers import GPT2Config, GPT2LMHeadModel

    from rl.decode import require_supported
    from rl.policy import PolicyError

    tiny = GPT2LMHeadModel(GPT2Config(n_layer=1, n_head=2, n_embd=16, vocab_size=64, n_positions=32))
    with pytest.raises(PolicyError, match=r"not 'gpt2': set policy.engine \(or trainer.engine\) to 'hf'$"):
        require_supported(tiny)


@pytest.mark.parametrize("n", [1, 5])
def test_grouped_attention_equals_attention_with_the_key_value_heads_repeated(n):
    import torch.nn.functional as F

    from rl.decode import folded_mask, grouped_attention

    torch.manual_seed(0)
    b, hq, hkv, d, s = 3, 6, 2, 8, 11
    q, k, v = torch.randn(b, hq, n, d), torch.randn(b, hkv, s, d), torch.randn(b, hkv, s, d)
    slots = torch.tensor([[4], [7], [10]]) + torch.arange(n) - (n - 1)  # each row's own positions
    mask = torch.arange(s)[None, None, None, :] <= slots[:, None, :, None]
    expected = F.scaled_dot_product_attention(
        q, k.repeat_interleave(hq // hkv, 1), v.repeat_interleave(hq // hkv, 1), attn_mask=mask, scale=0.3
    )
    assert torch.allclose(grouped_attention(q, k, v, mask, 0.3), expected, atol=1e-6)
    folded = folded_mask(mask, hq // hkv, q.dtype)  # what a forward builds once for all its layers
    assert folded.shape == (b, 1, hq // hkv * n if n > 1 else 1, s)
    assert torch.equal(grouped_attention(q, k, v, folded, 0.3), grouped_attention(q, k, v, mask, 0.3))


@pytest.mark.parametrize("bias", [False, True])
def test_a_decode_steps_projection_computes_what_the_linear_layer_computes(bias, monkeypatch):
    """rl/decode.py `project`: a few fp32 rows through the compiled kernel, the linear layer's
    result up to rounding; many rows, another module (a LoRA layer's own forward) or
    HS_DECODE_NARROW=0 run the module itself."""
    from rl.decode import KERNEL_ROWS, project

    torch.manual_seed(0)
    linear = torch.nn.Linear(48, 300, bias=bias)
    few, many = torch.randn(5, 1, 48), torch.randn(KERNEL_ROWS + 1, 48)
    assert torch.allclose(project(linear, few), linear(few), atol=1e-5)
    assert project(linear, few).shape == (5, 1, 300) and project(linear, few).is_contiguous()
    assert torch.equal(project(linear, many), linear(many))

    class Adapted(torch.nn.Linear):  # a subclass whose forward adds to the weight's product
        def forward(self, x):
            return super().forward(x) + 1.0

    adapted = Adapted(48, 300)
    assert torch.equal(project(adapted, few), adapted(few))
    monkeypatch.setenv("HS_DECODE_NARROW", "0")
    assert torch.equal(project(linear, few), linear(few))


def test_bf16_projections_take_the_kernel_only_where_it_was_measured_to_pay(monkeypatch):
    """`kernel_projects`: fp32 on CPU always; bf16 where the kernel is built (AVX-512 BF16) and the
    CPU has no AMX, whose oneDNN tiles the kernel has not been measured against, unless
    HS_DECODE_NARROW=all asks for it; never a tensor of another dtype."""
    from rl import decode, decode_kernel

    bf16, fp32 = torch.zeros(4, 4, dtype=torch.bfloat16), torch.zeros(4, 4)
    built = decode_kernel.linear_built(torch.bfloat16)
    assert decode.kernel_projects(fp32) == decode_kernel.available()
    assert not decode.kernel_projects(torch.zeros(4, 4, dtype=torch.float16))
    monkeypatch.setattr(decode, "cpu_has_amx", lambda: False)
    assert decode.kernel_projects(bf16) == built
    monkeypatch.setattr(decode, "cpu_has_amx", lambda: True)
    assert not decode.kernel_projects(bf16)
    assert decode.kernel_projects(fp32) == decode_kernel.available()
    monkeypatch.setenv("HS_DECODE_NARROW", "all")
    assert decode.kernel_projects(bf16) == built


def _observe(policy, session, turn: int, index: int) -> None:
    """What the environment appends after a reply; session 2 has its context replaced once, as
    a history window does."""
    if index == 2 and turn == 1:
        policy.reset_context(session, [{"role": "user", "content": "Start again: list the tables."}])
    else:
        policy.extend(session, [{"role": "user", "content": f"Observation {turn}: [(42,)]"}])


def _continuous_episode(policy, sampling: Sampling, turns: int = 3):
    sessions = [policy.start([{"role": "user", "content": "Count the rows of table orders."}]) for _ in range(2)]
    sessions.append(policy.start([{"role": "user", "content": "Which tables exist? Answer with SQL."}]))
    replies: list[list] = [[] for _ in sessions]

    def on_reply(i, generation) -> bool:
        replies[i].append(generation)
        if len(replies[i]) == turns:
            return False
        _observe(policy, sessions[i], len(replies[i]) - 1, i)
        return True

    policy.generate_continuous(sessions, sampling, on_reply)
    return sessions, replies


@pytest.mark.slow
def test_continuous_batching_samples_what_turn_by_turn_generation_samples(smol_policy):
    """Greedy episodes with different reply lengths (so rows take their next turns at different
    steps) and one context reset: the same tokens and log-probs as one call per turn."""
    greedy = Sampling(0.0, 1.0, 12)
    sessions, replies = _continuous_episode(smol_policy, greedy)
    by_turn = [smol_policy.start(s.messages[:1]) for s in sessions]
    by_turn[2] = smol_policy.start([{"role": "user", "content": "Which tables exist? Answer with SQL."}])
    for turn in range(3):
        generations = smol_policy.generate(by_turn, greedy)
        for i, (a, b) in enumerate(zip(generations, (r[turn] for r in replies))):
            assert a.token_ids == b.token_ids
            assert max(abs(x - y) for x, y in zip(a.logprobs, b.logprobs)) < 1e-4
        if turn < 2:
            for i, session in enumerate(by_turn):
                _observe(smol_policy, session, turn, i)
    assert [s.token_ids for s in sessions] == [s.token_ids for s in by_turn]
    assert len({len(r.token_ids) for r in replies[0] + replies[2]}) > 1  # rows did finish at different steps
    # sampled: the same seed gives the same episodes, whatever the batch did meanwhile
    sampled = Sampling(1.0, 0.95, 12, seed=5)
    first = [[g.token_ids for g in r] for r in _continuous_episode(smol_policy, sampled)[1]]
    again = [[g.token_ids for g in r] for r in _continuous_episode(smol_policy, sampled)[1]]
    assert first == again and first[0] != first[1]


def test_a_sequence_draws_from_its_own_stream_whatever_shares_its_batch():
    """Requests merged into one call (rl/batching.py) name their streams: each draws what it
    would draw alone. A tiny random Llama, whose flat logits leave no near-ties to rounding."""
    from rl.decode import DecodeEngine

    model = tiny_llama()
    engine = DecodeEngine(model, eos_ids=[0], pad_id=0)
    a, b = [5, 9, 12, 7], [3, 3, 8]
    alone_a = engine.generate([a], [None], 10, 1.0, 1.0, seed=5)[0].tokens
    alone_b = engine.generate([b], [None], 10, 1.0, 1.0, seed=None, streams=[(9, 1)])[0].tokens
    merged = engine.generate([b, a], [None, None], 10, 1.0, 1.0, seed=None, streams=[(9, 1), (5, 0)])
    assert [merged[1].tokens, merged[0].tokens] == [alone_a, alone_b]
    other = engine.generate([a], [None], 10, 1.0, 1.0, seed=6)[0].tokens
    assert other != alone_a  # the seed does decide the draws


def test_more_sequences_than_rows_wait_for_a_row_and_draw_the_same():
    """With max_rows 2, five continuous episodes take turns in two rows: each finished row serves
    the next waiting sequence, and every episode samples what it samples with a row each."""
    from rl.decode import DecodeEngine

    model = tiny_llama()
    prompts = [[5, 9, 12, 7], [3, 3, 8], [5, 9, 12, 7], [11, 2], [4, 4, 4, 4, 4, 6]]

    def episodes(max_rows: int) -> tuple[list[list[list[int]]], int]:
        engine = DecodeEngine(model, eos_ids=[0], pad_id=0)
        engine.max_rows = max_rows
        forward, widest = engine._forward, [0]

        def counting(ids, slots, kv, rows, width):
            widest[0] = max(widest[0], kv[0].shape[1])  # rows in the key/value buffer
            return forward(ids, slots, kv, rows, width)

        engine._forward = counting
        seqs = [list(p) for p in prompts]
        turns: list[list[list[int]]] = [[] for _ in prompts]

        def next_turn(i, decoded):
            turns[i].append(decoded.tokens)
            if len(turns[i]) == 1 + i % 3:  # episodes of 1, 2 or 3 turns
                return None
            seqs[i] = seqs[i] + decoded.tokens + [17, 18]  # an observation, then the next reply
            return seqs[i]

        engine.run([list(p) for p in prompts], [None] * len(prompts), 6, 1.0, 1.0, seed=3, next_turn=next_turn)
        return turns, widest[0]

    (bounded, rows), (unbounded, all_rows) = episodes(2), episodes(64)
    assert bounded == unbounded and (rows, all_rows) == (2, 5)
    assert [len(t) for t in bounded] == [1, 2, 3, 1, 2]


def _recording_buffer(engine):
    """Wraps engine._forward to record the key/value buffer's (rows, width) at every forward."""
    forward, seen = engine._forward, []

    def recording(ids, slots, kv, rows, width):
        seen.append((kv[0].shape[1], kv[0].shape[3]))
        return forward(ids, slots, kv, rows, width)

    engine._forward = recording
    return seen


def test_a_key_value_byte_budget_bounds_the_buffer_and_changes_no_draw():
    """Under a budget of 3 rows x 24 slots, seven sequences of 2-12 tokens take rows only while
    rows x width stays within it (a longer one waits for shorter ones to finish), and each
    samples what it samples with no budget; one sequence wider than the whole budget runs alone."""
    from rl.decode import DecodeEngine

    model = tiny_llama()
    prompts = [[5, 9, 12, 7], [3, 3, 8], list(range(1, 13)), [11, 2], [4, 4, 4, 4, 4, 6], [7, 1], [2] * 10]
    bounded = DecodeEngine(model, eos_ids=[0], pad_id=0)
    slot = bounded.slot_bytes
    bounded.kv_budget = 3 * 24 * slot
    seen = _recording_buffer(bounded)
    got = bounded.generate([list(p) for p in prompts], [None] * len(prompts), 8, 1.0, 1.0, seed=4)
    unbounded = DecodeEngine(model, eos_ids=[0], pad_id=0)
    unbounded.kv_budget = None
    free = _recording_buffer(unbounded)
    want = unbounded.generate([list(p) for p in prompts], [None] * len(prompts), 8, 1.0, 1.0, seed=4)
    assert [d.tokens for d in got] == [d.tokens for d in want]
    assert max(rows * width for rows, width in seen) * slot <= bounded.kv_budget
    assert max(rows for rows, _ in free) == len(prompts) > max(rows for rows, _ in seen)

    bounded.kv_budget = 8 * slot  # narrower than one sequence: it still runs, alone
    seen.clear()
    alone = bounded.generate(
        [list(range(1, 13)), [3, 3, 8]], [None, None], 8, 1.0, 1.0, seed=None, streams=[(4, 2), (4, 1)]
    )
    assert [d.tokens for d in alone] == [want[2].tokens, want[1].tokens]
    assert max(rows for rows, _ in seen) == 1


def test_the_byte_budget_comes_from_hs_kv_cache_gib_with_a_one_line_error(monkeypatch):
    from rl.decode import CPU_KV_BUDGET_GIB, kv_budget_bytes
    from rl.policy import PolicyError

    monkeypatch.delenv("HS_KV_CACHE_GIB", raising=False)
    assert kv_budget_bytes(torch.device("cpu")) == int(CPU_KV_BUDGET_GIB * 2**30)
    assert kv_budget_bytes(torch.device("meta")) is None  # not a CPU: max_rows alone bounds it
    monkeypatch.setenv("HS_KV_CACHE_GIB", "0.5")
    assert kv_budget_bytes(torch.device("cpu")) == 2**29
    monkeypatch.setenv("HS_KV_CACHE_GIB", "0")
    assert kv_budget_bytes(torch.device("cpu")) is None
    for bad in ("lots", "-1", "inf", "nan"):
        monkeypatch.setenv("HS_KV_CACHE_GIB", bad)
        with pytest.raises(PolicyError, match=f"HS_KV_CACHE_GIB='{bad}' is not a number of GiB"):
            kv_budget_bytes(torch.device("cpu"))


def test_under_a_byte_budget_a_turn_that_would_widen_the_buffer_waits_and_draws_the_same():
    """Continuous episodes of 1-3 turns whose contexts grow every turn, under a budget of 3 rows x
    30 slots: a row whose next turn would widen the buffer past it waits for finished rows to be
    dropped, so rows x width never passes the budget, and every episode samples what it samples
    with no budget."""
    from rl.decode import DecodeEngine

    model = tiny_llama()
    prompts = [[5, 9, 12, 7], [3, 3, 8], [5, 9, 12, 7], [11, 2], [4, 4, 4, 4, 4, 6], [7, 1, 2]]

    def episodes(budget_slots: int | None):
        engine = DecodeEngine(model, eos_ids=[0], pad_id=0)
        slot = engine.slot_bytes
        engine.kv_budget = budget_slots * slot if budget_slots else None
        seen = _recording_buffer(engine)
        seqs = [list(p) for p in prompts]
        turns: list[list[list[int]]] = [[] for _ in prompts]

        def next_turn(i, decoded):
            turns[i].append(decoded.tokens)
            if len(turns[i]) == 1 + i % 3:
                return None
            seqs[i] = seqs[i] + decoded.tokens + [17, 18, 19, 20]  # a longer observation every turn
            return seqs[i]

        engine.run([list(p) for p in prompts], [None] * len(prompts), 6, 1.0, 1.0, seed=3, next_turn=next_turn)
        return turns, max(rows * width for rows, width in seen), max(width for _, width in seen)

    (bounded, peak, width), (free, free_peak, _) = episodes(3 * 30), episodes(None)
    assert bounded == free and [len(t) for t in bounded] == [1, 2, 3, 1, 2, 3]
    assert peak <= 3 * 30 < free_peak and width > 20  # the episodes did grow past their first width
