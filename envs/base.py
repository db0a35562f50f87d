"""Benchmark-independent contracts between environments and the harness.

The harness (prompts, parsing, truncation, hooks) turns policy text into one of the
`Action` values below and an environment answers with a `StepResult`; after the episode the
same environment's `verify()` gives the `Verdict` that becomes the RL reward. Keeping these
types free of any benchmark detail is what lets every sibling harness of a benchmark share
one environment interface and one verifier (docs/method.md §1, docs/architecture.md).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from keyword import iskeyword
from pathlib import Path
from typing import Protocol, runtime_checkable


@dataclass(frozen=True)
class SqlAction:
    """Run one SQL statement against the episode's private database."""

    sql: str


@dataclass(frozen=True)
class AnswerAction:
    """Submit the final answer; `values` are the parsed items of the answer list.

    Items stay as the harness parsed them (str, int, float, None, ...) because the verifier,
    not the parser, owns the normalisation rules.
    """

    values: list


@dataclass(frozen=True)
class CommandAction:
    """Type one command into a text world (e.g. "take key", "go north")."""

    command: str


@dataclass(frozen=True)
class ToolCall:
    """One function call by name with literal arguments (parsed by a tool view, never evaluated)."""

    name: str
    args: tuple = ()
    kwargs: dict = field(default_factory=dict, hash=False)

    def text(self) -> str:
        """The call in Python syntax, exactly as it would run: parsing the text back gives this call or
        fails. A name or keyword that is not an identifier is written quoted (`'a b'(...)`,
        `**{'a b': 1}`), so it can never read as a different call (`folder='x') #` would), and a value
        that cannot be printed (an int over 4,300 digits) as a marker that does not parse."""
        parts = [_shown(a) for a in self.args]
        for key, value in self.kwargs.items():
            named = isinstance(key, str) and is_plain_name(key)
            parts.append(f"{key}={_shown(value)}" if named else f"**{{{_shown(key)}: {_shown(value)}}}")
        name = self.name if isinstance(self.name, str) and is_plain_name(self.name) else _shown(self.name)
        return f"{name}({', '.join(parts)})"


def is_plain_name(text: str) -> bool:
    """An ASCII identifier (Python folds other ones by NFKC when it parses them: 'ﬁ' reads as 'fi')."""
    return text.isascii() and text.isidentifier() and not iskeyword(text)


def _shown(value: object) -> str:
    try:
        return repr(value)
    except (ValueError, RecursionError, MemoryError):  # an int past Python's 4,300-digit limit, deep nesting
        return f"<{type(value).__name__} too large to show>"


@dataclass(frozen=True)
class CallAction:
    """Call one or more functions of the environment's APIs, in order."""

    calls: tuple[ToolCall, ...]


@dataclass(frozen=True)
class ReplyAction:
    """A message to the user that ends the agent's turn (multi-turn tasks: the next request follows)."""

    text: str


Action = SqlAction | AnswerAction | CommandAction | CallAction | ReplyAction


@dataclass
class StepResult:
    """What one action produced.

    `observation` is the full raw output: truncation is a harness decision (it is one of the
    things siblings edit), so the environment must never pre-truncate, apart from a safety cap
    on hostile output that says so in the observation (DBBench: 1,000 rows / 1 MB).
    `error` is a short error class (e.g. "sql_error") so detectors can count failures without
    parsing the observation text.
    """

    observation: str
    done: bool
    error: str | None = None
    outcome: str | None = None  # why a world ended the episode by itself ("won", "lost"); None otherwise


# End reason and failure kind of an episode whose environment (reset, step, verify) or harness raised:
# the rollout engine ends that episode alone, with reward 0 and the exception in
# verdict.details["env_error"] (rl/rollout.py); every benchmark has this kind besides its own.
ENV_ERROR = "env_error"


@dataclass
class Verdict:
    """Outcome of an episode: reward in [0, 1], success flag, and evidence for analysis."""

    reward: float
    success: bool
    details: dict = field(default_factory=dict)


@runtime_checkable
class Environment(Protocol):
    """One rollout's isolated world.

    Each instance owns its own state (e.g. a fresh database), so K rollouts of a group can run
    side by side without seeing each other's writes.
    """

    rounds_used: int
    max_rounds: int

    def reset(self) -> str:
        """Build the initial state and return the task instruction text."""
        ...

    def step(self, action: Action) -> StepResult:
        """Apply one action and report its raw outcome."""
        ...

    def verify(self) -> Verdict:
        """Judge the episode from the final answer and/or the final state."""
        ...

    def close(self) -> None:
        """Free whatever reset() created (databases, connections)."""
        ...


class DataError(Exception):
    """A user-facing problem with data or services, with a one-line message saying how to fix it.

    Raised instead of a stack of low-level errors so that CLI users and flow logs show the
    remedy directly.
    """


