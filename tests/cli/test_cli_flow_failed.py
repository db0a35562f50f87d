"""A flow that fails ends the command with one line; where it says `hs rerun`, the line names the
failed flow run's real id, so the command it shows works as written."""

from __future__ import annotations

import re
from uuid import UUID

import pytest
import typer
from typer.testing import CliRunner

from cli.errors import flow_failed
from cli.main import app

runner = CliRunner()
FAILED_GROUPS = (
    "1 of 3 rollout groups failed (first: dbbench/dev/0001 seed 0: boom [x]); "
    "start the same command again (or hs rerun FLOW_RUN_ID) to run only those groups"
)


def _error_line(text: str) -> str:
    lines = [line for line in text.splitlines() if line.startswith("error:")]
    assert len(lines) == 1, text
    return lines[0]


def test_the_rerun_hint_names_the_flow_run_in_the_message_and_the_hint(capsys):
    exc = RuntimeError(FAILED_GROUPS)
    exc.flow_run_id = "6f1c2a9e-0000-4000-8000-000000000001"
    with pytest.raises(typer.Exit) as info:
        flow_failed("evaluation", exc)
    assert info.value.exit_code == 1
    line = _error_line(capsys.readouterr().err)
    assert "hs rerun 6f1c2a9e-0000-4000-8000-000000000001" in line and "FLOW_RUN_ID" not in line
    assert "boom [x]" in line  # the message is text, not console markup

    exc = ValueError("phase 'train' stopped")
    exc.flow_run_id = "6f1c2a9e-0000-4000-8000-000000000002"
    with pytest.raises(typer.Exit):
        flow_failed("pipeline", exc, "start the same command again (or `hs rerun FLOW_RUN_ID`) to resume")
    line = _error_line(capsys.readouterr().err)
    assert line.endswith("(or `hs rerun 6f1c2a9e-0000-4000-8000-000000000002`) to resume")


def test_a_run_id_too_long_for_the_database_found_inside_a_flow_is_a_user_error(capsys):
    from db.ids import RunIdTooLong

    with pytest.raises(typer.Exit) as info:
        flow_failed("pipeline", RunIdTooLong("run id 'x' is 230 characters ..."), "start the same command again")
    assert info.value.exit_code == 2
    line = _error_line(capsys.readouterr().err)
    assert "230 characters" in line and "start the same command again" not in line


@pytest.mark.slow
def test_hs_eval_names_the_failed_flow_run_that_hs_rerun_takes(tmp_path, prefect_api, monkeypatch):
    from prefect import flow, get_client

    import cli.experiments as experiments
    import flows.evaluate as evaluate_module

    @flow(name="evaluate")
    def failing_evaluate(config, database_url: str | None = None) -> dict:
        raise RuntimeError(FAILED_GROUPS)

    monkeypatch.setattr(experiments, "eval_preflight", lambda *args, **kwargs: None)
    monkeypatch.setattr(evaluate_module, "evaluate", failing_evaluate)
    result = runner.invoke(app, ["eval", "--limit", "1", "--database-url", f"sqlite:///{tmp_path / 'hs.db'}"])
    assert result.exit_code == 1, result.output
    line = _error_line(result.output)
    assert line.startswith("error: evaluation failed: 1 of 3 rollout groups failed") and "FLOW_RUN_ID" not in line
    flow_run_id = re.search(r"hs rerun (\S+)\)", line).group(1)
    with get_client(sync_client=True) as client:
        run = client.read_flow_run(UUID(flow_run_id))
        assert run.state.is_failed() and client.read_flow(run.flow_id).name == "evaluate"
