"""Harness spec v1: what the policy sees and how its text becomes environment actions.

A harness is data, not code: prompts, a tool view (action protocol), a context policy, skills,
declarative hook rules and guidance. Its id is the sha256 of its canonical JSON, so two files
with the same content (whatever their YAML formatting or key order) share one id, and any edit
gives a new id. One YAML file per harness keeps sibling diffs readable.
"""

from __future__ import annotations

import hashlib
import json
import string
from functools import lru_cache
from pathlib import Path
from typing import Literal

import re2
import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from envs.registry import DEFAULT_BENCHMARK, check_name, parser
from envs.registry import benchmark as registered
from harness_pool.sandbox import LIMITS, SandboxError, check_hook_source, template_problem

HookPoint = Literal["on_init", "before_model_call", "before_action", "after_step"]
ActionKind = Literal["sql", "answer", "command", "call", "reply", "invalid"]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Prompts(_Frozen):
    system: str = Field(description="System message: the agent's role and the action protocol.")
    task_template: str = Field(
        description="First user message; placeholders are filled from the benchmark task (its benchmark's "
        "`fields`, e.g. {instruction}; docs/benchmarks.md lists each benchmark's placeholders)."
    )
    observation_template: str = Field(
        default="{observation}",
        description="How an environment observation is shown to the policy; placeholder {observation}.",
    )


class ToolView(_Frozen):
    protocol: str = Field(
        default="dbbench_text_v1",
        description="Action protocol parser: one of the harness's benchmark's protocols, named "
        "<benchmark>_<view>_v<n> (its PROTOCOLS, e.g. envs/dbbench/protocol.py: dbbench_text_v1 and "
        "dbbench_json_v1; each module's docstring says how a reply is read).",
    )

    @field_validator("protocol")
    @classmethod
    def _known_protocol(cls, protocol: str) -> str:
        parser(protocol)  # ValueError: unknown tool-view protocol '...': use one of ...
        return protocol

    on_invalid: Literal["end", "warn"] = Field(
        default="end",
        description="What an unparseable turn does: 'end' the episode (format error), or 'warn' "
        "(show invalid_message as the observation and spend a round).",
    )
    invalid_message: str = Field(
        default="Your reply did not follow the action format.",
        description="Observation shown for an unparseable turn when on_invalid is 'warn'.",
    )
    accept_scalar_answer: bool = Field(
        default=False,
        description="Treat a non-list answer x ('Final Answer: x', or submit_answer's answer) as the "
        "one-element list [x] instead of a format error.",
    )


class ContextPolicy(_Frozen):
    max_observation_chars: int = Field(
        default=800, ge=16, description="Database output longer than this is cut and marked."
    )
    truncation_marker: str = Field(default=" ...[truncated]", description="Appended to a cut observation.")
    history_window: int | None = Field(
        default=None,
        ge=1,
        description="Keep only the last N assistant/observation exchanges (the first user message always "
        "stays); None keeps the whole history.",
    )


class Skill(_Frozen):
    name: str = Field(description="Short identifier of the skill.")
    text: str = Field(description="Reusable hint shown to the policy in the system message.")


MAX_PATTERN_CHARS = 1_000  # one condition regex


def _regex_options() -> re2.Options:
    options = re2.Options()
    options.case_sensitive = False
    options.log_errors = False  # a refused pattern is our one-line error, not a line on stderr
    return options


_REGEX_OPTIONS = _regex_options()


@lru_cache(maxsize=1024)
def rule_regex(pattern: str):
    """A condition's pattern compiled case-insensitively by RE2 (google-re2), whose matching time is
    linear in the text whatever the pattern: an editor's `(x+x+)+y` cannot stall an episode. RE2 has
    no backreferences or lookaround and caps a compiled pattern's memory; a pattern it refuses, or
    one over MAX_PATTERN_CHARS, is a ValueError with a one-line message."""
    if len(pattern) > MAX_PATTERN_CHARS:
        raise ValueError(f"the regex is longer than {MAX_PATTERN_CHARS:,} characters")
    try:
        return re2.compile(pattern, _REGEX_OPTIONS)
    except re2.error as exc:
        reason = exc.args[0].decode(errors="replace") if exc.args and isinstance(exc.args[0], bytes) else str(exc)
        raise ValueError(
            f"the regex {pattern[:80]!r} is not accepted by RE2 ({reason.splitlines()[0] if reason else 'refused'}); "
            "use plain alternatives and classes, no backreferences or lookaround"
        ) from None


def regex_search(pattern: str, text: str) -> bool:
    """Whether the condition's pattern matches anywhere in `text` (case-insensitive, linear time)."""
    regex = rule_regex(pattern)
    try:
        return regex.search(text) is not None
    except UnicodeEncodeError:  # a lone surrogate: RE2 reads UTF-8
        return regex.search(text.encode("utf-8", "replace").decode("utf-8")) is not None


