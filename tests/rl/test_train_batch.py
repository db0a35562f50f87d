"""Trajectories -> training sequences: exact token layout, loss mask, rollout log-probs."""

import math
from types import SimpleNamespace

import torch

from rl.train_batch import collate, micro_batches, sequences_from_turns


def turn(ctx, comp, logps=None, events=None):
    return SimpleNamespace(
        context_ids=ctx,
        completion_ids=comp,
        completion_logprobs=logps if logps is not None else [],
        hook_events=events or [],
    )


def test_turns_concatenate_with_policy_tokens_masked_in():
    turns = [turn([1, 2, 3], [4, 5], [-0.1, -0.2]), turn([6], [7, 8, 9], [-0.3, -0.4, -0.5])]
    (seq,) = sequences_from_turns(turns, advantage=0.7)
    assert seq.input_ids == [1, 2, 3, 4, 5, 6, 7, 8, 9]
    assert seq.loss_mask == [0, 0, 0, 1, 1, 0, 1, 1, 1]
    assert seq.n_policy_tokens == 5 and seq.advantage == 0.7
    assert [x for x in seq.rollout_logprobs if not math.isnan(x)] == [-0.1, -0.2, -0.3, -0.4, -0.5]
    assert all(math.isnan(seq.rollout_logprobs[i]) for i in (0, 1, 2, 5))


def test_teacher_forced_turns_have_unknown_rollout_logprobs():
    (seq,) = sequences_from_turns([turn([1], [2, 3], [])], advantage=1.0)
    assert math.isnan(seq.rollout_logprobs[1]) and math.isnan(seq.rollout_logprobs[2])


def test_a_context_reset_starts_a_new_sequence():
    turns = [turn([1, 2], [3]), turn([1, 2, 9], [4], events=[{"event": "context_reset", "kept_messages": 3}])]
    first, second = sequences_from_turns(turns, advantage=-1.0)
    assert first.input_ids == [1, 2, 3] and second.input_ids == [1, 2, 9, 4]
    assert second.loss_mask == [0, 0, 0, 1] and second.advantage == -1.0


def test_collate_pads_right_and_never_trains_on_the_first_position():
    seqs = sequences_from_turns([turn([], [5, 6, 7], [-1.0, -1.0, -1.0])], 1.0) + sequences_from_turns(
        [turn([1], [2], [-2.0])], -1.0
    )
    b = collate(seqs, pad_id=0)
    assert b["input_ids"].tolist() == [[5, 6, 7], [1, 2, 0]]
    assert b["attention_mask"].tolist() == [[1, 1, 1], [1, 1, 0]]
    assert b["loss_mask"].tolist() == [[0.0, 1.0, 1.0], [0.0, 1.0, 0.0]]
    assert b["advantages"].tolist() == [1.0, -1.0]
    assert torch.isnan(b["rollout_logprobs"][1, 2])


def test_micro_batches_group_similar_lengths():
    seqs = [sequences_from_turns([turn([1] * n, [2])], 1.0)[0] for n in (9, 1, 5, 2)]
    chunks = micro_batches(seqs, 2)
    assert [[len(s.input_ids) for s in c] for c in chunks] == [[2, 3], [6, 10]]
