"""The committed evidence report (reports/dbbench-main) is what `hs report` computes from the
committed export of the rows it reads: nothing in report.md is edited by hand."""

from __future__ import annotations

import lzma
import re
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

REPORTS = Path(__file__).resolve().parents[2] / "reports"


@pytest.mark.parametrize("name", ["dbbench-main", "dbbench-hard"])
def test_hs_report_regenerates_the_committed_report_from_the_committed_export(tmp_path, name):
    from cli.main import app

    report_dir = REPORTS / name
    if not (report_dir / "rows.db.xz").exists():
        pytest.skip("no committed export yet")

    db = tmp_path / "rows.db"
    with lzma.open(report_dir / "rows.db.xz") as source, db.open("wb") as target:
        shutil.copyfileobj(source, target)
    committed = (report_dir / "report.md").read_text()
    line = committed.split("\n")[2]
    # As written, it works on a fresh checkout: decompress the export, then read it.
    prepare = re.fullmatch(r"Reproduce: `xz -dk (\S+)\.xz` \(once, on a fresh checkout\), then `hs report (.*)`", line)
    assert prepare, f"report.md names the steps that wrote it: {line[:120]}"
    assert prepare.group(1) == f"reports/{name}/rows.db"
    args = prepare.group(2).split()
    assert args[args.index("--database-url") + 1] == f"sqlite:///reports/{name}/rows.db"
    assert args[args.index("--out") + 1] == f"reports/{name}"
    args[args.index("--database-url") + 1] = f"sqlite:///{db}"  # the copy decompressed here
    args[args.index("--out") + 1] = str(tmp_path / "out")
    result = CliRunner().invoke(app, ["report", *args])
    assert result.exit_code == 0, result.output
    again = (tmp_path / "out" / "report.md").read_text()
    assert _without_command(again) == _without_command(committed)


def _without_command(report: str) -> str:
    """The report below its title and 'Reproduce' line (the --out folder differs)."""
    return report.split("\n", 3)[3]
