"""Multi-turn rollout engine: many episodes side by side in one batch.

Each rollout pairs a benchmark task, a harness and its own isolated environment. All rollouts
(a group of K, or a rescue group whose K rollouts run under K different harnesses, or several
groups) share the policy's batch: continuously where the policy supports it (an episode's next
turn joins the running batch when its reply and the environment's answer are in), else one
batched generate call per turn. Per turn we record the context tokens the harness
or environment added (loss mask 0), the policy's sampled tokens (loss mask 1) with their
rollout log-probs, the parsed action, the raw observation and the hook events.

One bad episode never loses another: whatever an episode's environment (reset, step, verify) or
the harness around it raises, a ValueError from a hostile literal as much as a crashed worker,
ends that episode alone, recorded with end reason and failure kind `env_error`, reward 0 and the
exception in `verdict.details["env_error"]`; the rest of the batch runs and is judged normally.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field, fields, is_dataclass, replace

from envs.base import ENV_ERROR, Environment, Steps, Verdict
from envs.registry import benchmark
from harness_pool.runtime import HarnessRuntime, task_fields
from harness_pool.spec import HarnessSpec
from harness_pool.tool_view import parse_action
from rl.policy import ChatSession, Policy, Sampling
from sandbox import SandboxUnavailable

log = logging.getLogger(__name__)

CONTEXT_RESET = "context_reset"  # hook event on the first turn after a history window reset the context


@dataclass
class TurnRecord:
    index: int
    context_text: str
    context_ids: list[int]
    completion_text: str
    completion_ids: list[int]
    completion_logprobs: list[float]
    finish_reason: str
    action_kind: str | None = None
    action: dict | None = None
    parse_error: str | None = None
    observation: str | None = None
    hook_events: list[dict] = field(default_factory=list)
    seconds_generate: float = 0.0
    seconds_env: float = 0.0

    @property
    def loss_mask(self) -> list[int]:
        """Aligned with context_ids + completion_ids: 1 exactly on policy-sampled tokens."""
        return [0] * len(self.context_ids) + [1] * len(self.completion_ids)


@dataclass
class RolloutSpec:
    bench_task: object
    harness: HarnessSpec
    sample_index: int


@dataclass
class RolloutResult:
    bench_task_id: str
    harness_id: str
    sample_index: int
    turns: list[TurnRecord]
    verdict: Verdict
    # answered | finished (the world ended it: won or lost) | format_error | round_limit | context_overflow
    # | env_error (its environment or harness raised)
    end_reason: str
    failure_kind: str | None
    answer: list | None
    behaviour_tags: list[str]
    seconds_total: float
    seconds_generate: float
    seconds_env: float

    @property
    def n_policy_tokens(self) -> int:
        return sum(len(t.completion_ids) for t in self.turns)


class _Episode:
    """Mutable state of one live rollout."""

    def __init__(self, spec: RolloutSpec, env: Environment, policy: Policy):
        self.spec = spec
        self.env = env
        self.runtime: HarnessRuntime | None = None
        self.session: ChatSession | None = None
        self.started = time.perf_counter()
        self.pending_events: list[dict] = []
        self.turns: list[TurnRecord] = []
        self.done = False
        self.end_reason = ""
        self.answer: list | None = None
        self.steps: Steps = []  # every action that reached the environment, with its answer
        self.outcome: str | None = None  # the world's own end ("won", "lost"), if it ended the episode
        self.error: dict | None = None  # what raised, for an env_error episode
        try:
            self.runtime = HarnessRuntime(spec.harness, task_fields(spec.bench_task))
            env.reset()
            messages, self.pending_events = self.runtime.opening_messages()
        except SandboxUnavailable:  # no sandbox here: the run stops with one line, not every episode
            raise
        except Exception as exc:  # noqa: BLE001 - this episode ends; the others run (module docstring)
            self.fail("reset", exc)
            return
        self.session = policy.start(messages)

    def fail(self, where: str, exc: BaseException) -> None:
        """End this episode as env_error, keeping what raised (type and first line of its message)."""
        first = _SURROGATE.sub("\ufffd", (str(exc).strip().splitlines() or [""])[0][:300])
        name = type(exc).__name__
        self.error = {"env_error": f"{name}: {first}" if first else name, "env_error_at": where}
        self.done, self.end_reason = True, ENV_ERROR
        log.warning("episode %s / %s ended at %s: %s", self.spec.bench_task.id, self.spec.harness.name, where, first)


def run_rollouts(
    policy: Policy,
    specs: list[RolloutSpec],
    make_env: Callable[[object], Environment],
    sampling: Sampling,
    max_rounds: int = 15,
    on_finished: Callable[[int, int], None] | None = None,
) -> list[RolloutResult]:
    """Run every spec to the end, all episodes in one batch.

    With a policy that batches continuously (`continuous_batching`), an episode takes its next
    turn as soon as its reply is complete and the environment has answered; otherwise all live
    episodes share one generate call per turn (turn t seeded with seed * 1000 + t).
    `on_finished(done, total)` is called each time an episode ends (progress of long calls).
    An episode whose environment raises ends alone as `env_error` (module docstring)."""
    episodes: list[_Episode] = []
    made: list[Environment] = []  # every environment first: those that start work when made start it side by side
    finished = [0]

    def done() -> None:
        finished[0] += 1
        if on_finished is not None:
            on_finished(finished[0], len(specs))

    try:
        made.extend(make_env(spec.bench_task) for spec in specs)
        for spec, env in zip(specs, made):
            episodes.append(_Episode(spec, env, policy))
        for e in episodes:
            if e.done:  # its reset raised
                done()
        if getattr(policy, "continuous_batching", False):
            _run_continuous(policy, episodes, sampling, max_rounds, done)
        else:
            _run_turn_by_turn(policy, episodes, sampling, max_rounds, done)
        return [_finish(e) for e in episodes]
    finally:
        for e in episodes:
            _close(e)
        for env in made[len(episodes) :]:  # made, but its episode never started
            try:
                env.close()
            except Exception as exc:  # noqa: BLE001 - cleanup of one must not skip the others'
                log.warning("closing an environment failed: %s: %s", type(exc).__name__, exc)


def _close(ep: _Episode) -> None:
    """Free the episode's environment and hooks; a failing close is logged, the others still run."""
    for what, close in (("environment", ep.env.close), ("harness", ep.runtime.close if ep.runtime else None)):
        if close is None:
            continue
        try:
            close()
        except Exception as exc:  # noqa: BLE001 - one episode's cleanup must not skip the others'
            log.warning("closing the %s of %s failed: %s: %s", what, ep.spec.bench_task.id, type(exc).__name__, exc)


