"""Prefect tasks of the engineer's GRPO (issue 21): sample G patches per bundle from the in-process
engineer, score the re-runs, and apply one clipped update on the engineer's tokens only.

The engineer and its trainer live once per process (like the policy of tasks/train_handle.py);
after every update the trainer state and the number of finished updates are saved, so a
restarted run loads them and goes on with the next update. Sampled replies are persisted task
results keyed by (run, step), so a crash between sampling and updating re-uses them.
"""

from __future__ import annotations

import json
import math
import random
import threading
from pathlib import Path

import torch
from prefect import task
from prefect.cache_policies import INPUTS, TASK_SOURCE

from configs.schema import EditorSftConfig, EditorTrainConfig, load_config_at
from db.engine import session_scope
from db.ids import run_id, stable_id
from db.models import TrainStep
from harness_pool.bundles import Bundle
from harness_pool.engineer import engineer_messages
from rl.grpo import group_advantages
from rl.policy import Sampling
from rl.precision import precision_record, resolve_dtype, rollout_copy, sync_weights
from rl.train_batch import TrainSequence
from rl.trainer import TorchTrainer, TrainerSettings
from tasks.editor_sft import engineer_checkpoint_name
from tasks.records import start_run
from tasks.resources import get_engine

ROLE = "editor-rerun"
_LOCK = threading.Lock()
_HANDLES: dict[str, tuple] = {}


def sft_config(cfg: EditorTrainConfig) -> EditorSftConfig:
    return load_config_at(EditorSftConfig, cfg.sft)


def editor_train_run_id(cfg: EditorTrainConfig) -> str:
    return run_id("engineer-grpo", cfg, engineer_checkpoint_name(sft_config(cfg)))


def state_dir(cfg: EditorTrainConfig, run_id: str) -> Path:
    return Path(cfg.results_dir).expanduser().resolve() / "editor-train" / run_id


def finished_updates(cfg: EditorTrainConfig, run_id: str) -> int:
    path = state_dir(cfg, run_id) / "progress.json"
    return json.loads(path.read_text())["updates"] if path.exists() else 0


@task(name="register-engineer-grpo")
def register_editor_train_run(cfg: EditorTrainConfig, database_url: str | None, prefect_flow_run_id: str | None) -> str:
    run_id = editor_train_run_id(cfg)
    config = {**cfg.model_dump(mode="json"), "init_checkpoint": engineer_checkpoint_name(sft_config(cfg))}
    with session_scope(get_engine(database_url)) as session:
        start_run(session, run_id, "editor_train", cfg.name, config, prefect_flow_run_id)
    return run_id


def batch_of(cfg: EditorTrainConfig, bundles: list[Bundle], step: int) -> list[Bundle]:
    """The update's bundles: a seeded sample, different at every step."""
    rng = random.Random(stable_id(cfg.seed, "bundles", step))
    return rng.sample(bundles, min(cfg.bundles_per_update, len(bundles)))


def engineer(cfg: EditorTrainConfig, run_id: str) -> tuple:
    """(policy, trainer) of the run, loaded once per process; the saved state when resuming."""
    with _LOCK:
        if run_id not in _HANDLES:
            from rl.transformers_policy import TransformersPolicy

            policy = TransformersPolicy(engineer_checkpoint_name(sft_config(cfg)), device=cfg.device, shared=False)
            settings = TrainerSettings(
                lr=cfg.lr,
                micro_batch=cfg.micro_batch,
                temperature=cfg.temperature,
                gradient_checkpointing=cfg.gradient_checkpointing,
                dtype=resolve_dtype(cfg.dtype, cfg.device),
            )
            trainer = TorchTrainer(policy.model, settings, policy.pad_id)
            state = state_dir(cfg, run_id) / "trainer.pt"
            if finished_updates(cfg, run_id) and state.exists():
                trainer.load_state(state)
            sampling_dtype = resolve_dtype("auto", cfg.device)  # a bf16 copy samples where bf16 is fast
            if sampling_dtype == "float32":
                policy.model = trainer.model
            else:
                policy.model = rollout_copy(trainer.export_model(), sampling_dtype)
                policy.dtype = sampling_dtype
            _HANDLES[run_id] = (policy, trainer)
        return _HANDLES[run_id]


def drop_engineer(run_id: str) -> None:
    from rl.memory import release_memory

    with _LOCK:
        _HANDLES.pop(run_id, None)
    release_memory()


