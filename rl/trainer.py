"""Trainer backends for GRPO updates: plain torch (CPU or one GPU) here, DeepSpeed ZeRO in
rl/deepspeed_trainer.py. Both take TrainSequences and run one update:

1. loss: the clipped surrogate of rl/grpo.py with the rollout/trainer mismatch weight,
   normalised by the mask-1 tokens of the WHOLE update, accumulated over micro-batches;
2. one optimizer step after a global gradient-norm clip.

The update takes one optimizer step per batch, so the "old" policy of the surrogate is the
current weights: its log-probs are this forward's, detached (ratio 1; the clip acts only
across several steps per batch, which this trainer does not take). `old_logprobs` computes
them in a separate pass for checks. The forward and backward run under `settings.dtype`
autocast (bf16 where fast, rl/precision.py) with float32 weights and optimizer state.

Log-probs are computed in position chunks (rl/logprobs.py), so full-vocabulary logits are
never held for a whole sequence. Sequences whose advantage is 0 (an all-equal group) have zero
gradient; they still count in the token normaliser but skip forward and backward.
Each update reports the mismatch weight's distribution over the tokens whose rollout
log-prob is known: mean, share at the cap 2, share below 0.5.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import torch

from rl.grpo import MISMATCH_CAP, clipped_surrogate_loss, mismatch_weight
from rl.logprobs import token_logprobs
from rl.memory import checkpoint_activations, populate_for_writing
from rl.precision import autocast
from rl.train_batch import TrainSequence, collate, micro_batches


@dataclass(frozen=True)
class TrainerSettings:
    lr: float = 1e-5
    weight_decay: float = 0.0
    grad_clip: float = 1.0
    micro_batch: int = 2
    micro_tokens: int | None = None  # micro-batches by padded tokens instead of `micro_batch` sequences
    logprob_chunk: int = 128
    temperature: float = 1.0  # the sampler's temperature: log-probs are of the same distribution
    gradient_checkpointing: bool = False
    lora: bool = False
    lora_rank: int = 16
    dtype: str = "float32"  # compute of forward and backward (autocast); weights stay float32
    optimizer_aside: bool = False  # CPU: AdamW's moments mapped from the saved state between steps (save_state)


def wrap_lora(model, rank: int):
    from peft import LoraConfig, get_peft_model

    return get_peft_model(
        model,
        LoraConfig(r=rank, lora_alpha=2 * rank, lora_dropout=0.0, target_modules="all-linear", task_type="CAUSAL_LM"),
    )


class TorchTrainer:
    """GRPO updates of a Hugging Face causal LM with torch.optim.AdamW."""

    backend = "torch"

    def __init__(self, model, settings: TrainerSettings, pad_id: int):
        self.settings = settings
        self.pad_id = pad_id
        if settings.lora:
            model = wrap_lora(model, settings.lora_rank)
        if settings.gradient_checkpointing:
            checkpoint_activations(model)
        self.model = model
        self.params = [p for p in model.parameters() if p.requires_grad]
        # fused: one kernel per step, without the foreach path's full-size temporaries
        self.optimizer = torch.optim.AdamW(self.params, lr=settings.lr, weight_decay=settings.weight_decay, fused=True)
        self.updates = 0

    @property
    def device(self):
        return next(self.model.parameters()).device

    def _logprobs(self, batch: dict) -> torch.Tensor:
        with autocast(self.device.type, self.settings.dtype):
            return token_logprobs(
                self.model,
                batch["input_ids"].to(self.device),
                batch["attention_mask"].to(self.device),
                chunk=self.settings.logprob_chunk,
                temperature=self.settings.temperature,
                needed=batch["loss_mask"].to(self.device) > 0,
            )  # the loss reads nothing else

    @torch.no_grad()
    def old_logprobs(self, chunks: list[list[TrainSequence]]) -> list[torch.Tensor]:
        self.model.eval()
        return [self._logprobs(collate(c, self.pad_id)).cpu() for c in chunks]

    def update(self, seqs: list[TrainSequence]) -> dict[str, float]:
        """One GRPO update on `seqs`; returns loss, clip fraction, mismatch statistics, tokens and
        seconds per phase."""
        started = time.perf_counter()
        n_tokens = float(sum(s.n_loss_tokens for s in seqs))
        active = [s for s in seqs if s.advantage != 0.0 and s.n_policy_tokens]
        chunks = micro_batches(active, self.settings.micro_batch, self.settings.micro_tokens)
        self.model.train()
        self._zero_grad()
        totals = dict.fromkeys(
            ("loss", "clipped", "tokens", "sequences", "known", "weight", "at_cap", "below_half"), 0.0
        )
        for chunk, weight in self._shard(chunks):
            batch = collate(chunk, self.pad_id)
            with self._recomputing(batch["input_ids"].numel()):
                loss, stats = self._micro_loss(batch, n_tokens)
                self._backward(loss * weight)
            if weight:  # a padding chunk (data-parallel ranks with fewer chunks) counts nothing
                totals["loss"] += loss.item()
                totals["clipped"] += stats["clip_fraction"] * float(batch["loss_mask"].sum().item())
                totals["tokens"] += float(batch["attention_mask"].sum().item())
                totals["sequences"] += len(chunk)
                for key in ("known", "weight", "at_cap", "below_half"):
                    totals[key] += stats[key]
        t_fb = time.perf_counter()
        grad_norm = self._step() if chunks else 0.0  # nothing informative: no step, optimizer state untouched
        self._zero_grad()  # the gradients are spent: their memory (a model's worth) goes back until the next update
        totals = dict(zip(totals, self._sum_over_ranks(list(totals.values()))))
        self.model.eval()
        self.updates += 1
        done = time.perf_counter()
        known = max(totals["known"], 1.0)
        return {
            "loss": totals["loss"],
            "clip_fraction": totals["clipped"] / max(n_tokens, 1.0),
            "grad_norm": grad_norm,
            "policy_tokens": n_tokens,
            "trained_sequences": totals["sequences"],
            "trained_tokens": totals["tokens"],
            "mismatch_tokens": totals["known"],
            "mismatch_mean": totals["weight"] / known if totals["known"] else 1.0,
            "mismatch_at_cap": totals["at_cap"] / known,
            "mismatch_below_half": totals["below_half"] / known,
            "seconds_forward_backward": t_fb - started,
            "seconds_optimizer": done - t_fb,
            "seconds_update": done - started,
        }

    def _shard(self, chunks: list[list[TrainSequence]]) -> list[tuple[list[TrainSequence], float]]:
        """The micro-batches this process trains, each with its loss weight (one process: all, weight 1)."""
        return [(chunk, 1.0) for chunk in chunks]

    def _sum_over_ranks(self, values: list[float]) -> list[float]:
        return values

    def _micro_loss(self, batch: dict, n_tokens: float):
        logp = self._logprobs(batch)
        device = logp.device
        old_lp = logp.detach()  # one optimizer step per batch: the old policy is the current one
        rollout = batch["rollout_logprobs"].to(device)
        mask = batch["loss_mask"].to(device)
        known = ~torch.isnan(rollout) & (mask > 0)
        rollout = torch.where(torch.isnan(rollout), old_lp, rollout)  # unknown -> weight 1
        loss, stats = clipped_surrogate_loss(
            logp, old_lp, batch["advantages"].to(device), mask, rollout_logprobs=rollout, normaliser=n_tokens
        )
        with torch.no_grad():
            w = mismatch_weight(old_lp, rollout)[known]
            stats.update(
                known=float(w.numel()),
                weight=float(w.sum()),
                at_cap=float((w >= MISMATCH_CAP).sum()),
                below_half=float((w < 0.5).sum()),
            )
        return loss, stats

    @contextmanager
    def _recomputing(self, padded_tokens: int) -> Iterator[None]:
        """Activations recomputed in backward for a micro-batch over `micro_tokens` (one sequence
        longer than the budget), so the budget bounds what a forward keeps; as configured otherwise."""
        over = self.settings.micro_tokens is not None and padded_tokens > self.settings.micro_tokens
        if not over or self.settings.gradient_checkpointing:
            yield
            return
        checkpoint_activations(self.model)
        try:
            yield
        finally:
            checkpoint_activations(self.model, enabled=False)

    def _backward(self, loss: torch.Tensor) -> None:
        loss.backward()

    def _zero_grad(self) -> None:
        self.optimizer.zero_grad(set_to_none=True)

    def _step(self) -> float:
        norm = torch.nn.utils.clip_grad_norm_(self.params, self.settings.grad_clip)
        if self.settings.optimizer_aside:  # mapped moments: the step writes every page, copy them in one pass
            populate_for_writing(v for s in self.optimizer.state.values() for v in s.values() if v.dim())
        self.optimizer.step()
        return float(norm)

    # -- resume ----------------------------------------------------------------------------
    def save_state(self, path: Path) -> None:
        """Weights (all trainable state, LoRA included) + optimizer, written atomically. With
        `optimizer_aside`, AdamW's moments then live in the file just written (_map_optimizer)."""
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        torch.save(
            {"model": self.model.state_dict(), "optimizer": self.optimizer.state_dict(), "updates": self.updates}, tmp
        )
        tmp.replace(path)
        if self.settings.optimizer_aside:
            self._map_optimizer(path)

    def load_state(self, path: Path) -> None:
        aside = self.settings.optimizer_aside
        state = torch.load(path, map_location=self.device, weights_only=True, mmap=aside)
        self.model.load_state_dict(state["model"])
        self.updates = int(state["updates"])
        if aside:
            del state  # the weights' pages, read through this mapping, leave with it
            self._map_optimizer(path)
        else:
            self.optimizer.load_state_dict(state["optimizer"])

    def _map_optimizer(self, path: Path) -> None:
        """Replace AdamW's moments (twice the trainable weights in fp32: 1 GiB for SmolLM2-135M) by a
        private (copy-on-write) mapping of the state file that holds the same values. Nothing of it
        is resident until the next optimizer step reads it: rollouts and the next update's forward
        and backward run without the moments, which are idle there. The step writes every page
        (copied in one pass just before it, rl/memory.py populate_for_writing), which makes them
        ordinary memory again, until the next save maps them once more. The mapping keeps the
        file's data alive when the file is replaced or removed (write_progress removes older
        states). CPU only: mapped tensors live in host memory."""
        mapped = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
        self.optimizer.load_state_dict(mapped["optimizer"])

    def export_model(self):
        """A plain (merged) Hugging Face model to save as a registry checkpoint."""
        if self.settings.lora:
            import copy

            return copy.deepcopy(self.model).merge_and_unload()
        return self.model
