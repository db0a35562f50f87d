"""Evidence bundles: what the trainable harness editor (the "engineer") reads to write one patch.

A bundle is the parent harness, 2-4 failed trajectories of a frozen target agent that share a
family of root causes (harness_pool/diagnosis.py), their causes, the fields of their tasks and
the control tasks the parent solves, with each trajectory's text trimmed so that all of them fit
one token budget. Bundles are deterministic for a seed: the same diagnosis gives the same bundles,
and a bundle's id is the hash of its content, so every engineer example traces back to its
trajectories (`failures[i].trajectory_id`).

`build_bundles` is pure: the caller supplies the diagnosis ({task id: {successes, causes,
trajectory_ids}}, as the evolution's harness runs return it), the trajectory texts and task fields.
A family with more failing tasks than one bundle holds gives several bundles over disjoint tasks.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Callable

from pydantic import BaseModel, ConfigDict, Field, computed_field

from harness_pool.operators import family_of
from harness_pool.spec import HarnessSpec


class BundleFailure(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    trajectory_id: str
    bench_task_id: str
    cause: str
    text: str = Field(description="The episode as text, trimmed to its share of the bundle's token budget.")


class Bundle(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    benchmark: str
    split: str = Field(description="'train' (the engineer learns from it) or 'heldout' (never trained on).")
    family: str = Field(description="The family of root causes its failures share.")
    parent: dict = Field(description="The parent harness spec (JSON).")
    causes: list[str] = Field(min_length=1, max_length=3, description="The causes to target, best supported first.")
    failures: list[BundleFailure] = Field(min_length=1, max_length=8)
    controls: list[str] = Field(default_factory=list, description="Tasks the parent solved, to catch breakage.")
    tasks: dict[str, dict] = Field(default_factory=dict, description="Task fields of every failing task.")

    @computed_field
    @property
    def id(self) -> str:
        data = self.model_dump(mode="json", exclude={"id"})
        return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:32]

    @property
    def failing_tasks(self) -> list[str]:
        return [f.bench_task_id for f in self.failures]

    @property
    def trajectory_ids(self) -> list[str]:
        return [f.trajectory_id for f in self.failures]


def approx_tokens(text: str) -> int:
    """A tokenizer-free estimate (about 4 characters per token); callers pass a real counter when they have one."""
    return (len(text) + 3) // 4


def trim(text: str, budget: int, count: Callable[[str], int] = approx_tokens) -> str:
    """`text` within `budget` tokens: its head (the task) and its tail (where it failed), cut in the middle."""
    if count(text) <= budget:
        return text
    marker = "\n...[cut]...\n"
    lo, hi = 0, len(text)
    while lo < hi:  # the largest head+tail length whose text fits
        mid = (lo + hi + 1) // 2
        head = mid // 3
        if count(text[:head] + marker + text[len(text) - (mid - head) :]) <= budget:
            lo = mid
        else:
            hi = mid - 1
    head = lo // 3
    return text[:head] + marker + text[len(text) - (lo - head) :]


def control_tasks(diagnosis: dict, seed: str) -> list[str]:
    """Control candidates: the tasks the parent solved in every rollout (seeded order), so a lost
    control means breakage rather than sampling noise; when it solved none that reliably, the
    tasks it solved at all, the most reliably solved first."""
    solved = sorted(t for t, r in diagnosis.items() if any(r["successes"]))
    random.Random(seed).shuffle(solved)
    rate = {t: sum(r["successes"]) / len(r["successes"]) for t, r in diagnosis.items()}
    robust = [t for t in solved if rate[t] == 1.0]
    return robust or sorted(solved, key=lambda t: -rate[t])


def _failures_by_family(parent: HarnessSpec, diagnosis: dict, seed: str) -> dict[str, list[tuple[str, str, str]]]:
    """family -> [(task id, trajectory id, cause)]: one failed rollout per task that never
    succeeded (a seeded choice among its failures), tasks in seeded order."""
    family = family_of(parent.benchmark)
    out: dict[str, list[tuple[str, str, str]]] = {}
    rng = random.Random(seed)
    for task_id in sorted(diagnosis):
        r = diagnosis[task_id]
        if any(r["successes"]):
            continue
        failed = [(tid, c) for tid, c in zip(r["trajectory_ids"], r["causes"]) if c]
        if failed:
            tid, cause = rng.choice(failed)
            out.setdefault(family.get(cause, cause), []).append((task_id, tid, cause))
    for items in out.values():
        rng.shuffle(items)
    return dict(sorted(out.items()))


def build_bundles(
    parent: HarnessSpec,
    diagnosis: dict,
    texts: dict[str, str],
    task_fields: dict[str, dict],
    *,
    split: str,
    seed: int | str,
    min_failures: int = 2,
    max_failures: int = 4,
    token_budget: int = 1500,
    n_controls: int = 8,
    count: Callable[[str], int] = approx_tokens,
) -> list[Bundle]:
    """The bundles of one parent's diagnosis, in a deterministic order (family, then chunk).

    Failing tasks of one family are cut into chunks of `max_failures` (a last chunk smaller than
    `min_failures` is dropped); each failure's text gets token_budget / len(chunk) tokens."""
    key = f"{seed}-{parent.id}"
    controls = sorted(control_tasks(diagnosis, key)[:n_controls])
    bundles = []
    for family, items in _failures_by_family(parent, diagnosis, key).items():
        for start in range(0, len(items), max_failures):
            chunk = items[start : start + max_failures]
            if len(chunk) < min_failures:
                continue
            support: dict[str, int] = {}
            for _, _, cause in chunk:
                support[cause] = support.get(cause, 0) + 1
            causes = sorted(support, key=lambda c: (-support[c], c))[:3]
            share = max(1, token_budget // len(chunk))
            bundles.append(
                Bundle(
                    benchmark=parent.benchmark,
                    split=split,
                    family=family,
                    parent=parent.model_dump(mode="json"),
                    causes=causes,
                    failures=[
                        BundleFailure(
                            trajectory_id=tid, bench_task_id=task, cause=cause, text=trim(texts[tid], share, count)
                        )
                        for task, tid, cause in chunk
                    ],
                    controls=controls,
                    tasks={task: task_fields.get(task, {}) for task, _, _ in chunk},
                )
            )
    return bundles
