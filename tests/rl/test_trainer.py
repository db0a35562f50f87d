"""Trainer backends on a small random-initialised Llama (real transformers model, fast on CPU)."""

from __future__ import annotations

import copy
import math
from pathlib import Path

import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM

from rl.train_batch import TrainSequence
from rl.trainer import TorchTrainer, TrainerSettings


def tiny_model(seed: int = 0) -> LlamaForCausalLM:
    torch.manual_seed(seed)
    cfg = LlamaConfig(
        vocab_size=96,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=128,
    )
    return LlamaForCausalLM(cfg).eval()


def batch(advantages=(1.0, -1.0, 0.5, -0.5)) -> list[TrainSequence]:
    out = []
    for i, adv in enumerate(advantages):
        n_ctx, n_gen = 5 + i, 4 + 2 * i
        ids = [(7 * i + j) % 90 + 3 for j in range(n_ctx + n_gen)]
        lp = [math.nan] * (n_ctx + n_gen)
        out.append(TrainSequence(ids, [0] * n_ctx + [1] * n_gen, lp, adv))
    return out


def params_of(model) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in model.named_parameters()}


def test_one_update_changes_parameters_and_reports_phases():
    model = tiny_model()
    before = params_of(model)
    trainer = TorchTrainer(model, TrainerSettings(lr=1e-2, micro_batch=2), pad_id=0)
    stats = trainer.update(batch())
    after = params_of(model)
    changed = [k for k in before if not torch.equal(before[k], after[k])]
    assert len(changed) == len(before)  # every weight gets gradient from the surrogate
    assert stats["policy_tokens"] == 4 + 6 + 8 + 10 and stats["trained_sequences"] == 4
    # ratio 1 at the first step: loss = -sum(A * tokens) / all tokens = -(4 - 6 + 4 - 5) / 28
    assert stats["loss"] == pytest.approx(3 / 28, rel=1e-5)
    assert stats["grad_norm"] > 0 and trainer.updates == 1
    assert set(k for k in stats if k.startswith("seconds_")) == {
        "seconds_forward_backward",
        "seconds_optimizer",
        "seconds_update",
    }
    assert stats["mismatch_tokens"] == 0 and stats["mismatch_mean"] == 1.0  # no rollout log-probs recorded


def test_all_zero_advantages_leave_the_model_and_optimizer_untouched():
    model = tiny_model()
    before = params_of(model)
    trainer = TorchTrainer(model, TrainerSettings(lr=1e-2), pad_id=0)
    stats = trainer.update(batch(advantages=(0.0, 0.0, 0.0, 0.0)))
    assert all(torch.equal(before[k], v) for k, v in params_of(model).items())
    assert stats["trained_sequences"] == 0 and stats["grad_norm"] == 0.0 and not trainer.optimizer.state


def _gradients(micro_batch: int, seqs, micro_tokens: int | None = None, trainer_out: list | None = None):
    model = tiny_model()
    trainer = TorchTrainer(model, TrainerSettings(micro_batch=micro_batch, micro_tokens=micro_tokens), pad_id=0)
    if trainer_out is not None:
        trainer_out.append(trainer)
    grads: dict[str, torch.Tensor] = {}
    # no step: copy the accumulated gradients for inspection (the update frees them after its step)
    trainer._step = lambda: grads.update({k: p.grad.clone() for k, p in model.named_parameters()}) or 0.0
    trainer.update(seqs)
    return grads


def test_the_update_frees_its_gradients_after_the_step():
    model = tiny_model()
    TorchTrainer(model, TrainerSettings(micro_batch=2), pad_id=0).update(batch())
    assert all(p.grad is None for p in model.parameters())


def test_micro_batching_accumulates_the_same_gradient_as_one_batch():
    seqs = batch()
    one, many = _gradients(4, seqs), _gradients(1, seqs)
    for k in one:
        assert torch.allclose(one[k], many[k], atol=1e-6, rtol=1e-4), k


def test_micro_batches_by_tokens_stay_within_the_budget_and_cover_every_sequence_once():
    from rl.train_batch import micro_batches

    seqs = [TrainSequence([1] * n, [1] * n, [math.nan] * n, 1.0) for n in (30, 5, 12, 9, 70, 9, 20, 3)]
    chunks = micro_batches(seqs, size=2, max_tokens=40)
    assert sorted(id(s) for c in chunks for s in c) == sorted(id(s) for s in seqs)
    for chunk in chunks:
        padded = len(chunk) * max(len(s.input_ids) for s in chunk)
        assert padded <= 40 or len(chunk) == 1
    assert [len(c) for c in chunks] == [4, 2, 1, 1]  # 3,5,9,9 | 12,20 | 30 | 70: short ones packed
    assert [len(c) for c in micro_batches(seqs, size=2)] == [2, 2, 2, 2]  # by count without a budget


