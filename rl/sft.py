"""Supervised warm start: protocol demonstrations replayed through the real environment.

At CPU scale the default policy ignores DBBench's protocol (0 of 9 dev tasks solved), so GRPO
would see only zero rewards. As the companion method's cold start does, we first fine-tune on
demonstrations written in H0's protocol: each training task's gold SQL, the REAL observation
the environment returns for it, and the final answer. The replies are appended to the same
token-level sessions the rollout engine uses (teacher forcing), so demonstrations have exactly
the token layout and loss mask of rollouts; the loss covers the assistant's tokens only.

Demonstrations come only from the generated training split, never from dev or standard.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

import torch

from envs.registry import benchmark
from harness_pool.spec import HarnessSpec
from rl.logprobs import token_logprobs
from rl.memory import release_memory
from rl.policy import ChatSession, Generation, Sampling
from rl.precision import autocast
from rl.rollout import RolloutResult, RolloutSpec, run_rollouts


@dataclass
class SftExample:
    bench_task_id: str
    input_ids: list[int]
    loss_mask: list[int]  # 1 on assistant (policy) tokens


def demo_replies(task, rng: random.Random, inspect_prob: float = 0.5) -> list[str]:
    """The scripted assistant turns for one training task in its benchmark's H0 text protocol."""
    return benchmark(task.benchmark).demo_replies(task, rng, inspect_prob)


class ForcedReplies:
    """A Policy whose 'samples' are given texts, appended with teacher forcing by a token-level
    backend; the i-th started session replays the i-th script. Used to record demonstrations
    through the real rollout engine and environment."""

    def __init__(self, inner, scripts: list[list[str]]):
        self.inner, self.name, self.max_context_tokens = inner, f"forced:{inner.name}", inner.max_context_tokens
        self._scripts = list(scripts)
        self._by_session: dict[int, list[str]] = {}
        self._last: dict[int, str] = {}

    def start(self, messages) -> ChatSession:
        session = self.inner.start(messages)
        self._by_session[id(session)] = list(self._scripts.pop(0))
        self._last[id(session)] = ""
        return session

    def extend(self, session, messages) -> None:
        self.inner.extend(session, messages)

    def reset_context(self, session, messages) -> None:
        self.inner.reset_context(session, messages)

    def generate(self, sessions, sampling: Sampling) -> list[Generation]:
        out = []
        for s in sessions:
            script = self._by_session[id(s)]
            text = script.pop(0) if script else self._last[id(s)]  # past the script: repeat its last reply
            self._last[id(s)] = text
            out.append(self.inner.append_reply(s, text))
        return out


def build_demonstrations(
    policy, tasks: list, harness: HarnessSpec, make_env, seed: int = 0, inspect_prob: float = 0.5, max_rounds: int = 15
) -> tuple[list[SftExample], list[RolloutResult]]:
    """Replay scripted demonstrations; keep those the verifier accepts. Returns (examples, all results)."""
    bad = [t.id for t in tasks if t.split != "train"]
    if bad:
        raise ValueError(f"demonstrations come only from the training split, got {bad[:3]}")
    rng = random.Random(seed)
    scripts = [demo_replies(t, rng, inspect_prob) for t in tasks]
    forced = ForcedReplies(policy, scripts)
    results = run_rollouts(forced, [RolloutSpec(t, harness, 0) for t in tasks], make_env, Sampling(), max_rounds)
    examples = []
    for r in results:
        if r.verdict.success:
            ids = [i for t in r.turns for i in t.context_ids + t.completion_ids]
            mask = [m for t in r.turns for m in t.loss_mask]
            examples.append(SftExample(r.bench_task_id, ids, mask))
    return examples, results


def _batch(examples: list[SftExample], pad_id: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Right-padded [B, T] input ids, attention mask and loss mask."""
    width = max(len(e.input_ids) for e in examples)
    ids = torch.full((len(examples), width), pad_id, dtype=torch.long)
    attn = torch.zeros((len(examples), width), dtype=torch.long)
    mask = torch.zeros((len(examples), width), dtype=torch.float32)
    for row, e in enumerate(examples):
        n = len(e.input_ids)
        ids[row, :n] = torch.tensor(e.input_ids)
        attn[row, :n] = 1
        mask[row, :n] = torch.tensor(e.loss_mask, dtype=torch.float32)
    return ids, attn, mask


def masked_nll_sum(model, examples: list[SftExample], pad_id: int) -> tuple[torch.Tensor, float]:
    """(sum of negative log-likelihoods over loss-mask-1 tokens, their count).

    Log-probs come from `token_logprobs`, which projects only the loss tokens to the vocabulary,
    in chunks, so full-vocabulary logits are never held for the whole batch.
    """
    ids, attn, mask = _batch(examples, pad_id)
    weight = mask.to(model.device)
    weight[:, 0] = 0.0  # the first token has no context
    logp = token_logprobs(model, ids.to(model.device), attn.to(model.device), needed=weight > 0)
    return -(logp * weight).sum(), float(weight.sum().item())


@torch.no_grad()
def heldout_loss(model, examples: list[SftExample], pad_id: int, batch_size: int = 2) -> float:
    model.eval()
    total, count = 0.0, 0
    for start in range(0, len(examples), batch_size):
        chunk = examples[start : start + batch_size]
        part_sum, part_count = masked_nll_sum(model, chunk, pad_id)
        total += part_sum.item()
        count += part_count
    return total / max(count, 1)


def train_sft(
    model,
    examples: list[SftExample],
    pad_id: int,
    steps: int,
    batch_size: int = 8,
    lr: float = 1e-4,
    seed: int = 0,
    on_step=None,
    micro_batch_size: int = 2,
    dtype: str = "float32",
) -> list[float]:
    """AdamW on shuffled mini-batches for `steps` updates (cosine decay); returns the loss per step.

    Each update accumulates gradients over micro-batches of `micro_batch_size` demonstrations
    (activation memory scales with it; the update is the same token-weighted mean as one big
    batch). On 2 CPU cores a batch of 8 long demonstrations at once needed over 23 GB. `dtype`
    is the compute of forward and backward (autocast); weights and optimizer stay as they are.
    """
    if not examples:
        raise ValueError("no demonstrations to train on")
    rng = random.Random(seed)
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=lr, weight_decay=0.0, fused=True)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: 0.5 * (1 + math.cos(math.pi * s / max(steps, 1))))
    order: list[int] = []
    losses = []
    model.train()
    for step in range(steps):
        if len(order) < batch_size:
            extra = list(range(len(examples)))
            rng.shuffle(extra)
            order += extra
        chunk = [examples[i] for i in order[:batch_size]]
        order = order[batch_size:]
        # zeroed in place, not freed: the gradients are needed again at once, and freeing and
        # reallocating 0.5 GB every update left the heap ~0.3 GiB higher (docs/results.md)
        optimizer.zero_grad(set_to_none=False)
        n_tokens = sum(sum(e.loss_mask[1:]) for e in chunk) or 1
        total = 0.0
        for start in range(0, len(chunk), micro_batch_size):
            with autocast(model.device.type, dtype):
                part_sum, _ = masked_nll_sum(model, chunk[start : start + micro_batch_size], pad_id)
            (part_sum / n_tokens).backward()
            total += part_sum.item()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        optimizer.step()
        schedule.step()
        losses.append(total / n_tokens)
        release_memory(collect=False)  # freed activations back to the OS: else the heap creeps up every update
        if on_step:
            on_step(step + 1, total / n_tokens)
    model.eval()
    return losses