@task(
    name="sample-patches",
    cache_policy=(INPUTS - "cfg" - "bundles") + TASK_SOURCE,
    persist_result=True,
    task_run_name="sample-step{step}",
)
def sample_patches(
    cfg: EditorTrainConfig, run_id: str, step: int, bundles: list[Bundle], bundle_ids: list[str]
) -> list[dict]:
    """G replies per bundle from the engineer as it is at this step, with their token ids and
    log-probs: [{bundle_id, sample_index, prompt_ids, token_ids, logprobs, text}]."""
    policy, _ = engineer(cfg, run_id)
    sessions, keys = [], []
    for b in bundles:
        for i in range(cfg.group_size):
            sessions.append(policy.start(engineer_messages(b)))
            keys.append((b.id, i))
    prompts = [list(s.token_ids) for s in sessions]
    sampling = Sampling(
        cfg.temperature, 1.0, cfg.max_new_tokens, seed=int(stable_id(cfg.seed, "engineer", step)[:8], 16)
    )
    generations = policy.generate(sessions, sampling)
    return [
        {
            "bundle_id": bid,
            "sample_index": i,
            "prompt_ids": prompt,
            "token_ids": list(g.token_ids),
            "logprobs": list(g.logprobs or []),
            "text": g.text,
        }
        for (bid, i), prompt, g in zip(keys, prompts, generations)
    ]


def sequences(samples: list[dict], rewards: list[float]) -> list[TrainSequence]:
    """One training sequence per sample (prompt: loss 0; reply: loss 1 with its recorded
    log-probs), its advantage relative to the other samples of the same bundle."""
    by_bundle: dict[str, list[int]] = {}
    for n, s in enumerate(samples):
        by_bundle.setdefault(s["bundle_id"], []).append(n)
    advantage = [0.0] * len(samples)
    for members in by_bundle.values():
        values = group_advantages(torch.tensor([rewards[n] for n in members], dtype=torch.float32)).tolist()
        for n, a in zip(members, values):
            advantage[n] = a
    out = []
    for s, a in zip(samples, advantage):
        logps = s["logprobs"] if len(s["logprobs"]) == len(s["token_ids"]) else [math.nan] * len(s["token_ids"])
        out.append(
            TrainSequence(
                s["prompt_ids"] + s["token_ids"],
                [0] * len(s["prompt_ids"]) + [1] * len(s["token_ids"]),
                [math.nan] * len(s["prompt_ids"]) + logps,
                a,
                s["bundle_id"],
            )
        )
    return out


@task(name="update-engineer", task_run_name="update-step{step}")
def update_engineer(
    cfg: EditorTrainConfig,
    run_id: str,
    step: int,
    samples: list[dict],
    rewards: list[float],
    details: list[dict],
    database_url: str | None,
) -> dict:
    """One GRPO update of the engineer; then its state, the progress and the step's row."""
    policy, trainer = engineer(cfg, run_id)
    stats = trainer.update(sequences(samples, rewards))
    if policy.model is not trainer.model:  # the sampling copy follows the trained weights
        sync_weights(trainer.export_model(), policy.model)
    folder = state_dir(cfg, run_id)
    trainer.save_state(folder / "trainer.pt")
    n = max(len(details), 1)
    metrics = {
        "editor/reward_mean": sum(rewards) / max(len(rewards), 1),
        "editor/valid_share": sum(d["status"] == "valid" for d in details) / n,
        "editor/rejected_share": sum(d["status"] == "rejected" for d in details) / n,
        "editor/fixed_mean": sum(len(d["fixed"]) for d in details) / n,
        "editor/broken_mean": sum(len(d["broken"]) for d in details) / n,
        **{f"train/{k}": v for k, v in stats.items()},
    }
    with session_scope(get_engine(database_url)) as session:
        session.merge(
            TrainStep(
                id=stable_id(run_id, step),
                run_id=run_id,
                step=step,
                mode="editor_grpo",
                metrics=metrics,
                details={"patches": details},
            )
        )
    with (folder / "losses.jsonl").open("a") as fh:
        fh.write(json.dumps({"step": step, "loss": stats["loss"]}) + "\n")
    (folder / "progress.json").write_text(json.dumps({"updates": step + 1}))
    return metrics


@task(name="save-engineer")
def save_engineer(cfg: EditorTrainConfig, run_id: str) -> dict:
    """The trained engineer as a registry checkpoint (name: the run id), once."""
    from rl.checkpoints import is_complete, read_meta, save_checkpoint

    if is_complete(run_id):
        return read_meta(run_id)
    policy, trainer = engineer(cfg, run_id)
    losses = [json.loads(line)["loss"] for line in (state_dir(cfg, run_id) / "losses.jsonl").read_text().splitlines()]
    start = engineer_checkpoint_name(sft_config(cfg))
    meta = {
        "name": run_id,
        "kind": "engineer_grpo",
        "run_id": run_id,
        "base_model": sft_config(cfg).base_model,
        "parent": start,
        "step": cfg.updates,
        "config": cfg.model_dump(mode="json"),
        "n_train": cfg.updates * cfg.bundles_per_update,
        "n_heldout": 0,
        "heldout_loss_before": None,
        "heldout_loss_after": None,
        "train_losses": losses,
        "precision": precision_record(cfg.device, update=cfg.dtype, rollouts="auto"),
    }
    save_checkpoint(trainer.export_model(), policy.tokenizer, run_id, meta)
    return meta
