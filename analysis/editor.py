"""The editor comparison (issue 21): what patches from each editor did on held-out bundles.

Per editor (offline operators, SFT-only engineer, GRPO engineer, an LLM editor when configured),
over its patches: the share that pass the static check (give a child harness at all), the share
that validate (fix >= 1 targeted failure, break no control), the mean fixed and broken tasks per
patch, and, per bundle, the target's success over the bundle's tasks under that editor's best
patch (the parent's success when no patch of it ran). Shares get Wilson intervals; the best-patch
success of two editors is compared with a paired bootstrap over the bundles they share.
"""

from __future__ import annotations

from dataclasses import dataclass

from analysis.statistics import Interval, paired_bootstrap, sign_flip_test, verdict, wilson


@dataclass(frozen=True)
class PatchRow:
    editor: str
    bundle_id: str
    status: str  # valid | invalid | rejected
    fixed: int
    broken: int


@dataclass(frozen=True)
class EditorSummary:
    editor: str
    patches: int
    bundles: int
    static_pass: Interval
    validated: Interval
    fixed_mean: float
    broken_mean: float
    best_success: float  # mean over bundles of the success under the editor's best patch


def editor_of(source: str) -> str:
    """offline-v2 -> offline; engineer-sft:NAME -> sft; engineer-grpo:NAME -> grpo; llm:MODEL -> llm."""
    if source.startswith("offline"):
        return "offline"
    head = source.split(":", 1)[0]
    return head.removeprefix("engineer-") if head.startswith("engineer-") else head


def success_under(row: PatchRow, n_failing: int, n_controls: int) -> float:
    """The target's success over the bundle's tasks under the patch (rejected: the parent's)."""
    if row.status == "rejected":
        return n_controls / (n_failing + n_controls)
    return (row.fixed + n_controls - row.broken) / (n_failing + n_controls)


def best_success(rows: list[PatchRow], sizes: dict[str, tuple[int, int]]) -> dict[str, float]:
    """bundle -> success under the best of these rows' patches for it."""
    out: dict[str, float] = {}
    for r in rows:
        value = success_under(r, *sizes[r.bundle_id])
        out[r.bundle_id] = max(out.get(r.bundle_id, 0.0), value)
    return out


def summarise(rows: list[PatchRow], sizes: dict[str, tuple[int, int]]) -> list[EditorSummary]:
    """One summary per editor, in the order offline, llm, sft, grpo, then others by name.
    `sizes`: bundle id -> (failing tasks, controls)."""
    order = {"offline": 0, "llm": 1, "sft": 2, "grpo": 3}
    out = []
    for editor in sorted({r.editor for r in rows}, key=lambda e: (order.get(e, 9), e)):
        mine = [r for r in rows if r.editor == editor]
        n = len(mine)
        best = best_success(mine, sizes)
        out.append(
            EditorSummary(
                editor=editor,
                patches=n,
                bundles=len(best),
                static_pass=wilson(sum(r.status != "rejected" for r in mine), n),
                validated=wilson(sum(r.status == "valid" for r in mine), n),
                fixed_mean=sum(r.fixed for r in mine) / n,
                broken_mean=sum(r.broken for r in mine) / n,
                best_success=sum(best.values()) / len(best),
            )
        )
    return out


def compare_best(
    rows: list[PatchRow], sizes: dict[str, tuple[int, int]], a: str, b: str
) -> tuple[Interval, str] | None:
    """Editor a's best-patch success minus b's over the bundles both patched (paired bootstrap)."""
    best_a = best_success([r for r in rows if r.editor == a], sizes)
    best_b = best_success([r for r in rows if r.editor == b], sizes)
    shared = sorted(set(best_a) & set(best_b))
    if len(shared) < 2:
        return None
    xs, ys = [best_a[k] for k in shared], [best_b[k] for k in shared]
    interval = paired_bootstrap(xs, ys)
    return interval, verdict(interval, sign_flip_test(xs, ys))
