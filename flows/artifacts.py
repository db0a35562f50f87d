"""Prefect artifacts: what a flow run produced, on its page in the Prefect UI (issue 50).

A run scheduled from the UI shows its result there: every flow ends by publishing its result
(evaluation: Pass@k / Avg@k per harness; training: a progress bar updated after every update and
a per-update table; the pipeline and the baselines: the results table and the paired differences
with their intervals; evolution, warm start, pool report and editor flows: a short table), and a
failed or crashed run gets a markdown artifact with its one-line cause and the command that
re-runs it (`failure_artifact`, an on_failure / on_crashed hook).

Keys are stable and derived from the run id (`<kind>-<run id>-<what>`): the same run published
again is a new version of the same key. With `HS_UI_URL` set (where `hs ui` serves, e.g.
http://127.0.0.1:8765), tables link to the explorer's pages (/runs/RUN_ID,
/runs/RUN_ID/updates/STEP). Text that comes from configs, harness files or a model is escaped
before it goes into markdown (`md_text`); the Prefect UI renders table cells as markdown too.
Publishing never fails a flow: an error is logged and the flow goes on.
"""

from __future__ import annotations

import functools
import logging
import os
import re
import warnings
from urllib.parse import quote

from prefect.artifacts import (
    MarkdownArtifact,
    create_progress_artifact,
    create_table_artifact,
    update_progress_artifact,
)
from prefect.context import FlowRunContext

UI_URL_VAR = "HS_UI_URL"
CAUSE_PREFIX = "Flow run encountered an exception: "
RERUN_PLACEHOLDER = "FLOW_RUN_ID"  # what a flow's error message says where it cannot know its own id

# ---------------------------------------------------------------------------------------------
# Pure helpers: keys, escaping, explorer links, numbers


def artifact_key(*parts: object) -> str:
    """A Prefect artifact key (lowercase letters, digits, dashes) from the parts, e.g. a kind and a run id."""
    key = re.sub(r"[^a-z0-9]+", "-", "-".join(str(p) for p in parts if p is not None).lower()).strip("-")
    return key or "run"


_MD_SPECIAL = re.compile(r"([\\`\[\]()<>|])")


def md_text(value: object, limit: int = 300) -> str:
    """Untrusted text (a harness name, an error message, a model's output) made safe for markdown:
    one line, at most `limit` characters, every character that could open a link, an image, HTML,
    code or a table cell (``\\ ` [ ] ( ) < > |``) backslash-escaped (rendered as itself), bare URLs
    (`http://`, `www.`) kept from becoming links, and no list or heading at the start."""
    text = " ".join(str(value).split())
    if len(text) > limit:
        text = text[: limit - 1] + "…"
    text = _MD_SPECIAL.sub(r"\\\1", text)
    text = re.sub(r":(?=//)", r"\\:", text)  # http://... would be autolinked
    text = re.sub(r"(?i)\b(www)\.", r"\1\\.", text)  # so would www....
    text = re.sub(r"^([-+=#*])", r"\\\1", text)  # a list, heading or rule at the start of a cell
    text = re.sub(r"^(\d+)([.)])", r"\1\\\2", text)  # an ordered list
    return text


def ui_url(*path: object) -> str | None:
    """`HS_UI_URL`/path (each part URL-quoted), or None when `HS_UI_URL` is unset or not an http(s) URL."""
    base = os.environ.get(UI_URL_VAR, "").strip().rstrip("/")
    if not re.fullmatch(r"https?://[^\s()<>\[\]`|\"']+", base):
        return None
    return "/".join([base, *(quote(str(p), safe="") for p in path)])


def ui_link(label: object, *path: object) -> str | None:
    """A markdown link to an explorer page, or None without `HS_UI_URL`."""
    url = ui_url(*path)
    return f"[{md_text(label)}]({url})" if url else None


def run_link(run_id: str | None) -> str | None:
    return ui_link(f"run {run_id}", "runs", run_id) if run_id else None


def pm(block: dict | None) -> str:
    """'12.50 ± 3.20' from {mean, std}."""
    if not block:
        return "-"
    return f"{block['mean']:.2f} ± {block['std']:.2f}"


def num(value: object, digits: int = 3) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, (int, float)):
        return f"{value:.{digits}f}" if isinstance(value, float) else str(value)
    return md_text(value)


