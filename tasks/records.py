"""Turning rollout results into database rows (deterministic ids, one group at a time)."""

from __future__ import annotations

from db.ids import stable_id
from db.models import RolloutGroup, Trajectory, Turn
from rl.rollout import RolloutResult


def group_id(run_id: str, step: int, bench_task_id: str, harness_id: str | None, seed: int, role: str) -> str:
    return stable_id("group", run_id, step, bench_task_id, harness_id or "mixed", seed, role)


def build_group(*, run_id: str, step: int, bench_task_id: str, harness_id: str | None, seed: int, role: str,
                checkpoint: str, results: list[RolloutResult]) -> RolloutGroup:
    gid = group_id(run_id, step, bench_task_id, harness_id, seed, role)
    group = RolloutGroup(id=gid, run_id=run_id, step=step, bench_task_id=bench_task_id, harness_id=harness_id,
                         seed=seed, k=len(results), role=role, checkpoint=checkpoint,
                         n_success=sum(r.verdict.success for r in results))
    for r in results:
        tid = stable_id("traj", run_id, step, bench_task_id, r.harness_id, seed, role, r.sample_index)
        traj = Trajectory(
            id=tid, run_id=run_id, bench_task_id=bench_task_id, harness_id=r.harness_id,
            sample_index=r.sample_index, checkpoint=checkpoint, reward=r.verdict.reward,
            success=r.verdict.success, failure_kind=r.failure_kind, finish_reason=r.end_reason,
            answer=r.answer, n_turns=len(r.turns), n_policy_tokens=r.n_policy_tokens,
            behaviour_tags=r.behaviour_tags, seconds_total=r.seconds_total,
            seconds_generate=r.seconds_generate, seconds_env=r.seconds_env,
            details=_jsonable(r.verdict.details))
        traj.turns = [
            Turn(id=stable_id(tid, t.index), index=t.index, context_text=t.context_text,
                 context_ids=t.context_ids, completion_text=t.completion_text, completion_ids=t.completion_ids,
                 completion_logprobs=t.completion_logprobs, loss_mask=t.loss_mask, action_kind=t.action_kind,
                 action=_jsonable(t.action), observation=t.observation, hook_events=t.hook_events,
                 seconds_generate=t.seconds_generate, seconds_env=t.seconds_env)
            for t in r.turns]
        group.trajectories.append(traj)
    return group


def _jsonable(value):
    """JSON columns take plain data; answers may hold Decimal or bytes from SQL drivers."""
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return str(value)