def _run_continuous(policy, episodes: list[_Episode], sampling: Sampling, max_rounds: int, done) -> None:
    live = [e for e in episodes if not e.done]

    def on_reply(index: int, gen) -> bool:
        episode = live[index]
        _advance(policy, episode, gen, gen.seconds, max_rounds)
        if episode.done:
            episode.session.release()
            done()
        return not episode.done

    if live:
        policy.generate_continuous([e.session for e in live], sampling, on_reply)


def _run_turn_by_turn(policy, episodes: list[_Episode], sampling: Sampling, max_rounds: int, done) -> None:
    turn = 0
    while any(not e.done for e in episodes):
        live = [e for e in episodes if not e.done]
        seed = None if sampling.seed is None else sampling.seed * 1000 + turn
        started = time.perf_counter()
        generations = policy.generate(
            [e.session for e in live], Sampling(sampling.temperature, sampling.top_p, sampling.max_new_tokens, seed)
        )
        seconds = time.perf_counter() - started
        for episode, gen in zip(live, generations):
            _advance(policy, episode, gen, seconds, max_rounds)
            if episode.done:
                episode.session.release()
                done()
        turn += 1


def _advance(policy: Policy, ep: _Episode, gen, seconds: float, max_rounds: int) -> None:
    """Record the turn, run its action, and give the policy what it sees next (unless it ended)."""
    context_ids, context_text = ep.session.take_pending()
    record = TurnRecord(
        index=len(ep.turns),
        context_text=context_text,
        context_ids=context_ids,
        completion_text=gen.text,
        completion_ids=gen.token_ids,
        completion_logprobs=gen.logprobs,
        finish_reason=gen.finish_reason,
        hook_events=ep.pending_events,
        seconds_generate=seconds,
    )
    ep.pending_events = []
    ep.turns.append(record)
    if gen.finish_reason == "context_overflow":
        ep.done, ep.end_reason = True, "context_overflow"
        return
    started = time.perf_counter()
    try:
        message = _act(ep, gen.text, record, max_rounds)
    except SandboxUnavailable:  # no sandbox here: the run stops with one line, not every episode
        raise
    except Exception as exc:  # noqa: BLE001 - this episode ends; the others run (module docstring)
        record.seconds_env = time.perf_counter() - started
        ep.fail("step", exc)
        return
    if message is None:
        return
    policy.extend(ep.session, [{"role": "user", "content": message}])
    windowed = ep.runtime.windowed(ep.session.messages)
    if windowed is not None:
        policy.reset_context(ep.session, windowed)
        # the next turn's context is a fresh prompt: trainers start a new sequence there
        ep.pending_events.append({"event": CONTEXT_RESET, "kept_messages": len(windowed)})