def interval(estimate: float, low: float, high: float, digits: int = 2) -> str:
    return f"{estimate:+.{digits}f} [{low:+.{digits}f}, {high:+.{digits}f}]"


def _with_link(rows: list[dict], link: str | None, column: str = "explorer") -> list[dict]:
    return [{**r, column: link} for r in rows] if link else rows


def _description(*parts: str | None) -> str:
    return " · ".join(p for p in parts if p)


# ---------------------------------------------------------------------------------------------
# Tables and markdown from what the flows return (pure)


def evaluation_rows(cfg, result: dict) -> list[dict]:
    """The evaluate flow's result as rows: the harness over all tasks, then per task type, with
    Pass@k and Avg@k (%) as mean ± std over seeds."""
    k = cfg.k
    harness = f"rank-1 router ({cfg.harness} + pool)" if cfg.routing == "rank1" else cfg.harness

    def row(tasks: str, block: dict) -> dict:
        return {
            "harness": md_text(harness),
            "tasks": tasks,
            "n tasks": block["n_tasks"],
            "seeds": cfg.seeds,
            f"Pass@{k} (%)": pm(block["pass"]),
            f"Avg@{k} (%)": pm(block["avg"]),
        }

    rows = [row("all", result["overall"])]
    rows += [row(md_text(t), b) for t, b in result.get("per_type", {}).items()]
    return _with_link(rows, run_link(result.get("run_id")))


def training_rows(run_id: str, history: list[dict]) -> list[dict]:
    """One row per update: valid-group ratio, dead groups, rescues, rescue success, mean reward, loss."""
    rows = []
    for h in history:
        row = {
            "step": h["step"],
            "valid-group ratio": num(h.get("train/valid_group_ratio")),
            "dead groups": num(_int(h.get("train/dead_groups"))),
            "rescues": num(_int(h.get("rollout/rescues_triggered"))),
            "rescue success": num(h.get("rollout/rescue_success")),
            "mean reward": num(h.get("train/reward_mean")),
            "loss": num(h.get("train/loss"), 4),
        }
        link = ui_link(f"update {h['step']}", "runs", run_id, "updates", h["step"])
        rows.append({**row, "explorer": link} if link else row)
    return rows


def pipeline_rows(results: dict) -> list[dict]:
    """The pipeline's results table (what `hs run` prints): each evaluation's Pass@k / Avg@k."""
    from analysis.pipeline_results import columns, rows

    out = []
    for label, values in zip(results["evaluations"], rows(results)):
        row = dict(zip(columns(results), (md_text(v) if i < 3 else v for i, v in enumerate(values))))
        link = run_link(results["evaluations"][label].get("run_id"))
        out.append({**row, "explorer": link} if link else row)
    return out


def difference_rows(results: dict) -> list[dict]:
    """The paired differences on the same tasks, with their 95% intervals."""
    k = results["k"]
    return [
        {
            "comparison": md_text(label),
            "n tasks": d["n_tasks"],
            f"Avg@{k} difference [95% interval]": interval(d["avg_diff"], d["avg_low"], d["avg_high"]),
            f"Pass@{k} difference [95% interval]": interval(d["pass_diff"], d["pass_low"], d["pass_high"]),
            "verdict": md_text(d["verdict"]),
        }
        for label, d in results.get("differences", {}).items()
    ]


def training_summary(results: dict) -> str | None:
    """The training line of a results document, with the valid-group ratio's interval."""
    t = results.get("training")
    if t is None:
        return None
    valid = f"{t['valid_group_ratio']:.3f}"
    if t.get("valid_group_interval"):
        low, high = t["valid_group_interval"]
        valid += f" [{low:.2f}, {high:.2f}]"
    rescue = "-" if t.get("rescue_success") is None else f"{t['rescue_success']:.2f}"
    return (
        f"training {md_text(results.get('train_run_id'))}: {t['updates']} updates, valid-group ratio {valid}, "
        f"rescues {t['rescues_triggered']:.0f} (success {rescue}), rollouts {t['rollouts_spent']:.0f}"
    )


