"""Bad input at the command line: one clear line, exit status 2, no traceback, nothing lost."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from cli.main import app

runner = CliRunner()
REPO = Path(__file__).resolve().parents[2]


def _one_line_error(result) -> str:
    assert result.exit_code == 2, result.output
    text = result.output.strip()
    assert text.startswith("error:") and "Traceback" not in text
    return text


def test_missing_data_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("HS_DATA_DIR", str(tmp_path / "nowhere"))
    text = _one_line_error(runner.invoke(app, ["env", "check-gold", "dbbench", "--split", "dev"]))
    assert "HS_DATA_DIR" in text


def test_bad_config_names_the_field(tmp_path):
    cfg = tmp_path / "eval.yaml"
    cfg.write_text("k: -3\n")
    text = _one_line_error(runner.invoke(app, ["eval", "--config", str(cfg)]))
    assert "'k'" in text and "greater than or equal to 1" in text


def test_unreachable_database(tmp_path):
    text = _one_line_error(
        runner.invoke(app, ["traj", "list", "--database-url", "postgresql+psycopg://postgres@127.0.0.1:9/nope"])
    )
    assert "HS_DATABASE_URL" in text and "127.0.0.1:9" in text


def test_unknown_trajectory_and_harness(tmp_path):
    url = f"sqlite:///{tmp_path / 'hs.db'}"
    assert runner.invoke(app, ["db", "upgrade", "--url", url]).exit_code == 0
    _one_line_error(runner.invoke(app, ["traj", "show", "abcdef123", "--database-url", url]))
    text = _one_line_error(runner.invoke(app, ["eval", "--harness", "no-such-harness", "--database-url", url]))
    assert "no-such-harness" in text


def test_missing_model_directory(tmp_path):
    url = f"sqlite:///{tmp_path / 'hs.db'}"
    text = _one_line_error(runner.invoke(app, ["eval", "--model", str(tmp_path / "no-model"), "--database-url", url]))
    assert "no-model" in text and "model directory" in text


def test_train_with_a_missing_checkpoint(tmp_path, train_dir, monkeypatch):
    monkeypatch.setenv("HS_CHECKPOINT_DIR", str(tmp_path / "ckpt"))
    url = f"sqlite:///{tmp_path / 'hs.db'}"
    text = _one_line_error(
        runner.invoke(
            app,
            [
                "train",
                "--config",
                "configs/train_dbbench_smol.yaml",
                "--init",
                "no-such-checkpoint",
                "--database-url",
                url,
            ],
        )
    )
    assert "model 'no-such-checkpoint' not found" in text and "checkpoint name" in text


def test_train_harness_s_with_an_empty_pool(tmp_path):
    text = _one_line_error(
        runner.invoke(app, ["train", "--config", "configs/train_dbbench_smol.yaml", "--set", "pool=[]"])
    )
    assert "non-empty pool" in text


def test_train_with_a_broken_sibling_harness(tmp_path, train_dir):
    broken = tmp_path / "broken.yaml"
    broken.write_text("name: broken\nbenchmark: dbbench\nprompts: [not, a, mapping]\n")
    text = _one_line_error(
        runner.invoke(app, ["train", "--config", "configs/train_dbbench_smol.yaml", "--set", f"pool=[{broken}]"])
    )
    assert "broken.yaml" in text


def test_train_on_task_ids_outside_the_training_split(train_dir):
    sets = ["--set", "task_ids=[dbbench/train/0001, dbbench/train/9999]", "--set", "validation.split=train"]
    text = _one_line_error(runner.invoke(app, ["train", "--config", "configs/train_dbbench_smol.yaml", *sets]))
    assert "task_ids dbbench/train/9999 are not training tasks" in text and "dbbench/train/0007" in text


def test_eval_of_a_missing_checkpoint(tmp_path, monkeypatch):
    monkeypatch.setenv("HS_CHECKPOINT_DIR", str(tmp_path / "ckpt"))
    text = _one_line_error(
        runner.invoke(
            app,
            [
                "eval",
                "--checkpoint",
                "no-such-checkpoint",
                "--limit",
                "1",
                "--database-url",
                f"sqlite:///{tmp_path / 'hs.db'}",
            ],
        )
    )
    assert "model 'no-such-checkpoint' not found" in text


def test_multi_process_launch_needs_the_deepspeed_backend(monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "0")
    text = _one_line_error(runner.invoke(app, ["train", "--config", "configs/train_dbbench_smol.yaml"]))
    assert "WORLD_SIZE=2" in text and "trainer.backend=deepspeed" in text
    text = _one_line_error(
        runner.invoke(
            app,
            [
                "train",
                "--config",
                "configs/train_dbbench_smol.yaml",
                "--set",
                "trainer.backend=deepspeed",
                "--set",
                "trainer.zero_stage=3",
            ],
        )
    )
    assert "zero_stage" in text


def test_harness_check_accepts_a_good_file_and_names_the_offending_construct(tmp_path):
    ok = runner.invoke(app, ["harness", "check", "harness_pool/harnesses/dbbench/query_before_answer.yaml"])
    assert ok.exit_code == 0 and "ok: harness 'query_before_answer'" in ok.output
    assert "before_action/block': 1" in ok.output
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "name: bad\nbenchmark: dbbench\nprompts: {system: s, task_template: t}\ncode_hooks:\n"
        "- at: after_step\n  name: esc\n  source: \"def hook(ctx, nb):\\n    return open('x')\"\n"
    )
    text = _one_line_error(runner.invoke(app, ["harness", "check", str(bad)]))
    assert "bad.yaml" in text and "'open' is not allowed in hook code (line 2)" in text
    patch = tmp_path / "patch.yaml"
    patch.write_text(
        "name: c\ndescription: d\nroot_causes: [x]\nedits:\n- op: add_code_hook\n  hook:\n"
        '    at: before_action\n    name: loop\n    source: "def hook(ctx, nb):\\n    while 1:\\n        pass"\n'
    )
    assert "'While' is not allowed" in _one_line_error(runner.invoke(app, ["harness", "check", str(patch)]))
    assert "no such file" in _one_line_error(runner.invoke(app, ["harness", "check", str(tmp_path / "nope.yaml")]))


def test_pool_report_and_evolve_fail_fast_on_bad_input(tmp_path):
    text = _one_line_error(runner.invoke(app, ["pool", "report", "no-such-version"]))
    assert "no-such-version" in text
    bad = tmp_path / "evolve.yaml"
    bad.write_text("rounds: 0\n")
    text = _one_line_error(runner.invoke(app, ["evolve", "--config", str(bad)]))
    assert "'rounds'" in text and "greater than or equal to 1" in text
    text = _one_line_error(runner.invoke(app, ["evolve", "--set", "editor.kind=openai"]))
    assert "editor.model" in text
    text = _one_line_error(runner.invoke(app, ["evolve", "--set", "editor.kind=trained"]))
    assert "editor.checkpoint" in text


def test_editor_commands_fail_fast_on_bad_input(tmp_path):
    text = _one_line_error(runner.invoke(app, ["editor", "sft"]))
    assert "--config" in text
    sft = tmp_path / "sft.yaml"
    sft.write_text(f"bundles: {tmp_path / 'missing.yaml'}\n")
    text = _one_line_error(runner.invoke(app, ["editor", "sft", "--config", str(sft)]))
    assert "missing.yaml" in text
    train = tmp_path / "train.yaml"
    train.write_text(f"sft: {sft}\ngroup_size: 1\n")
    text = _one_line_error(runner.invoke(app, ["editor", "train", "--config", str(train)]))
    assert "group_size" in text
    bundles = tmp_path / "bundles.yaml"
    bundles.write_text("min_failures: 4\nmax_failures: 2\n")
    text = _one_line_error(runner.invoke(app, ["editor", "bundles", "--config", str(bundles)]))
    assert "min_failures" in text


def test_pipeline_commands_reject_bad_input_before_starting(tmp_path):
    url = f"sqlite:///{tmp_path / 'hs.db'}"
    text = _one_line_error(runner.invoke(app, ["quickstart", "--database-url", url, "--set", "pool_version=v9"]))
    assert "v9" in text and "existing versions: v1" in text
    text = _one_line_error(runner.invoke(app, ["run", str(tmp_path / "none.yaml")]))
    assert "not found" in text
    text = _one_line_error(runner.invoke(app, ["run", "configs/quickstart.yaml", "--set", "train.k=1"]))
    assert "'train.k'" in text
    text = _one_line_error(runner.invoke(app, ["run", "configs/quickstart.yaml", "--set", "baseline=ppo"]))
    assert "'baseline'" in text and "frozen_evolution" in text
    coupled = ["run", "configs/baselines/harnessx_coupled.yaml", "--set", "train.mode=grpo"]
    assert "train.mode harnessx" in _one_line_error(runner.invoke(app, coupled))
    over = ["run", "configs/baselines/whale.yaml", "--database-url", url, "--set", "rft.rounds=3"]
    assert "budget.search_rollouts 1,200: this config plans up to 1,600" in _one_line_error(runner.invoke(app, over))
    small = ["run", "configs/quickstart.yaml", "--set", "budget.training_rollouts=1"]
    assert "below one update's most expensive outcome" in _one_line_error(runner.invoke(app, small))
    text = _one_line_error(runner.invoke(app, ["rollout", "--task", "dbbench/dev/9999", "--database-url", url]))
    assert "dbbench/dev/9999" in text
    text = _one_line_error(runner.invoke(app, ["rollout", "--task", "0007"]))
    assert "dbbench/dev/0007" in text
    text = _one_line_error(runner.invoke(app, ["rerun", "not-a-uuid"]))
    assert "UUID" in text


def test_deploy_and_rerun_name_an_unreachable_prefect_api(tmp_path):
    import os
    import subprocess
    import sys
    from pathlib import Path

    hs = str(Path(sys.executable).parent / "hs")
    env = {**os.environ, "PREFECT_API_URL": "http://127.0.0.1:9/api", "PREFECT_HOME": str(tmp_path)}
    for args in (["deploy"], ["rerun", "00000000-0000-0000-0000-000000000000"]):
        out = subprocess.run([hs, *args], env=env, capture_output=True, text=True, timeout=120)
        assert out.returncode == 2 and "Traceback" not in out.stderr
        assert "127.0.0.1:9" in out.stderr and "PREFECT_API_URL" in out.stderr


def test_eval_warm_start_conflicts_and_mismatches(tmp_path):
    url = f"sqlite:///{tmp_path / 'hs.db'}"
    warm = ["eval", "--warm-start", "configs/sft_bfcl_smol.yaml", "--database-url", url]
    text = _one_line_error(runner.invoke(app, [*warm, "--model", "smollm2-135m"]))
    assert "--warm-start" in text and "--model" in text
    text = _one_line_error(runner.invoke(app, [*warm, "--benchmark", "textworld"]))
    assert "bfcl" in text and "--benchmark bfcl" in text
    text = _one_line_error(runner.invoke(app, ["eval", "--warm-start", str(tmp_path / "none.yaml")]))
    assert "none.yaml" in text
    assert not (tmp_path / "hs.db").exists()  # refused before anything was written


def test_build_repair_names_the_known_projects(tmp_path, monkeypatch):
    monkeypatch.setenv("HS_GENERATED_DIR", str(tmp_path))
    text = _one_line_error(runner.invoke(app, ["data", "build-repair", "--project", "numpy"]))
    assert "numpy" in text and "toolz" in text and "boltons" in text
    assert not any(tmp_path.iterdir())  # nothing fetched or written


def _run_with_a_group_under(url: str, run_id: str, harness_path: Path):
    """A finished run holding one rollout under the harness file as it is now; returns that harness."""
    from configs.schema import EnvConfig
    from db import store
    from db.engine import make_engine, session_scope
    from envs.base import Verdict
    from harness_pool.spec import load_harness
    from rl.rollout import RolloutResult
    from tasks.records import GroupRecord, build_group, record_bench_tasks, record_harnesses
    from tasks.resources import bench_tasks

    harness, task = load_harness(str(harness_path)), bench_tasks(EnvConfig(), "dev", limit=1)[0]
    assert runner.invoke(app, ["db", "upgrade", "--url", url]).exit_code == 0
    with session_scope(make_engine(url)) as s:
        store.upsert_run(s, id=run_id, kind="eval", name="x", status="completed", config={})
        record_harnesses(s, [harness])
        record_bench_tasks(s, [task])
        result = RolloutResult(task.id, harness.id, 0, [], Verdict(1.0, True), "answered", None, [], [], 1.0, 1.0, 0.0)
        row = dict(run_id=run_id, step=0, bench_task_id=task.id, harness_id=harness.id, seed=0, role="eval")
        store.replace_group(s, build_group(GroupRecord(**row, checkpoint="smollm2-135m", results=[result])))
    harness_path.write_text(harness_path.read_text().replace("You ", "You now ", 1))  # the edit
    return harness


def _untouched(url: str, run_id: str, harness_id: str) -> bool:
    from sqlalchemy import select

    from db.engine import make_engine, session_scope
    from db.models import RolloutGroup, Run

    with session_scope(make_engine(url)) as s:  # nothing written, nothing marked
        return s.get(Run, run_id).status == "completed" and s.scalars(select(RolloutGroup.harness_id)).all() == [
            harness_id
        ]


def test_resuming_a_run_whose_harness_file_changed_is_refused_without_touching_the_run(tmp_path, train_dir):
    """Run ids come from the config, which names a harness file, not its content: after an edit of
    the file the same command would add the new harness's rollouts to the old run."""
    from configs.schema import EvalConfig, TrainConfig, load_config
    from tasks.evaluation import run_id_for
    from tasks.run_identity import train_run_id

    path, url = tmp_path / "mine.yaml", f"sqlite:///{tmp_path / 'hs.db'}"
    path.write_text((REPO / "harness_pool/harnesses/dbbench/h0.yaml").read_text())
    no_model = ["--model", str(tmp_path / "no-model")]  # were the check missing: a model error, not a real run
    run_id = run_id_for(load_config(EvalConfig, None, {"harness": str(path), "limit": 1, "policy.model": no_model[1]}))
    old = _run_with_a_group_under(url, run_id, path)
    text = _one_line_error(
        runner.invoke(app, ["eval", "--harness", str(path), "--limit", "1", "--database-url", url, *no_model])
    )
    assert run_id in text and f"({old.id[:12]})" in text and "a harness file changed" in text and "--set name=" in text
    assert _untouched(url, run_id, old.id)

    sibling = (REPO / "harness_pool/harnesses/dbbench/h0.yaml").read_text().replace("name: h0", "name: mine")
    path.write_text(sibling.replace("You work with", "You always work with", 1))  # now a training sibling
    url, config = f"sqlite:///{tmp_path / 'train.db'}", "configs/train_dbbench_smol.yaml"
    train_cfg = load_config(TrainConfig, config, {"init": "no-such-model"}, [f"pool=[{path}]"])
    run_id = train_run_id(train_cfg.model_copy(update={"warm_start": None}))
    old = _run_with_a_group_under(url, run_id, path)
    text = _one_line_error(
        runner.invoke(
            app,
            ["train", "--config", config, "--set", f"pool=[{path}]", "--database-url", url, "--init", "no-such-model"],
        )
    )
    assert run_id in text and f"({old.id[:12]})" in text
    assert _untouched(url, run_id, old.id)


