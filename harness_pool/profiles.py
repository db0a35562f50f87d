"""Behaviour profiles: where a sibling harness beats or loses to H0, and how it acts there.

A profile is induced from paired validation (every sibling and H0 ran the same validation
tasks, docs/method.md §4). Each entry says *when* (a task condition: task types,
tiers, keywords) and *how* the sibling acts differently from H0, with the evidence behind it
(the tasks, the mean success delta sibling - H0, their count). The router's voters read these
entries to rank siblings for a task before anything runs (§2.3).

Two inducers:
  - `induce_offline`: no model. Groups the paired tasks by task type and by tier, keeps the
    groups with a non-zero mean delta, and templates the behaviour from the sibling's edit plus
    the behaviour-tag frequencies (rl/rollout.py `behaviour_tags`) that differ from H0's.
  - `induce_llm`: the paper's way, a chat model reads the paired outcome table and the edit and
    writes the entries; the evidence is still recomputed from the data, so a model cannot
    invent numbers. An unusable reply falls back to the offline inducer, saying why.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterable
from statistics import mean

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from envs.registry import benchmark
from harness_pool.llm import ChatClient, LlmError
from harness_pool.spec import HarnessSpec

log = logging.getLogger(__name__)

# How a behaviour tag reads in a profile line ("<phrase> more/less often (+N pts)").
TAG_PHRASES: dict[str, str] = {
    "inspected_first": "inspects the table first",
    "repeated_query": "repeats an identical query",
    "answered_without_query": "answers without querying",
    "rechecked_mutation": "re-checks the table after changing it",
}
# Tag frequency differences smaller than this (percentage points) are noise at validation sizes.
MIN_TAG_POINTS = 10
_EPS = 1e-9


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


def task_text(task: object) -> str:
    """The text a condition's keywords are matched against: a BenchTask's instruction, a
    PairedRecord's text, or a bare description/string."""
    for attr in ("instruction", "text", "description"):
        value = getattr(task, attr, None)
        if isinstance(value, str):
            return value
    return task if isinstance(task, str) else ""


def _either(items: list[str]) -> str:
    return " or ".join(items)


class TaskCondition(_Frozen):
    """All set parts must hold (AND); within a part any value will do (OR). Empty: any task."""

    task_types: list[str] = Field(default_factory=list, description="DBBench task types, e.g. ['UPDATE'].")
    tiers: list[str] = Field(default_factory=list, description="Difficulty tiers (train split), e.g. ['medium'].")
    keywords: list[str] = Field(
        default_factory=list, description="Words of which at least one must appear in the task text (case-insensitive)."
    )

    def matches(self, task: object) -> bool:
        """Whether a task (BenchTask, PairedRecord, or anything with those attributes) qualifies."""
        if self.task_types and getattr(task, "task_type", None) not in self.task_types:
            return False
        if self.tiers and getattr(task, "tier", None) not in self.tiers:
            return False
        if self.keywords:
            text = task_text(task).lower()
            return any(word.lower() in text for word in self.keywords)
        return True

    def text(self) -> str:
        """A short readable phrase, e.g. "UPDATE tasks; medium tier; mentioning 'average'" (what
        the embedding voter compares a task with, and what prompts show)."""
        parts = []
        if self.task_types:
            parts.append(f"{_either(self.task_types)} tasks")
        if self.tiers:
            parts.append(f"{_either(self.tiers)} tier")
        if self.keywords:
            parts.append("mentioning " + _either([f"'{word}'" for word in self.keywords]))
        return "; ".join(parts) or "any task"


class Evidence(_Frozen):
    bench_task_ids: list[str] = Field(description="Validation tasks the entry rests on.")
    delta: float = Field(description="Mean success delta sibling - H0 over those tasks, in [-1, 1].")
    n: int = Field(ge=0, description="Number of those tasks.")


class ProfileEntry(_Frozen):
    when: TaskCondition = Field(description="Which tasks the entry is about.")
    behaviour: str = Field(description="How the sibling acts differently from H0 on them.")
    evidence: Evidence = Field(description="What the paired validation showed.")

    def describe(self) -> str:
        """One prompt line: condition, behaviour and evidence."""
        ev = self.evidence
        return f"on {self.when.text()}: {self.behaviour} (success delta {ev.delta:+.2f} over {ev.n} tasks)"


class BehaviourProfile(_Frozen):
    harness_id: str = Field(description="Content id of the sibling.")
    harness_name: str = Field(description="Its readable name.")
    success_rate: float = Field(
        description="Its validation success rate (mean over the paired tasks of their rollout success)."
    )
    h0_success_rate: float = Field(description="H0's validation success rate on the same tasks.")
    prefer: list[ProfileEntry] = Field(default_factory=list, description="Where it beats H0.")
    avoid: list[ProfileEntry] = Field(default_factory=list, description="Where it loses to H0.")
    inducer: str = Field(description="'offline', 'llm:<model>', or 'offline (llm failed: <reason>)'.")