def failure_markdown(
    flow_name: str,
    flow_run_id: str,
    cause: str,
    *,
    rerun_id: str | None,
    rerun_flow: str | None = None,
    from_deployment: bool = False,
    run_id: str | None = None,
    outcome: str = "failed",
) -> str:
    """The failure artifact: the one-line cause and the command that re-runs the run in place.
    `rerun_id`: the flow run `hs rerun` takes (the top-level one; None when `hs rerun` does not
    know the flow, e.g. the editor flows, which are started again with their own command)."""
    if rerun_id:  # a message's own `hs rerun FLOW_RUN_ID` hint names the real run, as the CLI prints it
        cause = cause.replace(RERUN_PLACEHOLDER, rerun_id)
    lines = [
        f"## {md_text(flow_name)} {md_text(outcome)}",
        "",
        f"**Cause:** {md_text(cause, limit=500) or 'unknown'}",
        "",
    ]
    if rerun_id:
        lines.append(f"**Re-run:** `hs rerun {rerun_id}`: finished tasks are skipped, only unfinished work runs again.")
        if rerun_id != flow_run_id:
            lines += ["", f"This run is part of the {md_text(rerun_flow or 'parent')} flow run `{rerun_id}`."]
        if from_deployment:
            lines += ["", "Its deployment's worker picks the re-run up (the Retry button here does the same)."]
    else:
        lines.append("**Re-run:** start the same `hs` command again: finished work is reused, not run again.")
    link = run_link(run_id)
    if link:
        lines += ["", f"Explorer: {link}"]
    lines += ["", f"Flow run: `{flow_run_id}`"]
    return "\n".join(lines) + "\n"


def one_line_cause(message: str | None) -> str:
    """The first line of a failed state's message, without Prefect's generic prefix."""
    lines = (message or "").strip().splitlines()
    return (lines[0] if lines else "").removeprefix(CAUSE_PREFIX).strip()


def _int(value):
    return int(value) if isinstance(value, float) and value.is_integer() else value


# ---------------------------------------------------------------------------------------------
# Publishing (inside a flow run; never raises)


def _logger() -> logging.Logger:
    from prefect import get_run_logger

    try:
        return get_run_logger()
    except Exception:  # noqa: BLE001 - outside a run context: the module's logger
        return logging.getLogger(__name__)


def _in_flow_run() -> bool:
    return FlowRunContext.get() is not None


def safely(publish):
    """Run a publisher inside a flow run only, logging instead of raising: an artifact never fails a flow."""

    @functools.wraps(publish)
    def wrapper(*args, **kwargs):
        if not _in_flow_run():  # e.g. a flow's .fn called directly: no run to attach to
            return None
        try:
            return publish(*args, **kwargs)
        except Exception as exc:  # noqa: BLE001 - artifacts are a view of the result, never a reason to fail
            _logger().warning("artifact not published (%s): %s", publish.__name__, exc)
            return None

    return wrapper


def _table(key: str, rows: list[dict], description: str) -> None:
    create_table_artifact(table=rows, key=key, description=description, _sync=True)  # sync in any context


@safely
def publish_evaluation(cfg, result: dict) -> None:
    run_id = result["run_id"]
    _table(
        artifact_key("eval", run_id),
        evaluation_rows(cfg, result),
        _description(
            f"Evaluation {md_text(cfg.name)}: {md_text(cfg.env.benchmark)} {cfg.split}, k = {cfg.k}, "
            f"{cfg.seeds} seed(s); mean ± std over seeds",
            f"run {md_text(run_id)}",
            run_link(run_id),
        ),
    )


class TrainingProgress:
    """The training flow's progress artifact: created when the updates start, updated after every update."""

    def __init__(self, run_id: str, done: int, updates: int):
        self.run_id, self.updates, self.artifact_id = run_id, max(updates, 1), None
        self._start(done)

    @safely
    def _start(self, done: int) -> None:
        self.artifact_id = create_progress_artifact(
            progress=self._percent(done),
            key=artifact_key("train", self.run_id, "progress"),
            description=self._words(done),
            _sync=True,
        )

    @safely
    def advance(self, done: int, note: str = "") -> None:
        """`done` updates of the run are finished."""
        if self.artifact_id is not None:
            update_progress_artifact(
                self.artifact_id, progress=self._percent(done), description=self._words(done, note), _sync=True
            )

    def _percent(self, done: int) -> float:
        return round(min(100.0, 100.0 * done / self.updates), 2)

    def _words(self, done: int, note: str = "") -> str:
        link = ui_link(f"update {done - 1}", "runs", self.run_id, "updates", done - 1) if done else None
        return _description(
            f"training {md_text(self.run_id)}: {done} of {self.updates} updates{note}", link or run_link(self.run_id)
        )


