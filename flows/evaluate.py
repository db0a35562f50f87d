"""Evaluation flow: a frozen policy under one harness on a DBBench split -> Pass@k and Avg@k.

Phases: register the run -> one Prefect task per (benchmark task, seed) rollout group ->
score from the trajectory database. Groups persist their results, so a retried or restarted
run skips finished groups; every trajectory, turn and token lands in the database.

Departures from the paper: the paper reports Pass@3/Avg@3 of 4B-9B models on GPUs; the
default here is SmolLM2-135M on CPU, so figures are far lower. Seeds re-sample the rollouts of
the same frozen policy (the paper's 3 independent runs).

Run: hs eval --benchmark dbbench --split dev --harness h0 --k 3 --seeds 3 [--limit N]
     on Ray (prefect-ray): add --set runner.kind=ray [--set runner.address=ray://HEAD:10001]
"""

from __future__ import annotations

from prefect import flow, get_run_logger
from prefect.futures import as_completed
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from configs.schema import EvalConfig
from flows import artifacts
from flows.hooks import mark_failed_on_failure
from flows.opening import open_run
from tasks.evaluation import (
    groups_in_flight,
    record_group,
    register_run,
    result_storage,
    rollout_group,
    run_id_for,
    score_evaluation,
    task_runner,
)


def _progress() -> Progress:
    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("solved {task.fields[solved]}/{task.fields[rollouts]}"),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
    )


@flow(
    name="evaluate",
    flow_run_name="eval-{config.name}-{config.split}",
    on_failure=[mark_failed_on_failure(EvalConfig, run_id_for), artifacts.failure_artifact(EvalConfig, run_id_for)],
    on_crashed=[artifacts.failure_artifact(EvalConfig, run_id_for)],
)
def evaluate(config: EvalConfig, database_url: str | None = None) -> dict:
    cfg = config
    logger = get_run_logger()
    run = open_run(cfg, register_run, database_url, warm_start=False)  # run row, owner
    # Task-major order: an interrupted run has complete seeds for the tasks it reached.
    jobs = [(task_id, seed) for task_id in run["bench_task_ids"] for seed in range(cfg.seeds)]
    logger.info("run %s: %d rollout groups (k=%d) on %s", run["run_id"], len(jobs), cfg.k, cfg.runner.kind)
    fan_out = rollout_groups.with_options(task_runner=task_runner(cfg.runner, groups_in_flight(cfg)))
    fanned = fan_out(cfg, run, jobs, database_url)
    failures = fanned["failures"]
    if failures:
        raise RuntimeError(
            f"{len(failures)} of {len(jobs)} rollout groups failed (first: {failures[0]}); "
            "start the same command again (or hs rerun FLOW_RUN_ID) to run only those groups"
        )
    scores = score_evaluation(cfg, run["run_id"], run["harness_id"], database_url, expected_groups=len(jobs))
    result = {**scores, "workers": fanned["workers"], "rewritten_from_cache": fanned["rewritten"]}
    artifacts.publish_evaluation(cfg, result)  # the Pass@k / Avg@k table on the flow run's page
    return result


@flow(name="rollout-groups", flow_run_name="groups-{config.name}")
def rollout_groups(config: EvalConfig, run: dict, jobs: list[tuple[str, int]], database_url: str | None = None) -> dict:
    """Every (benchmark task, seed) group, at most groups_in_flight(cfg) at once, on this subflow's
    task runner (threads, or Ray tasks). Every finished group, cached or not, is made sure to be
    in the current database. Returns the failures' messages (the other groups persisted), the
    host:pid of every process that ran a group and how many groups were written from the cache."""
    cfg = config
    logger = get_run_logger()
    group_task = rollout_group.with_options(result_storage=result_storage(cfg))
    queue, in_flight, solved, rollouts, failures, workers = iter(jobs), set(), 0, 0, [], set()
    rewritten = 0

    def submit_next() -> None:
        job = next(queue, None)
        if job is not None:
            in_flight.add(group_task.submit(cfg, run["run_id"], run["choices"][job[0]], job[0], job[1], database_url))

    with _progress() as bar:  # at most groups_in_flight groups in flight, whatever the task runner
        bar_id = bar.add_task("rollout groups", total=len(jobs), solved=0, rollouts=0)
        for _ in range(groups_in_flight(cfg)):
            submit_next()
        while in_flight:
            future = next(as_completed(list(in_flight)))
            in_flight.remove(future)
            try:
                summary = future.result()
                rewritten += record_group(summary, database_url)  # a cached result skipped its writes
            except Exception as exc:  # noqa: BLE001 - keep going: a re-run then redoes only the failed groups
                failures.append(str(exc))
                logger.error("rollout group failed: %s", exc)
                summary = {"successes": []}
            workers.add(summary.get("worker"))
            solved, rollouts = solved + sum(summary["successes"]), rollouts + len(summary["successes"])
            bar.update(bar_id, advance=1, solved=solved, rollouts=rollouts)
            submit_next()
    logger.info("groups ran in %d worker process(es): %s", len(workers - {None}), sorted(workers - {None}))
    if rewritten:
        logger.info("%d cached group(s) were written to this database from the results cache", rewritten)
    return {"failures": failures, "workers": sorted(workers - {None}), "rewritten": rewritten}
