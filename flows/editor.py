"""The trainable harness editor's flows (issue 21). Evidence first:

editor_bundles: the frozen target (the warm-start policy) runs the parent harness k times on a
seeded sample of training tasks and of validation tasks; every failure gets its rule root cause;
failing tasks sharing a family of causes become bundles of 2-4 trajectories (training bundles
to learn from, held-out bundles from validation tasks, never trained on).

Run: hs editor bundles --config configs/editor_bundles_dbbench_smol.yaml
"""

from __future__ import annotations

from prefect import flow, get_run_logger
from prefect.runtime import flow_run

from configs.schema import EditorBundlesConfig
from flows.hooks import mark_failed_on_failure
from flows.ownership import claim_run
from flows.sft import ensure_warm_start
from tasks.editor import SPLITS, bundles_run_id, finish_bundles_run, register_bundles_run, store_bundles
from tasks.evaluation import result_storage
from tasks.evolution import record_harness_run, run_harness
from tasks.training import warm_start_config


@flow(
    name="editor-bundles",
    flow_run_name="editor-bundles-{config.name}",
    on_failure=[mark_failed_on_failure(EditorBundlesConfig, bundles_run_id)],
)
def editor_bundles(config: EditorBundlesConfig, database_url: str | None = None) -> dict:
    cfg = config
    logger = get_run_logger()
    ensure_warm_start(warm_start_config(cfg), database_url)
    run = register_bundles_run(cfg, database_url, flow_run.get_id())
    claim_run(run["run_id"], database_url)
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
    return summary