def _act(ep: _Episode, text: str, record: TurnRecord, max_rounds: int) -> str | None:
    """Parse the reply, run hooks and the action; the next user message, or None when the episode ended."""
    tool = ep.spec.harness.tool_view
    parsed = parse_action(tool.protocol, text, tool.accept_scalar_answer)
    record.action_kind, record.parse_error = parsed.kind, parsed.error
    if parsed.action:
        record.action = _as_dict(parsed.action)
    else:
        record.action = {"type": "Invalid", "error": parsed.error}
        if parsed.detail:
            record.action["detail"] = parsed.detail
    sql = parsed.action.sql if parsed.kind == "sql" else None
    blocked, rewrite, events = ep.runtime.check_action(parsed.kind, sql)
    record.hook_events.extend(events)
    if rewrite is not None:  # a code hook replaced the SQL; the policy's own tokens stay as sampled
        sql = rewrite
        parsed = replace(parsed, action=replace(parsed.action, sql=rewrite))
        record.action = _as_dict(parsed.action)
    started = time.perf_counter()
    error = False
    if blocked is not None:
        observation = blocked
    elif parsed.kind == "invalid":
        if tool.on_invalid == "end":
            ep.done, ep.end_reason = True, "format_error"
            return None
        observation = tool.invalid_message if not parsed.detail else f"{tool.invalid_message}\n{parsed.detail}"
    else:
        step = ep.env.step(parsed.action)
        observation, error = step.observation, step.error is not None
        ep.steps.append((parsed.action, step))
        if step.error == ENV_ERROR:  # the environment's own machinery failed (e.g. a crashed interpreter)
            first = (observation.strip().splitlines() or [ENV_ERROR])[0][:300]
            ep.error = {"env_error": _SURROGATE.sub("\ufffd", first), "env_error_at": "step"}
            ep.done, ep.end_reason = True, ENV_ERROR
        elif parsed.kind == "answer":
            ep.answer = list(parsed.action.values)
            ep.done, ep.end_reason = True, "answered"
        elif step.done:
            ep.outcome = step.outcome
            ep.done, ep.end_reason = True, "finished" if step.outcome else "round_limit"
    record.seconds_env = time.perf_counter() - started
    record.observation = observation
    ep.runtime.record_step(parsed.kind, observation, error, sql)
    if not ep.done and len(ep.turns) >= max_rounds:
        ep.done, ep.end_reason = True, "round_limit"
    if ep.done:
        return None
    message, events = ep.runtime.next_user_message(ep.runtime.truncate(observation))
    ep.pending_events = events
    return _SURROGATE.sub("\ufffd", message)  # a tokenizer cannot encode a lone surrogate


_SURROGATE = re.compile("[\ud800-\udfff]")
MAX_RECORD_DEPTH = 32  # deeper than any parsed action (envs/literals.py allows 20 levels of nesting)


def _as_dict(action) -> dict | None:
    """The action as plain data (dataclasses as dicts, tuples kept), like `dataclasses.asdict` but
    without unbounded recursion: a value nested past MAX_RECORD_DEPTH, or an int Python cannot
    print, is recorded as a short marker string."""
    if action is None:
        return None
    return {"type": type(action).__name__, **_plain(action, 0)} if is_dataclass(action) else {"value": action}


def _plain(value, depth: int):
    if depth > MAX_RECORD_DEPTH:
        return f"<{type(value).__name__} nested deeper than {MAX_RECORD_DEPTH} levels>"
    if is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name), depth + 1) for f in fields(value)}
    if isinstance(value, (list, tuple)):
        items = (_plain(v, depth + 1) for v in value)
        return list(items) if isinstance(value, list) else tuple(items)
    if isinstance(value, dict):
        return {_plain(k, depth + 1): _plain(v, depth + 1) for k, v in value.items()}
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 14_000:
        return f"<int of {value.bit_length():,} bits>"  # str() of it raises past 4,300 digits
    return value


def _finish(ep: _Episode) -> RolloutResult:
    bench = benchmark(ep.spec.bench_task.benchmark)
    reached = ep.answer is not None or ep.outcome in ("won", "submitted")
    verdict, failure, tags = None, None, []
    if ep.error is None:
        try:
            verdict = ep.env.verify()
            failure = bench.failure_kind(verdict, ep.end_reason, ep.steps)
            tags = bench.behaviour_tags(ep.steps, reached)
        except SandboxUnavailable:  # no sandbox here: the run stops with one line, not every episode
            raise
        except Exception as exc:  # noqa: BLE001 - this episode is lost, not the batch
            ep.fail("verify", exc)
    if ep.error is not None:
        verdict, failure = Verdict(reward=0.0, success=False, details={**ep.error}), ENV_ERROR
        try:
            tags = bench.behaviour_tags(ep.steps, reached)
        except Exception:  # noqa: BLE001 - tags of a broken episode are best effort
            tags = []
    return RolloutResult(
        bench_task_id=ep.spec.bench_task.id,
        harness_id=ep.spec.harness.id,
        sample_index=ep.spec.sample_index,
        turns=ep.turns,
        verdict=verdict,
        end_reason=ep.end_reason,
        failure_kind=failure,
        answer=ep.answer,
        behaviour_tags=tags,
        seconds_total=time.perf_counter() - ep.started,
        seconds_generate=sum(t.seconds_generate for t in ep.turns),
        seconds_env=sum(t.seconds_env for t in ep.turns),
    )
