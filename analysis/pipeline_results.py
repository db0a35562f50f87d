"""The pipeline's results table (its run row's `results`), rendered once for every output:
`hs run` / `hs quickstart` print it with rich, `hs stage report` writes it as Markdown."""

from __future__ import annotations


def columns(results: dict) -> list[str]:
    k = results["k"]
    return ["evaluation", "harness", "tasks", f"Pass@{k} (%)", f"Avg@{k} (%)"]


def rows(results: dict) -> list[list[str]]:
    return [
        [
            label,
            "rank-1 router" if label.removeprefix("test-") in ("rank1", "rank1-before") else str(e["harness"]),
            str(e["n_tasks"]),
            _pm(e["pass"]),
            _pm(e["avg"]),
        ]
        for label, e in results["evaluations"].items()
    ]


def title(name: str, results: dict) -> str:
    return f"{name}: policy {results['checkpoint']} · pool {results['pool_version'] or '(config)'}"


def training_lines(results: dict) -> list[str]:
    lines = _search_lines(results)
    t = results.get("training")
    if t is not None:
        rescue = "-" if t["rescue_success"] is None else f"{t['rescue_success']:.2f}"
        interval = t.get("valid_group_interval")
        valid = f"{t['valid_group_ratio']:.3f}" + (f" [{interval[0]:.2f}, {interval[1]:.2f}]" if interval else "")
        lines += [
            f"training run {results['train_run_id']}: {t['updates']} updates · valid-group ratio "
            f"{valid} · effective-token ratio {t['effective_token_ratio']:.3f} · "
            f"rescues {t['rescues_triggered']:.0f}, success {rescue} · rollouts {t['rollouts_spent']:.0f}",
            "H0 validation success by re-anchor step: "
            + ", ".join(f"{s}: {v:.2f}" for s, v in t["h0_validation"].items()),
        ]
    phases = results.get("phase_seconds")
    if phases:  # this invocation's wall time by phase (tasks/phase_times.py)
        lines.append("wall time by phase: " + " · ".join(f"{p} {s:.0f} s" for p, s in phases.items()))
    peaks = results.get("phase_peak_gib")
    if peaks:
        allocator = f" ({results['allocator']})" if results.get("allocator") else ""
        lines.append(f"peak memory by phase (GiB{allocator}): " + " · ".join(f"{p} {g:.2f}" for p, g in peaks.items()))
    k = results["k"]
    for label, d in results.get("differences", {}).items():  # 95% paired-bootstrap intervals over tasks
        lines.append(
            f"{label}: Avg@{k} {d['avg_diff']:+.2f} [{d['avg_low']:+.2f}, {d['avg_high']:+.2f}], "
            f"Pass@{k} {d['pass_diff']:+.2f} [{d['pass_low']:+.2f}, {d['pass_high']:+.2f}] points "
            f"over {d['n_tasks']} tasks: {d['verdict']}"
        )
    return lines


def _search_lines(results: dict) -> list[str]:
    """A baseline's harness search: the validation success of each harness and the one deployed."""
    search = results.get("search")
    if not search:
        return []
    scored = ", ".join(f"{name} {rate:.2f}" for name, rate in search["validation_success"].items())
    return [
        f"{results.get('method', 'baseline')}: best harness {search['best']} on {search['n_tasks']} validation "
        f"tasks (k = {search['k']}): {scored} · search rollouts {results['budget']['search_rollouts']}"
    ]


def markdown(name: str, results: dict) -> str:
    head = columns(results)
    lines = [
        f"# {title(name, results)}",
        "",
        f"{results['seeds']} seed(s).",
        "",
        "| " + " | ".join(head) + " |",
        "|" + "---|" * len(head),
    ]
    lines += ["| " + " | ".join(row) + " |" for row in rows(results)]
    return "\n".join([*lines, "", *training_lines(results), ""])


def _pm(block: dict) -> str:
    return f"{block['mean']:.2f} ± {block['std']:.2f}"
