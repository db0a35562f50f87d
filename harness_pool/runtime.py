"""Applying a harness to one episode: messages, observation truncation, declarative hooks.

The runtime is pure bookkeeping over one episode (no model, no database): the rollout engine
asks it for the opening messages, for what to show after each step, and whether an action is
blocked. Hook text and prompts may use the task placeholders of `task_fields`.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from functools import lru_cache

from envs.registry import benchmark
from harness_pool.hook_client import HookSession
from harness_pool.sandbox import HookFailure, template_problem
from harness_pool.spec import Condition, HarnessSpec, HookRule, regex_search

log = logging.getLogger(__name__)


# What a code hook's context carries at most: any text field, each past query, past queries.
CTX_TEXT_CHARS = 20_000
CTX_SQL_CHARS = 2_000
CTX_SQL_HISTORY = 20


def _clip(text: str, limit: int = CTX_TEXT_CHARS) -> str:
    return text if len(text) <= limit else text[:limit]


class _Blank(dict):
    def __missing__(self, key: str) -> str:  # unknown placeholders render as-is
        return "{" + key + "}"


@lru_cache(maxsize=1024)
def _allowed(template: str) -> str:
    """The template, once it passes the policy a harness is loaded under (a spec changed with
    model_copy is not validated again); else a one-line ValueError."""
    problem = template_problem(template)
    if problem is not None:
        raise ValueError(f"harness template not allowed: {problem}")
    return template


def fill(template: str, fields: dict[str, str]) -> str:
    return _allowed(template).format_map(_Blank(fields))


def task_fields(task: object) -> dict[str, str]:
    """Template placeholders a harness may use, taken from a benchmark task (its benchmark says which)."""
    return benchmark(task.benchmark).fields(task)


@dataclass
class EpisodeState:
    """What hook conditions can see: counters and the last step, nothing hidden from the agent."""

    round: int = 0
    queries: int = 0
    last_error: bool = False
    last_observation: str = ""
    fired: set[int] = field(default_factory=set)
    sql_log: list[tuple[str, bool]] = field(default_factory=list)  # (query, failed) in order


class HarnessRuntime:
    def __init__(self, spec: HarnessSpec, fields: dict[str, str]):
        self.spec = spec
        self.fields = fields
        self.state = EpisodeState()
        self.first_user_message = ""
        # Code hooks run only in the confined worker process, compiled fresh for this episode.
        self.hooks = HookSession([(h.name, h.source) for h in spec.code_hooks]) if spec.code_hooks else None

    def close(self) -> None:
        """Forget this episode's compiled hooks in the worker."""
        if self.hooks is not None:
            self.hooks.close()

    # -- hooks --------------------------------------------------------------------------------
    def _holds(self, cond: Condition, action_kind: str | None) -> bool:
        s = self.state
        checks = [
            cond.action_kind is None or cond.action_kind == action_kind,
            cond.queries_at_most is None or s.queries <= cond.queries_at_most,
            cond.queries_at_least is None or s.queries >= cond.queries_at_least,
            cond.round_at_least is None or s.round >= cond.round_at_least,
            cond.last_step_error is None or s.last_error == cond.last_step_error,
            cond.observation_matches is None or regex_search(cond.observation_matches, s.last_observation),
            cond.instruction_matches is None
            or regex_search(cond.instruction_matches, self.fields.get("instruction", "")),
        ]
        return all(checks)

    def fire(self, point: str, action_kind: str | None = None) -> list[tuple[HookRule, str]]:
        """Rules at `point` whose condition holds now, with their filled message; marks `once` rules."""
        fired = []
        for i, rule in enumerate(self.spec.hooks):
            if rule.at != point or (rule.once and i in self.state.fired):
                continue
            if self._holds(rule.when, action_kind):
                self.state.fired.add(i)
                fired.append((rule, fill(rule.message, self.fields)))
        return fired

    def _context(self, point: str, action_kind: str | None, sql: str | None) -> dict:
        """What a code hook sees; every text bounded, since the agent's SQL and results are."""
        s = self.state
        return {
            **{k: _clip(v) for k, v in self.fields.items()},
            "point": point,
            "round": s.round,
            "queries": s.queries,
            "last_error": s.last_error,
            "last_observation": _clip(s.last_observation),
            "sql_history": tuple(_clip(q, CTX_SQL_CHARS) for q, _ in s.sql_log[-CTX_SQL_HISTORY:]),
            "action_kind": action_kind,
            "action_sql": None if sql is None else _clip(sql),
        }

    def run_code(
        self, point: str, action_kind: str | None = None, sql: str | None = None
    ) -> tuple[list[dict[str, str]], list[dict]]:
        """Effects of the code hooks at `point`; a failing hook has none and is logged as an event."""
        effects, events = [], []
        for hook in self.spec.code_hooks:
            if hook.at != point:
                continue
            try:
                out = self.hooks.call(hook.name, self._context(point, action_kind, sql))
            except HookFailure as exc:
                log.warning("code hook %s failed at %s: %s", hook.name, point, exc)
                events.append({"at": point, "effect": "hook_error", "hook": hook.name, "error": str(exc)[:300]})
                continue
            if point != "before_action":
                out = {k: v for k, v in out.items() if k == "inject"}
            effects.append(out)
            events += [{"at": point, "effect": k, "hook": hook.name, "message": v} for k, v in out.items()]
        return effects, events

    def _injections(self, points: tuple[str, ...]) -> tuple[list[str], list[dict]]:
        texts, events = [], []
        for point in points:
            for rule, text in self.fire(point):
                if rule.effect == "inject":
                    texts.append(text)
                    events.append({"at": point, "effect": "inject", "message": text})
            effects, code_events = self.run_code(point)
            texts += [e["inject"] for e in effects if e.get("inject")]
            events += code_events
        return texts, events

    # -- messages -----------------------------------------------------------------------------
    def opening_messages(self) -> tuple[list[dict[str, str]], list[dict]]:
        hints, events = self._injections(("on_init", "before_model_call"))
        parts = [fill(self.spec.prompts.task_template, self.fields).strip(), *hints]
        self.first_user_message = "\n\n".join(parts)
        system = fill(self.spec.system_message(), self.fields)
        return [{"role": "system", "content": system}, {"role": "user", "content": self.first_user_message}], events

    def truncate(self, observation: str) -> str:
        limit = self.spec.context.max_observation_chars
        if len(observation) <= limit:
            return observation
        return observation[:limit] + self.spec.context.truncation_marker

    def next_user_message(self, observation: str) -> tuple[str, list[dict]]:
        """What the policy sees after a step: the shown observation plus injected hints."""
        parts = [fill(self.spec.prompts.observation_template, {**self.fields, "observation": observation})]
        if self.spec.memory.query_log and self.state.sql_log:
            recent = self.state.sql_log[-self.spec.memory.query_log :]
            parts.append(
                "Queries you have run so far (oldest first):\n"
                + "\n".join(f"- {q} ({'failed' if failed else 'ran'})" for q, failed in recent)
            )
        hints, events = self._injections(("after_step", "before_model_call"))
        return "\n\n".join(p for p in [*parts, *hints] if p), events

    def check_action(self, action_kind: str, sql: str | None = None) -> tuple[str | None, str | None, list[dict]]:
        """(blocking message or None, replacement SQL or None, events) for the action about to run:
        guard rules first, then code hooks (a block wins over a rewrite)."""
        events, blocked, rewrite = [], None, None
        for rule, text in self.fire("before_action", action_kind):
            events.append({"at": "before_action", "effect": rule.effect, "message": text})
            if rule.effect == "block" and blocked is None:
                blocked = text
        effects, code_events = self.run_code("before_action", action_kind, sql)
        events += code_events
        for out in effects:
            blocked = blocked if blocked is not None else out.get("block")
            if action_kind == "sql" and rewrite is None and out.get("rewrite"):
                rewrite = out["rewrite"]
        return blocked, (None if blocked is not None else rewrite), events

    def windowed(self, messages: list[dict[str, str]]) -> list[dict[str, str]] | None:
        """The messages to keep under the history window, or None when nothing is dropped."""
        window = self.spec.context.history_window
        if window is None:
            return None
        head, tail = messages[:2], messages[2:]
        if len(tail) <= 2 * window:  # tail alternates assistant reply, user observation
            return None
        return head + tail[-2 * window :]

    def record_step(self, action_kind: str, observation: str, error: bool, sql: str | None = None) -> None:
        self.state.round += 1
        if action_kind == "sql":
            self.state.queries += 1
            self.state.sql_log.append((sql or "", error))
        self.state.last_error = error
        self.state.last_observation = observation