def test_model_written_code_without_a_sandbox_is_refused_in_one_line(tmp_path, monkeypatch, repair_generated):
    """No bubblewrap here and no HS_SANDBOX=none: a repair evaluation (its tests run the policy's
    patch) stops before anything starts, saying how to get the sandbox."""
    from sandbox import jail

    monkeypatch.setenv("HS_GENERATED_DIR", str(repair_generated))
    monkeypatch.delenv("HS_SANDBOX", raising=False)
    monkeypatch.setattr(jail.shutil, "which", lambda name: None)
    jail._bwrap_problem.cache_clear()
    try:
        url = f"sqlite:///{tmp_path / 'hs.db'}"
        args = ["eval", "--benchmark", "repair", "--split", "dev", "--harness", "h0", "--database-url", url]
        text = _one_line_error(runner.invoke(app, args))
        assert "bubblewrap" in text and "HS_SANDBOX=none" in text
    finally:
        jail._bwrap_problem.cache_clear()


def test_a_run_id_too_long_for_the_database_is_refused_before_any_flow(tmp_path):
    from db.ids import RUN_ID_MAX

    url = f"sqlite:///{tmp_path / 'hs.db'}"
    long_name = "n" * RUN_ID_MAX
    text = _one_line_error(
        runner.invoke(app, ["eval", "--limit", "1", "--database-url", url, "--set", f"name={long_name}"])
    )
    assert f"over the {RUN_ID_MAX} the database holds" in text and "--set name=" in text
    text = _one_line_error(runner.invoke(app, ["quickstart", "--database-url", url, "--set", f"name={long_name}"]))
    assert f"over the {RUN_ID_MAX} the database holds" in text
    assert not (tmp_path / "hs.db").exists()  # refused before the database was touched


def test_an_unknown_set_key_suggests_the_nearest_field(tmp_path):
    text = _one_line_error(runner.invoke(app, ["eval", "--set", "sampling.temprature=0.5"]))
    assert "'sampling.temprature'" in text and "did you mean 'sampling.temperature'?" in text
    text = _one_line_error(runner.invoke(app, ["run", "configs/quickstart.yaml", "--set", "train.updats=3"]))
    assert "did you mean 'train.updates'?" in text
