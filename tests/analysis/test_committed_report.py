"""The committed evidence report (reports/dbbench-main) is what `hs report` computes from the
committed export of the rows it reads: nothing in report.md is edited by hand."""

from __future__ import annotations

import lzma
import re
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

REPORT = Path(__file__).resolve().parents[2] / "reports" / "dbbench-main"


@pytest.mark.skipif(not (REPORT / "rows.db.xz").exists(), reason="no committed export yet")
def test_hs_report_regenerates_the_committed_report_from_the_committed_export(tmp_path):
    from cli.main import app

    db = tmp_path / "rows.db"
    with lzma.open(REPORT / "rows.db.xz") as source, db.open("wb") as target:
        shutil.copyfileobj(source, target)
    committed = (REPORT / "report.md").read_text()
    command = re.search(r"Reproduce: `hs report (.*) --out \S+`", committed)
    assert command, "report.md names the command that wrote it"
    args = command.group(1).split()
    result = CliRunner().invoke(
        app, ["report", *args, "--out", str(tmp_path / "out"), "--database-url", f"sqlite:///{db}"]
    )
    assert result.exit_code == 0, result.output
    again = (tmp_path / "out" / "report.md").read_text()
    assert _without_command(again) == _without_command(committed)


def _without_command(report: str) -> str:
    """The report below its title and 'Reproduce' line (the --out folder differs)."""
    return report.split("\n", 3)[3]
