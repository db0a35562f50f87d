"""The end-to-end pipeline (flows/pipeline.py) with the real SmolLM2 on a tiny budget: reuse a
frozen pool, train, evaluate before/after/Rank-1; a second call skips all finished work."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from sqlalchemy import func, select

from analysis import pipeline_results as shown
from analysis.report import build_report
from configs.pipeline import PipelineConfig
from configs.schema import ConfigError, load_config
from db.engine import make_engine, session_scope
from db.models import Evaluation, RolloutGroup, RouterDecision, Run, Trajectory
from harness_pool.pool_store import load_pool
from harness_pool.spec import load_harness

HS = str(Path(sys.executable).parent / "hs")


def tiny_pipeline(tmp_path, **changes) -> PipelineConfig:
    data = {
        "name": "pipe",
        "pool_version": "v1",
        "train": {
            "from": "configs/train_dbbench_smol.yaml",
            "warm_start": None,
            "init": "smollm2-135m",
            "updates": 1,
            "batch_tasks": 1,
            "k": 2,
            "reanchor_every": 10,
            "checkpoint_every": 10,
            "tiers": ["easy"],
            "validation": {"split": "train", "n_tasks": 1, "k": 1},
            "sampling": {"max_new_tokens": 12},
            "env": {"max_rounds": 1},
            "wandb": "disabled",
            "router": {"kind": "adaptive", "voters": ["statistics"]},
            "state_dir": str(tmp_path / "runs"),
            "results_dir": str(tmp_path / "results"),
        },
        "evaluate": {
            "split": "dev",
            "limit": 2,
            "k": 1,
            "seeds": 1,
            "group_concurrency": 2,
            "rank1_before": True,
            "outside": ["fc_tools"],
            "trained_tasks_k": 1,
        },
    }
    data.update(changes)
    return PipelineConfig.model_validate(data)


def test_from_merges_the_phase_file_under_inline_fields_and_set_reaches_it(tmp_path):
    cfg = load_config(PipelineConfig, "configs/quickstart.yaml", sets=["train.updates=5", "train.trainer.lr=0.5"])
    assert cfg.train.updates == 5 and cfg.train.trainer.lr == 0.5
    assert cfg.train.k == 4  # inline in quickstart.yaml, over the file's 8
    assert cfg.train.sampling.max_new_tokens == 96 and cfg.train.trainer.micro_batch == 2  # from the file
    assert cfg.pool_name() == "v1"


def test_pipeline_config_errors_are_one_line(tmp_path):
    with pytest.raises(ConfigError, match="either evolve .* or pool_version"):
        load_config(PipelineConfig, "configs/pipeline_dbbench_smol.yaml", sets=["pool_version=v1"])
    with pytest.raises(ConfigError, match="not found"):
        load_config(PipelineConfig, "configs/quickstart.yaml", sets=["train.from=configs/missing.yaml"])


@pytest.fixture(scope="module")
def pipeline_run(tmp_path_factory, train_dir, prefect_api) -> dict:
    """One tiny real pipeline (train 1 update, evaluate every label) in a module-wide folder."""
    from flows.pipeline import pipeline

    tmp_path = tmp_path_factory.mktemp("pipeline")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("HS_CHECKPOINT_DIR", str(tmp_path / "ckpt"))
        cfg = tiny_pipeline(tmp_path)
        url = f"sqlite:///{tmp_path / 'hs.db'}"
        return {"tmp_path": tmp_path, "cfg": cfg, "url": url, "result": pipeline(cfg, database_url=url)}


@pytest.mark.slow
def test_pipeline_trains_on_the_frozen_pool_evaluates_every_label_and_reports(pipeline_run, monkeypatch):
    from flows.pipeline import pipeline
    from tasks.pipeline import pipeline_run_id

    tmp_path, cfg, url, result = (pipeline_run[k] for k in ("tmp_path", "cfg", "url", "result"))
    monkeypatch.setenv("HS_CHECKPOINT_DIR", str(tmp_path / "ckpt"))

    assert list(result["evaluations"]) == [
        "before",
        "after",
        "rank1",
        "rank1-before",
        "outside-fc_tools",
        "trained-tasks-before",
        "trained-tasks-after",
    ]
    assert result["checkpoint"] == f"{result['train_run_id']}-u1"
    assert result["training"]["updates"] == 1
    phases = result["phase_seconds"]  # this invocation's wall time by phase, printed by hs run
    assert {"re-anchors", "collections", "updates", "records", "evaluations"} <= set(phases)
    assert sum(v for p, v in phases.items() if p != "total") == pytest.approx(phases["total"], abs=0.5)
    assert "wall time by phase: " in "\n".join(shown.training_lines(result))
    assert set(result["phase_peak_gib"]) <= set(phases) | {"other"} and 0.2 < result["phase_peak_gib"]["updates"] < 24
    low, high = result["training"]["valid_group_interval"]  # Wilson over the run's groups
    assert 0.0 <= low <= result["training"]["valid_group_ratio"] <= high <= 1.0
    paired = result["differences"]["after - before (H0)"]  # the same dev tasks before and after training
    assert paired["avg_low"] <= paired["avg_diff"] <= paired["avg_high"]
    assert set(result["differences"]) == {"after - before (H0)", "Rank-1 - H0 (after)"}
    _, h0, siblings = load_pool("v1")
    with session_scope(make_engine(url)) as s:
        train_run = s.get(Run, result["train_run_id"])
        assert train_run.config["pool"] == ["pool:v1"] and train_run.status == "completed"
        models = {
            label: s.get(Run, e["run_id"]).config["policy"]["model"] for label, e in result["evaluations"].items()
        }
        assert models == {
            "before": "smollm2-135m",
            "after": result["checkpoint"],
            "rank1": result["checkpoint"],
            "rank1-before": "smollm2-135m",
            "outside-fc_tools": result["checkpoint"],
            "trained-tasks-before": "smollm2-135m",
            "trained-tasks-after": result["checkpoint"],
        }
        drawn = s.scalars(  # the one task the one update drew, evaluated under H0 on the training split
            select(RolloutGroup.bench_task_id).where(
                RolloutGroup.run_id == result["train_run_id"], RolloutGroup.role == "h0"
            )
        ).all()
        for label in ("trained-tasks-before", "trained-tasks-after"):
            config = s.get(Run, result["evaluations"][label]["run_id"]).config
            assert (config["split"], config["task_ids"], config["k"]) == ("train", sorted(set(drawn)), 1)
        for label, version in (("rank1", 1), ("rank1-before", 0)):  # newest profiles vs the first re-anchor's
            run_id = result["evaluations"][label]["run_id"]
            decisions = s.scalars(select(RouterDecision).where(RouterDecision.run_id == run_id)).all()
            assert len(decisions) == 2 and {d.purpose for d in decisions} == {"rank1"}
            assert {d.profile_version for d in decisions} == {version}
            assert {d.chosen[0] for d in decisions} <= {s_.id for s_ in siblings} | {h0.id}
        outside = s.scalars(
            select(Trajectory.harness_id).where(
                Trajectory.run_id == result["evaluations"]["outside-fc_tools"]["run_id"]
            )
        ).all()
        assert set(outside) == {load_harness("fc_tools").id}
        reanchored = {e.harness_id for e in s.scalars(select(Evaluation).where(Evaluation.run_id == train_run.id))}
        assert {s_.id for s_ in siblings} <= reanchored  # every pool sibling validated at the re-anchors
        row = s.get(Run, pipeline_run_id(cfg))
        assert row.kind == "pipeline" and row.results["train_run_id"] == result["train_run_id"]
        assert row.results["evaluations"]["after"]["avg"] == result["evaluations"]["after"]["avg"]
        n_traj = s.scalar(select(func.count()).select_from(Trajectory))

        report = build_report(s, "pipe", [])  # by name: the report reads the same numbers back from the views
        rq1 = {(r["method"], r["routing"]): r["pass_mean"] for r in report.tables["rq1"].to_dict("records")}
        assert rq1 == {
            ("base policy", "H0"): result["evaluations"]["before"]["pass"]["mean"],
            ("base policy", "Rank-1"): result["evaluations"]["rank1-before"]["pass"]["mean"],
            ("harness_s (adaptive)", "H0"): result["evaluations"]["after"]["pass"]["mean"],
            ("harness_s (adaptive)", "Rank-1"): result["evaluations"]["rank1"]["pass"]["mean"],
        }
        assert set(report.tables["rq6"]["harness"]) == {"h0", "fc_tools"}
        assert report.tables["rq5"]["before"].sum() == pytest.approx(1.0)
        assert report.tables["rq2_validation"]["step"].tolist() == [0, 1]

    again = pipeline(cfg, database_url=url)  # everything finished: nothing runs twice, no row duplicated
    assert again["evaluations"] == result["evaluations"]
    with session_scope(make_engine(url)) as s:
        assert s.scalar(select(func.count()).select_from(Trajectory)) == n_traj

    # the same pipeline on a new database, on a deleted one, and with the results cache deleted:
    # each time the database ends with every row of the clean run; only a lost cache costs rollouts
    import shutil

    import tasks.evaluation as te
    import tasks.reanchor as tr
    import tasks.rollout_groups as tg
    from tests.flows.test_cache_and_database import every_id

    rollouts = []
    for module in (te, tr, tg):
        real = module.run_rollouts
        monkeypatch.setattr(module, "run_rollouts", lambda *a, _real=real, **kw: rollouts.append(1) or _real(*a, **kw))
    expected = every_id(url)
    other = f"sqlite:///{tmp_path / 'other.db'}"
    assert pipeline(cfg, database_url=other)["evaluations"] == result["evaluations"]
    assert rollouts == [] and every_id(other) == expected
    (tmp_path / "hs.db").unlink()
    assert pipeline(cfg, database_url=url)["evaluations"] == result["evaluations"]
    assert rollouts == [] and every_id(url) == expected
    shutil.rmtree(tmp_path / "results")
    rerun = pipeline(cfg, database_url=url)
    assert rollouts and list(rerun["evaluations"]) == list(result["evaluations"])
    assert every_id(url) == expected


def _serve(database_url: str) -> tuple[subprocess.Popen, str]:
    """`hs ui` on a free port, as a user starts it; returns the process and its base URL."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    command = [HS, "ui", "--port", str(port), "--database-url", database_url]
    server = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and server.poll() is None:
        with socket.socket() as attempt:
            if attempt.connect_ex(("127.0.0.1", port)) == 0:
                return server, f"http://127.0.0.1:{port}"
        time.sleep(0.2)
    server.kill()
    raise AssertionError(f"hs ui did not start: {server.communicate()[0]}")


