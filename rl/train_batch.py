"""From recorded trajectories to the tensors of one GRPO update (pure; no database or Prefect).

A trajectory's turns hold, in order, the context tokens the harness or environment added
(loss mask 0) and the tokens the policy sampled (loss mask 1) with the rollout engine's
log-probs. Concatenated they are exactly the token sequence the model saw, so the trainer
scores the same tokens the sampler produced. A turn whose hook events say the context was
reset (a history window) starts a new sequence, because the model saw a fresh prompt there.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from rl.rollout import CONTEXT_RESET


@dataclass
class TrainSequence:
    """One token sequence of a rollout with its group-relative advantage.

    input_ids, loss_mask, rollout_logprobs: [T] aligned lists; rollout_logprobs is NaN where the
    engine recorded none (masked tokens, teacher-forced text).
    """

    input_ids: list[int]
    loss_mask: list[int]
    rollout_logprobs: list[float]
    advantage: float
    group_key: str = ""

    @property
    def n_policy_tokens(self) -> int:
        return sum(self.loss_mask)

    @property
    def n_loss_tokens(self) -> int:
        """Mask-1 tokens that get a loss term (position 0 has no context; collate masks it)."""
        return sum(self.loss_mask[1:])


def sequences_from_turns(turns, advantage: float, group_key: str = "") -> list[TrainSequence]:
    """Turns (objects with context_ids, completion_ids, completion_logprobs, hook_events) ->
    one sequence, or several when the context was reset part-way."""
    out: list[TrainSequence] = []
    ids: list[int] = []
    mask: list[int] = []
    logps: list[float] = []
    for turn in turns:
        events = turn.hook_events or []
        if ids and any(e.get("event") == CONTEXT_RESET for e in events if isinstance(e, dict)):
            out.append(TrainSequence(ids, mask, logps, advantage, group_key))
            ids, mask, logps = [], [], []
        completion = list(turn.completion_ids)
        recorded = list(turn.completion_logprobs or [])
        if len(recorded) != len(completion):
            recorded = [math.nan] * len(completion)
        ids += list(turn.context_ids) + completion
        mask += [0] * len(turn.context_ids) + [1] * len(completion)
        logps += [math.nan] * len(turn.context_ids) + recorded
    if ids:
        out.append(TrainSequence(ids, mask, logps, advantage, group_key))
    return out


def collate(seqs: list[TrainSequence], pad_id: int) -> dict[str, torch.Tensor]:
    """Right-padded batch: input_ids [B, T] long, attention_mask [B, T] long, loss_mask [B, T]
    float, rollout_logprobs [B, T] float (NaN where unknown), advantages [B] float.

    The first position is never a loss token (it has no context to be predicted from)."""
    width = max(len(s.input_ids) for s in seqs)
    b = len(seqs)
    ids = torch.full((b, width), pad_id, dtype=torch.long)
    attn = torch.zeros((b, width), dtype=torch.long)
    mask = torch.zeros((b, width), dtype=torch.float32)
    rollout = torch.full((b, width), math.nan, dtype=torch.float32)
    for row, s in enumerate(seqs):
        n = len(s.input_ids)
        ids[row, :n] = torch.tensor(s.input_ids)
        attn[row, :n] = 1
        mask[row, :n] = torch.tensor(s.loss_mask, dtype=torch.float32)
        rollout[row, :n] = torch.tensor(s.rollout_logprobs, dtype=torch.float32)
    mask[:, 0] = 0.0
    return {
        "input_ids": ids,
        "attention_mask": attn,
        "loss_mask": mask,
        "rollout_logprobs": rollout,
        "advantages": torch.tensor([s.advantage for s in seqs], dtype=torch.float32),
    }


def micro_batches(seqs: list[TrainSequence], size: int, max_tokens: int | None = None) -> list[list[TrainSequence]]:
    """Consecutive chunks after sorting by length, so padding stays small: `size` sequences each,
    or with `max_tokens` as many as fit in that many padded tokens (rows x the longest), so a
    forward's activations are bounded whatever the lengths; a longer sequence trains alone."""
    ordered = sorted(seqs, key=lambda s: len(s.input_ids))
    if max_tokens is None:
        return [ordered[i : i + size] for i in range(0, len(ordered), size)]
    chunks: list[list[TrainSequence]] = []
    for seq in ordered:  # ascending: the newest sequence is the chunk's longest
        if chunks and (len(chunks[-1]) + 1) * len(seq.input_ids) <= max_tokens:
            chunks[-1].append(seq)
        else:
            chunks.append([seq])
    return chunks