@pytest.mark.parametrize(
    "budget, chunks, recomputed",
    [(24, [[9, 12], [15], [18]], [False, False, False]), (16, [[9], [12], [15], [18]], [False, False, False, True])],
)
def test_micro_batches_by_tokens_accumulate_one_batchs_gradient_recomputing_only_a_longer_sequence(
    budget, chunks, recomputed
):
    """Sequences of 9, 12, 15 and 18 tokens: under 24 padded tokens the two shortest share a
    micro-batch; under 16 the longest is over the budget and trains alone with its activations
    recomputed (checkpointing on for it only). Either way the gradient is one batch's."""
    from rl.train_batch import micro_batches

    seqs = batch()
    assert [[len(s.input_ids) for s in c] for c in micro_batches(seqs, 1, budget)] == chunks
    trainers: list = []
    seen: list[bool] = []
    one = _gradients(4, seqs)
    original = TorchTrainer._micro_loss

    def watching(self, micro, n_tokens):
        seen.append(bool(self.model.model.gradient_checkpointing))
        return original(self, micro, n_tokens)

    TorchTrainer._micro_loss = watching
    try:
        budgeted = _gradients(1, seqs, micro_tokens=budget, trainer_out=trainers)
    finally:
        TorchTrainer._micro_loss = original
    for k in one:
        assert torch.allclose(one[k], budgeted[k], atol=1e-6, rtol=1e-4), k
    assert seen == recomputed
    assert not trainers[0].model.model.gradient_checkpointing  # off again after the long one


def test_mismatch_weight_scales_the_gradient_of_each_token():
    seqs = batch(advantages=(1.0,))
    plain = _gradients(1, seqs)
    # rollout engine gave each sampled token half the trainer's probability -> weight min(2, 2) = 2
    model = tiny_model()
    trainer = TorchTrainer(model, TrainerSettings(micro_batch=1), pad_id=0)
    old = trainer.old_logprobs([seqs])[0][0].tolist()
    halved = [TrainSequence(s.input_ids, s.loss_mask, [o - math.log(2.0) for o in old], s.advantage) for s in seqs]
    doubled = _gradients(1, halved)
    for k in plain:
        assert torch.allclose(doubled[k], 2 * plain[k], atol=1e-6, rtol=1e-3), k


def test_detached_current_logprobs_give_the_gradient_of_a_separate_old_policy_pass():
    """One optimizer step per batch: the surrogate with old log-probs from a separate no-grad
    pass (what the update used to do) has the same gradient as with this forward's, detached."""
    from rl.grpo import clipped_surrogate_loss
    from rl.train_batch import collate

    seqs = batch()
    model = tiny_model()
    trainer = TorchTrainer(model, TrainerSettings(micro_batch=4), pad_id=0)
    old = trainer.old_logprobs([seqs])[0]
    rolled = [
        TrainSequence(s.input_ids, s.loss_mask, [o - 0.3 for o in old[i, : len(s.input_ids)].tolist()], s.advantage)
        for i, s in enumerate(seqs)
    ]  # the rollout model's log-probs a little off
    b = collate(rolled, 0)
    model.train()
    loss, _ = clipped_surrogate_loss(
        trainer._logprobs(b),
        old,
        b["advantages"],
        b["loss_mask"],
        rollout_logprobs=torch.where(b["rollout_logprobs"].isnan(), old, b["rollout_logprobs"]),
        normaliser=float(sum(s.n_loss_tokens for s in seqs)),
    )
    loss.backward()
    reference = {k: p.grad.clone() for k, p in model.named_parameters()}
    now = _gradients(4, rolled)
    for k in reference:
        assert torch.allclose(reference[k], now[k], atol=1e-7, rtol=1e-5), k


