"""`dvc repro` of dvc.yaml in a fresh clone of the repository, on a tiny params.yaml, with the real
model, real Prefect flows and a real SQLite database; a second repro skips every stage."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from sqlalchemy import select

from db.engine import make_engine, session_scope
from db.models import Run

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent

TINY = {
    "name": "dvc-tiny",
    "evolve": {
        "from": "configs/evolve_dbbench_smol.yaml",
        "warm_start": None,
        "rounds": 1,
        "children_per_parent": 1,
        "tiers": ["easy"],
        "diagnose": {"n_tasks": 2, "k": 1, "min_support": 1},
        "validation": {"max_tasks": 2, "n_controls": 0, "k": 1, "min_fixed": 1, "max_broken": 0},
        "sampling": {"max_new_tokens": 8},
        "env": {"max_rounds": 1},
        "pool": {"version": "dvc", "root": "harness_pool/pools", "dvc": False},
    },
    "train": {
        "from": "configs/train_dbbench_smol.yaml",
        "warm_start": None,
        "init": "smollm2-135m",
        "mode": "grpo",
        "updates": 1,
        "batch_tasks": 1,
        "k": 2,
        "tiers": ["easy"],
        "validation": {"split": "train", "n_tasks": 1, "k": 1},
        "sampling": {"max_new_tokens": 8},
        "env": {"max_rounds": 1},
        "wandb": "disabled",
    },
    "evaluate": {"split": "dev", "limit": 2, "k": 1, "seeds": 1, "before": False, "rank1": False},
}


def _git_clean_clone(dest: Path) -> None:
    subprocess.run(["git", "clone", "-q", str(REPO), str(dest)], check=True)
    if subprocess.run(["git", "diff", "--quiet", "HEAD", "--", "dvc.yaml", "cli/stages.py"], cwd=REPO).returncode:
        pytest.skip("dvc.yaml or cli/stages.py has uncommitted changes: commit them to test the fresh clone")


@pytest.mark.slow
def test_dvc_repro_runs_every_stage_in_a_fresh_clone_then_skips_them(tmp_path, data_dir, prefect_api_url):
    clone = tmp_path / "clone"
    _git_clean_clone(clone)
    (clone / "params.yaml").write_text(yaml.safe_dump(TINY, sort_keys=False))
    env = {
        **os.environ,
        "PATH": f"{BIN}:{os.environ['PATH']}",
        "DVC_NO_ANALYTICS": "1",
        "WANDB_MODE": "disabled",
        "PREFECT_HOME": str(tmp_path / "prefect"),
        "PREFECT_API_URL": prefect_api_url,  # the stages' flows report to the test API (no server per stage)
        "HS_GENERATED_DIR": ".hs/data",
    }
    env.pop("HS_DATABASE_URL", None)
    first = subprocess.run(
        [str(BIN / "dvc"), "repro"], cwd=clone, env=env, capture_output=True, text=True, timeout=1200
    )
    assert first.returncode == 0, (first.stdout + first.stderr)[-4000:]

    lock = yaml.safe_load((clone / "dvc.lock").read_text())
    assert set(lock["stages"]) == {"data", "pool", "train", "evaluate", "report"}
    assert lock["stages"]["pool"]["outs"][0]["path"] == "harness_pool/pools/dbbench/dvc"
    assert lock["stages"]["data"]["outs"][0]["md5"]  # the generated dataset is versioned by hash
    assert (clone / "harness_pool/pools/dbbench/dvc/manifest.yaml").exists()
    assert "dvc" in (clone / "harness_pool/pools/dbbench/.gitignore").read_text()  # tracked by DVC, not git
    report = (clone / "reports/dvc/results.md").read_text()
    assert "| after | h0 | 2 |" in report
    rq = (clone / "reports/dvc/report.md").read_text()  # the RQ report of the same pipeline run, from the views
    assert "## RQ1: main table" in rq and "| grpo " in rq and (clone / "reports/dvc/rq1_pass.png").exists()
    with session_scope(make_engine(f"sqlite:///{clone / '.hs/hs.db'}")) as s:
        pipeline = s.scalars(select(Run).where(Run.kind == "pipeline")).one()
        assert pipeline.results["pool_version"] == "dvc" and pipeline.results["training"]["updates"] == 1

    second = subprocess.run(
        [str(BIN / "dvc"), "repro"], cwd=clone, env=env, capture_output=True, text=True, timeout=600
    )
    assert second.returncode == 0, second.stderr[-2000:]
    assert "Running stage" not in second.stdout  # nothing changed, nothing ran
    assert second.stdout.count("didn't change, skipping") == 5
