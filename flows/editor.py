"""The trainable harness editor's flows (issue 21). Evidence first:

editor_bundles: the frozen target (the warm-start policy) runs the parent harness k times on a
seeded sample of training tasks and of validation tasks; every failure gets its rule root cause;
failing tasks sharing a family of causes become bundles of 2-4 trajectories (training bundles
to learn from, held-out bundles from validation tasks, never trained on).

editor_sft (the cold start): offline-operator patches for the training bundles, re-run by the
frozen target; the validated ones are demonstrations for fine-tuning the engineer.

Run: hs editor bundles --config configs/editor_bundles_dbbench_smol.yaml
     hs editor sft --config configs/editor_sft_dbbench_smol.yaml
     hs editor train --config configs/editor_train_dbbench_smol.yaml

editor_compare: on held-out bundles, offline operators vs the SFT-only engineer vs the GRPO
engineer (hs editor compare; hs report editor RUN prints it again from the database).

editor_train (GRPO): per update, G patches per training bundle sampled from the engineer, each
re-run by the frozen target; reward = (fixed - broken) / tasks re-run; the clipped update.
"""

from __future__ import annotations

from pathlib import Path

from prefect import flow, get_run_logger
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn
from transformers import AutoTokenizer

from configs.schema import EditorBundlesConfig, EditorSftConfig, EditorTrainConfig
from flows import artifacts
from flows.evolve import run_harnesses
from flows.hooks import mark_failed_on_failure
from flows.opening import open_run
from harness_pool.engineer import read_reply
from harness_pool.patch import HarnessPatch
from harness_pool.spec import HarnessSpec
from rl.model_store import resolve_model
from tasks.editor import SPLITS, bundles_run_id, finish_bundles_run, load_bundles, register_bundles_run, store_bundles
from tasks.editor_compare import ROLE as ROLE_COMPARE
from tasks.editor_compare import compare_run_id, editor_table, finish_compare_run, register_compare_run, sample_replies
from tasks.editor_sft import (
    ROLE,
    bundles_config,
    editor_sft_run_id,
    engineer_checkpoint_name,
    engineer_example,
    llm_candidates,
    offline_candidates,
    outcome,
    record_patches,
    register_editor_sft_run,
    train_engineer,
)
from tasks.editor_train import ROLE as ROLE_RERUN
from tasks.editor_train import (
    batch_of,
    drop_engineer,
    editor_train_run_id,
    finished_updates,
    register_editor_train_run,
    sample_patches,
    save_engineer,
    sft_config,
    update_engineer,
)
from tasks.evaluation import result_storage
from tasks.evolution import record_harness_run, run_harness
from tasks.sft import register_checkpoint, write_examples


@flow(
    name="editor-bundles",
    flow_run_name="editor-bundles-{config.name}",
    on_failure=[
        mark_failed_on_failure(EditorBundlesConfig, bundles_run_id),
        artifacts.failure_artifact(EditorBundlesConfig, bundles_run_id),
    ],
    on_crashed=[artifacts.failure_artifact(EditorBundlesConfig, bundles_run_id)],
)
def editor_bundles(config: EditorBundlesConfig, database_url: str | None = None) -> dict:
    cfg = config
    logger = get_run_logger()
    run = open_run(cfg, register_bundles_run, database_url, warm_start=True)
    runner = run_harness.with_options(result_storage=result_storage(cfg))
    summary = {"run_id": run["run_id"]}
    for split in SPLITS:
        task_ids = run["task_ids"][split]
        if not task_ids:
            summary[split] = {"tasks": 0, "failed_tasks": 0, "bundles": []}
            continue
        diagnosis = runner(cfg, run["run_id"], run["parent"], task_ids, f"diagnose-{split}", 0, cfg.k, database_url)
        record_harness_run(run["parent"], diagnosis, database_url)  # a cached result skipped its writes
        ids = store_bundles(cfg, run["run_id"], run["parent"], diagnosis, split, database_url)
        failed = sum(not any(r["successes"]) for r in diagnosis["tasks"].values())
        summary[split] = {"tasks": len(task_ids), "failed_tasks": failed, "bundles": ids}
        logger.info("%s: %d tasks, %d never solved, %d bundles", split, len(task_ids), failed, len(ids))
    finish_bundles_run(run["run_id"], summary, database_url)
    artifacts.publish_editor("bundles", summary)
    return summary


