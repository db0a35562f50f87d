"""`hs pool`: freeze, list, show and diff pool versions; unknown versions fail in one line."""

from __future__ import annotations

import pytest
import typer
from typer.testing import CliRunner

from cli.pool import pool_app
from harness_pool.spec import BUILTIN_DIR, dump_harness, load_harness

SIBLINGS = ["schema_rows", "format_reminder", "inspect_first", "query_before_answer", "lenient_answer"]
app = typer.Typer()
app.add_typer(pool_app, name="pool")
runner = CliRunner(env={"COLUMNS": "200", "DVC_NO_ANALYTICS": "1"})


def _ok(*args: str) -> str:
    result = runner.invoke(app, ["pool", *args])
    assert result.exit_code == 0, result.output
    return result.output


@pytest.fixture
def pools(tmp_path):
    """v1: the seed pool; v2: lenient_answer dropped, inspect_first edited, window3 added (as files)."""
    root = tmp_path / "pools"
    siblings = [a for name in SIBLINGS for a in ("--sibling", name)]
    out = _ok("freeze", "v1", "--root", str(root), "--created-by", "hand", *siblings)
    assert "froze 6 harnesses as pool dbbench/v1" in out and "DVC is not initialised" in out

    h0 = load_harness("h0")
    edited = load_harness("inspect_first").model_copy(update={"guidance": "Look at three rows first."})
    window3 = h0.model_copy(
        update={
            "name": "window3",
            "parent_ids": [h0.id],
            "context": h0.context.model_copy(update={"history_window": 3}),
        }
    )
    files = [str(dump_harness(spec, tmp_path / f"{spec.name}.yaml")) for spec in (edited, window3)]
    v2 = [a for s in ["schema_rows", "format_reminder", "query_before_answer", *files] for a in ("--sibling", s)]
    out = _ok(
        "freeze", "v2", "--root", str(root), "--no-dvc", "--harness", str(BUILTIN_DIR / "dbbench" / "h0.yaml"), *v2
    )
    assert "froze 6 harnesses as pool dbbench/v2" in out and "DVC" not in out
    return root


def test_show_lists_members_with_parent_names(pools):
    out = _ok("show", "v1", "--root", str(pools))
    h0 = load_harness("h0")
    assert f"base h0 ({h0.id[:12]})" in out and "created by hand" in out
    row = next(line for line in out.splitlines() if "schema_rows" in line)
    assert load_harness("schema_rows").id[:12] in row and "│ h0 " in row and "unknown_column" in row
    assert all(name in out for name in SIBLINGS)


def test_list_shows_versions_sizes_and_ids(pools, tmp_path):
    out = _ok("list", "--root", str(pools))
    rows = [line for line in out.splitlines() if line.startswith("│ v")]
    assert [r.split("│")[1].strip() for r in rows] == ["v1", "v2"]
    assert all(r.split("│")[2].strip() == "6" for r in rows)
    assert "no pool versions" in _ok("list", "--root", str(tmp_path / "empty"))


def test_diff_reports_each_kind_of_change(pools):
    out = _ok("diff", "v1", "v2", "--root", str(pools))
    assert "added    window3" in out
    assert "removed  lenient_answer" in out
    assert "changed  inspect_first" in out
    assert "+guidance: Look at three rows first." in out and "--- v1/inspect_first.yaml" in out
    assert "unchanged: 4" in out


def test_refreeze_with_other_members_and_unknown_version_fail_in_one_line(pools):
    result = runner.invoke(app, ["pool", "freeze", "v1", "--root", str(pools), "--no-dvc"])
    assert result.exit_code == 2
    assert result.output.strip() == "error: pool version v1 already exists with other members; choose a new version"

    result = runner.invoke(app, ["pool", "show", "v9", "--root", str(pools)])
    assert result.exit_code == 2
    text = result.output.strip()
    assert text.startswith("error: pool version 'v9' not found") and "existing versions: v1, v2" in text
    assert "\n" not in text and "Traceback" not in text
