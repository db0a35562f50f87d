"""LLM editor and diagnoser: a chat model proposes a harness patch for a few related root causes.

`LlmEditor.propose` builds one prompt (the causes to target with their support, excerpts of
failing trajectories, the parent harness as YAML, the patch JSON schema and the code-hook
sandbox rules), parses the reply into a HarnessPatch and applies it to the parent. A reply that
does not parse, validate or apply gets exactly one repair request in the same conversation,
quoting the error; a second failure gives no child. The child's name is always the one the
caller chose, so names stay unique within a pool whatever the model writes.

`LlmDiagnoser.cause` asks for the single root cause of one failed trajectory, offering the
rule-based causes and the rule's guess; a reply that is neither a known cause nor a short
snake_case label falls back to the rule's cause.

Server errors (LlmError from harness_pool.llm) are not repaired: they propagate to the caller.
"""

from __future__ import annotations

import json
import re

from envs.registry import DEFAULT_BENCHMARK
from envs.registry import benchmark as registered
from harness_pool.diagnosis import Cluster, causes_for
from harness_pool.llm import ChatClient
from harness_pool.patch import HarnessPatch, apply_patch, parse_patch
from harness_pool.spec import HarnessSpec, harness_yaml

MAX_EXCERPTS = 4
EXCERPT_CHARS = 1500
RAW_CHARS = 4000
UNKNOWN_CAUSE = "a cause named by the diagnoser (no rule describes it)"

EDITOR_SYSTEM_TEMPLATE = """\
You improve agent harnesses for {blurb}. A harness is data: prompts, a tool \
view, a context policy, skills, declarative hook rules, sandboxed code hooks and guidance. You \
never change the model or the benchmark, only the harness, through a patch of typed edits.
Reply with exactly one JSON object, the patch, in a ```json block, and nothing else."""


def editor_system(benchmark: str) -> str:
    return EDITOR_SYSTEM_TEMPLATE.format(blurb=registered(benchmark).blurb)


SANDBOX_RULES = """\
Code hooks (op add_code_hook) are Python source defining exactly one `def hook(ctx, nb):` and \
nothing else at the top level except other plain functions.
- It returns None or a dict with keys among "inject" (text shown to the agent next), "block" \
(before_action only: refuse the action and show the text) and "rewrite" (before_action only, \
SQL actions: run this SQL instead); values are strings, at most 2000 characters in all.
- ctx is read-only: point, round, queries, last_error, last_observation, sql_history, \
action_kind ('sql'|'answer'|'invalid'|None), action_sql, instruction, description, \
add_description, table_name, headers, sample_rows. nb is a dict of JSON values kept for the \
episode (write nb["key"] = value).
- Not allowed: import, while, try, with, lambda, class, global, nested functions, default \
argument values, assigning to attributes, names starting with '_', eval/exec/open/getattr/type/\
print and similar; .format only on a constant template without attribute or index fields \
(prefer f-strings). Only simple builtins (len, min, max, sum, sorted, any, all, str, int, list, \
dict, range, ...). At most 4000 characters; it must be fast (50 ms) and build strings and lists \
of at most 100,000 items.
- Prefer declarative edits (add_guard_rule, add_recovery_rule, add_hint) when they suffice."""


# The closing fence must start a line: a JSON string cannot hold a raw newline, so a ``` inside
# patch text (an SQL example in a prompt) never ends the block early.
_FENCE = re.compile(r"```json[^\S\n]*\n(.*?)\n[^\S\n]*```", re.DOTALL | re.IGNORECASE)


def _fenced_or_braced(text: str) -> str:
    """The first ```json fenced block, else the outermost {...} of the reply."""
    fenced = _FENCE.search(text)
    if fenced:
        return fenced.group(1)
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end < start:
        raise ValueError("the reply holds no JSON object; reply with one JSON object (the patch)")
    return text[start : end + 1]


def parse_reply(text: str, name: str) -> HarnessPatch:
    try:
        data = json.loads(_fenced_or_braced(text))
    except json.JSONDecodeError as exc:
        raise ValueError(f"the reply is not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})") from None
    if not isinstance(data, dict):
        raise ValueError(f"the reply's JSON is a {type(data).__name__}, not an object (the patch)")
    return parse_patch({**data, "name": name})


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + " ...[cut]"