@flow(
    name="editor-sft",
    flow_run_name="editor-sft-{config.name}",
    on_failure=[
        mark_failed_on_failure(EditorSftConfig, editor_sft_run_id),
        artifacts.failure_artifact(EditorSftConfig, editor_sft_run_id),
    ],
    on_crashed=[artifacts.failure_artifact(EditorSftConfig, editor_sft_run_id)],
)
def editor_sft(config: EditorSftConfig, database_url: str | None = None) -> dict:
    """Cold start: for every training bundle, offline-operator patches; the frozen target re-runs
    the bundle's failing tasks and controls under each child; the patches that fixed a failure
    without breaking a control become demonstrations, and the engineer is fine-tuned on them."""
    cfg = config
    logger = get_run_logger()
    target = bundles_config(cfg)
    bundle_run = editor_bundles(target, database_url)  # built on first use; cached afterwards
    run_id = open_run(cfg, register_editor_sft_run, database_url, warm_start=False)  # the bundles' run built it
    bundles = load_bundles(bundle_run["run_id"], "train", database_url)
    candidates = [(b, c) for b in bundles for c in offline_candidates(b, cfg.variants)]
    if cfg.llm is not None:  # the LLM editor's patches are candidates too
        by_id = {b.id: b for b in bundles}
        candidates += [
            (by_id[c["bundle_id"]], c) for c in llm_candidates(cfg, bundles, [b.id for b in bundles], "train")
        ]
    runnable = [(b, c) for b, c in candidates if c["spec"] is not None]
    jobs = [(c["spec"], sorted(set(b.failing_tasks) | set(b.controls)), ROLE, 0, cfg.k) for b, c in runnable]
    with Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn()) as bar:
        runs = run_harnesses(target, jobs, run_id, database_url, bar, bar.add_task("re-run patches", total=len(jobs)))
    by_candidate = {id(c): r for (_, c), r in zip(runnable, runs)}
    rows, demos = [], []
    for b, c in candidates:
        result = outcome(b, by_candidate.get(id(c)), cfg.min_fixed, cfg.max_broken)
        rows.append(
            {
                "bundle_id": b.id,
                "step": 0,
                "sample_index": 0,
                "source": c["source"],
                "harness_id": c["spec"] and HarnessSpec.model_validate(c["spec"]).id,
                "reason": c["reason"],
                "patch": c["patch"],
                **result,
            }
        )
        if result["status"] == "valid":
            demos.append((b, HarnessPatch.model_validate(c["patch"])))
    record_patches(run_id, rows, database_url)
    logger.info("%d bundles, %d candidates, %d validated", len(bundles), len(candidates), len(demos))
    if not demos:
        raise ValueError(
            f"no offline patch validated on the {len(bundles)} training bundles: raise n_train_tasks in "
            f"{cfg.bundles} or variants, or lower min_fixed"
        )
    tokenizer = AutoTokenizer.from_pretrained(resolve_model(cfg.base_model))
    path = Path(cfg.results_dir).expanduser().resolve() / "editor-sft" / engineer_checkpoint_name(cfg) / "demos.jsonl"
    demos_path = write_examples([engineer_example(tokenizer, b, p) for b, p in demos], path)
    meta = train_engineer(cfg, demos_path, run_id)
    register_checkpoint(meta, database_url)
    result = {
        "run_id": run_id,
        "bundles_run_id": bundle_run["run_id"],
        "bundles": len(bundles),
        "candidates": len(candidates),
        "validated": len(demos),
        "checkpoint": meta["name"],
        "heldout_loss_before": meta["heldout_loss_before"],
        "heldout_loss_after": meta["heldout_loss_after"],
    }
    artifacts.publish_editor("sft", result)
    return result


@flow(
    name="editor-train",
    flow_run_name="editor-train-{config.name}",
    on_failure=[
        mark_failed_on_failure(EditorTrainConfig, editor_train_run_id),
        artifacts.failure_artifact(EditorTrainConfig, editor_train_run_id),
    ],
    on_crashed=[artifacts.failure_artifact(EditorTrainConfig, editor_train_run_id)],
)
def editor_train(config: EditorTrainConfig, database_url: str | None = None) -> dict:
    """GRPO for the engineer: for each update, a batch of training bundles; G sampled patches per
    bundle; the frozen target re-runs each child on the bundle's failing tasks and controls;
    reward = (fixed - broken) / tasks (rejected patches: the lowest reward); one clipped update."""
    cfg = config
    logger = get_run_logger()
    start = sft_config(cfg)
    cold = editor_sft(start, database_url)  # the engineer's starting checkpoint, built on first use
    target = bundles_config(start)
    run_id = open_run(cfg, register_editor_train_run, database_url, warm_start=False)
    bundles = load_bundles(cold["bundles_run_id"], "train", database_url)
    by_id = {b.id: b for b in bundles}
    source = f"engineer:{cold['checkpoint']}"
    history = []
    for step in range(finished_updates(cfg, run_id), cfg.updates):
        batch = batch_of(cfg, bundles, step)
        samples = sample_patches(cfg, run_id, step, batch, [b.id for b in batch])
        readings = [
            read_reply(s["text"], by_id[s["bundle_id"]], f"engineer-s{step}-{n}") for n, s in enumerate(samples)
        ]
        runnable = [(s, r) for s, r in zip(samples, readings) if r.valid]
        jobs = [
            (r.child.model_dump(mode="json"), _rerun_tasks(by_id[s["bundle_id"]]), ROLE_RERUN, step, cfg.k)
            for s, r in runnable
        ]
        with Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn()) as bar:
            bar_id = bar.add_task(f"update {step}: re-run patches", total=len(jobs))
            runs = run_harnesses(target, jobs, run_id, database_url, bar, bar_id)
        run_of = {id(s): run for (s, _), run in zip(runnable, runs)}
        rows, rewards = [], []
        for s, r in zip(samples, readings):
            result = outcome(by_id[s["bundle_id"]], run_of.get(id(s)), start.min_fixed, start.max_broken)
            if result["status"] == "rejected":
                result["reward"] = cfg.rejected_reward
            rewards.append(result["reward"])
            rows.append(
                {
                    "bundle_id": s["bundle_id"],
                    "step": step,
                    "sample_index": s["sample_index"],
                    "source": source,
                    "harness_id": r.child.id if r.child else None,
                    "reason": r.reason,
                    "patch": r.patch.model_dump(mode="json") if r.patch else None,
                    "reply": s["text"],
                    **result,
                }
            )
        record_patches(run_id, rows, database_url)
        details = [
            {k: row[k] for k in ("bundle_id", "sample_index", "status", "fixed", "broken", "reward")} for row in rows
        ]
        metrics = update_engineer(cfg, run_id, step, samples, rewards, details, database_url)
        history.append(metrics)
        logger.info(
            "update %d: reward %.3f, valid %.0f%%, rejected %.0f%%",
            step,
            metrics["editor/reward_mean"],
            100 * metrics["editor/valid_share"],
            100 * metrics["editor/rejected_share"],
        )
    meta = save_engineer(cfg, run_id)  # a finished run's checkpoint is kept, not saved again
    register_checkpoint(meta, database_url)
    drop_engineer(run_id)
    result = {"run_id": run_id, "checkpoint": meta["name"], "updates": cfg.updates, "history": history}
    artifacts.publish_editor("train", result)
    return result


