"""Training-run summaries from the per-update signals (pure: rows in, table rows out).

One row per run: the means over its updates of the valid-group ratio and effective-token
ratio; rescues triggered and the share that found a success (over all rescue groups, not a
mean of per-step shares); rollouts spent in total; and H0's validation success at each
re-anchor. These are the RQ2/RQ3 signals of docs/method.md §5.
"""

from __future__ import annotations

from statistics import fmean


def summarise_training(steps: list[dict], reanchors: list[dict]) -> dict:
    """steps: one metrics dict per update (with 'step'); reanchors: {step, harness, success_rate}."""

    def mean(key: str) -> float:
        values = [s[key] for s in steps if key in s]
        return fmean(values) if values else 0.0

    triggered, rescued = _rescues(steps)
    h0 = {r["step"]: r["success_rate"] for r in reanchors if r["harness"] == "h0"}
    return {
        "updates": len(steps),
        "valid_group_ratio": mean("train/valid_group_ratio"),
        "effective_token_ratio": mean("train/effective_token_ratio"),
        "first_group_success": mean("train/first_group_success"),
        "rescues_triggered": triggered,
        "rescue_success": rescued / triggered if triggered else None,
        "rollouts_spent": sum(s.get("rollout/rollouts_spent", 0.0) for s in steps),
        "h0_validation": dict(sorted(h0.items())),
        "rescue_by_stage": rescue_by_stage(steps, sorted(h0)),
        "seconds": sum(s.get("time/rollout_s", 0.0) + s.get("time/update_s", 0.0) for s in steps),
    }


def _rescues(steps: list[dict]) -> tuple[float, float]:
    """(rescue groups, rescue groups with a success) over the given updates."""
    triggered = sum(s.get("rollout/rescues_triggered", 0.0) for s in steps)
    rescued = sum(s.get("rollout/rescue_success", 0.0) * s.get("rollout/rescues_triggered", 0.0) for s in steps)
    return triggered, rescued


def rescue_by_stage(steps: list[dict], reanchor_steps: list[int]) -> dict[int, dict]:
    """Training stages are the spans between re-anchors (each with one profile version): for every
    stage, keyed by its first update, the rescues triggered and the share that found a success (RQ3)."""
    starts = sorted(a for a in reanchor_steps if any(s["step"] >= a for s in steps)) or [0]
    out = {}
    for i, start in enumerate(starts):
        end = starts[i + 1] if i + 1 < len(starts) else float("inf")
        triggered, rescued = _rescues([s for s in steps if start <= s["step"] < end])
        out[start] = {"rescues": triggered, "rescue_success": rescued / triggered if triggered else None}
    return out