def _walk_to_a_token_view(browser, base: str, train_run_id: str) -> None:
    """Runs list -> the training run -> its update -> the dead group beside its rescue -> a
    trajectory of the dead group -> its tokens, each by clicking what the page shows."""
    from selenium.webdriver.common.by import By

    browser.get(base + "/?kind=train")
    browser.find_element(By.LINK_TEXT, train_run_id).click()
    assert "valid-group ratio" in browser.page_source
    browser.find_element(By.CSS_SELECTOR, "#updates a").click()
    dead = browser.find_elements(By.CSS_SELECTOR, "tr.dead-row")
    assert dead, "the tiny run's untrained policy leaves its first H0 group dead"
    dead[0].find_element(By.CSS_SELECTOR, "a.compare").click()
    sides = browser.find_elements(By.CSS_SELECTOR, ".side")
    assert len(sides) == 2 and "h0 group" in sides[0].text and "rescue group" in sides[1].text
    sides[0].find_element(By.CSS_SELECTOR, "table.trajectories a").click()
    assert "/trajectories/" in browser.current_url and browser.find_elements(By.CSS_SELECTOR, "pre.reply")
    browser.find_element(By.CSS_SELECTOR, "details.tokens-box summary").click()
    tokens = browser.find_elements(By.CSS_SELECTOR, "span.token")
    assert tokens and {t.get_attribute("class") for t in tokens} <= {"token trained", "token masked"}
    assert any(not t.text.strip().isdigit() for t in tokens if t.text.strip())  # decoded by the run's tokenizer


