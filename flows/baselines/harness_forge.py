"""HarnessForge: a policy fine-tuned per harness branch; the best (harness, policy) pair deployed.

The paper: HarnessForge evolves a paired policy per harness branch, each branch's harness with
its own fine-tuned policy, and reports the best pair.

Our reading: the starting policy ranks H0 and every pool harness on the training config's
validation tasks (the re-anchor's tasks and k); the rft.harnesses best are the branches. Each
branch fine-tunes its own copy of the starting policy for rft.rounds rounds: rft.k rollouts per
task under the branch's harness on the round's rft.tasks_per_round training tasks (the same
seeded batches for every branch), then fine-tuning on the round's successful rollouts (the loss
on the policy's own tokens). Each pair is validated on the same validation tasks; the best pair
(ties to the earlier branch) is deployed: its policy under its harness ("best") and under H0
("after"); the starting policy under H0 is "before".

Departures: the paper's branches are grown by harness evolution with their policies in the
loop; ours are the frozen pool's best harnesses for the starting policy (the evolution, when
`evolve:` is set, runs once, before branching). Budget: search = the ranking's and the pair
validations' rollouts (+ the evolution's); training = the collected rollouts of every branch.

Run: hs run configs/baselines/harness_forge.yaml
"""

from __future__ import annotations

from prefect import flow, get_run_logger
from prefect.runtime import flow_run

from configs.pipeline import PipelineConfig
from flows import artifacts
from flows.baselines.search import harness_search, search_record, searched_pool
from flows.evaluate import evaluate
from harness_pool.selection import ranked_harnesses
from tasks.baselines import (
    collect_configs,
    deployment_configs,
    rft_checkpoint,
    rollout_budget,
    round_tasks,
    selection_configs,
)
from tasks.pipeline import pipeline_run_id, record_results
from tasks.run_identity import init_checkpoint


@flow(
    name="harness-forge",
    flow_run_name="harness-forge-{config.name}",
    on_failure=[artifacts.failure_artifact(PipelineConfig, pipeline_run_id)],
    on_crashed=[artifacts.failure_artifact(PipelineConfig, pipeline_run_id)],
)
def harness_forge(config: PipelineConfig, database_url: str | None = None) -> dict:
    cfg = config
    logger = get_run_logger()
    pool_version, train_cfg = searched_pool(cfg, database_url)  # evolved now with `evolve:`, else frozen
    start = init_checkpoint(train_cfg)
    found = harness_search(cfg, train_cfg, start, "branch-search", database_url)
    branches = found["ranked"][: cfg.rft.harnesses]
    pairs, searched, collected, finetuned = {}, list(found["runs"].values()), [], []
    for b in branches:  # each branch fine-tunes its own copy of the starting policy under its harness
        policy = start
        for r in range(cfg.rft.rounds):
            tasks = round_tasks(cfg, train_cfg, r)
            (collect,) = collect_configs(
                cfg, train_cfg, policy, {b: found["sources"][b]}, tasks, f"branch-r{r}-collect"
            ).values()
            run_id = evaluate(collect, database_url)["run_id"]
            collected.append(run_id)
            tuned = rft_checkpoint(cfg, train_cfg, f"rft-{b}-r{r}", policy, [run_id], database_url)
            policy = tuned["checkpoint"]
            finetuned += [tuned["run_id"]] if tuned["run_id"] else []
        check = evaluate(selection_configs(cfg, train_cfg, policy, f"pair-{b}")[b], database_url)  # the pair
        searched.append(check["run_id"])
        pairs[b] = {"checkpoint": policy, "success": check["overall"]["avg"]["mean"] / 100}
        logger.info("branch %s: policy %s, validation success %.2f", b, policy, pairs[b]["success"])
    best = ranked_harnesses({b: p["success"] for b, p in pairs.items()}, branches)[0]
    deployed = deployment_configs(cfg, train_cfg, pairs[best]["checkpoint"], found["sources"][best])
    evaluations = {label: {**evaluate(e, database_url), "harness": e.harness} for label, e in deployed.items()}
    extra = {
        "method": "harness_forge",
        "search": {**search_record(found, train_cfg), "best": best},
        "pairs": pairs,
        "budget": rollout_budget(pool_version, cfg.train.env.benchmark, searched, database_url, collected, finetuned),
    }
    record = record_results(
        cfg, pool_version, None, pairs[best]["checkpoint"], evaluations, database_url, flow_run.get_id(), extra
    )
    artifacts.publish_results(cfg.name, pipeline_run_id(cfg), record)
    return record