def test_the_update_reports_the_mismatch_weight_distribution():
    seqs = batch()
    trainer = TorchTrainer(tiny_model(), TrainerSettings(micro_batch=2), pad_id=0)
    old = trainer.old_logprobs([seqs])[0]
    # half the sequences' tokens sampled at half the trainer's probability (weight 2, the cap),
    # the rest at 4x (weight 0.25)
    rolled = [
        TrainSequence(
            s.input_ids,
            s.loss_mask,
            [o + (-math.log(2.0) if i % 2 == 0 else math.log(4.0)) for o in old[i, : len(s.input_ids)].tolist()],
            s.advantage,
        )
        for i, s in enumerate(seqs)
    ]
    stats = TorchTrainer(tiny_model(), TrainerSettings(micro_batch=2), pad_id=0).update(rolled)
    at_cap = (4 + 8) / 28  # policy tokens of sequences 0 and 2 over all policy tokens
    assert stats["mismatch_tokens"] == 28
    assert stats["mismatch_at_cap"] == pytest.approx(at_cap, abs=1e-6)
    assert stats["mismatch_below_half"] == pytest.approx(1 - at_cap, abs=1e-6)
    assert stats["mismatch_mean"] == pytest.approx(2 * at_cap + 0.25 * (1 - at_cap), rel=1e-4)


def test_bf16_autocast_trains_float32_weights():
    model = tiny_model()
    before = params_of(model)
    trainer = TorchTrainer(model, TrainerSettings(lr=1e-2, micro_batch=2, dtype="bfloat16"), pad_id=0)
    stats = trainer.update(batch())
    assert all(p.dtype == torch.float32 for p in model.parameters())
    assert all(not torch.equal(before[k], v) for k, v in params_of(model).items())
    assert stats["loss"] == pytest.approx(3 / 28, rel=1e-2)  # the same surrogate, in bf16 compute


def test_state_round_trip_resumes_the_same_weights_and_optimizer(tmp_path):
    model = tiny_model()
    trainer = TorchTrainer(model, TrainerSettings(lr=1e-2), pad_id=0)
    trainer.update(batch())
    trainer.save_state(tmp_path / "trainer.pt")
    resumed = TorchTrainer(tiny_model(seed=1), TrainerSettings(lr=1e-2), pad_id=0)
    resumed.load_state(tmp_path / "trainer.pt")
    assert resumed.updates == 1
    assert all(torch.equal(a, b) for a, b in zip(model.parameters(), resumed.model.parameters()))
    trainer.update(batch())
    resumed.update(batch())
    assert all(torch.allclose(a, b) for a, b in zip(model.parameters(), resumed.model.parameters()))


def mapping_of(tensor: torch.Tensor) -> tuple[str | None, int]:
    """The file mapped where `tensor`'s memory is (None or "[heap]": memory) and how many kB of that
    mapping are the process's own private pages (/proc/self/smaps)."""
    address, found = tensor.data_ptr(), None
    for line in open("/proc/self/smaps"):
        head = line.split(maxsplit=5)
        if "-" in head[0] and not head[0].endswith(":"):
            if found is not None:
                break
            low, high = (int(x, 16) for x in head[0].split("-"))
            if low <= address < high:
                found = [head[5].strip() if len(head) == 6 else None, 0]
        elif found is not None and head[0] == "Anonymous:":
            found[1] = int(head[1])
    assert found is not None, "no mapping holds the tensor"
    return found[0], found[1]


def moments(trainer: TorchTrainer) -> list[torch.Tensor]:
    return [s[k] for s in trainer.optimizer.state.values() for k in ("exp_avg", "exp_avg_sq")]


