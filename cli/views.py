"""Rich renderings for the CLI: metrics tables and trajectories with their loss-mask spans."""

from __future__ import annotations

from rich.console import Console
from rich.panel import Panel
from rich.table import Table
from rich.text import Text


def _pm(block: dict) -> str:
    return f"{block['mean']:.2f} ± {block['std']:.2f}"


def print_metrics(console: Console, cfg, result: dict) -> None:
    k = cfg.k
    table = Table(title=f"{cfg.env.benchmark} {cfg.split} · harness {cfg.harness} · {cfg.seeds} seeds · k={k}")
    for col in ("task type", "tasks", f"Pass@{k} (%)", f"Avg@{k} (%)"):
        table.add_column(col, justify="right" if col != "task type" else "left")
    for name, block in result["per_type"].items():
        table.add_row(name, str(block["n_tasks"]), _pm(block["pass"]), _pm(block["avg"]))
    overall = result["overall"]
    table.add_row(
        "[bold]overall", str(overall["n_tasks"]), f"[bold]{_pm(overall['pass'])}", f"[bold]{_pm(overall['avg'])}"
    )
    console.print(table)
    console.print(f"run {result['run_id']} · evaluation {result['evaluation_id']}")
    console.print(f"Pass@{k}: {_pm(overall['pass'])}  Avg@{k}: {_pm(overall['avg'])}", highlight=False, soft_wrap=True)
    dead = {name: 100.0 - block["pass"]["mean"] for name, block in result["per_type"].items()}
    console.print(  # a training group of k rollouts on such a task has no success: GRPO gets no signal from it
        f"dead (no success in {k}): {100.0 - overall['pass']['mean']:.1f}% of tasks ("
        + ", ".join(f"{name} {share:.1f}%" for name, share in dead.items())
        + ")",
        highlight=False,
        soft_wrap=True,
    )


def print_training(console: Console, result: dict) -> None:
    """Per-update signals of a finished training run, then the final re-anchor."""
    table = Table(title=f"training run {result['run_id']}")
    cols = [
        ("step", "step"),
        ("reward", "train/reward_mean"),
        ("valid groups", "train/valid_group_ratio"),
        ("eff. tokens", "train/effective_token_ratio"),
        ("rescues", "rollout/rescues_triggered"),
        ("rescue ok", "rollout/rescue_success"),
        ("rollouts", "rollout/rollouts_spent"),
        ("rollout s", "time/rollout_s"),
        ("update s", "time/update_s"),
    ]
    for title, _ in cols:
        table.add_column(title, justify="right")
    for row in result["history"]:
        table.add_row(*[f"{row.get(key, 0):.2f}" if key != "step" else str(row["step"]) for _, key in cols])
    console.print(table)
    final = result["final_reanchor"]
    console.print(
        "validation success at the end: " + ", ".join(f"{k} {v:.2f}" for k, v in final["success"].items()),
        highlight=False,
        soft_wrap=True,
    )
    console.print(
        f"checkpoint {result['checkpoint']} · evaluate it under H0: hs eval --checkpoint {result['checkpoint']}",
        highlight=False,
        soft_wrap=True,
    )


def print_runs(console: Console, runs) -> None:
    from flows.ownership import crash_note

    table = Table(title="training runs")
    for col in ("run id", "mode", "status", "created"):
        table.add_column(col, no_wrap=col == "run id")
    for r in runs:
        status = "crashed" if crash_note(r) else r.status  # stored as 'failed' (flows/ownership.py)
        table.add_row(r.id, str(r.config.get("mode", "")), status, r.created_at.strftime("%Y-%m-%d %H:%M"))
    console.print(table)


