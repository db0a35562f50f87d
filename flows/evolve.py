"""Evolution flow: directional harness evolution and the frozen, versioned sibling pool (docs/method.md §2).

With the starting policy frozen, for rounds g = 1..R from parents {H0}:
  1. diagnose: every parent runs k rollouts on the same sampled training tasks; every failure
     gets a root cause; causes backed by >= min_support tasks form clusters;
  2. edit: the editor proposes children per parent, each targeting 2-3 related causes;
  3. validate: static check (schema + hook sandbox, at patch time), then the child runs on at
     most 30 tasks (the parent's targeted failures + solved controls), one persisted Prefect
     task per candidate; valid = fixes >= min_fixed targeted failures, breaks <= max_broken controls;
  4. select: up to B parents for the next round by greedy maximum coverage of solved tasks;
  5. grow: every valid child joins the pool, selected or not.
Then the pool (H0 + siblings) is frozen into harness_pool/pools/<benchmark>/<version>/, recorded
in the database and, when the repo has DVC initialised, dvc-added and git-tagged.

Departures from the paper: at CPU scale the policy is SmolLM2-135M after the supervised warm
start, the editor defaults to offline operators (an LLM editor is one config flag away), a
round with no valid child keeps its parents (the offline editor then tries other operator
variants), controls are the tasks the parent solved in every diagnosis rollout, and one
control may flip (max_broken 1) because k is small.

Run: hs evolve --config configs/evolve_dbbench_smol.yaml
"""

from __future__ import annotations

from prefect import flow, get_run_logger
from prefect.futures import wait
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from configs.schema import EvolveConfig
from flows import artifacts
from flows.hooks import mark_failed_on_failure
from flows.opening import open_run
from harness_pool.selection import greedy_cover
from tasks.evaluation import result_storage
from tasks.evolution import evolve_run_id, freeze, record_harness_run, register_evolution, run_harness
from tasks.evolution_candidates import judge, propose_children, record_candidates, record_rejected


def run_harnesses(
    cfg: EvolveConfig, jobs: list[tuple], run_id: str, database_url: str | None, bar, bar_id
) -> list[dict]:
    """Harness runs, `concurrency` at a time (their generate calls are batched together); each
    result, fresh or cached, is made sure to be in the current database."""
    runner = run_harness.with_options(result_storage=result_storage(cfg))
    out = []
    for start in range(0, len(jobs), cfg.concurrency):
        futures = [
            runner.submit(cfg, run_id, harness, task_ids, role, rnd, k, database_url)
            for harness, task_ids, role, rnd, k in jobs[start : start + cfg.concurrency]
        ]
        wait(futures)
        for (harness, *_), future in zip(jobs[start : start + cfg.concurrency], futures):
            out.append(future.result())
            record_harness_run(harness, out[-1], database_url)  # a cached result skipped its writes
        bar.update(bar_id, advance=len(futures))
    return out


@flow(
    name="evolve",
    flow_run_name="evolve-{config.name}",
    on_failure=[
        mark_failed_on_failure(EvolveConfig, evolve_run_id),
        artifacts.failure_artifact(EvolveConfig, evolve_run_id),
    ],
    on_crashed=[artifacts.failure_artifact(EvolveConfig, evolve_run_id)],
)
def evolve(config: EvolveConfig, database_url: str | None = None) -> dict:
    cfg = config
    logger = get_run_logger()
    run = open_run(cfg, register_evolution, database_url, warm_start=True)  # warm start, run row, owner
    run_id, h0, tasks = run["run_id"], run["h0"], run["task_ids"]
    parents, pool, rounds = [h0], [], []
    known = {_id(h0)}
    with Progress(
        TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn()
    ) as bar:
        for rnd in range(1, cfg.rounds + 1):
            bar_id = bar.add_task(f"round {rnd}: diagnose", total=len(parents))
            diagnoses = run_harnesses(
                cfg, [(p, tasks, "diagnose", rnd, cfg.diagnose.k) for p in parents], run_id, database_url, bar, bar_id
            )
            candidates = []
            for parent, diagnosis in zip(parents, diagnoses):
                proposed = propose_children(cfg, run_id, rnd, parent, diagnosis, sorted(known), database_url)
                record_rejected(cfg, run_id, rnd, proposed, database_url)
                candidates += [c for c in proposed if c["spec"] is not None]
                known |= {c["harness_id"] for c in proposed if c["harness_id"]}
            bar.update(bar_id, description=f"round {rnd}: validate", total=len(parents) + len(candidates))
            runs = run_harnesses(
                cfg,
                [
                    (c["spec"], sorted(set(c["targeted"]) | set(c["controls"])), "validate", rnd, cfg.validation.k)
                    for c in candidates
                ],
                run_id,
                database_url,
                bar,
                bar_id,
            )
            judged = [
                {**c, **judge(c, r, cfg.validation.min_fixed, cfg.validation.max_broken)}
                for c, r in zip(candidates, runs)
            ]
            valid = [c for c in judged if c["valid"]]
            chosen = [valid[i] for i in greedy_cover([set(c["solved"]) for c in valid], cfg.parents_per_round)]
            record_candidates(cfg, run_id, rnd, judged, [c["harness_id"] for c in chosen], database_url)
            pool += [c["spec"] for c in valid]
            rounds.append(
                {
                    "round": rnd,
                    "parents": len(parents),
                    "candidates": len(judged),
                    "valid": len(valid),
                    "selected": [c["name"] for c in chosen],
                }
            )
            logger.info(
                "round %d: %d parents, %d candidates, %d valid, selected %s",
                rnd,
                len(parents),
                len(judged),
                len(valid),
                [c["name"] for c in chosen],
            )
            if chosen:
                parents = [c["spec"] for c in chosen]
            else:  # keep the parents: the next round's editor tries other operator variants
                logger.info("round %d gave no valid child: the parents stay for round %d", rnd, rnd + 1)
    frozen = freeze(cfg, run_id, h0, pool, database_url)
    result = {"run_id": run_id, "rounds": rounds, **frozen}
    artifacts.publish_evolution(result)
    return result


def _id(spec: dict) -> str:
    from harness_pool.spec import HarnessSpec

    return HarnessSpec.model_validate(spec).id