class PairedRecord(_Frozen):
    """One harness's outcome on one validation task (its K rollouts)."""

    bench_task_id: str = Field(description="Validation task id.")
    task_type: str = Field(description="DBBench task type.")
    tier: str | None = Field(default=None, description="Tier, if the task has one (dev tasks do not).")
    text: str = Field(description="The task instruction.")
    harness_id: str = Field(description="Harness that ran it.")
    successes: list[bool] = Field(description="One per rollout.")
    behaviour_tags: list[list[str]] = Field(default_factory=list, description="Tags of each rollout.")


def _by_task(records: Iterable[PairedRecord], harness_id: str) -> dict[str, PairedRecord]:
    """One record per task for a harness; repeated records of a task are merged (more rollouts)."""
    out: dict[str, PairedRecord] = {}
    for r in records:
        if r.harness_id != harness_id:
            continue
        if r.bench_task_id in out:
            old = out[r.bench_task_id]
            r = old.model_copy(
                update={
                    "successes": old.successes + r.successes,
                    "behaviour_tags": old.behaviour_tags + r.behaviour_tags,
                }
            )
        out[r.bench_task_id] = r
    return out


def _rate(record: PairedRecord) -> float:
    return sum(record.successes) / len(record.successes) if record.successes else 0.0


def _success_rate(by_task: dict[str, PairedRecord], ids: list[str]) -> float:
    """Over the paired tasks only, so the sibling's and H0's rates compare like with like; tasks
    weigh equally, whatever their rollout count."""
    return mean(_rate(by_task[i]) for i in ids) if ids else 0.0


def _tag_share(records: list[PairedRecord], tag: str) -> float:
    tagged = [tag in tags for r in records for tags in r.behaviour_tags]
    return sum(tagged) / len(tagged) if tagged else 0.0


def _tag_phrases(sib: list[PairedRecord], h0: list[PairedRecord]) -> list[str]:
    """Tag frequency differences vs H0 worth saying, largest first."""
    tags = sorted({t for r in sib + h0 for tags in r.behaviour_tags for t in tags})
    diffs = [(round(100 * (_tag_share(sib, t) - _tag_share(h0, t))), t) for t in tags]
    diffs = sorted((d for d in diffs if abs(d[0]) >= MIN_TAG_POINTS), key=lambda d: (-abs(d[0]), d[1]))
    return [f"{TAG_PHRASES.get(t, f'shows {t!r}')} {'more' if d > 0 else 'less'} often ({d:+d} pts)" for d, t in diffs]


def _behaviour(sibling: HarnessSpec, sib: list[PairedRecord], h0: list[PairedRecord]) -> str:
    edit = sibling.provenance.edit or f"acts as harness '{sibling.name}'"
    return "; ".join([edit, *_tag_phrases(sib, h0)])


def _paired(sibling: HarnessSpec, records: list[PairedRecord], h0_id: str):
    """(sibling by task, H0 by task, task ids both ran, sorted)."""
    sib, base = _by_task(records, sibling.id), _by_task(records, h0_id)
    return sib, base, sorted(sib.keys() & base.keys())


def _entry(cond: TaskCondition, behaviour: str, ids: list[str], sib, base) -> ProfileEntry:
    delta = mean(_rate(sib[i]) - _rate(base[i]) for i in ids)
    return ProfileEntry(
        when=cond, behaviour=behaviour, evidence=Evidence(bench_task_ids=ids, delta=round(delta, 6), n=len(ids))
    )


def _order(entries: list[ProfileEntry]) -> list[ProfileEntry]:
    """Strongest evidence first; ties by condition text, so the order never depends on input order."""
    return sorted(entries, key=lambda e: (-abs(e.evidence.delta), e.when.text()))


def induce_offline(
    sibling: HarnessSpec, records: list[PairedRecord], h0_id: str, min_tasks: int = 1
) -> BehaviourProfile:
    """Profile from paired records: one candidate entry per task type and per tier; a positive
    mean delta makes it a prefer entry, a negative one an avoid entry, zero says nothing."""
    sib, base, ids = _paired(sibling, records, h0_id)
    groups: dict[tuple[str, str], list[str]] = {}  # (part, value): conditions are unhashable (lists)
    for i in ids:
        groups.setdefault(("task_types", sib[i].task_type), []).append(i)
        if sib[i].tier:
            groups.setdefault(("tiers", sib[i].tier), []).append(i)
    prefer, avoid = [], []
    for (part, value), group in groups.items():
        if len(group) < min_tasks:
            continue
        cond = TaskCondition(**{part: [value]})
        behaviour = _behaviour(sibling, [sib[i] for i in group], [base[i] for i in group])
        entry = _entry(cond, behaviour, group, sib, base)
        if entry.evidence.delta > _EPS:
            prefer.append(entry)
        elif entry.evidence.delta < -_EPS:
            avoid.append(entry)
    return BehaviourProfile(
        harness_id=sibling.id,
        harness_name=sibling.name,
        success_rate=_success_rate(sib, ids),
        h0_success_rate=_success_rate(base, ids),
        prefer=_order(prefer),
        avoid=_order(avoid),
        inducer="offline",
    )