@pytest.mark.slow
def test_hs_ui_shows_the_run_a_dead_group_beside_its_rescue_and_tokens_then_the_same_on_postgresql(
    pipeline_run, browser, postgres_url
):
    """The done-when of the explorer: a real run's database in `hs ui` in a real browser, then the
    same walk after `hs db copy` moved it to PostgreSQL."""
    train_run_id = pipeline_run["result"]["train_run_id"]
    for url in (pipeline_run["url"], postgres_url):
        if url == postgres_url:
            copy = subprocess.run([HS, "db", "copy", "--from", pipeline_run["url"], "--to", postgres_url],
                                  capture_output=True, text=True, timeout=300)  # fmt: skip
            assert copy.returncode == 0, copy.stdout + copy.stderr
        server, base = _serve(url)
        try:
            _walk_to_a_token_view(browser, base, train_run_id)
        finally:
            server.terminate()
            server.wait(timeout=30)


@pytest.mark.parametrize("path", ["configs/quickstart.yaml", "configs/pipeline_dbbench_smol.yaml", "params.yaml"])
def test_committed_pipeline_configs_validate(path):
    cfg = load_config(PipelineConfig, path)
    assert cfg.pool_name() and cfg.train.mode == "harness_s" and cfg.train.warm_start


@pytest.mark.parametrize("method", ["harness_s", "grpo", "h0_rescue", "fixed_mixture"])
def test_comparison_configs_validate(method):
    """configs/compare: one training phase, each method's pipeline differing in its mode (and pool) only."""
    cfg = load_config(PipelineConfig, f"configs/compare/{method}.yaml")
    base = load_config(PipelineConfig, "configs/compare/harness_s.yaml")
    assert cfg.train.mode == method and cfg.train.warm_start == base.train.warm_start
    assert (cfg.train.updates, cfg.train.k, cfg.train.seed) == (base.train.updates, base.train.k, base.train.seed)
    assert cfg.evaluate.model_dump(include={"split", "every", "k", "seeds"}) == base.evaluate.model_dump(
        include={"split", "every", "k", "seeds"}
    )