@dataclass
class GoldReport:
    """A gold replay of one split: per tier (gold solutions that pass, tasks), how many times the
    control (an episode that should not succeed) passed, the disagreements, and, where measured,
    the wall time of each judgment. `format_lines` ends with exactly `agreement: X%`."""

    benchmark: str
    split: str
    gold: str  # how the gold solutions are played, e.g. "walkthroughs through the environment"
    control: str  # what the control does, e.g. "only 'look'"
    per_tier: dict[str, tuple[int, int]] = field(default_factory=dict)
    control_passes: int = 0
    disagreements: list[tuple[str, str]] = field(default_factory=list)  # (task id, reason)
    judge_seconds: list[float] = field(default_factory=list)

    def record(self, tier: str, passed: bool, control_passed: bool, task_id: str = "", why: str = "") -> None:
        ok, total = self.per_tier.get(tier, (0, 0))
        self.per_tier[tier] = (ok + int(passed), total + 1)
        self.control_passes += int(control_passed)
        if not passed:
            self.disagreements.append((task_id, why))

    @property
    def total(self) -> int:
        return sum(total for _, total in self.per_tier.values())

    @property
    def agreement(self) -> float:
        return sum(ok for ok, _ in self.per_tier.values()) / self.total if self.total else 1.0

    def format_lines(self) -> list[str]:
        width = max((len(t) for t in self.per_tier), default=0)
        lines = [f"gold replay: {self.benchmark}/{self.split} ({self.gold})"]
        lines += [f"  {tier:<{width}} {ok:>4}/{total:<4}" for tier, (ok, total) in self.per_tier.items()]
        lines += [f"  DISAGREE {task_id}: {reason}" for task_id, reason in self.disagreements]
        lines.append(f"  control ({self.control}): {self.control_passes}/{self.total} passed")
        if self.judge_seconds:
            mean = sum(self.judge_seconds) / len(self.judge_seconds)
            lines.append(f"  mean wall time of a judgment: {mean:.2f} s")
        lines.append(f"agreement: {100.0 * self.agreement:.1f}%")
        return lines


# (action, what the environment answered) for every action that reached the environment
Steps = list[tuple[Action, StepResult]]


@runtime_checkable
class Task(Protocol):
    """What the platform reads of a benchmark's task (stored as a bench_tasks row, db/models.py)."""

    id: str  # unique across benchmarks, e.g. "dbbench/dev/0007"
    benchmark: str
    split: str
    index: int
    task_type: str | None  # a category for analyses (may be None)
    tier: str | None  # its difficulty tier, one of Benchmark.tiers
    description: str  # one line for listings
    record: dict  # everything else, JSON-able, as the benchmark wants it kept


@dataclass(frozen=True)
class Benchmark:
    """A benchmark as the platform sees it: one object per benchmark package, registered in
    envs/registry.py (built-in) or through the harness_s.benchmarks entry-point group."""

    name: str
    splits: tuple[str, ...]  # every split name; the training split is "train"
    tiers: tuple[str, ...]  # difficulty tiers (or categories) of its tasks, for `tiers:` in configs
    validation_split: str
    test_split: str
    load: Callable[..., list[Task]]  # (split, data_dir, limit, tiers) -> tasks in a stable order
    make_env: Callable[..., Environment]  # (task, env config) -> a fresh, isolated environment
    fields: Callable[[object], dict[str, str]]  # template placeholders of a task
    behaviour_tags: Callable[[Steps, bool], list[str]]  # (steps, ended by an answer or a win)
    behaviours: tuple[str, ...]  # every tag behaviour_tags can give, in report order
    # (verdict, end reason, steps); the rollout engine sets "env_error" itself (envs.base.ENV_ERROR)
    failure_kind: Callable[[Verdict, str, Steps], str | None]
    demo_replies: Callable[..., list[str]]  # (training task, rng, inspect_prob) -> H0 turns that solve it
    # module with PROTOCOLS: {protocol name: parser(reply text, accept_scalar_answer) -> envs.replies.ParsedAction};
    # protocol names start with "<benchmark>_" (e.g. dbbench_text_v1)
    protocols: str
    # module with CAUSES {cause: explanation}, FAMILIES {family: causes}, OPERATORS {cause: variants of
    # harness edits}, FORMAT_REMINDER and root_cause(rollout result, task) -> cause or None
    rules: str
    blurb: str  # what the benchmark is, one clause, for the editor's, diagnoser's and router's prompts
    check_gold: Callable[..., GoldReport]  # (split, limit, env config) -> a replay of its gold solutions
    harness_dir: Path  # its built-in harness YAML files (h0.yaml at least)
    # (env config) -> where its training split is, built first when it is generated and missing
    prepare_training_split: Callable[..., str] | None = None
    # (data dir, missing_ok) -> None, or DataError naming the first damaged line of its generated training split
    check_training_split: Callable[..., None] | None = None
    runs_model_code: bool = False  # its environment executes what the policy writes: needs the sandbox (sandbox/)