@pytest.mark.skipif(not Path("/proc/self/smaps").exists(), reason="reads the process's mappings (Linux)")
def test_the_moments_set_aside_live_in_the_state_file_and_train_the_same(tmp_path):
    """With optimizer_aside, AdamW's moments are a mapping of the state file after each save (no
    anonymous memory while rollouts run), the step makes them ordinary memory again, and three
    updates, each saved and the older file removed as write_progress does, give the same weights
    as with the moments kept in memory; a resume maps them the same way."""
    kept = TorchTrainer(tiny_model(), TrainerSettings(lr=1e-2), pad_id=0)
    aside = TorchTrainer(tiny_model(), TrainerSettings(lr=1e-2, optimizer_aside=True), pad_id=0)
    for n in range(1, 4):
        for trainer, folder in ((kept, tmp_path / "kept"), (aside, tmp_path / "aside")):
            trainer.update(batch())
            if n > 1 and trainer is aside:  # the step wrote the mapped moments: private copies now
                assert all(mapping_of(m)[1] > 0 for m in moments(trainer))
            trainer.save_state(folder / f"trainer-u{n}.pt")
            (folder / f"trainer-u{n - 1}.pt").unlink(missing_ok=True)
        state_file = str(tmp_path / "aside" / f"trainer-u{n}.pt")
        assert {mapping_of(m) for m in moments(aside)} == {(state_file, 0)}  # no memory of their own
        assert not any(str(mapping_of(m)[0]).endswith(".pt") for m in moments(kept))  # heap or anonymous
    assert all(torch.equal(a, b) for a, b in zip(kept.model.parameters(), aside.model.parameters()))
    assert all(torch.equal(a, b) for a, b in zip(moments(kept), moments(aside)))

    resumed = TorchTrainer(tiny_model(seed=1), TrainerSettings(lr=1e-2, optimizer_aside=True), pad_id=0)
    resumed.load_state(tmp_path / "aside" / "trainer-u3.pt")
    assert {mapping_of(m) for m in moments(resumed)} == {(str(tmp_path / "aside" / "trainer-u3.pt"), 0)}
    (tmp_path / "aside" / "trainer-u3.pt").unlink()  # the mapping keeps the data of a removed file
    kept.update(batch())
    resumed.update(batch())
    assert all(torch.equal(a, b) for a, b in zip(kept.model.parameters(), resumed.model.parameters()))


def test_lora_trains_adapters_only_and_exports_merged_weights():
    model = tiny_model()
    base = params_of(model)
    trainer = TorchTrainer(model, TrainerSettings(lr=5e-2, lora=True, lora_rank=4), pad_id=0)
    trainer.update(batch())
    trainer.update(batch())
    named = dict(trainer.model.named_parameters())
    lora = {k: v for k, v in named.items() if "lora_" in k}
    assert lora and all(v.requires_grad for v in lora.values())
    frozen = {k: v for k, v in named.items() if "lora_" not in k}
    assert all(not v.requires_grad for v in frozen.values())
    exported = trainer.export_model()
    assert not any("lora_" in k for k, _ in exported.named_parameters())
    merged = params_of(exported)
    assert any(not torch.equal(merged[k], base[k]) for k in base if "proj" in k)  # adapters merged in


@pytest.mark.parametrize("stage", [0, 1, 2])
def test_deepspeed_zero_update_matches_the_torch_backend(stage, monkeypatch):
    pytest.importorskip("deepspeed")
    from rl.deepspeed_trainer import DeepSpeedTrainer

    monkeypatch.setenv("MASTER_PORT", str(29600 + stage))
    settings = TrainerSettings(lr=1e-2, micro_batch=2)
    reference = TorchTrainer(tiny_model(), settings, pad_id=0)
    reference.update(batch())
    ds = DeepSpeedTrainer(copy.deepcopy(tiny_model()), settings, pad_id=0, zero_stage=stage)
    before = [p.detach().clone() for p in ds.model.parameters()]
    ds.update(batch())
    assert all(not torch.equal(a, b.detach()) for a, b in zip(before, ds.model.parameters()))
    for (name, a), b in zip(reference.model.named_parameters(), ds.model.parameters()):
        assert torch.allclose(a, b.detach(), atol=1e-5), (stage, name)


def test_deepspeed_state_round_trip_resumes_weights_and_optimizer(tmp_path, monkeypatch):
    pytest.importorskip("deepspeed")
    from rl.deepspeed_trainer import DeepSpeedTrainer

    monkeypatch.setenv("MASTER_PORT", "29610")
    settings = TrainerSettings(lr=1e-2, micro_batch=2)
    trainer = DeepSpeedTrainer(tiny_model(), settings, pad_id=0, zero_stage=2)
    trainer.update(batch())
    trainer.save_state(tmp_path / "trainer-u1.pt")
    resumed = DeepSpeedTrainer(tiny_model(seed=1), settings, pad_id=0, zero_stage=2)
    resumed.load_state(tmp_path / "trainer-u1.pt")
    assert resumed.updates == 1
    assert all(torch.equal(a, b) for a, b in zip(trainer.model.parameters(), resumed.model.parameters()))
    trainer.update(batch())
    resumed.update(batch())  # same optimizer moments -> the same second step
    assert all(torch.allclose(a, b, atol=1e-6) for a, b in zip(trainer.model.parameters(), resumed.model.parameters()))