class Condition(_Frozen):
    """All set fields must hold (logical AND); an empty condition always holds."""

    action_kind: ActionKind | None = Field(default=None, description="Kind of the action being taken/just taken.")
    queries_at_most: int | None = Field(default=None, ge=0, description="Holds while at most N SQL queries ran.")
    queries_at_least: int | None = Field(default=None, ge=0, description="Holds once at least N SQL queries ran.")
    round_at_least: int | None = Field(default=None, ge=0, description="Holds from round N on (0-based).")
    last_step_error: bool | None = Field(default=None, description="Whether the last environment step was an error.")
    observation_matches: str | None = Field(
        default=None,
        description="Case-insensitive regex (RE2: no backreferences or lookaround) the last observation must match.",
    )
    instruction_matches: str | None = Field(
        default=None,
        description="Case-insensitive regex (RE2: no backreferences or lookaround) the task instruction must match.",
    )

    @field_validator("observation_matches", "instruction_matches")
    @classmethod
    def _linear_regex(cls, pattern: str | None) -> str | None:
        if pattern is not None:
            rule_regex(pattern)
        return pattern


class HookRule(_Frozen):
    at: HookPoint = Field(description="Lifecycle point where the rule is checked.")
    when: Condition = Field(default_factory=Condition, description="When the rule fires.")
    effect: Literal["inject", "block"] = Field(
        description="'inject' appends message to what the policy sees next; 'block' (before_action only) "
        "refuses the action, shows message as the observation and spends a round."
    )
    message: str = Field(description="Text injected or shown; task placeholders as in task_template are filled.")
    once: bool = Field(default=False, description="Fire at most once per episode.")


class CodeHook(_Frozen):
    """Sandboxed Python `def hook(ctx, nb)` (harness_pool/sandbox.py): returns None or effects
    {"inject": text} / {"block": text} / {"rewrite": sql}; a failing call has no effect."""

    at: HookPoint = Field(description="Lifecycle point where the hook is called.")
    name: str = Field(description="Short identifier, shown in the trajectory's hook events.")
    source: str = Field(description="Python source defining `def hook(ctx, nb):` (sandbox rules apply).")

    @field_validator("source")
    @classmethod
    def _passes_sandbox(cls, source: str) -> str:
        try:
            check_hook_source(source)
        except SandboxError as exc:
            raise ValueError(str(exc)) from None
        return source


class MemoryPolicy(_Frozen):
    query_log: int = Field(
        default=0,
        ge=0,
        le=20,
        description="After each observation, list the last N SQL queries run in this episode (and whether each "
        "failed), so they survive a history window; 0 = off.",
    )


class Provenance(_Frozen):
    edit: str | None = Field(default=None, description="What edit produced this harness from its parent.")
    root_causes: list[str] = Field(default_factory=list, description="Failure causes the edit targets.")
    round: int | None = Field(default=None, description="Evolution round that produced it (None for H0).")