def _rerun_tasks(bundle) -> list[str]:
    return sorted(set(bundle.failing_tasks) | set(bundle.controls))


@flow(
    name="editor-compare",
    flow_run_name="editor-compare-{config.name}",
    on_failure=[artifacts.failure_artifact(EditorTrainConfig, compare_run_id)],
    on_crashed=[artifacts.failure_artifact(EditorTrainConfig, compare_run_id)],
)
def editor_compare(config: EditorTrainConfig, database_url: str | None = None) -> dict:
    """On held-out bundles (never trained on): the offline operators' patches, G patches of the
    SFT-only engineer and G of the GRPO engineer (and the LLM editor's when the cold start has
    one), all re-run by the frozen target; every patch and its outcome is recorded, and the
    summary per editor is returned (analysis/editor.py)."""
    cfg = config
    trained = editor_train(cfg, database_url)  # everything before it is built first, on first use
    start = sft_config(cfg)
    target = bundles_config(start)
    run_id = open_run(cfg, register_compare_run, database_url, warm_start=False)
    heldout = load_bundles(bundles_run_id(target), "heldout", database_url)
    if not heldout:
        raise ValueError(f"no held-out bundles: raise n_heldout_tasks in {start.bundles}")
    proposals = []  # (bundle, source, sample index, spec or None, reason, patch json, reply)
    for b in heldout:
        for c in offline_candidates(b, start.variants):
            proposals.append((b, c["source"], 0, c["spec"], c["reason"], c["patch"], None))
    ids = [b.id for b in heldout]
    if start.llm is not None:
        by_id = {b.id: b for b in heldout}
        for c in llm_candidates(start, heldout, ids, "heldout"):
            proposals.append((by_id[c["bundle_id"]], c["source"], 0, c["spec"], c["reason"], c["patch"], None))
    for label, checkpoint in (("sft", engineer_checkpoint_name(start)), ("grpo", trained["checkpoint"])):
        replies = sample_replies(cfg, checkpoint, heldout, ids)
        for n, reply in enumerate(replies):
            b, i = heldout[n // cfg.group_size], n % cfg.group_size
            r = read_reply(reply, b, f"{label}-{b.id[:8]}-{i}")
            patch = r.patch.model_dump(mode="json") if r.patch else None
            spec = r.child.model_dump(mode="json") if r.child else None
            proposals.append((b, f"engineer-{label}:{checkpoint}", i, spec, r.reason, patch, reply))
    runnable = [p for p in proposals if p[3] is not None]
    jobs = [(p[3], _rerun_tasks(p[0]), ROLE_COMPARE, 0, start.k) for p in runnable]
    with Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn()) as bar:
        runs = run_harnesses(target, jobs, run_id, database_url, bar, bar.add_task("re-run patches", total=len(jobs)))
    run_of = {id(p): run for p, run in zip(runnable, runs)}
    rows = []
    for p in proposals:
        b, source, i, spec, reason, patch, reply = p
        result = outcome(b, run_of.get(id(p)), start.min_fixed, start.max_broken)
        harness_id = HarnessSpec.model_validate(spec).id if spec else None
        rows.append(
            {
                "bundle_id": b.id,
                "step": 0,
                "sample_index": i,
                "source": source,
                "harness_id": harness_id,
                "reason": reason,
                "patch": patch,
                "reply": reply,
                **result,
            }
        )
    record_patches(run_id, rows, database_url)
    table = editor_table(run_id, database_url)
    finish_compare_run(run_id, table, database_url)
    artifacts.publish_editor("compare", table)
    return table
