"""Warm-start flow: protocol demonstrations from the training split -> supervised fine-tuning.

Phases: register the run -> replay scripted demonstrations through the real environment
(gold SQL, real observation, final answer; only verified successes kept) -> fine-tune a fresh
copy of the base model on the assistant tokens (full or LoRA, a fixed step budget) -> save
to the checkpoint registry and record it in the database.

Departure from the paper: the Harness-S paper starts GRPO from instruct models of 4B+ that
already follow the protocol; a 135M model on CPU does not, so (like the companion method's
cold-start SFT) we warm-start it. The checkpoint name is derived from the config: a second run
with the same config reuses the checkpoint instead of training again. Demonstrations never
come from dev or standard.

Run: hs sft --config configs/sft_dbbench_smol.yaml [--steps N] [--lora]
"""

from __future__ import annotations

from pathlib import Path

from prefect import flow, get_run_logger

from configs.schema import SftConfig
from flows import artifacts
from flows.ownership import register_and_claim
from tasks.sft import (
    checkpoint_name,
    make_demonstrations,
    record_existing_checkpoint,
    register_checkpoint,
    register_sft_run,
    sft_run_id,
    train_checkpoint,
)


@flow(
    name="sft",
    flow_run_name="sft-{config.name}",
    on_failure=[artifacts.failure_artifact(SftConfig, sft_run_id)],
    on_crashed=[artifacts.failure_artifact(SftConfig, sft_run_id)],
)
def sft(config: SftConfig, database_url: str | None = None) -> dict:
    cfg = config
    logger = get_run_logger()
    run_id = register_and_claim(cfg, register_sft_run, database_url)  # its own warm start: none to build
    storage = Path(cfg.results_dir).expanduser().resolve()
    demos = make_demonstrations.with_options(result_storage=storage)(cfg, str(storage / "sft" / checkpoint_name(cfg)))
    logger.info(
        "%d verified demonstrations from %d training tasks (%d failed replays, %d longer than the model's context)",
        demos["n_examples"],
        demos["n_tasks"],
        len(demos["failed_replays"]),
        len(demos.get("too_long", [])),
    )
    meta = train_checkpoint(cfg, demos["path"], run_id)
    register_checkpoint(meta, database_url)
    result = {
        "checkpoint": meta["name"],
        "path": meta.get("path"),
        "demonstrations": demos["n_examples"],
        "failed_replays": demos["failed_replays"],
        "heldout_loss_before": meta["heldout_loss_before"],
        "heldout_loss_after": meta["heldout_loss_after"],
        "run_id": run_id,
    }
    artifacts.publish_sft(result)
    return result


def ensure_warm_start(sft_cfg: SftConfig | None, database_url: str | None) -> None:
    """Build the warm-start checkpoint as a subflow on first use; once it exists, only make
    sure the current database records it (a new or lost database gets its rows back)."""
    from rl.checkpoints import is_complete

    if sft_cfg is None:
        return
    if not is_complete(checkpoint_name(sft_cfg)):
        sft(sft_cfg, database_url)
    else:
        record_existing_checkpoint(sft_cfg, database_url)
