"""Prefect tasks of the evolution flow's editing and judging (flows/evolve.py): the editor's
children of a parent harness, each with the tasks that validate it, and the verdict on each
child once it has run on them (tasks/evolution.py run_harness runs the harnesses)."""

from __future__ import annotations

from prefect import task
from prefect.cache_policies import INPUTS, TASK_SOURCE

from configs.schema import EvolveConfig
from db.engine import session_scope
from db.ids import stable_id
from db.models import EvolutionCandidate
from harness_pool.bundles import control_tasks
from harness_pool.diagnosis import cluster_causes
from harness_pool.operators import VARIANTS, family_of, offline_patch, target_groups
from harness_pool.patch import apply_patch
from harness_pool.spec import HarnessError, HarnessSpec
from tasks import tracking
from tasks.resources import get_engine


# -- editing -----------------------------------------------------------------------------------
def _clusters(run: dict, min_support: int):
    causes = {
        tid: (task_id, cause)
        for task_id, r in run["tasks"].items()
        for tid, cause in zip(r["trajectory_ids"], r["causes"])
        if cause
    }
    return cluster_causes(causes, min_support)


@task(
    name="propose-children",
    cache_policy=(INPUTS - "cfg" - "database_url") + TASK_SOURCE,
    persist_result=True,
    task_run_name="edit-r{round}-{parent[name]}",
)
def propose_children(
    cfg: EvolveConfig,
    run_id: str,
    round: int,
    parent: dict,
    diagnosis: dict,
    known_ids: list[str],
    database_url: str | None,
) -> list[dict]:
    """The editor's candidates for one parent, each with its validation tasks: the targeted
    failures plus controls (tasks the parent solved in every diagnosis rollout, see
    harness_pool.bundles.control_tasks). The flow records the rejected patches with their reason (record_rejected),
    whether this result is fresh or cached. (Prefect's cache key covers
    this function's source only: change this docstring when a helper's rule changes.)"""
    spec = HarnessSpec.model_validate(parent)
    groups = target_groups(_clusters(diagnosis, cfg.diagnose.min_support), benchmark=cfg.env.benchmark)
    solved = control_tasks(diagnosis["tasks"], f"{cfg.seed}-{spec.id}")
    out, seen = [], set(known_ids)
    for i in range(cfg.children_per_parent if groups else 0):
        # variants rotate with the round: a parent kept for another round gets new children
        target, variant = groups[i % len(groups)], (i // len(groups) + round - 1) % VARIANTS
        causes = [c.cause for c in target]
        name = f"{_family(causes, cfg.env.benchmark)}-r{round}-{spec.id[:6]}-v{variant}"
        child, error, info = _edit(cfg, spec, target, variant, name, round, diagnosis, database_url)
        if child is not None and child.id in seen:
            child, error = None, "duplicate of a harness already in the pool or a parent"
        failed = sorted(
            t
            for t, r in diagnosis["tasks"].items()
            if not any(r["successes"]) and any(c in causes for c in r["causes"])
        )
        budget = cfg.validation.max_tasks - min(cfg.validation.n_controls, len(solved))
        controls = sorted(solved[: cfg.validation.n_controls])
        candidate = {
            "id": stable_id("candidate", run_id, round, spec.id, name),
            "name": name,
            "parent_id": spec.id,
            "root_causes": causes,
            "targeted": failed[:budget],
            "controls": controls,
            "harness_id": child.id if child else None,
            "spec": child.model_dump(mode="json") if child else None,
            "error": error,
            "editor": info,
        }
        if child is not None:
            seen.add(child.id)
        out.append(candidate)
    return out


def record_rejected(cfg: EvolveConfig, run_id: str, round: int, proposed: list[dict], database_url: str | None) -> None:
    """Record the rejected patches among `propose_children`'s candidates (idempotent: the flow
    calls it after every call, cached or not, so the current database always has them)."""
    with session_scope(get_engine(database_url)) as session:
        for c in proposed:
            if c["spec"] is None:
                details = {"error": c["error"], "editor": c["editor"]}
                session.merge(_candidate_row(cfg, run_id, round, c, "rejected", details))


def _candidate_row(cfg: EvolveConfig, run_id: str, round: int, c: dict, status: str, details: dict, **judged):
    """The EvolutionCandidate row of `propose_children`'s candidate `c`: rejected at patch time
    (no harness), or judged valid / invalid with its validation outcome in `judged` (selected,
    fixed, broken, solved, validation_tasks; a rejected row leaves them at their defaults)."""
    return EvolutionCandidate(
        id=c["id"],
        run_id=run_id,
        round=round,
        parent_id=c["parent_id"],
        harness_id=c["harness_id"] if c["spec"] is not None else None,
        name=c["name"],
        editor=cfg.editor.kind,
        root_causes=c["root_causes"],
        status=status,
        details=details,
        **judged,
    )


def _family(causes: list[str], benchmark: str) -> str:
    return family_of(benchmark).get(causes[0], causes[0])


def _edit(
    cfg: EvolveConfig,
    parent: HarnessSpec,
    target,
    variant: int,
    name: str,
    round: int,
    diagnosis: dict,
    database_url: str | None,
):
    """(child or None, error or None, editor info) from the configured editor."""
    if cfg.editor.kind == "offline":
        try:
            patch = offline_patch(target, variant, name, parent.benchmark)
            return apply_patch(parent, patch, round), None, {"kind": "offline"}
        except HarnessError as exc:
            return None, str(exc), {"kind": "offline"}
    if cfg.editor.kind == "trained":
        from tasks.engineer_editing import engineer_child

        return engineer_child(cfg, parent, target, name, round, diagnosis, database_url)
    from tasks.llm_editing import llm_child

    return llm_child(cfg, parent, target, name, round, diagnosis, database_url)


# -- judging -------------------------------------------------------------------------------------
def judge(candidate: dict, run: dict, min_fixed: int, max_broken: int) -> dict:
    """fixed = targeted failures the child solved; broken = controls it no longer solves."""
    solved = sorted(t for t, r in run["tasks"].items() if any(r["successes"]))
    fixed = sorted(set(candidate["targeted"]) & set(solved))
    broken = sorted(set(candidate["controls"]) - set(solved))
    valid = len(fixed) >= min_fixed and len(broken) <= max_broken
    return {"fixed": fixed, "broken": broken, "solved": solved, "valid": valid}


@task(name="record-candidates", task_run_name="judge-r{round}")
def record_candidates(
    cfg: EvolveConfig, run_id: str, round: int, judged: list[dict], selected: list[str], database_url: str | None
) -> None:
    with session_scope(get_engine(database_url)) as session:
        for c in judged:
            session.merge(
                _candidate_row(
                    cfg,
                    run_id,
                    round,
                    c,
                    "valid" if c["valid"] else "invalid",
                    {"editor": c["editor"], "targeted": c["targeted"], "controls": c["controls"]},
                    selected=c["harness_id"] in selected,
                    fixed=c["fixed"],
                    broken=c["broken"],
                    solved=c["solved"],
                    validation_tasks=sorted(set(c["targeted"]) | set(c["controls"])),
                )
            )
    valid = [c for c in judged if c["valid"]]
    tracking.log_metrics(
        run_id,
        cfg.wandb,
        cfg.model_dump(mode="json"),
        {
            "evolve/candidates": len(judged),
            "evolve/valid": len(valid),
            "evolve/selected": len(selected),
            "evolve/fixed_per_valid": sum(len(c["fixed"]) for c in valid) / max(len(valid), 1),
            "evolve/broken_per_valid": sum(len(c["broken"]) for c in valid) / max(len(valid), 1),
        },
        round,
    )
