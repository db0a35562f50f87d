"""WHALE: harness search alternating with rejection-sampling fine-tuning of the policy.

The paper: WHALE alternates harness search with rejection-sampling fine-tuning (fine-tuning the
policy on the successful trajectories collected under the current harnesses), and is reported
under its best harness (H_best) and under H0.

Our reading, for rounds r = 1..rft.rounds, starting from the starting policy:
  1. search: the current policy runs under H0 and every pool harness on the training config's
     validation tasks (the re-anchor's tasks and k); the rft.harnesses best (ties to H0, then
     pool order) are the round's current harnesses;
  2. collect: the current policy runs rft.k rollouts per task under each current harness, on
     the round's rft.tasks_per_round training tasks (seeded batches, as training draws them);
  3. fine-tune: the current policy is fine-tuned on every successful rollout of the round (the
     loss on its own tokens, as the GRPO update's mask), rft.steps AdamW steps; no success
     leaves it unchanged.
A last search with the final policy gives H_best; the final policy is evaluated under H0
("after") and under H_best ("best"), the starting policy under H0 ("before").

Departures: the paper's search edits harnesses (Meta-Harness style) in every round; ours
re-selects among the frozen pool (the evolution, when `evolve:` is set, runs once, before the
rounds), so the search adapts to the policy but does not write new harnesses. Budget: search =
the selections' rollouts (+ the evolution's); training = the collected rollouts.

Run: hs run configs/baselines/whale.yaml
"""

from __future__ import annotations

from prefect import flow, get_run_logger
from prefect.runtime import flow_run

from configs.pipeline import PipelineConfig
from flows import artifacts
from flows.baselines.search import harness_search, search_record, searched_pool
from flows.evaluate import evaluate
from tasks.baselines import collect_configs, deployment_configs, rft_checkpoint, rollout_budget, round_tasks
from tasks.pipeline import pipeline_run_id, record_results
from tasks.run_identity import init_checkpoint


@flow(
    name="whale",
    flow_run_name="whale-{config.name}",
    on_failure=[artifacts.failure_artifact(PipelineConfig, pipeline_run_id)],
    on_crashed=[artifacts.failure_artifact(PipelineConfig, pipeline_run_id)],
)
def whale(config: PipelineConfig, database_url: str | None = None) -> dict:
    cfg = config
    logger = get_run_logger()
    pool_version, train_cfg = searched_pool(cfg, database_url)  # evolved now with `evolve:`, else frozen
    policy, rounds, searched, collected, finetuned = init_checkpoint(train_cfg), [], [], [], []
    for r in range(cfg.rft.rounds):
        found = harness_search(cfg, train_cfg, policy, f"r{r}-search", database_url)  # harness search, policy frozen
        current = {name: found["sources"][name] for name in found["ranked"][: cfg.rft.harnesses]}
        tasks = round_tasks(cfg, train_cfg, r)
        runs = {
            name: evaluate(e, database_url)["run_id"]  # rollouts under the current harnesses
            for name, e in collect_configs(cfg, train_cfg, policy, current, tasks, f"r{r}-collect").items()
        }
        tuned = rft_checkpoint(cfg, train_cfg, f"rft-r{r}", policy, list(runs.values()), database_url)
        logger.info(
            "round %d: harnesses %s, %d successes -> %s", r, list(current), tuned["examples"], tuned["checkpoint"]
        )
        rounds.append({"round": r, "harnesses": list(current), "success": found["success"], **tuned})
        searched += list(found["runs"].values())
        collected += list(runs.values())
        finetuned += [tuned["run_id"]] if tuned["run_id"] else []
        policy = tuned["checkpoint"]
    final = harness_search(cfg, train_cfg, policy, "final-search", database_url)
    best = final["ranked"][0]
    deployed = deployment_configs(cfg, train_cfg, policy, final["sources"][best])
    evaluations = {label: {**evaluate(e, database_url), "harness": e.harness} for label, e in deployed.items()}
    extra = {
        "method": "whale",
        "rounds": rounds,
        "search": search_record(final, train_cfg),
        "budget": rollout_budget(
            pool_version,
            cfg.train.env.benchmark,
            searched + list(final["runs"].values()),
            database_url,
            collected,
            finetuned,
        ),
    }
    record = record_results(cfg, pool_version, None, policy, evaluations, database_url, flow_run.get_id(), extra)
    artifacts.publish_results(cfg.name, pipeline_run_id(cfg), record)
    return record