class HarnessSpec(_Frozen):
    schema_version: Literal[1] = Field(default=1, description="Harness spec format version.")
    name: str = Field(description="Human-readable name, e.g. 'h0'.")
    benchmark: str = Field(description="Benchmark whose environment and verifier it drives (envs/registry.py).")
    parent_ids: list[str] = Field(default_factory=list, description="Content ids of the parent harnesses.")
    prompts: Prompts = Field(description="System prompt and task template.")
    tool_view: ToolView = Field(default_factory=ToolView, description="Action protocol and its error handling.")
    context: ContextPolicy = Field(default_factory=ContextPolicy, description="Observation truncation and history.")
    skills: list[Skill] = Field(default_factory=list, description="Reusable hints added to the system message.")
    hooks: list[HookRule] = Field(
        default_factory=list,
        description="Declarative lifecycle rules (guard rules before an action, recovery rules after a step, hints).",
    )
    code_hooks: list[CodeHook] = Field(default_factory=list, description="Sandboxed code hooks.")
    memory: MemoryPolicy = Field(default_factory=MemoryPolicy, description="What the episode remembers for the policy.")
    guidance: str | None = Field(default=None, description="Action guidance appended to the system message.")
    provenance: Provenance = Field(default_factory=Provenance, description="How this harness came to be.")

    @property
    def id(self) -> str:
        return harness_id(self)

    @field_validator("benchmark")
    @classmethod
    def _known_benchmark(cls, name: str) -> str:
        return check_name(name)

    @model_validator(mode="after")
    def _protocol_fits_benchmark(self) -> HarnessSpec:
        if not self.tool_view.protocol.startswith(f"{self.benchmark}_"):
            raise ValueError(
                f"tool_view.protocol '{self.tool_view.protocol}' is not a {self.benchmark} protocol; "
                f"use {self.benchmark}_text_v1 or {self.benchmark}_json_v1"
            )
        return self

    @model_validator(mode="after")
    def _templates_render(self) -> HarnessSpec:
        """Prompts, skills, guidance and hook messages are filled with str.format at run time: a stray brace
        (e.g. a JSON example) would crash every episode, and a field with a huge width or an attribute or
        index (`{x:>1000000000}`, `{x.__class__}`) would build a huge string or walk objects in every
        episode, so both are rejected here, where the file is checked (the hook sandbox's template policy)."""
        texts = {
            "prompts.system (with skills and guidance)": self.system_message(),
            "prompts.task_template": self.prompts.task_template,
            "prompts.observation_template": self.prompts.observation_template,
            **{f"hooks.{i}.message": rule.message for i, rule in enumerate(self.hooks)},
        }
        for where, template in texts.items():
            problem = template_problem(template)  # before formatting it: '{x:>1000000000}' builds 1 GB
            if problem is not None and _parses(template):
                raise ValueError(
                    f"{where} is not an allowed template ({problem}); fields are plain names, with widths and "
                    f"precisions of at most {LIMITS.max_range:,}"
                )
            try:
                template.format_map(_AnyField())
            except (ValueError, IndexError) as exc:
                raise ValueError(
                    f"{where} is not a valid template ({exc}); write literal braces as {{{{ and }}}}"
                ) from None
        return self

    def system_message(self) -> str:
        parts = [self.prompts.system.strip()]
        if self.skills:
            parts.append("Useful skills:\n" + "\n".join(f"- {s.text.strip()}" for s in self.skills))
        if self.guidance:
            parts.append(self.guidance.strip())
        return "\n\n".join(parts)


def _parses(template: str) -> bool:
    try:
        list(string.Formatter().parse(template))
    except ValueError:
        return False  # the format_map below says why, in the message for stray braces
    return True


class _AnyField(dict):
    def __missing__(self, key: str) -> str:
        return ""


class HarnessError(ValueError):
    """A harness file that cannot be used; the message says which file and how to fix it."""


def first_error(exc: ValidationError) -> tuple[str, str]:
    """(dotted location, message) of a validation error's first problem, for one-line errors."""
    err = exc.errors()[0]
    return ".".join(str(p) for p in err["loc"]) or "(top level)", err["msg"]


def canonical_json(spec: HarnessSpec) -> str:
    """Sorted keys, fields at their default left out: a field added to the format later (with a
    default) leaves the ids of existing harnesses unchanged."""
    data = spec.model_dump(mode="json", exclude_defaults=True)
    return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def harness_id(spec: HarnessSpec) -> str:
    return hashlib.sha256(canonical_json(spec).encode()).hexdigest()


BUILTIN_DIR = Path(__file__).parent / "harnesses"


def load_harness(name_or_path: str | Path, benchmark: str = DEFAULT_BENCHMARK) -> HarnessSpec:
    """Load a harness by built-in name (e.g. 'h0') or by path to a YAML file."""
    path = Path(name_or_path)
    folder = registered(benchmark).harness_dir
    if not path.suffix:
        path = folder / f"{name_or_path}.yaml"
    if not path.exists():
        known = sorted(p.stem for p in folder.glob("*.yaml"))
        raise HarnessError(f"harness '{name_or_path}' not found: give a YAML path or one of {known}")
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        raise HarnessError(f"{path}: not valid YAML ({str(exc).splitlines()[0]}); fix the file syntax") from None
    if not isinstance(data, dict):
        raise HarnessError(f"{path}: expected a mapping of harness fields at the top level")
    try:
        return HarnessSpec.model_validate(data)
    except ValidationError as exc:
        where, msg = first_error(exc)
        raise HarnessError(f"{path}: field '{where}': {msg}; fix that field (see harness_pool/spec.py)") from None


class _ReadableDumper(yaml.SafeDumper):
    """Multi-line text as literal blocks, so a diff between sibling files reads like prose."""


def _str(dumper: yaml.SafeDumper, value: str):
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_ReadableDumper.add_representer(str, _str)


def harness_yaml(spec: HarnessSpec) -> str:
    """The readable YAML text of a harness (what dump_harness writes)."""
    return yaml.dump(
        spec.model_dump(mode="json"), Dumper=_ReadableDumper, sort_keys=False, allow_unicode=True, width=100
    )


def dump_harness(spec: HarnessSpec, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(harness_yaml(spec))
    if load_harness(path).id != spec.id:  # never write a file that loads as a different harness
        raise HarnessError(f"{path}: YAML round trip changed the harness; report this as a bug")
    return path
