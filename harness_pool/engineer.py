"""The engineer: a policy that reads an evidence bundle and writes one harness patch.

Any policy backend plays it (the local transformers model by default, an OpenAI-compatible
server optionally); this module only builds its messages and reads its reply. `read_reply` turns
the reply text into a child harness, or into a rejection with a one-line reason (no JSON, invalid
JSON, a patch that breaks the schema, fails the code-hook sandbox's static check, or changes
nothing), so every sampled patch gets a reward and a logged outcome.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from harness_pool.bundles import Bundle
from harness_pool.diagnosis import causes_for
from harness_pool.editor_llm import SANDBOX_RULES, editor_system, parse_reply
from harness_pool.patch import HarnessPatch, apply_patch, patch_format
from harness_pool.spec import HarnessSpec, harness_yaml


@dataclass(frozen=True)
class Reading:
    """What one engineer reply gave: a patch and its child, or the reason it was rejected."""

    patch: HarnessPatch | None
    child: HarnessSpec | None
    reason: str | None

    @property
    def valid(self) -> bool:
        return self.child is not None


def bundle_prompt(bundle: Bundle) -> str:
    """The engineer's user message: the causes, the failing episodes, the parent, the patch format."""
    known = causes_for(bundle.benchmark)
    causes = "\n".join(f"- {c}: {known.get(c, 'a cause named by the diagnoser')}" for c in bundle.causes)
    episodes = "\n\n".join(
        f"--- failure {i + 1}: task {f.bench_task_id}, cause {f.cause} ---\n{f.text}"
        for i, f in enumerate(bundle.failures)
    )
    parent = HarnessSpec.model_validate(bundle.parent)
    return f"""## Root causes to fix
{causes}

## Failing episodes of the agent under the parent harness
{episodes}

## Parent harness (YAML)
{harness_yaml(parent)}
## Patch format
{patch_format()}

## Code hook rules
{SANDBOX_RULES}

## Your task
Write one patch that makes the agent avoid these failures without hurting the tasks it already \
solves: a few edits that change behaviour. Set "root_causes" to {json.dumps(bundle.causes)}. \
Reply with exactly one JSON object in a ```json block."""


def engineer_messages(bundle: Bundle) -> list[dict[str, str]]:
    return [
        {"role": "system", "content": editor_system(bundle.benchmark)},
        {"role": "user", "content": bundle_prompt(bundle)},
    ]


def read_reply(reply: str, bundle: Bundle, name: str, round: int | None = None) -> Reading:
    """The child harness an engineer reply proposes for `bundle`, or why it is rejected."""
    parent = HarnessSpec.model_validate(bundle.parent)
    try:
        patch = parse_reply(reply, name)
        return Reading(patch, apply_patch(parent, patch, round), None)
    except ValueError as exc:  # JSON, schema, sandbox and no-op errors (HarnessError is a ValueError)
        return Reading(None, None, " ".join(str(exc).split()))


def demonstration(bundle: Bundle, patch: HarnessPatch) -> list[dict[str, str]]:
    """A cold-start example: the engineer's messages and, as its reply, a patch that validated,
    without the fields left at their defaults (the parser fills them back): a shorter reply is
    one a small engineer gets right more often (with them, a third of sampled replies broke JSON)."""
    body = patch.model_dump(mode="json", exclude={"name"}, exclude_defaults=True)
    reply = "```json\n" + json.dumps(body, ensure_ascii=False, indent=1) + "\n```"
    return [*engineer_messages(bundle), {"role": "assistant", "content": reply}]
