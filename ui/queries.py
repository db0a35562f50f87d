"""What each page shows, read from the trajectory database (plain dicts and ORM rows)."""

from __future__ import annotations

from sqlalchemy import case, func, select
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


def groups(session: Session, run_id: str, step: int | None = None, page: int | None = 0) -> list[RolloutGroup]:
    """A run's groups (of one step), PAGE at a time (page None: all of them)."""
    query = select(RolloutGroup).where(RolloutGroup.run_id == run_id)
    if step is not None:
        query = query.where(RolloutGroup.step == step)
    query = query.order_by(RolloutGroup.step, RolloutGroup.bench_task_id, RolloutGroup.role)
    if page is not None:
        query = query.offset(page * PAGE).limit(PAGE)
    return list(session.scalars(query))


def update_rows(session: Session, run_id: str, step: int) -> list[dict]:
    """An update's groups by task: the first group (dead when it had no success), its rescue group
    when there is one, and the router's decision behind the rescue."""
    by_task: dict[str, dict] = {}
    for g in groups(session, run_id, step, page=None):
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


def harness_names(session: Session) -> dict[str, str]:
    return {h.id: h.name for h in session.scalars(select(Harness))}


def trajectories_of(session: Session, group_id: str) -> list[Trajectory]:
    query = select(Trajectory).where(Trajectory.group_id == group_id).order_by(Trajectory.sample_index)
    return list(session.scalars(query))


def same_task_groups(session: Session, group: RolloutGroup, limit: int = 30) -> list[dict]:
    """Other groups of the group's task, in any run (another harness, before or after training,
    another method), each with its run's kind and method: what the compare page pairs it with."""
    query = (
        select(RolloutGroup, Run)
        .join(Run, Run.id == RolloutGroup.run_id)
        .where(RolloutGroup.bench_task_id == group.bench_task_id, RolloutGroup.id != group.id)
        .order_by(
            case((RolloutGroup.run_id == group.run_id, 0), else_=1),  # this run's own groups first
            Run.created_at,
            RolloutGroup.step,
            RolloutGroup.role,
            RolloutGroup.id,
        )
        .limit(limit)
    )
    out = []
    for other, run in session.execute(query):
        same_run = other.run_id == group.run_id
        out.append({"group": other, "run": run, "method": method_of(run), "same_run": same_run})
    return out


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


SEARCH_FIELDS = ("task", "benchmark", "harness", "failure_kind", "min_reward", "max_reward", "text")


def search(session: Session, wanted: dict[str, str], page: int = 0) -> list[Trajectory]:
    """Trajectories matching every given field (text: in any reply or observation), newest first."""
    from db.models import Turn

    query = select(Trajectory).join(BenchTask, BenchTask.id == Trajectory.bench_task_id)
    if wanted.get("task"):
        query = query.where(Trajectory.bench_task_id.contains(wanted["task"], autoescape=True))
    if wanted.get("benchmark"):
        query = query.where(BenchTask.benchmark == wanted["benchmark"])
    if wanted.get("harness"):
        ids = select(Harness.id).where(Harness.name == wanted["harness"])
        query = query.where(Trajectory.harness_id.in_(ids))
    if wanted.get("failure_kind"):
        query = query.where(Trajectory.failure_kind == wanted["failure_kind"])
    for key, compare in (("min_reward", Trajectory.reward.__ge__), ("max_reward", Trajectory.reward.__le__)):
        if wanted.get(key):
            query = query.where(compare(float(wanted[key])))
    if wanted.get("text"):
        pattern = wanted["text"]
        in_reply = Turn.completion_text.contains(pattern, autoescape=True)
        turns = select(Turn.trajectory_id).where(in_reply | Turn.observation.contains(pattern, autoescape=True))
        query = query.where(Trajectory.id.in_(turns))
    query = query.order_by(Trajectory.created_at.desc(), Trajectory.id)
    return list(session.scalars(query.offset(page * PAGE).limit(PAGE)))


def search_choices(session: Session) -> dict[str, list[str]]:
    kinds = session.scalars(select(Trajectory.failure_kind).distinct().where(Trajectory.failure_kind.is_not(None)))
    return {
        "benchmark": sorted(set(session.scalars(select(BenchTask.benchmark).distinct()))),
        "harness": sorted(set(session.scalars(select(Harness.name).distinct()))),
        "failure_kind": sorted(set(kinds)),
    }