def editor_prompt(parent: HarnessSpec, clusters: list[Cluster], failures: list[str], name: str) -> str:
    known = causes_for(parent.benchmark)
    causes = "\n".join(f"- {c.cause} ({c.support} tasks): {known.get(c.cause, UNKNOWN_CAUSE)}" for c in clusters)
    excerpts = (
        "\n\n".join(
            f"--- failure {i + 1} ---\n{_cut(text, EXCERPT_CHARS)}" for i, text in enumerate(failures[:MAX_EXCERPTS])
        )
        or "(none)"
    )
    schema = json.dumps(HarnessPatch.model_json_schema(), ensure_ascii=False)
    targets = json.dumps([c.cause for c in clusters])
    return f"""## Root causes to fix
These related failure causes were found in the parent's failed episodes (support = distinct tasks):
{causes}

## Failing trajectories (excerpts)
{excerpts}

## Parent harness (YAML)
{harness_yaml(parent)}
## Patch format (JSON schema)
{schema}

## Code hook rules
{SANDBOX_RULES}

## Your task
Write one patch that makes the parent avoid these failures without hurting tasks it already \
solves. Keep it small and targeted: a few edits that change behaviour, not cosmetic rewording.
Set "name" to "{name}", "root_causes" to {targets} and "description" to one sentence on what \
the edit does. Reply with exactly one JSON object in a ```json block."""


def _repair_prompt(error: str) -> str:
    return (
        f"That patch was rejected: {error}\n"
        "Fix this and reply with the whole corrected patch: exactly one JSON object in a ```json block."
    )


class LlmEditor:
    """Proposes a child harness with a chat model; at most one repair round per proposal."""

    def __init__(self, chat: ChatClient):
        self.chat = chat

    def propose(
        self, parent: HarnessSpec, clusters: list[Cluster], failures: list[str], round: int, name: str
    ) -> tuple[HarnessPatch | None, HarnessSpec | None, dict]:
        """(patch, child, info); (None, None, info) when both attempts fail.
        info: {"attempts": 1|2, "errors": [one line per failed attempt], "raw": [reply texts, cut]}."""
        messages = [
            {"role": "system", "content": editor_system(parent.benchmark)},
            {"role": "user", "content": editor_prompt(parent, clusters, failures, name)},
        ]
        info: dict = {"attempts": 0, "errors": [], "raw": []}
        for attempt in (1, 2):
            reply = self.chat.chat(messages)
            info["attempts"] = attempt
            info["raw"].append(reply[:RAW_CHARS])
            try:
                patch = parse_reply(reply, name)
                return patch, apply_patch(parent, patch, round), info
            except ValueError as exc:  # JSON, validation and HarnessError (all ValueError)
                error = " ".join(str(exc).split())
                info["errors"].append(error)
                messages += [
                    {"role": "assistant", "content": reply},
                    {"role": "user", "content": _repair_prompt(error)},
                ]
        return None, None, info


DIAGNOSER_SYSTEM_TEMPLATE = """\
You diagnose failed episodes of a language-model agent on {blurb}. Name the single root cause \
of the failure: the earliest mistake that, had it not happened, would most likely have led to success.
Reply with the cause label only: one of the known causes, or if none fits, a new short \
snake_case label (3-40 characters, lowercase letters, digits and underscores)."""

LABEL = re.compile(r"^[a-z][a-z0-9_]{2,39}$")


class LlmDiagnoser:
    """One root-cause label per failed trajectory, falling back to the rule's cause."""

    def __init__(self, chat: ChatClient, max_chars: int = 8000, benchmark: str = DEFAULT_BENCHMARK):
        self.chat, self.max_chars, self.benchmark = chat, max_chars, benchmark

    def cause(self, trajectory_text: str, rule_cause: str) -> str:
        known = "\n".join(f"- {cause}: {text}" for cause, text in causes_for(self.benchmark).items())
        user = (
            f"Known causes:\n{known}\n\nA rule-based check guessed: {rule_cause}\n\n"
            f"Failed trajectory:\n{_cut(trajectory_text, self.max_chars)}\n\nRoot cause label:"
        )
        reply = self.chat.complete(DIAGNOSER_SYSTEM_TEMPLATE.format(blurb=registered(self.benchmark).blurb), user)
        label = reply.strip().strip("`'\"*.").strip().lower()
        return label if LABEL.match(label) else rule_cause
