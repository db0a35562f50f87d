"""Multi-turn rollout engine: many episodes side by side in one batch.

Each rollout pairs a benchmark task, a harness and its own isolated environment. All rollouts
(a group of K, or a rescue group whose K rollouts run under K different harnesses, or several
groups) share the policy's batch: continuously where the policy supports it (an episode's next
turn joins the running batch when its reply and the environment's answer are in), else one
batched generate call per turn. Per turn we record the context tokens the harness
or environment added (loss mask 0), the policy's sampled tokens (loss mask 1) with their
rollout log-probs, the parsed action, the raw observation and the hook events.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, is_dataclass, replace

from envs.base import Environment, Verdict
from envs.registry import Steps, benchmark
from harness_pool.runtime import HarnessRuntime, task_fields
from harness_pool.spec import HarnessSpec
from harness_pool.tool_view import parse_action
from rl.policy import ChatSession, Policy, Sampling

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
    end_reason: (
        str  # answered | finished (the world ended it: won or lost) | format_error | round_limit | context_overflow
    )
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
        self.runtime = HarnessRuntime(spec.harness, task_fields(spec.bench_task))
        self.started = time.perf_counter()
        env.reset()
        messages, self.pending_events = self.runtime.opening_messages()
        self.session: ChatSession = policy.start(messages)
        self.turns: list[TurnRecord] = []
        self.done = False
        self.end_reason = ""
        self.answer: list | None = None
        self.steps: Steps = []  # every action that reached the environment, with its answer
        self.outcome: str | None = None  # the world's own end ("won", "lost"), if it ended the episode


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
    `on_finished(done, total)` is called each time an episode ends (progress of long calls)."""
    episodes = [_Episode(spec, make_env(spec.bench_task), policy) for spec in specs]
    finished = [0]

    def done() -> None:
        finished[0] += 1
        if on_finished is not None:
            on_finished(finished[0], len(episodes))

    try:
        if getattr(policy, "continuous_batching", False):
            _run_continuous(policy, episodes, sampling, max_rounds, done)
        else:
            _run_turn_by_turn(policy, episodes, sampling, max_rounds, done)
        return [_finish(e) for e in episodes]
    finally:
        for e in episodes:
            e.env.close()
            e.runtime.close()


def _run_continuous(policy, episodes: list[_Episode], sampling: Sampling, max_rounds: int, done) -> None:
    def on_reply(index: int, gen) -> bool:
        episode = episodes[index]
        _advance(policy, episode, gen, gen.seconds, max_rounds)
        if episode.done:
            episode.session.release()
            done()
        return not episode.done

    policy.generate_continuous([e.session for e in episodes], sampling, on_reply)


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
    tool = ep.spec.harness.tool_view
    parsed = parse_action(tool.protocol, gen.text, tool.accept_scalar_answer)
    record.action_kind, record.parse_error = parsed.kind, parsed.error
    record.action = _as_dict(parsed.action) if parsed.action else {"type": "Invalid", "error": parsed.error}
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
            return
        observation = tool.invalid_message
    else:
        step = ep.env.step(parsed.action)
        observation, error = step.observation, step.error is not None
        ep.steps.append((parsed.action, step))
        if parsed.kind == "answer":
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
        return
    message, events = ep.runtime.next_user_message(ep.runtime.truncate(observation))
    ep.pending_events = events
    policy.extend(ep.session, [{"role": "user", "content": message}])
    windowed = ep.runtime.windowed(ep.session.messages)
    if windowed is not None:
        policy.reset_context(ep.session, windowed)
        # the next turn's context is a fresh prompt: trainers start a new sequence there
        ep.pending_events.append({"event": CONTEXT_RESET, "kept_messages": len(windowed)})


def _as_dict(action) -> dict | None:
    if action is None:
        return None
    return {"type": type(action).__name__, **asdict(action)} if is_dataclass(action) else {"value": action}


def _finish(ep: _Episode) -> RolloutResult:
    verdict = ep.env.verify()
    bench = benchmark(getattr(ep.spec.bench_task, "benchmark", "dbbench"))
    return RolloutResult(
        bench_task_id=ep.spec.bench_task.id,
        harness_id=ep.spec.harness.id,
        sample_index=ep.spec.sample_index,
        turns=ep.turns,
        verdict=verdict,
        end_reason=ep.end_reason,
        failure_kind=bench.failure_kind(verdict, ep.end_reason, ep.steps),
        answer=ep.answer,
        behaviour_tags=bench.behaviour_tags(ep.steps, ep.answer is not None or ep.outcome in ("won", "submitted")),
        seconds_total=time.perf_counter() - ep.started,
        seconds_generate=sum(t.seconds_generate for t in ep.turns),
        seconds_env=sum(t.seconds_env for t in ep.turns),
    )
