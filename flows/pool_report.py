"""Pool report flow: locality and complementarity of a frozen pool, measured (docs/method.md §5).

Every sibling runs k rollouts and H0 k x N (N siblings) on the same training tasks (not the
ones evolution diagnosed on, when the pool came from `hs evolve`), with the same frozen policy.
Reported: per sibling the tasks fixed and broken relative to H0 at k; the oracle union of the
siblings vs the best single sibling vs H0 at the same rollout count; pairwise repair overlap.

Run: hs pool report VERSION [--warm-start configs/sft_dbbench_smol.yaml] [--n-tasks 30]
"""

from __future__ import annotations

from prefect import flow
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from configs.schema import PoolReportConfig
from flows import artifacts
from flows.evolve import run_harnesses
from flows.opening import open_run
from tasks.pool_report import register_pool_report, report_run_id, summarise_pool


@flow(
    name="pool-report",
    flow_run_name="pool-report-{config.version}",
    on_failure=[artifacts.failure_artifact(PoolReportConfig, report_run_id)],
    on_crashed=[artifacts.failure_artifact(PoolReportConfig, report_run_id)],
)
def pool_report(config: PoolReportConfig, database_url: str | None = None) -> dict:
    cfg = config
    run = open_run(cfg, register_pool_report, database_url, warm_start=True)  # warm start, run row, owner
    n = max(len(run["siblings"]), 1)
    jobs = [(run["base"], run["task_ids"], "report", 0, cfg.k * n)]
    jobs += [(s, run["task_ids"], "report", 0, cfg.k) for s in run["siblings"]]
    with Progress(
        TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn()
    ) as bar:
        results = run_harnesses(
            cfg, jobs, run["run_id"], database_url, bar, bar.add_task("harness runs", total=len(jobs))
        )
    result = summarise_pool(cfg, run["run_id"], results[0], results[1:], database_url)
    artifacts.publish_pool_report(result)
    return result
