"""Routing inside training: behaviour profiles at every re-anchor, the router of the configured
variant, and the stored record of every rescue decision (RQ3, RQ5).

Profiles are induced from the re-anchor's paired validation (every sibling and H0 on the same
tasks with the frozen policy) and stored as version = step. `adaptive` reads the newest version
at or before the step; `fixed_profiles` keeps version of the first re-anchor; `rules` reads only
validation success rates.
"""

from __future__ import annotations

from sqlalchemy import select

from configs.schema import TrainConfig
from db.ids import stable_id
from db.models import ProfileVersion, RouterDecision
from harness_pool.adaptive_router import AdaptiveRouter, EmbeddingVoter, LlmVoter, RulesVoter, StatisticsVoter
from harness_pool.llm import make_chat
from harness_pool.profiles import BehaviourProfile, PairedRecord, induce_llm, induce_offline, task_text
from harness_pool.router import FixedRouter, RandomRouter
from harness_pool.spec import HarnessSpec


def paired_records(results, tasks_by_id: dict) -> list[PairedRecord]:
    """One record per (harness, task) from a re-anchor's rollout results."""
    grouped: dict[tuple[str, str], list] = {}
    for r in results:
        grouped.setdefault((r.harness_id, r.bench_task_id), []).append(r)
    out = []
    for (harness_id, task_id), rs in sorted(grouped.items()):
        t = tasks_by_id[task_id]
        out.append(
            PairedRecord(
                bench_task_id=task_id,
                task_type=t.task_type,
                tier=t.tier,
                text=task_text(t),
                harness_id=harness_id,
                successes=[r.verdict.success for r in rs],
                behaviour_tags=[list(r.behaviour_tags) for r in rs],
            )
        )
    return out


def _chats(cfg: TrainConfig):
    return [(v, make_chat(v.kind, v.model, v.base_url, v.api_key_env, 0.0, 800)) for v in cfg.router.llm_voters]


def store_profiles(
    session,
    cfg: TrainConfig,
    run_id: str,
    step: int,
    h0: HarnessSpec,
    pool: list[HarnessSpec],
    records: list[PairedRecord],
) -> dict[str, dict]:
    """Induce and store every sibling's profile at this re-anchor; returns entry counts by name."""
    chat = _chats(cfg)[0][1] if cfg.router.inducer == "llm" and cfg.router.llm_voters else None
    summary = {}
    for sib in pool:
        if sib.id == h0.id:
            continue
        profile = induce_llm(chat, sib, records, h0.id) if chat else induce_offline(sib, records, h0.id)
        session.merge(
            ProfileVersion(
                id=stable_id("profile", run_id, sib.id, step),
                run_id=run_id,
                harness_id=sib.id,
                version=step,
                inducer=profile.inducer,
                success_rate=profile.success_rate,
                profile=profile.model_dump(mode="json"),
            )
        )
        summary[sib.name] = {
            "prefer": len(profile.prefer),
            "avoid": len(profile.avoid),
            "success": profile.success_rate,
        }
    return summary


def load_profiles(session, run_id: str, step: int, first_only: bool) -> tuple[int | None, dict[str, BehaviourProfile]]:
    """(version, {harness id: profile}): the newest version at or before `step`, or the first one."""
    versions = sorted(
        set(
            session.scalars(
                select(ProfileVersion.version).where(ProfileVersion.run_id == run_id, ProfileVersion.version <= step)
            ).all()
        )
    )
    if not versions:
        return None, {}
    version = versions[0] if first_only else versions[-1]
    rows = session.scalars(
        select(ProfileVersion).where(ProfileVersion.run_id == run_id, ProfileVersion.version == version)
    ).all()
    return version, {r.harness_id: BehaviourProfile.model_validate(r.profile) for r in rows}


def _fixed_router(cfg: TrainConfig, session, run_id: str, step: int):
    return FixedRouter(list(cfg.router.names)), None


def _random_router(cfg: TrainConfig, session, run_id: str, step: int):
    return RandomRouter(seed=cfg.seed * 100003 + step), None


def _rules_router(cfg: TrainConfig, session, run_id: str, step: int):
    version, profiles = load_profiles(session, run_id, step, first_only=False)
    success = {hid: p.success_rate for hid, p in profiles.items()}
    return AdaptiveRouter([RulesVoter(success)], {}, success, name="rules", timeout_s=cfg.router.timeout_s), version


def _voting_router(cfg: TrainConfig, session, run_id: str, step: int):
    """The adaptive router: statistics, embedding and LLM voters over the latest re-anchor's
    profiles (fixed_profiles: over the first re-anchor's, never refreshed)."""
    kind = cfg.router.kind
    version, profiles = load_profiles(session, run_id, step, first_only=kind == "fixed_profiles")
    success = {hid: p.success_rate for hid, p in profiles.items()}
    voters = [StatisticsVoter() if v == "statistics" else EmbeddingVoter() for v in cfg.router.voters]
    voters += [LlmVoter(chat, f"llm:{v.model}") for v, chat in _chats(cfg)]
    return AdaptiveRouter(voters, profiles, success, name=kind, timeout_s=cfg.router.timeout_s), version


ROUTER_BUILDERS = {
    "fixed": _fixed_router,
    "random": _random_router,
    "rules": _rules_router,
    "adaptive": _voting_router,
    "fixed_profiles": _voting_router,
}


def build_router(cfg: TrainConfig, session, run_id: str, step: int):
    """(router, profile version used) for the configured variant (`router.kind` picks the builder)."""
    return ROUTER_BUILDERS[cfg.router.kind](cfg, session, run_id, step)


def record_decisions(session, run_id: str, step: int, router_name: str, version: int | None, rescues) -> None:
    """One RouterDecision per rescue group (PlannedGroup with the router's votes)."""
    for g in rescues:
        session.merge(
            RouterDecision(
                id=stable_id("decision", run_id, step, g.bench_task.id, "rescue"),
                run_id=run_id,
                step=step,
                bench_task_id=g.bench_task.id,
                purpose="rescue",
                router=router_name,
                profile_version=version,
                ranking=list(g.ranking),
                chosen=[s.harness.id for s in g.specs],
                votes={"voters": dict(g.votes), "errors": dict(g.errors)},
            )
        )
