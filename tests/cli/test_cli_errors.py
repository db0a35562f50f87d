"""Bad input at the command line: one clear line, exit status 2, no traceback, nothing lost."""

from __future__ import annotations

from typer.testing import CliRunner

from cli.main import app

runner = CliRunner()


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
    text = _one_line_error(runner.invoke(app, ["traj", "list", "--database-url",
                                               "postgresql+psycopg://postgres@127.0.0.1:9/nope"]))
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
