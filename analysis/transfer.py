"""Transfer on the rescued tasks: the mechanism's own measure (issue 52).

A training task whose first H0 group was dead gives GRPO no signal; Harness-S rescues it under
siblings, and the claim is that what the policy learned there shows back under H0. So, for every
training task the main run drew, its category from that run's groups:

- rescued: the first H0 group had no success and the rescue group at that update had at least one;
- dead, not rescued: no success in either (the control: trained on neither side);
- alive: the first H0 group had a success (both methods had its signal).

On those tasks, the pipelines' `trained-tasks-*` evaluations (H0, k rollouts, fresh seeds; the
config's `evaluate.trained_tasks_k`) give each task's H0 success at the end of training under the
main method, under each other method trained with the same seed (same data order, so the same
tasks; for GRPO the rescued tasks' groups were dead), and under the warm start (the main run's
`trained-tasks-before`). Differences are paired over (seed, task) units, seeds pooled: 95%
paired-bootstrap interval and sign-flip p-value of the mean Avg@k difference, in points.
"""

from __future__ import annotations

from collections import defaultdict
from statistics import fmean

import pandas as pd
from sqlalchemy import text
from sqlalchemy.orm import Session

from analysis.comparisons import task_scores
from analysis.runs import Method, seed_groups
from analysis.statistics import paired_bootstrap, sign_flip_test, verdict

CATEGORIES = ("rescued", "dead, not rescued", "alive")
COLUMNS = ["category", "comparison", "seeds", "n_tasks", "a_avg", "b_avg", "diff", "low", "high", "p", "verdict"]


def task_categories(session: Session, train_run_id: str) -> dict[str, str]:
    """bench task -> its category (module doc) from the training run's first H0 group of it."""
    rows = session.execute(
        text(
            "SELECT bench_task_id, step, role, n_success FROM rollout_groups "
            "WHERE run_id = :r AND role IN ('h0', 'rescue') ORDER BY step"
        ),
        {"r": train_run_id},
    ).mappings()
    first: dict[str, tuple[int, int]] = {}
    rescued: dict[tuple[str, int], int] = defaultdict(int)
    for r in rows:
        if r["role"] == "h0":
            first.setdefault(r["bench_task_id"], (r["step"], r["n_success"]))
        else:
            rescued[(r["bench_task_id"], r["step"])] += r["n_success"]
    return {
        task: "alive" if successes else "rescued" if rescued[(task, step)] else "dead, not rescued"
        for task, (step, successes) in first.items()
    }


def transfer_table(session: Session, methods: list[Method]) -> pd.DataFrame:
    """Per category: the main method against the warm start and against every other method with a
    run of the same seed, and each such method against the warm start (module doc)."""
    groups = seed_groups(methods)
    main, *others = list(groups)
    pairs: dict[tuple[str, str], list[tuple[float, float]]] = defaultdict(list)
    seeds: dict[tuple[str, str], set] = defaultdict(set)
    for m in groups[main]:
        after, before = m.eval_run("trained-tasks-after"), m.eval_run("trained-tasks-before")
        if not (m.train_run_id and after and before):
            continue
        scores = {"main": task_scores(session, after), "warm start": task_scores(session, before)}
        sides = [(f"{main} - warm start", "main", "warm start")]
        for g in others:
            twin = next((o for o in groups[g] if o.seed == m.seed and o.eval_run("trained-tasks-after")), None)
            if twin is not None:
                scores[g] = task_scores(session, twin.eval_run("trained-tasks-after"))
                sides += [(f"{main} - {g}", "main", g), (f"{g} - warm start", g, "warm start")]
        for task, category in task_categories(session, m.train_run_id).items():
            for label, a, b in sides:
                if task in scores[a] and task in scores[b]:
                    pairs[(category, label)].append((scores[a][task][1], scores[b][task][1]))
                    seeds[(category, label)].add(m.seed)
    rows = []
    for (category, label), units in sorted(pairs.items(), key=lambda kv: CATEGORIES.index(kv[0][0])):
        a, b = [x for x, _ in units], [y for _, y in units]
        interval, p_value = paired_bootstrap(a, b), sign_flip_test(a, b)
        rows.append(
            {
                "category": category,
                "comparison": label,
                "seeds": len(seeds[(category, label)]),
                "n_tasks": len(units),
                "a_avg": fmean(a),
                "b_avg": fmean(b),
                "diff": interval.estimate,
                "low": interval.low,
                "high": interval.high,
                "p": p_value,
                "verdict": verdict(interval, p_value),
            }
        )
    return pd.DataFrame(rows, columns=COLUMNS)
