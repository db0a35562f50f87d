"""Diagnosis: one root cause per failed trajectory, then clusters of causes backed by >= 2 tasks.

The root cause of a rollout comes from its benchmark's rules module (`Benchmark.rules`, e.g.
envs/dbbench/rules.py), which reads only what the trajectory shows, most specific cause first.
An LLM diagnoser (harness_pool/llm.py) may replace the rule's cause when one is configured.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from envs.registry import rules


def causes_for(benchmark: str) -> dict[str, str]:
    """cause -> one-line explanation, for a benchmark's diagnosis rules."""
    return rules(benchmark).CAUSES


def root_cause(result, task) -> str | None:
    """The rule root cause of one rollout of `task` (rl.rollout.RolloutResult); None for a success."""
    return rules(task.benchmark).root_cause(result, task)


@dataclass
class Cluster:
    cause: str
    bench_task_ids: list[str] = field(default_factory=list)
    trajectory_ids: list[str] = field(default_factory=list)

    @property
    def support(self) -> int:
        return len(self.bench_task_ids)


def cluster_causes(causes: dict[str, tuple[str, str]], min_support: int = 2) -> list[Cluster]:
    """Clusters from {trajectory id: (bench task id, cause)}: those backed by at least
    `min_support` distinct tasks, largest first (ties by cause name)."""
    by_cause: dict[str, Cluster] = defaultdict(lambda: Cluster(cause=""))
    for traj_id, (task_id, cause) in sorted(causes.items()):
        c = by_cause[cause]
        c.cause = cause
        c.trajectory_ids.append(traj_id)
        if task_id not in c.bench_task_ids:
            c.bench_task_ids.append(task_id)
    kept = [c for c in by_cause.values() if c.support >= min_support]
    return sorted(kept, key=lambda c: (-c.support, c.cause))
