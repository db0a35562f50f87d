"""Trainer backends for GRPO updates: plain torch (CPU or one GPU) here, DeepSpeed ZeRO in
rl/deepspeed_trainer.py. Both take TrainSequences and run one update:

1. old log-probs: the trainer's log-probs of the sampled tokens before the update (no grad);
2. loss: the clipped surrogate of rl/grpo.py with the rollout/trainer mismatch weight,
   normalised by the mask-1 tokens of the WHOLE update, accumulated over micro-batches;
3. one optimizer step after a global gradient-norm clip.

Log-probs are computed in position chunks (rl/logprobs.py), so full-vocabulary logits are
never held for a whole sequence. Sequences whose advantage is 0 (an all-equal group) have zero
gradient; they still count in the token normaliser but skip forward and backward.
The model is shared with the rollout policy (updated in place), so the next rollouts use the
new weights without a copy.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import torch

from rl.grpo import clipped_surrogate_loss
from rl.logprobs import token_logprobs
from rl.train_batch import TrainSequence, collate, micro_batches


@dataclass(frozen=True)
class TrainerSettings:
    lr: float = 1e-5
    weight_decay: float = 0.0
    grad_clip: float = 1.0
    micro_batch: int = 2
    logprob_chunk: int = 128
    temperature: float = 1.0  # the sampler's temperature: log-probs are of the same distribution
    gradient_checkpointing: bool = False
    lora: bool = False
    lora_rank: int = 16


def wrap_lora(model, rank: int):
    from peft import LoraConfig, get_peft_model

    return get_peft_model(model, LoraConfig(r=rank, lora_alpha=2 * rank, lora_dropout=0.0,
                                            target_modules="all-linear", task_type="CAUSAL_LM"))


class TorchTrainer:
    """GRPO updates of a Hugging Face causal LM with torch.optim.AdamW."""

    backend = "torch"

    def __init__(self, model, settings: TrainerSettings, pad_id: int):
        self.settings = settings
        self.pad_id = pad_id
        if settings.lora:
            model = wrap_lora(model, settings.lora_rank)
        if settings.gradient_checkpointing:
            model.gradient_checkpointing_enable()
        self.model = model
        self.params = [p for p in model.parameters() if p.requires_grad]
        self.optimizer = torch.optim.AdamW(self.params, lr=settings.lr, weight_decay=settings.weight_decay)
        self.updates = 0

    @property
    def device(self):
        return next(self.model.parameters()).device

    def _logprobs(self, batch: dict) -> torch.Tensor:
        return token_logprobs(self.model, batch["input_ids"].to(self.device), batch["attention_mask"].to(self.device),
                              chunk=self.settings.logprob_chunk, temperature=self.settings.temperature)

    @torch.no_grad()
    def old_logprobs(self, chunks: list[list[TrainSequence]]) -> list[torch.Tensor]:
        self.model.eval()
        return [self._logprobs(collate(c, self.pad_id)).cpu() for c in chunks]

    def update(self, seqs: list[TrainSequence]) -> dict[str, float]:
        """One GRPO update on `seqs`; returns loss, clip fraction, tokens and seconds per phase."""
        started = time.perf_counter()
        n_tokens = float(sum(s.n_loss_tokens for s in seqs))
        active = [s for s in seqs if s.advantage != 0.0 and s.n_policy_tokens]
        chunks = micro_batches(active, self.settings.micro_batch)
        mine = self._shard(chunks)
        old = self.old_logprobs([chunk for chunk, _ in mine])
        t_old = time.perf_counter()
        self.model.train()
        self._zero_grad()
        loss_total, clip_weighted, trained_tokens, trained_seqs = 0.0, 0.0, 0.0, 0.0
        for (chunk, weight), old_lp in zip(mine, old):
            batch = collate(chunk, self.pad_id)
            loss, stats = self._micro_loss(batch, old_lp, n_tokens)
            self._backward(loss * weight)
            if weight:  # a padding chunk (data-parallel ranks with fewer chunks) counts nothing
                loss_total += loss.item()
                clip_weighted += stats["clip_fraction"] * float(batch["loss_mask"].sum().item())
                trained_tokens += float(batch["attention_mask"].sum().item())
                trained_seqs += len(chunk)
        t_fb = time.perf_counter()
        grad_norm = self._step() if chunks else 0.0  # nothing informative: no step, optimizer state untouched
        loss_total, clip_weighted, trained_tokens, trained_seqs = self._sum_over_ranks(
            [loss_total, clip_weighted, trained_tokens, trained_seqs])
        self.model.eval()
        self.updates += 1
        done = time.perf_counter()
        return {"loss": loss_total, "clip_fraction": clip_weighted / max(n_tokens, 1.0), "grad_norm": grad_norm,
                "policy_tokens": n_tokens, "trained_sequences": trained_seqs,
                "trained_tokens": trained_tokens, "seconds_old_logprobs": t_old - started,
                "seconds_forward_backward": t_fb - t_old, "seconds_optimizer": done - t_fb,
                "seconds_update": done - started}

    def _shard(self, chunks: list[list[TrainSequence]]) -> list[tuple[list[TrainSequence], float]]:
        """The micro-batches this process trains, each with its loss weight (one process: all, weight 1)."""
        return [(chunk, 1.0) for chunk in chunks]

    def _sum_over_ranks(self, values: list[float]) -> list[float]:
        return values

    def _micro_loss(self, batch: dict, old_lp: torch.Tensor, n_tokens: float):
        logp = self._logprobs(batch)
        device = logp.device
        old_lp = old_lp.to(device)
        rollout = batch["rollout_logprobs"].to(device)
        rollout = torch.where(torch.isnan(rollout), old_lp, rollout)  # unknown -> weight 1
        return clipped_surrogate_loss(logp, old_lp, batch["advantages"].to(device), batch["loss_mask"].to(device),
                                      rollout_logprobs=rollout, normaliser=n_tokens)

    def _backward(self, loss: torch.Tensor) -> None:
        loss.backward()

    def _zero_grad(self) -> None:
        self.optimizer.zero_grad(set_to_none=True)

    def _step(self) -> float:
        norm = torch.nn.utils.clip_grad_norm_(self.params, self.settings.grad_clip)
        self.optimizer.step()
        return float(norm)

    # -- resume ----------------------------------------------------------------------------
    def save_state(self, path: Path) -> None:
        """Weights (all trainable state, LoRA included) + optimizer, written atomically."""
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        torch.save({"model": self.model.state_dict(), "optimizer": self.optimizer.state_dict(),
                    "updates": self.updates}, tmp)
        tmp.replace(path)

    def load_state(self, path: Path) -> None:
        state = torch.load(path, map_location=self.device, weights_only=True)
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.updates = int(state["updates"])

    def export_model(self):
        """A plain (merged) Hugging Face model to save as a registry checkpoint."""
        if self.settings.lora:
            import copy

            return copy.deepcopy(self.model).merge_and_unload()
        return self.model
