"""Harness patches: typed edit actions over a harness's components.

An editor (LLM or offline operators) proposes a HarnessPatch: a child name, the root causes it
targets and a list of edits. `apply_patch` is pure and deterministic: the same parent and patch
always give the same child, whose id is its content hash and whose parent id is recorded. The
child is validated as a whole (code hooks go through the sandbox's static check), so a patch
that applies is statically compatible: same benchmark, environment interface and verifier.
Guard rules act before an action (block it); recovery rules act after a step (inject a hint).
"""

from __future__ import annotations

import json
from typing import Annotated, Literal, Union, get_args, get_origin

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from harness_pool.spec import (
    CodeHook,
    Condition,
    ContextPolicy,
    HarnessError,
    HarnessSpec,
    HookRule,
    MemoryPolicy,
    Provenance,
    Skill,
    ToolView,
    first_error,
)


class _Edit(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class AppendPrompt(_Edit):
    op: Literal["append_prompt"]
    field: Literal["system", "task_template", "observation_template"] = Field(description="Which prompt to extend.")
    text: str = Field(min_length=1, description="Paragraph appended (after a blank line).")


class SetPrompt(_Edit):
    op: Literal["set_prompt"]
    field: Literal["system", "task_template", "observation_template"] = Field(description="Which prompt to replace.")
    text: str = Field(min_length=1, description="The new prompt text.")


class AddSkill(_Edit):
    op: Literal["add_skill"]
    name: str = Field(description="Skill identifier (replaces a skill of the same name).")
    text: str = Field(min_length=1, description="The reusable hint.")


class RemoveSkill(_Edit):
    op: Literal["remove_skill"]
    name: str = Field(description="Skill identifier to drop.")


class SetGuidance(_Edit):
    op: Literal["set_guidance"]
    text: str | None = Field(description="Action guidance appended to the system message (None removes it).")


class SetContext(_Edit):
    op: Literal["set_context"]
    max_observation_chars: int | None = Field(default=None, ge=16, description="New truncation limit, if set.")
    history_window: int | None = Field(default=None, ge=1, description="New history window, if set.")


class SetMemory(_Edit):
    op: Literal["set_memory"]
    query_log: int = Field(ge=0, le=20, description="Show the last N queries after each observation (0 = off).")


class SetToolView(_Edit):
    op: Literal["set_tool_view"]
    on_invalid: Literal["end", "warn"] | None = Field(default=None, description="What an unparseable turn does.")
    invalid_message: str | None = Field(default=None, description="Observation for an unparseable turn ('warn').")
    accept_scalar_answer: bool | None = Field(default=None, description="Wrap a scalar final answer as a list.")


class AddGuardRule(_Edit):
    op: Literal["add_guard_rule"]
    when: Condition = Field(description="When the action is refused (action_kind is usually set).")
    message: str = Field(min_length=1, description="Shown instead of running the action.")
    once: bool = Field(default=False, description="Refuse at most once per episode.")


class AddRecoveryRule(_Edit):
    op: Literal["add_recovery_rule"]
    when: Condition = Field(description="After which steps the hint is shown (e.g. last_step_error: true).")
    message: str = Field(min_length=1, description="Hint injected after the observation.")
    once: bool = Field(default=False, description="Inject at most once per episode.")


class AddHint(_Edit):
    op: Literal["add_hint"]
    at: Literal["on_init", "before_model_call"] = Field(description="Where the hint is injected.")
    when: Condition = Field(default_factory=Condition, description="When it is injected.")
    message: str = Field(min_length=1, description="Hint text; task placeholders are filled.")


class AddCodeHook(_Edit):
    op: Literal["add_code_hook"]
    hook: CodeHook = Field(description="The sandboxed hook (replaces a hook of the same name).")


class RemoveHooks(_Edit):
    op: Literal["remove_hooks"]
    at: Literal["on_init", "before_model_call", "before_action", "after_step"] = Field(
        description="Drop every declarative rule and code hook at this point."
    )


Edit = Annotated[
    Union[
        AppendPrompt,
        SetPrompt,
        AddSkill,
        RemoveSkill,
        SetGuidance,
        SetContext,
        SetMemory,
        SetToolView,
        AddGuardRule,
        AddRecoveryRule,
        AddHint,
        AddCodeHook,
        RemoveHooks,
    ],
    Field(discriminator="op"),
]


class HarnessPatch(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(min_length=1, description="Name of the child harness.")
    description: str = Field(description="What the edit does, in one sentence.")
    root_causes: list[str] = Field(min_length=1, max_length=3, description="The 1-3 related causes it targets.")
    edits: list[Edit] = Field(min_length=1, description="Edit actions, applied in order.")


def _apply_one(spec: HarnessSpec, edit) -> dict:
    """The fields of `spec` that `edit` changes (pydantic objects; validated by the caller)."""
    if isinstance(edit, (AppendPrompt, SetPrompt)):
        old = getattr(spec.prompts, edit.field)
        text = edit.text if isinstance(edit, SetPrompt) else f"{old.rstrip()}\n\n{edit.text.strip()}"
        return {"prompts": spec.prompts.model_copy(update={edit.field: text})}
    if isinstance(edit, AddSkill):
        return {"skills": [s for s in spec.skills if s.name != edit.name] + [Skill(name=edit.name, text=edit.text)]}
    if isinstance(edit, RemoveSkill):
        return {"skills": [s for s in spec.skills if s.name != edit.name]}
    if isinstance(edit, SetGuidance):
        return {"guidance": edit.text}
    if isinstance(edit, (SetContext, SetMemory, SetToolView)):
        target, kind = {
            SetContext: ("context", ContextPolicy),
            SetMemory: ("memory", MemoryPolicy),
            SetToolView: ("tool_view", ToolView),
        }[type(edit)]
        changes = edit.model_dump(exclude={"op"}, exclude_none=True)
        return {target: kind.model_validate({**getattr(spec, target).model_dump(), **changes})}
    if isinstance(edit, AddGuardRule):
        rule = HookRule(at="before_action", when=edit.when, effect="block", message=edit.message, once=edit.once)
        return {"hooks": [*spec.hooks, rule]}
    if isinstance(edit, AddRecoveryRule):
        rule = HookRule(at="after_step", when=edit.when, effect="inject", message=edit.message, once=edit.once)
        return {"hooks": [*spec.hooks, rule]}
    if isinstance(edit, AddHint):
        return {"hooks": [*spec.hooks, HookRule(at=edit.at, when=edit.when, effect="inject", message=edit.message)]}
    if isinstance(edit, AddCodeHook):
        return {"code_hooks": [h for h in spec.code_hooks if h.name != edit.hook.name] + [edit.hook]}
    if isinstance(edit, RemoveHooks):
        return {
            "hooks": [h for h in spec.hooks if h.at != edit.at],
            "code_hooks": [h for h in spec.code_hooks if h.at != edit.at],
        }
    raise TypeError(f"unknown edit {edit!r}")


def apply_patch(parent: HarnessSpec, patch: HarnessPatch, round: int | None = None) -> HarnessSpec:
    """The child harness: parent + edits, with its parent id and provenance. Pure and deterministic."""
    spec = parent
    for edit in patch.edits:
        spec = spec.model_copy(update=_apply_one(spec, edit))
    data = spec.model_dump(mode="json")
    data.update(
        name=patch.name,
        parent_ids=[parent.id],
        provenance=Provenance(edit=patch.description, root_causes=list(patch.root_causes), round=round).model_dump(
            mode="json"
        ),
    )
    try:
        child = HarnessSpec.model_validate(data)  # re-validates every component, code hooks included
    except ValidationError as exc:
        where, msg = first_error(exc)
        raise HarnessError(f"patch '{patch.name}' gives an invalid harness at '{where}': {msg}") from None
    if spec.id == parent.id:
        raise HarnessError(f"patch '{patch.name}' changes nothing in the parent's behaviour; edit a component")
    return child


def parse_patch(data: dict) -> HarnessPatch:
    """A patch from JSON/YAML data; a one-line HarnessError naming the bad field otherwise."""
    try:
        return HarnessPatch.model_validate(data)
    except ValidationError as exc:
        where, msg = first_error(exc)
        raise HarnessError(f"invalid patch at '{where}': {msg}") from None


def _type_text(annotation) -> str:
    """A field type in a few words: str, int, bool, a list of literal values, 'or null'."""
    args = [a for a in get_args(annotation) if a is not type(None)]
    if get_origin(annotation) is Literal:
        return " | ".join(json.dumps(a) for a in get_args(annotation))
    if args and len(args) < len(get_args(annotation)):  # Optional[...]
        return " | ".join(_type_text(a) for a in args) + " | null"
    if args:
        return " | ".join(_type_text(a) for a in args)
    return getattr(annotation, "__name__", str(annotation))


def _field_line(name: str, info) -> str:
    optional = "" if info.is_required() else ", optional"
    return f"{name} ({_type_text(info.annotation)}{optional}): {info.description or ''}".rstrip(": ")


def patch_format() -> str:
    """The patch format in about 700 tokens (the JSON schema is over 3,000): its top-level keys,
    every edit op with its fields, and the condition fields, generated from the models."""
    lines = [
        'One JSON object: {"description": str, "root_causes": [1-3 cause labels], "edits": [edit, ...]}.',
        "Edits (by op):",
    ]
    for cls in get_args(get_args(Edit)[0]):
        fields = [_field_line(n, f) for n, f in cls.model_fields.items() if n != "op"]
        lines.append(f"- {get_args(cls.model_fields['op'].annotation)[0]}: " + "; ".join(fields))
    cond = [_field_line(n, f) for n, f in Condition.model_fields.items()]
    lines.append("A condition (when) is an object; every field set must hold: " + "; ".join(cond))
    hook = [_field_line(n, f) for n, f in CodeHook.model_fields.items()]
    lines.append("A code hook (hook) is an object: " + "; ".join(hook))
    return "\n".join(lines)