@safely
def publish_training(cfg, result: dict, progress: TrainingProgress | None = None) -> None:
    run_id, history = result["run_id"], result.get("history", [])
    if progress is not None:
        note = "" if len(history) >= cfg.updates else " (the rollout budget ended training)"
        progress.advance(len(history), note)
    final = result.get("final_reanchor") or {}
    success = ", ".join(f"{md_text(h)} {v:.2f}" for h, v in final.get("success", {}).items())
    _table(
        artifact_key("train", run_id, "updates"),
        training_rows(run_id, history),
        _description(
            f"Training {md_text(run_id)} ({md_text(cfg.mode)}): {len(history)} updates",
            f"checkpoint {md_text(result.get('checkpoint'))}",
            f"final re-anchor success: {success}" if success else None,
            run_link(run_id),
        ),
    )


@safely
def publish_results(name: str, run_id: str, results: dict) -> None:
    """The pipeline's (or a baseline's) results document: the results table, and the paired
    differences with their 95% intervals."""
    policy = f"policy {md_text(results.get('checkpoint'))}, pool {md_text(results.get('pool_version') or '(config)')}"
    head = _description(
        f"{md_text(name)}: {policy}, {results['seeds']} seed(s), mean ± std over seeds",
        training_summary(results),
        run_link(run_id),
    )
    _table(artifact_key("pipeline", run_id, "results"), pipeline_rows(results), head)
    differences = difference_rows(results)
    if differences:
        _table(
            artifact_key("pipeline", run_id, "differences"),
            differences,
            f"{md_text(name)}: paired differences on the same tasks, 95% bootstrap intervals",
        )


@safely
def publish_evolution(result: dict) -> None:
    run_id = result["run_id"]
    rows = [
        {
            "round": r["round"],
            "parents": r["parents"],
            "candidates": r["candidates"],
            "valid": r["valid"],
            "selected": ", ".join(md_text(s) for s in r["selected"]) or "-",
        }
        for r in result["rounds"]
    ]
    _table(
        artifact_key("evolve", run_id, "rounds"),
        _with_link(rows, run_link(run_id)),
        _description(
            f"Evolution {md_text(run_id)}: pool {md_text(result.get('version'))} with {result.get('size')} harnesses",
            f"tag {md_text(result['dvc_tag'])}" if result.get("dvc_tag") else None,
            run_link(run_id),
        ),
    )


@safely
def publish_sft(result: dict) -> None:
    run_id = result["run_id"]
    row = {
        "checkpoint": md_text(result["checkpoint"]),
        "demonstrations": result["demonstrations"],
        "failed replays": len(result.get("failed_replays") or []),
        "held-out loss before": num(result.get("heldout_loss_before"), 4),
        "held-out loss after": num(result.get("heldout_loss_after"), 4),
    }
    _table(
        artifact_key("sft", run_id),
        _with_link([row], run_link(run_id)),
        _description(f"Warm start {md_text(run_id)}", run_link(run_id)),
    )


@safely
def publish_pool_report(result: dict) -> None:
    run_id = result["run_id"]
    rows = [
        {
            "sibling": md_text(name),
            "solved": s["solved"],
            "fixed vs H0": s["fixed"],
            "broken vs H0": s["broken"],
            "edge over H0 [95% interval]": interval(s["edge"]["difference"], *s["edge"]["interval"]),
            "verdict": md_text(s["edge"]["verdict"]),
        }
        for name, s in result.get("locality", {}).items()
    ]
    c = result.get("complementarity", {})
    shares = ", ".join(
        f"{label} {c[key]:.2f}"
        for key, label in (
            ("h0_at_k", "H0 at k"),
            ("best_single", "best single"),
            ("oracle_union", "oracle union"),
            ("h0_at_equal_rollouts", "H0 at equal rollouts"),
        )
        if isinstance(c.get(key), (int, float))
    )
    _table(
        artifact_key("pool-report", run_id),
        _with_link(rows, run_link(run_id)),
        _description(
            f"Pool {md_text(result.get('version'))} under {md_text(result.get('policy'))}: "
            f"{result.get('n_tasks')} tasks, k = {result.get('k')}",
            f"solved shares: {shares}" if shares else None,
            run_link(run_id),
        ),
    )