def _share(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def print_training_summary(console: Console, rows: dict[str, dict]) -> None:
    table = Table(title="training runs side by side")
    for col in (
        "run",
        "updates",
        "valid groups",
        "eff. tokens",
        "H0 first-group success",
        "rescues",
        "rescue success",
        "rescue success by stage",
        "rollouts",
        "H0 validation by re-anchor step",
        "minutes",
    ):
        table.add_column(col, justify="left" if col == "run" else "right")
    for run_id, s in rows.items():
        rescue = "-" if s["rescue_success"] is None else f"{s['rescue_success']:.2f}"
        val = ", ".join(f"{step}: {rate:.2f}" for step, rate in s["h0_validation"].items())
        stages = ", ".join(
            f"{start}: {_share(st['rescue_success'])} of {st['rescues']:.0f}"
            for start, st in s["rescue_by_stage"].items()
        )
        table.add_row(
            run_id,
            str(s["updates"]),
            f"{s['valid_group_ratio']:.3f}",
            f"{s['effective_token_ratio']:.3f}",
            f"{s['first_group_success']:.3f}",
            f"{s['rescues_triggered']:.0f}",
            rescue,
            stages,
            f"{s['rollouts_spent']:.0f}",
            val,
            f"{s['seconds'] / 60:.1f}",
        )
    console.print(table)


def print_trajectory_table(console: Console, rows) -> None:
    table = Table(title="trajectories")
    for col in ("id", "run", "bench task", "harness", "#", "ok", "failure", "turns", "tokens"):
        table.add_column(col, no_wrap=col in ("id", "bench task"), min_width=12 if col == "id" else None)
    for t in rows:
        table.add_row(
            t.id[:12],
            t.run_id[:24],
            t.bench_task_id,
            t.harness_id[:8],
            str(t.sample_index),
            "yes" if t.success else "no",
            t.failure_kind or "",
            str(t.n_turns),
            str(t.n_policy_tokens),
        )
    console.print(table)


def print_trajectory(console: Console, traj, tokens: bool = False) -> None:
    console.print(
        Panel.fit(
            f"trajectory {traj.id}\nrun {traj.run_id} · task {traj.bench_task_id} · harness {traj.harness_id[:12]} "
            f"· sample {traj.sample_index} · checkpoint {traj.checkpoint}\n"
            f"success {traj.success} · reward {traj.reward} · failure {traj.failure_kind} · end {traj.finish_reason}\n"
            f"answer {traj.answer} · tags {traj.behaviour_tags} · {traj.seconds_total:.1f}s "
            f"(generate {traj.seconds_generate:.1f}s, env {traj.seconds_env:.2f}s)"
        )
    )
    for turn in sorted(traj.turns, key=lambda t: t.index):
        console.rule(
            f"turn {turn.index} · action {turn.action_kind} · {len(turn.context_ids)} masked + "
            f"{len(turn.completion_ids)} policy tokens"
        )
        body = Text()
        body.append(turn.context_text, style="dim")
        body.append(turn.completion_text, style="bold green")
        console.print(body)
        if turn.observation is not None:
            console.print(Text("observation: " + turn.observation, style="cyan"))
        for event in turn.hook_events or []:
            console.print(Text(f"hook {event}", style="magenta"))
        if tokens:
            ids = list(turn.context_ids) + list(turn.completion_ids)
            console.print(
                " ".join(f"{i}{'*' if m else ''}" for i, m in zip(ids, turn.loss_mask)), highlight=False, soft_wrap=True
            )
    console.print(
        "[dim]dim = context (loss mask 0)[/dim] · [bold green]green = policy tokens (loss mask 1)[/bold green]"
        + (" · * = mask 1" if tokens else "")
    )


def print_harness_summary(console: Console, spec) -> None:
    hooks = {}
    for rule in spec.hooks:
        hooks[f"{rule.at}/{rule.effect}"] = hooks.get(f"{rule.at}/{rule.effect}", 0) + 1
    console.print(f"ok: harness '{spec.name}' ({spec.benchmark}) id {spec.id[:12]}", highlight=False, soft_wrap=True)
    console.print(
        f"  parents: {', '.join(p[:12] for p in spec.parent_ids) or 'none'}; "
        f"skills: {len(spec.skills)}; rules: {dict(sorted(hooks.items())) or 'none'}; "
        f"code hooks: {', '.join(f'{h.name}@{h.at}' for h in spec.code_hooks) or 'none'}",
        highlight=False,
        soft_wrap=True,
    )
    console.print(
        f"  tool view: {spec.tool_view.protocol}, on_invalid={spec.tool_view.on_invalid}; context: "
        f"{spec.context.max_observation_chars} chars, window {spec.context.history_window}; "
        f"memory: query_log={spec.memory.query_log}",
        highlight=False,
        soft_wrap=True,
    )
    if spec.provenance.edit:
        console.print(
            f"  edit: {spec.provenance.edit} (targets {', '.join(spec.provenance.root_causes)})",
            highlight=False,
            soft_wrap=True,
        )


def print_evolution(console: Console, result: dict) -> None:
    table = Table(title=f"evolution {result['run_id']}")
    for col in ("round", "parents", "candidates", "valid", "selected"):
        table.add_column(col)
    for r in result["rounds"]:
        table.add_row(
            str(r["round"]), str(r["parents"]), str(r["candidates"]), str(r["valid"]), ", ".join(r["selected"]) or "-"
        )
    console.print(table)
    console.print(
        f"pool {result['version']}: {result['size']} harnesses (H0 + {result['size'] - 1} siblings) in "
        f"{result['path']}; DVC tag {result['dvc_tag'] or '-'}",
        highlight=False,
        soft_wrap=True,
    )
    console.print(f"inspect it: hs pool show {result['version']}", highlight=False)


def print_pool_report(console: Console, report: dict) -> None:
    table = Table(
        title=f"pool {report['version']}: locality vs H0 ({report['n_tasks']} tasks, k={report['k']}, "
        f"policy {report['policy']})"
    )
    for col in ("sibling", "solved", "fixed", "broken", "edge vs H0 [95%]", "verdict"):
        table.add_column(col)
    for name, row in report["locality"].items():
        edge = row.get("edge")
        shown = f"{edge['difference']:+.3f} [{edge['interval'][0]:+.3f}, {edge['interval'][1]:+.3f}]" if edge else "-"
        table.add_row(
            name, str(row["solved"]), str(row["fixed"]), str(row["broken"]), shown, edge["verdict"] if edge else "-"
        )
    console.print(table)
    c = report["complementarity"]
    console.print(
        f"complementarity: oracle union {c['oracle_union']:.1%} vs best single {c['best_single']:.1%} "
        f"({c['best_single_name']}) vs H0 at k {c['h0_at_k']:.1%} vs H0 at {c['equal_rollouts']} rollouts "
        f"{c['h0_at_equal_rollouts']:.1%}",
        highlight=False,
        soft_wrap=True,
    )
    for key, label in (
        ("oracle_vs_best_single", "oracle union - best single"),
        ("oracle_vs_h0_at_equal_rollouts", "oracle union - H0 at equal rollouts"),
    ):
        if key in c:
            d = c[key]
            console.print(
                f"{label}: {d['difference']:+.3f} [{d['interval'][0]:+.3f}, {d['interval'][1]:+.3f}], {d['verdict']}",
                highlight=False,
            )
    pairs = {k: v for k, v in report["overlap"].items() if v is not None}
    if pairs:
        console.print(
            "repair overlap (Jaccard of fixed sets): " + ", ".join(f"{k} {v:.2f}" for k, v in sorted(pairs.items())),
            highlight=False,
            soft_wrap=True,
        )
    console.print(f"report written to {report['path']}", highlight=False)


def print_profile(console: Console, row) -> None:
    p = row.profile
    console.print(
        f"profile of {p['harness_name']} ({row.harness_id[:12]}), run {row.run_id}, version {row.version} "
        f"({row.inducer}); validation success {p['success_rate']:.2f} vs H0 {p['h0_success_rate']:.2f}",
        highlight=False,
        soft_wrap=True,
    )
    for kind in ("prefer", "avoid"):
        table = Table(title=kind)
        for col in ("when", "behaviour", "delta", "tasks"):
            table.add_column(col)
        for e in p[kind]:
            when = "; ".join(f"{k}: {', '.join(v)}" for k, v in e["when"].items() if v) or "any task"
            table.add_row(when, e["behaviour"], f"{e['evidence']['delta']:+.2f}", str(e["evidence"]["n"]))
        console.print(table)
