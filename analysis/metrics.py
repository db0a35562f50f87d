"""Pass@k and Avg@k over seeds, overall and per task type (pure functions, no database).

For one seed, Pass@k is the share of tasks solved at least once in its k rollouts, and Avg@k the
mean success over those k rollouts averaged over tasks. Both are reported as mean and std over
seeds (population std: the seeds are the whole set of runs we report on).
"""

from __future__ import annotations

from collections import defaultdict
from statistics import fmean, pstdev


def pass_avg(successes: dict[str, list[bool]]) -> tuple[float, float]:
    """successes: bench task id -> its k outcomes for one seed. Returns (Pass@k, Avg@k) in %."""
    if not successes:
        return 0.0, 0.0
    passed = [any(v) for v in successes.values()]
    avg = [fmean(v) if v else 0.0 for v in successes.values()]
    return 100.0 * fmean(passed), 100.0 * fmean(avg)


def _mean_std(values: list[float]) -> dict[str, float]:
    return {"mean": fmean(values), "std": pstdev(values) if len(values) > 1 else 0.0}


def summarise(outcomes: list[dict]) -> dict:
    """outcomes: rows {seed, bench_task_id, task_type, success}. Returns the metrics document.

    {"overall": {"pass": {mean, std}, "avg": {mean, std}, "n_tasks": N},
     "per_type": {type: {...same...}}, "per_seed": {seed: {"pass": x, "avg": y}}}
    """
    by_seed: dict[int, dict[str, list[bool]]] = defaultdict(lambda: defaultdict(list))
    types: dict[str, str] = {}
    for row in outcomes:
        by_seed[row["seed"]][row["bench_task_id"]].append(bool(row["success"]))
        types[row["bench_task_id"]] = row["task_type"]
    seeds = sorted(by_seed)

    def block(task_ids: set[str]) -> dict:
        pairs = [pass_avg({t: v for t, v in by_seed[s].items() if t in task_ids}) for s in seeds]
        return {
            "pass": _mean_std([p for p, _ in pairs]),
            "avg": _mean_std([a for _, a in pairs]),
            "n_tasks": len(task_ids),
        }

    all_ids = set(types)
    per_type = {t: block({i for i, tt in types.items() if tt == t}) for t in sorted(set(types.values()))}
    per_seed = {s: dict(zip(("pass", "avg"), pass_avg(by_seed[s]))) for s in seeds}
    return {"overall": block(all_ids), "per_type": per_type, "per_seed": per_seed}
