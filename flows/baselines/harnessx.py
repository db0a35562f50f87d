"""HarnessX: harness evolution coupled with GRPO whose groups span harnesses, fed from a shared
replay buffer.

The paper: HarnessX couples harness evolution with GRPO; a group's rollouts span harnesses, and
updates are fed from a replay buffer shared across the run.

Our reading, for rounds r = 1..coupling.rounds, from the starting policy:
  1. evolve: one round of our directional evolution (flows/evolve.py, `evolve:` settings) from
     H0 with the current policy frozen; its valid children form a pool version of their own;
  2. train: a segment of train.updates / rounds updates in mode harnessx (rl/replay.py) over
     train.pool plus every pool evolved so far: each group's K rollouts spread over H0 and the
     pool; each update also trains on groups drawn from a replay buffer that starts with the
     earlier segments' groups, so one buffer runs through the whole coupling.
The final policy is evaluated as the pipeline evaluates Harness-S (H0 before/after, Rank-1 over
the final pool with the last segment's profiles, outside harnesses).

Departures: evolution and training alternate in rounds rather than running concurrently; every
round evolves from H0 (the policy, not the parents, carries over). Budget: search = the
evolution rounds' rollouts; training = the segments' update groups (replays cost none);
validation = the segments' re-anchors.

Run: hs run configs/baselines/harnessx_coupled.yaml
"""

from __future__ import annotations

from prefect import flow, get_run_logger
from prefect.runtime import flow_run

from configs.pipeline import PipelineConfig
from flows import artifacts
from flows.evaluate import evaluate
from flows.evolve import evolve
from flows.opening import open_baseline
from flows.train import train
from tasks.baselines import coupled_budget, round_evolution, segment_config, segment_updates
from tasks.pipeline import ensure_training_split, evaluation_configs, pipeline_run_id, record_results, training_config
from tasks.run_identity import init_checkpoint


@flow(
    name="harnessx",
    flow_run_name="harnessx-{config.name}",
    on_failure=[artifacts.failure_artifact(PipelineConfig, pipeline_run_id)],
    on_crashed=[artifacts.failure_artifact(PipelineConfig, pipeline_run_id)],
)
def harnessx(config: PipelineConfig, database_url: str | None = None) -> dict:
    cfg = config
    logger = get_run_logger()
    ensure_training_split(cfg.train.env)
    start_cfg = training_config(cfg, None)
    open_baseline(cfg, start_cfg, database_url)  # upper bounds within the caps, then the warm start
    policy, pools, evolutions, segments = init_checkpoint(start_cfg), [], [], []
    for r, updates in enumerate(segment_updates(cfg)):
        evolved = evolve(round_evolution(cfg, r, policy), database_url)  # the current policy frozen
        pools.append(f"pool:{evolved['path']}")
        trained = train(segment_config(cfg, r, policy, pools, updates, list(segments)), database_url)
        evolutions.append(evolved["run_id"])
        segments.append(trained["run_id"])
        policy = trained["checkpoint"]
        logger.info(
            "round %d: pool %s (%d harnesses), %d updates -> %s",
            r,
            evolved["version"],
            evolved["size"],
            updates,
            policy,
        )
    final_cfg = start_cfg.model_copy(update={"pool": [*start_cfg.pool, *pools]})  # starts where round 0 did
    evaluations = {
        label: {**evaluate(e, database_url), "harness": e.harness}
        for label, e in evaluation_configs(cfg, final_cfg, segments[-1], policy).items()
    }
    extra = {
        "method": "harnessx",
        "segments": segments,
        "evolutions": evolutions,
        "pools": pools,
        "budget": coupled_budget(evolutions, segments, database_url),
    }
    record = record_results(cfg, None, segments[-1], policy, evaluations, database_url, flow_run.get_id(), extra)
    artifacts.publish_results(cfg.name, pipeline_run_id(cfg), record)
    return record
