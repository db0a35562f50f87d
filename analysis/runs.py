"""Which runs a report compares: each given run (a pipeline or a training run, by id or name)
becomes a Method with its training run, its evaluations by label and a readable label.

A pipeline run's results document (tasks/pipeline.record_results) names its training run and
its evaluation runs ("before", "after", "rank1", "rank1-before", "outside-<harness>"; a baseline
that deploys a harness: "best"); a bare training run (e.g. an RQ3 router variant trained with
`hs train`) has no evaluations. A baseline without training (frozen_evolution) has no training run.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from sqlalchemy import select
from sqlalchemy.orm import Session

from db.models import Run
from rl.training_modes import MODES

REPORTABLE_KINDS = ("pipeline", "train")
# runs an export takes by themselves: a pool report, and the trainable editor's runs
STANDALONE_KINDS = ("pool_report", "editor_bundles", "editor_sft", "editor_train", "editor_compare")


@dataclass(frozen=True)
class Method:
    label: str
    run_id: str
    train_run_id: str | None
    mode: str
    router: str | None
    base_harness: str
    evaluations: dict[str, str] = field(default_factory=dict)  # label -> evaluation run id
    batch_tasks: int | None = None  # groups per update (one per task of the batch)
    segments: tuple[str, ...] = ()  # every training run, in order, when there are several (coupled HarnessX)
    search_runs: tuple[str, ...] = ()  # a search baseline's harness selections
    collection_runs: tuple[str, ...] = ()  # a fine-tuning baseline's collections and fine-tuning runs
    seed: int | None = None  # the training seed (train.seed): runs of one method that differ in it are replicates
    group: str = ""  # the method without its seed: the runs a seed-aware comparison pools (the label by default)

    @property
    def train_run_ids(self) -> tuple[str, ...]:
        return self.segments or ((self.train_run_id,) if self.train_run_id else ())

    def eval_run(self, label: str) -> str | None:
        return self.evaluations.get(label)


def _run_of_kind(session: Session, id_or_name: str, kinds: tuple[str, ...]) -> Run | None:
    """The run with this id, else the newest run with this name, when it is of one of ``kinds``."""
    run = session.get(Run, id_or_name)
    if run is None:
        run = session.scalars(
            select(Run).where(Run.name == id_or_name, Run.kind.in_(kinds)).order_by(Run.created_at.desc())
        ).first()
    return run if run is not None and run.kind in kinds else None


def find_run(session: Session, id_or_name: str) -> Run:
    """The run with this id, else the newest pipeline/training run with this name."""
    run = _run_of_kind(session, id_or_name, REPORTABLE_KINDS)
    if run is None:
        raise LookupError(
            f"no pipeline or training run '{id_or_name}': give a run id or name from "
            "`hs report training` or the runs table (kind 'pipeline' or 'train')"
        )
    return run


def method_of(session: Session, run: Run) -> Method:
    if run.kind == "pipeline":
        results = run.results or {}
        train_run_id = results.get("train_run_id")
        train_config = run.config.get("train", {})
        evaluations = {label: e["run_id"] for label, e in results.get("evaluations", {}).items()}
    else:
        train_run_id, train_config, evaluations = run.id, run.config, {}
    mode = (run.results or {}).get("method") or train_config.get("mode", "harness_s")  # a baseline names itself
    routed = mode in MODES and MODES[mode].needs_router  # a baseline's own name is no registered mode
    router = train_config.get("router", {}).get("kind") if routed else None
    label = f"{mode} ({router})" if router else mode
    return Method(
        label=label,
        run_id=run.id,
        train_run_id=train_run_id,
        mode=mode,
        router=router,
        base_harness=train_config.get("harness", "h0"),
        evaluations=evaluations,
        batch_tasks=train_config.get("batch_tasks"),
        segments=tuple((run.results or {}).get("segments", ())),
        seed=train_config.get("seed"),
        group=label,
        **_baseline_runs(run),
    )


def _baseline_runs(run: Run) -> dict[str, tuple[str, ...]]:
    """A baseline pipeline's selections (search_runs) and collections and fine-tuning runs
    (collection_runs), from the budget its results record; a run recorded before the budget kept
    them has its final search's selections in `search`."""
    results = (run.results or {}) if run.kind == "pipeline" else {}
    budget = results.get("budget") or {}
    search = budget.get("search_run_ids")
    if search is None:
        search = list(((results.get("search") or {}).get("selection_runs") or {}).values())
    return {"search_runs": tuple(search), "collection_runs": tuple(budget.get("training_run_ids") or ())}


def resolve_methods(session: Session, main: str, baselines: list[str]) -> list[Method]:
    """The main method first, then the baselines. Runs of one method with distinct training seeds
    are replicates: labelled 'METHOD seed S', one group. Other duplicate labels get the run name
    appended and stay groups of their own."""
    runs = [find_run(session, main)] + [find_run(session, b) for b in baselines]
    methods = [method_of(session, r) for r in runs]
    seeds_by_label: dict[str, list[int | None]] = {}
    for m in methods:
        seeds_by_label.setdefault(m.label, []).append(m.seed)

    def relabelled(m: Method, run: Run) -> Method:
        seeds = seeds_by_label[m.label]
        if len(seeds) == 1:
            return m
        if None not in seeds and len(set(seeds)) == len(seeds):
            return replace(m, label=f"{m.label} seed {m.seed}")
        return replace(m, label=f"{m.label} [{run.name}]", group=f"{m.label} [{run.name}]")

    return [relabelled(m, r) for m, r in zip(methods, runs)]


def seed_groups(methods: list[Method]) -> dict[str, list[Method]]:
    """group -> its runs (replicates over training seeds), in the order the groups first appear."""
    groups: dict[str, list[Method]] = {}
    for m in methods:
        groups.setdefault(m.group or m.label, []).append(m)
    return groups


def runs_of(methods: list[Method]) -> set[str]:
    """Every run a report over `methods` reads: each method's own, its training runs, its evaluations
    and a baseline's selections, collections and fine-tuning runs (the resource table's wall time)."""
    return {
        r
        for m in methods
        for r in (m.run_id, m.train_run_id, *m.segments, *m.evaluations.values(), *m.search_runs, *m.collection_runs)
        if r
    }


def pool_reports(session: Session, ids_or_names: list[str]) -> list[tuple[str, dict]]:
    """(run name, results) of finished pool-report runs (`hs pool report`), by id or newest with the name."""
    found = []
    for key in ids_or_names:
        run = _run_of_kind(session, key, ("pool_report",))
        if run is None or not run.results:
            raise LookupError(
                f"no finished pool report '{key}': run `hs pool report VERSION --set name={key}` first "
                "(or give a run id of kind 'pool_report')"
            )
        found.append((run.name, run.results))
    return found


def export_runs(session: Session, ids_or_names: list[str]) -> set[str]:
    """Every run id an export of these runs needs: a pipeline or training run with its training and
    evaluation runs (as a report reads them), a pool-report or editor run by itself."""
    pools = {key: _run_of_kind(session, key, STANDALONE_KINDS) for key in ids_or_names}
    methods = [key for key, run in pools.items() if run is None]
    ids = {run.id for run in pools.values() if run is not None}
    return ids | (runs_of(resolve_methods(session, methods[0], methods[1:])) if methods else set())