# ------------------------------------------------------------------------------------- LLM inducer


class _LlmEntry(_Frozen):
    when: TaskCondition
    behaviour: str = Field(min_length=1)


class _LlmReply(_Frozen):
    prefer: list[_LlmEntry] = Field(default_factory=list)
    avoid: list[_LlmEntry] = Field(default_factory=list)


INDUCER_SYSTEM_TEMPLATE = (
    "You compare two agent harnesses that ran the same tasks of {blurb}: the base harness H0 and a "
    "sibling made from it by one edit. Describe when the sibling should be preferred over H0 and when it "
    "should be avoided, and how it behaves differently there. Reply with one JSON object only."
)


def parse_json_reply(text: str) -> object:
    """The JSON value in a model reply: a ```json fenced block, the whole text, or the widest
    {...} / [...] span. Raises ValueError when none parses."""
    candidates = re.findall(r"```(?:json)?\s*(.*?)```", text, flags=re.DOTALL) + [text]
    for opener, closer in (("{", "}"), ("[", "]")):
        start, end = text.find(opener), text.rfind(closer)
        if 0 <= start < end:
            candidates.append(text[start : end + 1])
    for candidate in candidates:
        try:
            return json.loads(candidate)
        except json.JSONDecodeError:
            continue
    raise ValueError(f"no JSON in the reply: {' '.join(text.split())[:120]!r}")


def _outcomes_table(ids: list[str], sib, base) -> str:
    """One line per paired task: what the model needs to see, task text cut short."""
    lines = ["task id | type | tier | H0 successes | sibling successes | task text"]
    for i in ids:
        s, b = sib[i], base[i]
        text = " ".join(s.text.split())[:200]
        lines.append(
            f"{i} | {s.task_type} | {s.tier or '-'} | {sum(b.successes)}/{len(b.successes)} | "
            f"{sum(s.successes)}/{len(s.successes)} | {text}"
        )
    return "\n".join(lines)


def _inducer_prompt(sibling: HarnessSpec, ids: list[str], sib, base) -> str:
    causes = ", ".join(sibling.provenance.root_causes) or "none recorded"
    return (
        f"Sibling '{sibling.name}'. Its edit from H0: {sibling.provenance.edit or 'not recorded'}.\n"
        f"Failure causes the edit targets: {causes}.\n\n"
        f"Paired validation outcomes:\n{_outcomes_table(ids, sib, base)}\n\n"
        'Reply with JSON {"prefer": [ENTRY, ...], "avoid": [ENTRY, ...]} where ENTRY is '
        '{"when": {"task_types": [...], "tiers": [...], "keywords": [...]}, "behaviour": "..."}: '
        "'when' names the tasks (any of those task types, any of those tiers, any of those keywords "
        "in the task text; leave a list empty to not restrict on it); 'behaviour' says in a short "
        "phrase how the sibling acts differently from H0 on them. No other keys."
    )


def _llm_entries(raw: list[_LlmEntry], ids: list[str], sib, base) -> list[ProfileEntry]:
    """Evidence recomputed from the paired data; an entry matching no paired task is dropped."""
    out = []
    for e in raw:
        matched = [i for i in ids if e.when.matches(sib[i])]
        if not matched:
            log.info("dropping induced entry %r: it matches no paired validation task", e.when.text())
            continue
        out.append(_entry(e.when, e.behaviour, matched, sib, base))
    return _order(out)


def induce_llm(chat: ChatClient, sibling: HarnessSpec, records: list[PairedRecord], h0_id: str) -> BehaviourProfile:
    """The paper's inducer; any failure (request error, no JSON, wrong schema) falls back to
    `induce_offline` so re-anchoring never stops on a model's bad day."""
    sib, base, ids = _paired(sibling, records, h0_id)
    try:
        system = INDUCER_SYSTEM_TEMPLATE.format(blurb=benchmark(sibling.benchmark).blurb)
        reply = chat.complete(system, _inducer_prompt(sibling, ids, sib, base))
        parsed = _LlmReply.model_validate(parse_json_reply(reply))
    except (LlmError, ValueError, ValidationError) as err:  # ValidationError is a ValueError; named for clarity
        reason = " ".join(str(err).split())[:200]
        log.warning("LLM profile induction for %s failed (%s); using the offline inducer", sibling.name, reason)
        profile = induce_offline(sibling, records, h0_id)
        return profile.model_copy(update={"inducer": f"offline (llm failed: {reason})"})
    return BehaviourProfile(
        harness_id=sibling.id,
        harness_name=sibling.name,
        success_rate=_success_rate(sib, ids),
        h0_success_rate=_success_rate(base, ids),
        prefer=_llm_entries(parsed.prefer, ids, sib, base),
        avoid=_llm_entries(parsed.avoid, ids, sib, base),
        inducer=f"llm:{getattr(chat, 'model', 'unknown')}",
    )
