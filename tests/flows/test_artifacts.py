"""Prefect artifacts (flows/artifacts.py): what a flow run produced, read back from a real Prefect
server (the `prefect_api` test harness), and the escaping of untrusted text put into markdown."""

from __future__ import annotations

import json
import re
from types import SimpleNamespace

import pytest
from prefect import flow

from configs.schema import EvalConfig
from flows.artifacts import (
    artifact_key,
    evaluation_rows,
    failure_markdown,
    md_text,
    pipeline_rows,
    training_rows,
)
from flows.evaluate import evaluate

HOSTILE = "evil](http://x.example)<img src=x onerror=alert(1)>|`rm -rf`[click](javascript:alert(1))"
UI = "http://127.0.0.1:8765"


def artifacts_of(flow_run_id=None, key=None) -> list:
    """The keyed artifacts of a flow run (or of a key), oldest first, through the Prefect client
    (Prefect's own result records carry no key)."""
    from prefect import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterFlowRunId, ArtifactFilterKey

    wanted = ArtifactFilter(
        flow_run_id=ArtifactFilterFlowRunId(any_=[flow_run_id]) if flow_run_id else None,
        key=ArtifactFilterKey(any_=[key]) if key else None,
    )
    with get_client(sync_client=True) as client:
        found = client.read_artifacts(artifact_filter=wanted)
    return sorted((a for a in found if a.key), key=lambda a: a.created)


def _cfg(tmp_path, name: str) -> EvalConfig:  # the smallest evaluation the flow tests run
    return EvalConfig(
        name=name,
        split="dev",
        limit=2,
        k=1,
        seeds=1,
        results_dir=str(tmp_path / "results"),
        sampling={"max_new_tokens": 8},
        env={"max_rounds": 1},
    )


def _no_markup(text: str) -> None:
    """Untrusted text cannot open a link, an image, HTML, a code span or a table cell: every such
    character is backslash-escaped, and no bare URL is left to autolink."""
    assert re.search(r"(?<!\\)[\[\]()<>|`]", text) is None, text
    assert "http://" not in text, text


def _cause(page: str) -> str:
    (line,) = [line for line in page.splitlines() if line.startswith("**Cause:** ")]
    return line.removeprefix("**Cause:** ")


def test_untrusted_text_cannot_inject_links_or_html(monkeypatch):
    monkeypatch.delenv("HS_UI_URL", raising=False)
    escaped = md_text(HOSTILE)
    _no_markup(escaped)
    assert escaped.startswith("evil\\]\\(http\\://x.example\\)\\<img")
    assert md_text("line one\nline two") == "line one line two"
    assert md_text("# heading") == "\\# heading" and md_text("1. item") == "1\\. item"
    assert md_text("x" * 400).endswith("…") and len(md_text("x" * 400)) == 300

    cfg = SimpleNamespace(k=3, seeds=2, harness=HOSTILE, routing="h0")
    block = {"pass": {"mean": 50.0, "std": 1.5}, "avg": {"mean": 25.0, "std": 0.25}, "n_tasks": 2}
    result = {"run_id": "r1", "overall": block, "per_type": {"<script>": block}}
    rows = evaluation_rows(cfg, result)
    assert [r["Pass@3 (%)"] for r in rows] == ["50.00 ± 1.50"] * 2 and rows[0]["Avg@3 (%)"] == "25.00 ± 0.25"
    assert rows[1]["tasks"] == "\\<script\\>"
    results = {
        "k": 3,
        "seeds": 2,
        "evaluations": {"after": {"run_id": "e1", "harness": HOSTILE, "pass": block["pass"], "avg": block["avg"]}},
    }
    results["evaluations"]["after"]["n_tasks"] = 2
    (row,) = pipeline_rows(results)
    assert row["evaluation"] == "after" and row["Pass@3 (%)"] == "50.00 ± 1.50"
    for text in (*rows[0].values(), *row.values()):
        _no_markup(str(text))

    page = failure_markdown("evaluate", "f-1", HOSTILE, rerun_id="f-1")
    _no_markup(_cause(page))
    assert "`hs rerun f-1`" in page
    page = failure_markdown(
        "evaluate", "f-1", "1 of 2 groups failed: start again (or hs rerun FLOW_RUN_ID)", rerun_id="f-0"
    )
    assert _cause(page) == "1 of 2 groups failed: start again \\(or hs rerun f-0\\)"

    assert artifact_key("eval", "Flow_Test-3F2a.yaml") == "eval-flow-test-3f2a-yaml"


def test_links_to_the_explorer_only_where_hs_ui_url_is_set(monkeypatch):
    history = [{"step": 0, "train/valid_group_ratio": 0.5, "train/dead_groups": 1.0, "train/loss": 0.1234567}]
    monkeypatch.delenv("HS_UI_URL", raising=False)
    (row,) = training_rows("run-1", history)
    assert "explorer" not in row and row["dead groups"] == "1" and row["loss"] == "0.1235"
    monkeypatch.setenv("HS_UI_URL", UI + "/")
    (row,) = training_rows("run 1", history)
    assert row["explorer"] == f"[update 0]({UI}/runs/run%201/updates/0)"
    monkeypatch.setenv("HS_UI_URL", "javascript:alert(1)")  # not an http(s) URL: no link
    assert "explorer" not in training_rows("run-1", history)[0]


