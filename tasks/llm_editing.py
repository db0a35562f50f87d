"""The LLM side of evolution: the configured chat client, failure excerpts, one patch per
candidate (repaired once by the editor), and the optional LLM root-cause diagnosis.

API tokens spent are returned with each candidate's editor info, so runs can report them.
"""

from __future__ import annotations

import threading

from sqlalchemy import select
from sqlalchemy.orm import selectinload

from configs.schema import EvolveConfig
from db.engine import session_scope
from db.models import Trajectory
from harness_pool.editor_llm import LlmDiagnoser, LlmEditor
from harness_pool.llm import ChatClient, make_chat
from harness_pool.spec import HarnessSpec
from tasks.resources import get_engine

_CHATS: dict[tuple, ChatClient] = {}
_LOCK = threading.Lock()


def chat_for(cfg: EvolveConfig) -> ChatClient:
    e = cfg.editor
    key = (e.kind, e.model, e.base_url, e.api_key_env, e.temperature, e.max_tokens)
    with _LOCK:
        if key not in _CHATS:
            _CHATS[key] = make_chat(e.kind, e.model, e.base_url, e.api_key_env, e.temperature, e.max_tokens)
        return _CHATS[key]


def render_turns(turns, limit: int = 600) -> str:
    """A failed episode as text: what the agent saw, what it replied, what came back."""
    parts = []
    for t in turns:
        if t.context_text:
            parts.append(f"[shown to the agent]\n{t.context_text[-limit:]}")
        parts.append(f"[agent]\n{t.completion_text[:limit]}")
        if t.observation:
            parts.append(f"[environment]\n{t.observation[:limit]}")
    return "\n".join(parts)


def llm_child(
    cfg: EvolveConfig, parent: HarnessSpec, target, name: str, round: int, diagnosis: dict, database_url: str | None
):
    """(child or None, error or None, editor info with attempts, errors and tokens)."""
    causes = {c.cause for c in target}
    ids = [
        tid
        for r in diagnosis["tasks"].values()
        for tid, cause in zip(r["trajectory_ids"], r["causes"])
        if cause in causes
    ][:4]
    with session_scope(get_engine(database_url)) as session:
        trajs = session.scalars(
            select(Trajectory).where(Trajectory.id.in_(ids)).options(selectinload(Trajectory.turns))
        ).all()
        failures = [render_turns(sorted(t.turns, key=lambda x: x.index)) for t in trajs]
    chat = chat_for(cfg)
    (_, child, info), usage = chat.measured(LlmEditor(chat).propose, parent, target, failures, round, name)
    info = {**info, "kind": cfg.editor.kind, "model": cfg.editor.model, "usage": usage, "usage_total": dict(chat.usage)}
    return child, None if child else (info["errors"] or ["no patch"])[-1], info


def llm_causes(cfg: EvolveConfig, results, causes: list[str | None]) -> tuple[list[str | None], list[dict]]:
    """The LLM's root cause for up to max_diagnosis_calls failed rollouts (rule causes elsewhere),
    and per rollout the details to record: {"diagnosis": {cause, rule_cause, usage}} where the LLM
    was asked (its usage is the tokens that call spent, counted in the run's editor tokens), {} elsewhere."""
    chat = chat_for(cfg)
    diagnoser, out, notes, calls = LlmDiagnoser(chat, benchmark=cfg.env.benchmark), list(causes), [], 0
    for i, (result, cause) in enumerate(zip(results, causes)):
        if cause is None or calls >= cfg.editor.max_diagnosis_calls:
            notes.append({})
            continue
        out[i], usage = chat.measured(diagnoser.cause, render_turns(result.turns), cause)
        notes.append({"diagnosis": {"cause": out[i], "rule_cause": cause, "usage": usage}})
        calls += 1
    return out, notes