def pools(session: Session) -> list:
    from db.models import Pool

    return list(session.scalars(select(Pool).order_by(Pool.benchmark, Pool.created_at)))


def harnesses(session: Session) -> list[Harness]:
    return list(session.scalars(select(Harness).order_by(Harness.benchmark, Harness.name, Harness.created_at)))


def spec_diff(base: Harness | None, harness: Harness) -> str:
    """The harness against H0 (or its parent), as a unified diff of their YAML."""
    import difflib

    import yaml

    def lines(h: Harness | None) -> list[str]:
        return yaml.safe_dump(h.spec if h else {}, sort_keys=True, allow_unicode=True).splitlines(keepends=True)

    name = base.name if base else "nothing"
    return "".join(difflib.unified_diff(lines(base), lines(harness), f"{name}.yaml", f"{harness.name}.yaml"))


def base_of(session: Session, harness: Harness) -> Harness | None:
    """What a sibling is measured against: its first parent, else the benchmark's h0."""
    for parent in harness.parent_ids or []:
        found = session.get(Harness, parent)
        if found is not None:
            return found
    if harness.name == "h0":
        return None
    query = select(Harness).where(Harness.benchmark == harness.benchmark, Harness.name == "h0")
    return session.scalars(query.order_by(Harness.created_at)).first()


def profiles_of(session: Session, harness_id: str) -> list:
    from db.models import ProfileVersion

    query = select(ProfileVersion).where(ProfileVersion.harness_id == harness_id)
    return list(session.scalars(query.order_by(ProfileVersion.run_id, ProfileVersion.version)))


def task_success(session: Session, run_id: str) -> dict[str, float]:
    """bench task -> the run's success rate on it (every stored trajectory of the run)."""
    query = (
        select(Trajectory.bench_task_id, func.avg(case((Trajectory.success, 1.0), else_=0.0)))
        .where(Trajectory.run_id == run_id)
        .group_by(Trajectory.bench_task_id)
    )
    return {task: float(rate) for task, rate in session.execute(query)}


def paired_runs(session: Session, a: str, b: str) -> dict:
    """Two runs paired task by task: per-task success rates, the mean difference a - b with its
    paired bootstrap interval, the exact/approximate sign-flip p-value and the report's verdict."""
    from analysis.statistics import paired_bootstrap, sign_flip_test, verdict

    rates_a, rates_b = task_success(session, a), task_success(session, b)
    tasks = sorted(set(rates_a) & set(rates_b))
    rows = [(t, rates_a[t], rates_b[t]) for t in tasks]
    if not rows:
        return {"rows": [], "only_a": len(rates_a), "only_b": len(rates_b)}
    xs, ys = [r[1] for r in rows], [r[2] for r in rows]
    interval, p = paired_bootstrap(xs, ys), sign_flip_test(xs, ys)
    return {
        "rows": rows, "interval": interval, "p": p, "verdict": verdict(interval, p),
        "only_a": len(rates_a) - len(tasks), "only_b": len(rates_b) - len(tasks),
    }  # fmt: skip


def drawn_tasks(session: Session, run: Run) -> list[dict]:
    """A pipeline run's training tasks by what their first H0 group gave (rescued, dead and not
    rescued, alive: analysis/transfer.py), with each one's H0 success rate under the warm start and
    after training from the trained-tasks evaluations; empty when the run has none."""
    from analysis.transfer import CATEGORIES, task_categories

    results = (run.results or {}) if run.kind == "pipeline" else {}
    evaluations = {label: e.get("run_id") for label, e in (results.get("evaluations") or {}).items()}
    after, before = evaluations.get("trained-tasks-after"), evaluations.get("trained-tasks-before")
    if not (results.get("train_run_id") and after):
        return []
    rates_after, rates_before = task_success(session, after), task_success(session, before) if before else {}
    categories = task_categories(session, results["train_run_id"])
    rows = [
        {"task": t, "category": c, "before": rates_before.get(t), "after": rates_after.get(t), "eval": after}
        for t, c in categories.items()
    ]
    return sorted(rows, key=lambda r: (CATEGORIES.index(r["category"]), r["task"]))