@pytest.mark.slow
def test_an_evaluation_run_publishes_its_pass_and_avg_table(tmp_path, data_dir, prefect_api, smol_policy, monkeypatch):
    monkeypatch.setenv("HS_UI_URL", UI)
    cfg = _cfg(tmp_path, "artifacts")
    state = evaluate(cfg, database_url=f"sqlite:///{tmp_path / 'hs.db'}", return_state=True)
    result, flow_run_id = state.result(), state.state_details.flow_run_id
    run_id = result["run_id"]

    (table,) = artifacts_of(flow_run_id)
    assert table.type == "table" and table.key == artifact_key("eval", run_id)
    rows = json.loads(table.data)
    overall = result["overall"]
    assert rows[0] == {
        "harness": "h0",
        "tasks": "all",
        "n tasks": 2,
        "seeds": 1,
        "Pass@1 (%)": f"{overall['pass']['mean']:.2f} ± {overall['pass']['std']:.2f}",
        "Avg@1 (%)": f"{overall['avg']['mean']:.2f} ± {overall['avg']['std']:.2f}",
        "explorer": f"[run {run_id}]({UI}/runs/{run_id})",
    }
    assert [r["tasks"] for r in rows[1:]] == [md_text(t) for t in result["per_type"]]
    assert f"({UI}/runs/{run_id})" in table.description


@pytest.mark.slow
def test_a_failed_run_publishes_its_cause_and_the_rerun_command(tmp_path, prefect_api, monkeypatch):
    import flows.evaluate as fe
    from tasks.evaluation import run_id_for

    def fails(*args, **kwargs):
        raise RuntimeError(f"injected fault {HOSTILE}")

    monkeypatch.setattr(fe, "open_run", fails)
    monkeypatch.setenv("HS_UI_URL", UI)
    cfg = _cfg(tmp_path, "artifacts-failed")
    state = evaluate(cfg, database_url=f"sqlite:///{tmp_path / 'hs.db'}", return_state=True)
    assert state.is_failed()
    flow_run_id = str(state.state_details.flow_run_id)

    (page,) = artifacts_of(flow_run_id)
    assert page.type == "markdown" and page.key == artifact_key("evaluate", "failure", run_id_for(cfg))
    assert "## evaluate failed" in page.data and "**Cause:** RuntimeError: injected fault evil" in page.data
    assert f"`hs rerun {flow_run_id}`" in page.data
    assert f"({UI}/runs/{run_id_for(cfg)})" in page.data
    _no_markup(_cause(page.data))


@flow(name="artifacts-parent")
def artifacts_parent(config: EvalConfig, database_url: str | None = None) -> dict:
    return evaluate(config, database_url)


@pytest.mark.slow
def test_a_failed_subflow_names_the_top_level_run_to_rerun(tmp_path, prefect_api, monkeypatch):
    import flows.evaluate as fe
    from flows import registry
    from tasks.evaluation import run_id_for

    def fails(*args, **kwargs):
        raise LookupError("no such split")

    monkeypatch.setattr(fe, "open_run", fails)
    monkeypatch.setitem(registry.FLOWS, "artifacts-parent", (__name__, "artifacts_parent"))
    cfg = _cfg(tmp_path, "artifacts-subflow")
    state = artifacts_parent(cfg, f"sqlite:///{tmp_path / 'hs.db'}", return_state=True)
    parent_id = str(state.state_details.flow_run_id)
    (page,) = artifacts_of(key=artifact_key("evaluate", "failure", run_id_for(cfg)))
    assert str(page.flow_run_id) != parent_id  # on the evaluate subflow's page
    assert "**Cause:** LookupError: no such split" in page.data
    assert f"`hs rerun {parent_id}`" in page.data and "part of the artifacts-parent flow run" in page.data


@flow(name="artifacts-every-publisher")
def every_publisher(docs: dict) -> None:
    from flows import artifacts

    artifacts.publish_results("pipe", "pipe-1", docs["pipeline"])
    artifacts.publish_evolution(docs["evolve"])
    artifacts.publish_sft(docs["sft"])
    artifacts.publish_pool_report(docs["pool"])
    for kind in ("bundles", "sft", "train", "compare"):
        artifacts.publish_editor(kind, docs[f"editor-{kind}"])