@safely
def publish_editor(kind: str, result: dict) -> None:
    """The editor flows: bundles per split, the cold start, the GRPO updates, the comparison."""
    run_id = result["run_id"]
    if kind == "bundles":
        rows = [
            {
                "split": md_text(split),
                "tasks": result[split]["tasks"],
                "never solved": result[split]["failed_tasks"],
                "bundles": len(result[split]["bundles"]),
            }
            for split in result
            if split != "run_id"
        ]
    elif kind == "sft":
        rows = [
            {
                "bundles": result["bundles"],
                "candidates": result["candidates"],
                "validated": result["validated"],
                "checkpoint": md_text(result["checkpoint"]),
                "held-out loss before": num(result.get("heldout_loss_before"), 4),
                "held-out loss after": num(result.get("heldout_loss_after"), 4),
            }
        ]
    elif kind == "train":
        first = result["updates"] - len(result["history"])
        rows = [
            {
                "step": first + i,
                "mean reward": num(h.get("editor/reward_mean")),
                "valid share": num(h.get("editor/valid_share")),
                "rejected share": num(h.get("editor/rejected_share")),
                "loss": num(h.get("train/loss"), 4),
            }
            for i, h in enumerate(result["history"])
        ]
    else:  # compare
        rows = [
            {
                "editor": md_text(e["editor"]),
                "patches": e["patches"],
                "static pass [95% interval]": _share(e["static_pass"]),
                "validated [95% interval]": _share(e["validated"]),
                "fixed (mean)": num(e["fixed_mean"], 2),
                "broken (mean)": num(e["broken_mean"], 2),
                "best success": num(e["best_success"], 2),
            }
            for e in result.get("editors", [])
        ]
    _table(
        artifact_key("editor", kind, run_id),
        _with_link(rows, run_link(run_id)) if rows else [{"result": "nothing to show"}],
        _description(f"Editor {kind} {md_text(run_id)}", run_link(run_id)),
    )


def _share(values: list) -> str:
    estimate, low, high = values
    return f"{estimate:.2f} [{low:.2f}, {high:.2f}]"


# ---------------------------------------------------------------------------------------------
# Failure: an on_failure / on_crashed hook


def failure_artifact(config_type=None, run_id_of=None):
    """A hook for on_failure and on_crashed: a markdown artifact on the failed flow run with its
    one-line cause and `hs rerun <top-level flow run id>` (the explorer's run page too, with
    `HS_UI_URL` and `run_id_of`, which maps the validated config to the run id). Never raises."""

    def publish_failure(flow, flow_run, state) -> None:
        try:
            _publish_failure(flow, flow_run, state, config_type, run_id_of)
        except Exception as exc:  # noqa: BLE001 - a hook that fails must not hide the flow's own failure
            _logger().warning("failure artifact not published: %s", exc)

    return publish_failure


def _publish_failure(flow, flow_run, state, config_type, run_id_of) -> None:
    from prefect import get_client

    from flows.registry import FLOWS

    run_id = None
    if config_type is not None and run_id_of is not None:
        try:
            run_id = run_id_of(config_type.model_validate((flow_run.parameters or {})["config"]))
        except Exception:  # noqa: BLE001 - a config that does not validate: the artifact goes without the link
            run_id = None
    with get_client(sync_client=True) as client:
        root = _top_level(client, flow_run)
        root_flow = flow.name if root.id == flow_run.id else client.read_flow(root.flow_id).name
    markdown = failure_markdown(
        flow.name,
        str(flow_run.id),
        one_line_cause(state.message),
        rerun_id=str(root.id) if root_flow in FLOWS else None,
        rerun_flow=root_flow,
        from_deployment=root.deployment_id is not None,
        run_id=run_id,
        outcome=state.type.value.lower(),
    )
    with warnings.catch_warnings():  # a hook may run after the flow's run context closed
        warnings.simplefilter("ignore", FutureWarning)
        MarkdownArtifact(
            key=artifact_key(flow.name, "failure", run_id or flow_run.id),
            markdown=markdown,
            description=f"{md_text(flow.name)} {state.type.value.lower()}: the cause and how to re-run it",
            flow_run_id=flow_run.id,
        ).create(_sync=True)


def _top_level(client, flow_run, depth: int = 20):
    """The flow run at the top of a subflow's chain of parents (the run `hs rerun` resumes whole)."""
    run = flow_run
    for _ in range(depth):
        if run.parent_task_run_id is None:
            return run
        parent_task = client.read_task_run(run.parent_task_run_id)
        if parent_task.flow_run_id is None:
            return run
        run = client.read_flow_run(parent_task.flow_run_id)
    return run
