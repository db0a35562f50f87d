"""The editor comparison's figures on hand-built patch rows."""

import pytest

from analysis.editor import PatchRow, compare_best, editor_of, success_under, summarise


def test_sources_map_to_editors():
    assert editor_of("offline-v2") == "offline"
    assert editor_of("engineer-sft:engineer-sft-ab12") == "sft"
    assert editor_of("engineer-grpo:engineer-grpo-cd34") == "grpo"
    assert editor_of("llm:gpt") == "llm"


def test_summary_shares_means_and_best_patch_success():
    sizes = {"b1": (2, 2), "b2": (4, 0)}
    rows = [
        PatchRow("offline", "b1", "valid", 1, 0),
        PatchRow("offline", "b1", "invalid", 0, 1),
        PatchRow("offline", "b2", "rejected", 0, 0),
        PatchRow("grpo", "b1", "valid", 2, 0),
        PatchRow("grpo", "b2", "invalid", 1, 0),
    ]
    offline, grpo = summarise(rows, sizes)
    assert offline.editor == "offline" and offline.patches == 3 and offline.bundles == 2
    assert offline.static_pass.estimate == pytest.approx(2 / 3) and offline.validated.estimate == pytest.approx(1 / 3)
    assert offline.fixed_mean == pytest.approx(1 / 3) and offline.broken_mean == pytest.approx(1 / 3)
    # b1: best of (1 + 2 - 0) / 4 and (0 + 2 - 1) / 4 = 0.75; b2: rejected -> the parent's 0 / 4
    assert offline.best_success == pytest.approx((0.75 + 0.0) / 2)
    assert grpo.best_success == pytest.approx((1.0 + 0.25) / 2)
    assert success_under(PatchRow("x", "b1", "rejected", 0, 0), 2, 2) == 0.5
    assert compare_best(rows, sizes, "grpo", "offline")[1] == "within noise"  # two bundles decide nothing
    assert compare_best(rows, sizes, "grpo", "sft") is None


def test_an_exported_comparison_prints_the_same_table(db_url, tmp_path):
    """hs db copy takes the editor runs by name; hs report editor reads the export (SQLite and PostgreSQL)."""
    from typer.testing import CliRunner

    from cli.main import app
    from db.engine import make_engine, session_scope, upgrade
    from db.models import EditorBundle, EditorPatch, Run

    upgrade(db_url)
    engine = make_engine(db_url)
    with session_scope(engine) as s:
        s.add_all([Run(id="b-id", kind="editor_bundles", name="b"), Run(id="c-id", kind="editor_compare", name="c")])
        s.flush()
        for n, (failing, controls) in enumerate([(2, 2), (3, 1)]):
            content = {"failures": [{}] * failing, "controls": ["x"] * controls}
            s.add(
                EditorBundle(
                    id=f"bundle{n}",
                    run_id="b-id",
                    benchmark="dbbench",
                    split="heldout",
                    family="f",
                    parent_id="p",
                    causes=["c"],
                    trajectory_ids=[],
                    content=content,
                )
            )
        s.flush()
        rows = [("offline-v0", 0, "valid", 1), ("engineer-grpo:g", 0, "invalid", 0), ("engineer-grpo:g", 1, "valid", 2)]
        for source, bundle, status, fixed in rows:
            s.add(
                EditorPatch(
                    id=f"{source}{bundle}",
                    run_id="c-id",
                    bundle_id=f"bundle{bundle}",
                    source=source,
                    status=status,
                    fixed=["t"] * fixed,
                    broken=[],
                )
            )
    engine.dispose()
    export = f"sqlite:///{tmp_path / 'rows.db'}"
    runner = CliRunner()
    copied = runner.invoke(
        app, ["db", "copy", "--from", db_url, "--to", export, "--no-turns", "--run", "b", "--run", "c"]
    )
    assert copied.exit_code == 0, copied.output
    shown = runner.invoke(app, ["report", "editor", "c-id", "--database-url", export])
    assert shown.exit_code == 0, shown.output
    assert "editors on 2 held-out bundles" in shown.output and "offline" in shown.output and "grpo" in shown.output
    missing = runner.invoke(app, ["report", "editor", "b-id", "--database-url", export])
    assert missing.exit_code == 2 and "no editor patches" in missing.output