@pytest.mark.slow
def test_every_flow_result_becomes_an_artifact(prefect_api, monkeypatch):
    """The other flows' result documents (shaped as their flows return them) each give a table."""
    from analysis.pool import pool_report

    monkeypatch.setenv("HS_UI_URL", UI)
    block = {"mean": 50.0, "std": 0.0}
    evaluation = {"run_id": "e1", "harness": "h0", "pass": block, "avg": block, "n_tasks": 2}
    docs = {
        "pipeline": {
            "pool_version": "v1",
            "train_run_id": "t1",
            "checkpoint": "t1-u2",
            "k": 3,
            "seeds": 1,
            "evaluations": {"before": evaluation, "after": {**evaluation, "run_id": "e2", "harness": HOSTILE}},
            "training": {
                "updates": 2,
                "valid_group_ratio": 0.5,
                "effective_token_ratio": 0.4,
                "rescues_triggered": 1.0,
                "rescue_success": 1.0,
                "rollouts_spent": 8.0,
                "h0_validation": {"0": 0.0, "2": 0.5},
                "valid_group_interval": [0.1, 0.9],
            },
            "differences": {
                "after - before": {
                    "n_tasks": 2,
                    "avg_diff": 12.5,
                    "avg_low": -5.0,
                    "avg_high": 30.0,
                    "pass_diff": 0.0,
                    "pass_low": 0.0,
                    "pass_high": 0.0,
                    "verdict": "within noise",
                }
            },
        },
        "evolve": {
            "run_id": "ev1",
            "rounds": [{"round": 1, "parents": 1, "candidates": 3, "valid": 1, "selected": [HOSTILE]}],
            "version": "v2",
            "size": 2,
            "dvc_tag": None,
        },
        "sft": {
            "checkpoint": "sft-1",
            "demonstrations": 10,
            "failed_replays": [],
            "heldout_loss_before": 2.0,
            "heldout_loss_after": 1.0,
            "run_id": "s1",
        },
        "pool": {
            "version": "v1",
            "run_id": "p1",
            "policy": "smollm2-135m",
            **pool_report({"a": [True], "b": [False]}, {HOSTILE: {"a": [True], "b": [True]}}, 1),
        },
        "editor-bundles": {
            "run_id": "b1",
            "train": {"tasks": 4, "failed_tasks": 2, "bundles": ["x"]},
            "heldout": {"tasks": 0, "failed_tasks": 0, "bundles": []},
        },
        "editor-sft": {
            "run_id": "es1",
            "bundles_run_id": "b1",
            "bundles": 1,
            "candidates": 3,
            "validated": 1,
            "checkpoint": "eng-1",
            "heldout_loss_before": 2.0,
            "heldout_loss_after": 1.5,
        },
        "editor-train": {
            "run_id": "eg1",
            "checkpoint": "eng-2",
            "updates": 2,
            "history": [{"editor/reward_mean": 0.1, "editor/valid_share": 0.5, "train/loss": 0.3}],
        },
        "editor-compare": {
            "run_id": "ec1",
            "bundles": 1,
            "editors": [
                {
                    "editor": "offline",
                    "patches": 2,
                    "static_pass": [1.0, 0.3, 1.0],
                    "validated": [0.5, 0.1, 0.9],
                    "fixed_mean": 1.0,
                    "broken_mean": 0.0,
                    "best_success": 0.5,
                }
            ],
        },
    }
    state = every_publisher(docs, return_state=True)
    tables = {a.key: json.loads(a.data) for a in artifacts_of(state.state_details.flow_run_id)}
    assert sorted(tables) == sorted(
        [
            "pipeline-pipe-1-results",
            "pipeline-pipe-1-differences",
            "evolve-ev1-rounds",
            "sft-s1",
            "pool-report-p1",
            "editor-bundles-b1",
            "editor-sft-es1",
            "editor-train-eg1",
            "editor-compare-ec1",
        ]
    )
    results = tables["pipeline-pipe-1-results"]
    assert [r["evaluation"] for r in results] == ["before", "after"] and results[1]["Pass@3 (%)"] == "50.00 ± 0.00"
    assert results[1]["explorer"] == f"[run e2]({UI}/runs/e2)"
    (difference,) = tables["pipeline-pipe-1-differences"]
    assert difference["Avg@3 difference [95% interval]"] == "+12.50 [-5.00, +30.00]"
    assert [r["step"] for r in tables["editor-train-eg1"]] == [1]  # the last of 2 updates ran in this execution
    hostile = [str(text) for rows in tables.values() for row in rows for text in row.values() if "evil" in str(text)]
    assert len(hostile) == 3  # the pipeline's harness, the evolution's selected child, the pool's sibling
    for text in hostile:
        _no_markup(text)


@flow(name="artifacts-broken-publisher")
def broken_publisher() -> str:
    from flows import artifacts

    artifacts.publish_evaluation(SimpleNamespace(), {"run_id": "r"})  # a result it cannot read
    artifacts.publish_sft({"run_id": "s", "checkpoint": "c", "demonstrations": 1})  # the API refuses it (below)
    return "done"


@pytest.mark.slow
def test_a_publishing_error_never_fails_the_flow(prefect_api, monkeypatch):
    from flows import artifacts

    assert artifacts.publish_sft({}) is None  # outside a flow run: nothing to attach to, nothing raised

    def refused(*args, **kwargs):
        raise RuntimeError("the API is down")

    monkeypatch.setattr(artifacts, "create_table_artifact", refused)
    state = broken_publisher(return_state=True)
    assert state.is_completed() and state.result() == "done"
    assert artifacts_of(state.state_details.flow_run_id) == []
