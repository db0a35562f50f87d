"""What each page shows, read from the trajectory database (plain dicts and ORM rows)."""

from __future__ import annotations

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from db.models import BenchTask, Harness, RolloutGroup, RouterDecision, Run, TrainStep, Trajectory
from rl.modes import FIRST_ROLES

PAGE = 50  # rows per page of a listing
CHART_METRICS = {  # per-update signals charted on a training run's page
    "train/valid_group_ratio": "valid-group ratio",
    "rollout/rescues_triggered": "rescues",
    "rollout/rescue_success": "rescue success",
    "train/reward_mean": "mean reward",
    "train/loss": "loss",
    "train/mismatch_mean": "mismatch weight (mean)",
}


def _section(config: dict) -> dict:
    """The part of a run's config that names its benchmark and method (a pipeline nests it in train)."""
    return config.get("train") if isinstance(config.get("train"), dict) else config


def benchmark_of(run: Run) -> str:
    return str((_section(run.config or {}).get("env") or {}).get("benchmark", ""))


def method_of(run: Run) -> str:
    config = run.config or {}
    return str(config.get("baseline") or _section(config).get("mode") or "")


def runs(session: Session, kind: str = "", benchmark: str = "", method: str = "", status: str = "") -> list[dict]:
    query = select(Run).order_by(Run.created_at.desc())
    if kind:
        query = query.where(Run.kind == kind)
    if status:
        query = query.where(Run.status == status)
    out = []
    for run in session.scalars(query):
        row = {"run": run, "benchmark": benchmark_of(run), "method": method_of(run), "headline": headline(run)}
        if (not benchmark or row["benchmark"] == benchmark) and (not method or row["method"] == method):
            out.append(row)
    return out


def headline(run: Run) -> str:
    """A run's main figure in a few words, from its results."""
    results = run.results or {}
    for key in ("pass", "avg", "success_rate", "agreement", "size", "updates"):
        value = results.get(key)
        if isinstance(value, dict) and isinstance(value.get("mean"), int | float):
            return f"{key} {value['mean']:.3f}"
        if isinstance(value, int | float):
            return f"{key} {value:.3f}" if isinstance(value, float) else f"{key} {value}"
    return ""


def filter_choices(session: Session) -> dict[str, list[str]]:
    all_runs = session.scalars(select(Run)).all()
    return {
        "kind": sorted({r.kind for r in all_runs}),
        "benchmark": sorted({benchmark_of(r) for r in all_runs} - {""}),
        "method": sorted({method_of(r) for r in all_runs} - {""}),
        "status": sorted({r.status for r in all_runs}),
    }


def train_steps(session: Session, run_id: str) -> list[TrainStep]:
    return list(session.scalars(select(TrainStep).where(TrainStep.run_id == run_id).order_by(TrainStep.step)))


def charts(steps: list[TrainStep]) -> list[dict]:
    """One chart per signal: (step, value) points, with the value range for the axis labels."""
    out = []
    for key, label in CHART_METRICS.items():
        points = [(s.step, float(s.metrics[key])) for s in steps if isinstance(s.metrics.get(key), int | float)]
        if points:
            values = [v for _, v in points]
            out.append({"label": label, "points": points, "low": min(values), "high": max(values)})
    return out


def group_counts(session: Session, run_id: str) -> list[tuple[int, str, int, int]]:
    """(step, role, groups, successes) of a run."""
    query = (
        select(RolloutGroup.step, RolloutGroup.role, func.count(), func.sum(RolloutGroup.n_success))
        .where(RolloutGroup.run_id == run_id)
        .group_by(RolloutGroup.step, RolloutGroup.role)
        .order_by(RolloutGroup.step, RolloutGroup.role)
    )
    return [tuple(row) for row in session.execute(query)]


def groups(session: Session, run_id: str, step: int | None = None, page: int = 0) -> list[RolloutGroup]:
    query = select(RolloutGroup).where(RolloutGroup.run_id == run_id)
    if step is not None:
        query = query.where(RolloutGroup.step == step)
    query = query.order_by(RolloutGroup.step, RolloutGroup.bench_task_id, RolloutGroup.role)
    return list(session.scalars(query.offset(page * PAGE).limit(PAGE)))


def update_rows(session: Session, run_id: str, step: int) -> list[dict]:
    """An update's groups by task: the first group (dead when it had no success), its rescue group
    when there is one, and the router's decision behind the rescue."""
    by_task: dict[str, dict] = {}
    for g in groups_of_step(session, run_id, step):
        row = by_task.setdefault(g.bench_task_id, {"task": g.bench_task_id, "first": None, "rescue": None})
        if g.role in FIRST_ROLES:
            row["first"] = g
        elif g.role in ("rescue", "h0_rescue"):
            row["rescue"] = g
    decisions = session.scalars(
        select(RouterDecision).where(RouterDecision.run_id == run_id, RouterDecision.step == step)
    ).all()
    names = harness_names(session)
    for d in decisions:
        if d.bench_task_id in by_task:
            by_task[d.bench_task_id]["decision"] = {
                "ranking": [names.get(h, h[:12]) for h in d.ranking],
                "chosen": [names.get(h, h[:12]) for h in d.chosen],
                "votes": {v: [names.get(h, h[:12]) for h in r] for v, r in (d.votes.get("voters") or {}).items()},
                "errors": d.votes.get("errors") or {},
                "router": d.router,
                "profile_version": d.profile_version,
            }
    for row in by_task.values():
        first = row["first"]
        row["dead"] = first is not None and first.n_success == 0
    return sorted(by_task.values(), key=lambda r: r["task"])


def groups_of_step(session: Session, run_id: str, step: int) -> list[RolloutGroup]:
    query = select(RolloutGroup).where(RolloutGroup.run_id == run_id, RolloutGroup.step == step)
    return list(session.scalars(query.order_by(RolloutGroup.bench_task_id, RolloutGroup.role)))


def harness_names(session: Session) -> dict[str, str]:
    return {h.id: h.name for h in session.scalars(select(Harness))}


def trajectories_of(session: Session, group_id: str) -> list[Trajectory]:
    query = select(Trajectory).where(Trajectory.group_id == group_id).order_by(Trajectory.sample_index)
    return list(session.scalars(query))


def task(session: Session, task_id: str) -> BenchTask | None:
    return session.get(BenchTask, task_id)


def token_rows(turn) -> list[dict]:
    """The policy's tokens of one turn: id, text when the tokenizer is known, log-prob, in the loss."""
    ids, logprobs = list(turn.completion_ids or []), list(turn.completion_logprobs or [])
    mask = list(turn.loss_mask or [])[len(turn.context_ids or []) :]
    return [
        {
            "id": token,
            "logprob": logprobs[i] if i < len(logprobs) else None,
            "trained": bool(mask[i]) if i < len(mask) else True,
        }
        for i, token in enumerate(ids)
    ]
