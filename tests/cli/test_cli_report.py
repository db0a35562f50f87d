"""`hs report training` reads the signals the training flow stores and prints runs side by side."""

from __future__ import annotations

from typer.testing import CliRunner

from cli.main import app
from db import store
from db.engine import make_engine, session_scope, upgrade
from db.models import Evaluation, TrainStep
from harness_pool.spec import load_harness


def test_report_training_side_by_side(tmp_path):
    url = f"sqlite:///{tmp_path / 'hs.db'}"
    upgrade(url)
    h0 = load_harness("h0")
    with session_scope(make_engine(url)) as s:
        store.upsert_harness(s, id=h0.id, name=h0.name, benchmark=h0.benchmark, parent_ids=[], spec={})
        for run, valid in (("run-hs", 0.75), ("run-grpo", 0.5)):
            store.upsert_run(s, id=run, kind="train", name=run, config={"mode": run[4:]}, status="completed")
            for step in (0, 1):
                s.add(
                    TrainStep(
                        id=f"{run}-{step}",
                        run_id=run,
                        step=step,
                        mode=run[4:],
                        details={},
                        metrics={
                            "train/valid_group_ratio": valid,
                            "rollout/rescues_triggered": 1.0,
                            "rollout/rescue_success": 1.0 if step else 0.0,
                            "rollout/rollouts_spent": 24.0,
                        },
                    )
                )
            s.add(
                Evaluation(
                    id=f"{run}-e",
                    run_id=run,
                    benchmark="dbbench",
                    split="train",
                    harness_id=h0.id,
                    routing="reanchor",
                    k=1,
                    n_seeds=1,
                    n_bench_tasks=4,
                    metrics={"step": 2, "success_rate": 0.25},
                )
            )
    runner = CliRunner()
    listed = runner.invoke(app, ["report", "training", "--database-url", url], env={"COLUMNS": "200"})
    assert listed.exit_code == 0 and "run-hs" in listed.output and "run-grpo" in listed.output
    out = runner.invoke(
        app, ["report", "training", "run-hs", "run-grpo", "--database-url", url], env={"COLUMNS": "250"}
    )
    assert out.exit_code == 0, out.output
    hs_line = next(line for line in out.output.splitlines() if "run-hs" in line)
    grpo_line = next(line for line in out.output.splitlines() if "run-grpo" in line)
    assert "0.750" in hs_line and "0.500" in grpo_line and "0.50" in hs_line  # rescue success 1 of 2
    assert "48" in hs_line and "2: 0.25" in hs_line
    missing = runner.invoke(app, ["report", "training", "nope", "--database-url", url])
    assert missing.exit_code == 2 and "no run 'nope'" in missing.output


def test_the_reproduce_line_works_as_written_on_a_fresh_checkout(tmp_path, monkeypatch):
    """report.md's 'Reproduce' line names the database it read and, for an export kept compressed
    beside it (reports/dbbench-main/rows.db.xz), the step that decompresses it."""
    import importlib.util
    from pathlib import Path

    spec = importlib.util.spec_from_file_location(
        "handbuilt_db", Path(__file__).parents[1] / "analysis" / "handbuilt_db.py"
    )
    handbuilt = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(handbuilt)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "export").mkdir()
    url = "sqlite:///export/rows.db"
    upgrade(url)
    with session_scope(make_engine(url)) as s:
        handbuilt.build(s)
    args = ["report", "--run", "pipe-hs", "--baseline", "compare-grpo", "--database-url", url, "--out", "out"]
    command = "hs report --run pipe-hs --baseline compare-grpo --database-url sqlite:///export/rows.db --out out"

    assert CliRunner().invoke(app, args).exit_code == 0
    assert (tmp_path / "out" / "report.md").read_text().split("\n")[2] == f"Reproduce: `{command}`"
    (tmp_path / "export" / "rows.db.xz").write_bytes(b"")  # committed compressed, as reports/dbbench-main
    assert CliRunner().invoke(app, args).exit_code == 0
    assert (tmp_path / "out" / "report.md").read_text().split("\n")[2] == (
        f"Reproduce: `xz -dk export/rows.db.xz` (once, on a fresh checkout), then `{command}`"
    )
