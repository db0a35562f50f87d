"""Prefect tasks of the warm-start flow: demonstrations, training, checkpoint registration."""

from __future__ import annotations

import json
import random
from pathlib import Path

import torch
from prefect import get_run_logger, task
from prefect.cache_policies import INPUTS, TASK_SOURCE
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

from configs.schema import PolicyConfig, SftConfig
from db import store
from db.engine import session_scope
from db.ids import run_id
from db.models import Checkpoint
from envs.registry import benchmark
from harness_pool.spec import load_harness
from rl.checkpoints import is_complete, read_meta, save_checkpoint
from rl.memory import checkpoint_activations, release_memory
from rl.model_store import resolve_model
from rl.precision import precision_record, resolve_dtype
from rl.sft import SftExample, build_demonstrations, heldout_loss, train_sft
from tasks import tracking
from tasks.records import start_run
from tasks.resources import drop_local_policies, env_factory, get_engine, get_policy


def checkpoint_name(cfg: SftConfig) -> str:
    """Same config, same checkpoint: built on first use, reused afterwards."""
    return run_id("sft", cfg, digits=10)


def sft_run_id(cfg: SftConfig) -> str:
    return f"sft-{checkpoint_name(cfg)}"


@task(name="build-demonstrations", cache_policy=INPUTS + TASK_SOURCE, persist_result=True)
def make_demonstrations(cfg: SftConfig, out_dir: str) -> dict:
    """Replay scripted demonstrations of training tasks; write the verified ones as JSONL."""
    tasks = benchmark(cfg.env.benchmark).load("train", data_dir=cfg.env.data_dir, limit=cfg.n_tasks, tiers=cfg.tiers)
    policy = get_policy(PolicyConfig(model=cfg.base_model, device="cpu"))
    examples, results = build_demonstrations(
        getattr(policy, "inner", policy),
        tasks,
        load_harness(cfg.harness, cfg.env.benchmark),
        env_factory(cfg.env),
        seed=cfg.seed,
        inspect_prob=cfg.inspect_prob,
        max_rounds=cfg.env.max_rounds,
    )
    inner = getattr(policy, "inner", policy)
    too_long = [e.bench_task_id for e in examples if len(e.input_ids) > inner.max_context_tokens]
    examples = [e for e in examples if len(e.input_ids) <= inner.max_context_tokens]  # beyond it, positions are unseen
    path = write_examples(examples, Path(out_dir) / "demonstrations.jsonl")
    failed = [r.bench_task_id for r in results if not r.verdict.success]
    del policy, inner, results  # the base model was only needed to replay the scripts:
    drop_local_policies()  # free it and give its pages back before the fine-tune loads its own copy
    release_memory()
    return {
        "path": path,
        "n_examples": len(examples),
        "n_tasks": len(tasks),
        "failed_replays": failed,
        "too_long": too_long,
    }


def write_examples(examples: list[SftExample], path: Path) -> str:
    """Demonstrations as JSONL (what `_load_examples` reads back); returns the path."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as fh:
        for e in examples:
            fh.write(
                json.dumps({"bench_task_id": e.bench_task_id, "input_ids": e.input_ids, "loss_mask": e.loss_mask})
                + "\n"
            )
    return str(path)


def _load_examples(path: str) -> list[SftExample]:
    return [SftExample(**json.loads(line)) for line in Path(path).read_text().splitlines() if line]


def _progress() -> Progress:
    return Progress(
        TextColumn("[bold]sft"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("loss {task.fields[loss]:.3f}"),
        TimeRemainingColumn(),
    )


@task(name="train-sft")
def train_checkpoint(cfg: SftConfig, demos_path: str, run_id: str) -> dict:
    """Fine-tune a fresh copy of the base model; skipped when the checkpoint already exists."""
    name = checkpoint_name(cfg)
    if is_complete(name):
        return read_meta(name)
    try:
        return _fine_tune(cfg, demos_path, run_id, name)
    finally:
        release_memory()  # the model, its gradients and the optimizer state are gone: give the pages back


def _fine_tune(cfg: SftConfig, demos_path: str, run_id: str, name: str) -> dict:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    examples = _load_examples(demos_path)
    random.Random(cfg.seed).shuffle(examples)
    n_held = int(len(examples) * cfg.heldout_fraction)
    held, train = examples[:n_held], examples[n_held:]
    model_dir = resolve_model(cfg.base_model)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).to(cfg.device)
    if cfg.lora:
        from peft import LoraConfig, get_peft_model

        model = get_peft_model(
            model,
            LoraConfig(
                r=cfg.lora_rank,
                lora_alpha=2 * cfg.lora_rank,
                lora_dropout=0.0,
                target_modules="all-linear",
                task_type="CAUSAL_LM",
            ),
        )
    if cfg.gradient_checkpointing:
        checkpoint_activations(model)
        if cfg.lora:
            model.enable_input_require_grads()  # frozen embeddings: the recomputed blocks still need an input grad
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    before = heldout_loss(model, held, pad) if held else None
    logger = get_run_logger()

    def on_step(step: int, loss: float) -> None:
        bar.update(bar_id, completed=step, loss=loss)
        if step % 5 == 0 or step == cfg.steps:  # progress also reaches logs and the Prefect UI
            logger.info("sft step %d/%d loss %.4f", step, cfg.steps, loss)

    with _progress() as bar:
        bar_id = bar.add_task("sft", total=cfg.steps, loss=float("nan"))
        losses = train_sft(
            model,
            train,
            pad,
            cfg.steps,
            cfg.batch_size,
            cfg.lr,
            cfg.seed,
            on_step=on_step,
            dtype=resolve_dtype(cfg.dtype, cfg.device),
        )
    after = heldout_loss(model, held, pad) if held else None
    if cfg.gradient_checkpointing:  # the saved model samples with its cache
        checkpoint_activations(model, False)
    if cfg.lora:
        model = model.merge_and_unload()
    meta = {
        "name": name,
        "kind": "sft",
        "run_id": run_id,
        "base_model": cfg.base_model,
        "parent": cfg.base_model,
        "step": cfg.steps,
        "config": cfg.model_dump(mode="json"),
        "n_train": len(train),
        "n_heldout": len(held),
        "heldout_loss_before": before,
        "heldout_loss_after": after,
        "train_losses": losses,
        "precision": precision_record(cfg.device, compute=cfg.dtype),
    }
    path = save_checkpoint(model, tokenizer, name, meta)
    return {**meta, "path": str(path.resolve())}


@task(name="register-checkpoint")
def register_checkpoint(meta: dict, database_url: str | None) -> str:
    from rl.checkpoints import checkpoint_path

    with session_scope(get_engine(database_url)) as session:
        session.merge(
            Checkpoint(
                id=meta["name"],
                run_id=meta["run_id"],
                kind=meta["kind"],
                parent_id=meta["parent"],
                base_model=meta["base_model"],
                path=str(checkpoint_path(meta["name"]).resolve()),
                step=meta["step"],
                provenance={
                    k: meta[k] for k in ("config", "n_train", "n_heldout", "train_losses", "precision") if k in meta
                },
                metrics={
                    "heldout_loss_before": meta["heldout_loss_before"],
                    "heldout_loss_after": meta["heldout_loss_after"],
                },
            )
        )
        store.finish_run(session, meta["run_id"], "completed")
    tracking.log_summary(
        meta["run_id"],
        tracking.default_mode(),
        meta["config"],
        {
            "sft/heldout_loss_before": meta["heldout_loss_before"],
            "sft/heldout_loss_after": meta["heldout_loss_after"],
            "sft/steps": meta["step"],
        },
        meta["step"],
    )
    return meta["name"]


@task(name="register-sft-run")
def register_sft_run(cfg: SftConfig, database_url: str | None, prefect_flow_run_id: str | None) -> str:
    run_id = sft_run_id(cfg)
    with session_scope(get_engine(database_url)) as session:
        start_run(session, run_id, "sft", cfg.name, cfg.model_dump(mode="json"), prefect_flow_run_id)
    return run_id


def record_existing_checkpoint(cfg: SftConfig, database_url: str | None) -> bool:
    """A warm start already on disk, but unknown to the current database (a new or lost one):
    record its run and checkpoint rows from the checkpoint's own metadata. True if it wrote."""
    name = checkpoint_name(cfg)
    with session_scope(get_engine(database_url)) as session:
        if session.get(Checkpoint, name) is not None:
            return False
    meta = read_meta(name)
    register_sft_run.fn(cfg, database_url, None)
    register_checkpoint.fn({**meta, "run_id": sft_run_id(cfg)}, database_url)
    return True
