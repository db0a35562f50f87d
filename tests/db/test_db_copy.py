"""`hs db copy`: a whole database into another, SQLite -> PostgreSQL and back, idempotent."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from sqlalchemy import func, select, text
from typer.testing import CliRunner

from cli.main import app
from db.copy import copy_database, count_rows, tables
from db.engine import make_engine, session_scope, upgrade
from db.models import Run, Trajectory, Turn

_spec = importlib.util.spec_from_file_location(
    "handbuilt_db", Path(__file__).parents[1] / "analysis" / "handbuilt_db.py"
)
handbuilt = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(handbuilt)
runner = CliRunner()


def _source(tmp_path) -> str:
    url = f"sqlite:///{tmp_path / 'source.db'}"
    upgrade(url)
    engine = make_engine(url)
    with session_scope(engine) as s:
        handbuilt.build(s)
        trajectory = s.scalars(select(Trajectory)).first()
        s.add(
            Turn(
                id="turn-1",
                trajectory_id=trajectory.id,
                index=0,
                context_text="ctx",
                context_ids=[1, 2],
                completion_text="Action: Answer",
                completion_ids=[3],
                completion_logprobs=[-0.5],
                loss_mask=[0, 0, 1],
                action_kind="answer",
                action={"type": "AnswerAction", "values": ["1"]},
                observation="",
                hook_events=[{"at": "on_init", "effect": "inject"}],
            )
        )
    engine.dispose()
    return url


def _dump(url: str) -> dict:
    engine = make_engine(url)
    try:
        with engine.connect() as c:
            return {
                t.name: {
                    tuple(row[k.name] for k in t.primary_key.columns): dict(row)
                    for row in c.execute(select(t)).mappings()
                }
                for t in tables()
            }
    finally:
        engine.dispose()


@pytest.mark.postgres
def test_copy_to_postgresql_and_back_keeps_every_row_and_value(tmp_path, postgres_url):
    source = _source(tmp_path)
    copied = copy_database(source, postgres_url)
    assert copied == count_rows(source) == count_rows(postgres_url) and copied["trajectories"] > 0
    assert copy_database(source, postgres_url) == copied and count_rows(postgres_url) == copied  # idempotent
    back = f"sqlite:///{tmp_path / 'back.db'}"
    assert copy_database(postgres_url, back) == copied
    assert _dump(back) == _dump(source)  # JSON, datetimes and token lists survive both ways
    engine = make_engine(postgres_url)
    with session_scope(engine) as s:
        assert s.get(Turn, "turn-1").completion_logprobs == [-0.5]
        assert s.get(Run, "pipe-hs").config["train"]["mode"] == "harness_s"
        copied_view = s.execute(text("SELECT * FROM eval_scores ORDER BY 1, 2, 3")).all()
    engine.dispose()
    engine = make_engine(source)
    with session_scope(engine) as s:  # the analysis views read the copied rows alike
        assert copied_view == s.execute(text("SELECT * FROM eval_scores ORDER BY 1, 2, 3")).all() != []
    engine.dispose()


def test_copy_updates_changed_rows_and_keeps_the_targets_own(tmp_path):
    source, target = _source(tmp_path), f"sqlite:///{tmp_path / 'target.db'}"
    copy_database(source, target)
    engine = make_engine(source)
    with session_scope(engine) as s:
        s.get(Run, "pipe-hs").status = "failed"
    engine.dispose()
    engine = make_engine(target)
    with session_scope(engine) as s:
        s.add(Run(id="only-in-target", kind="eval", name="x", status="completed", config={}))
    copy_database(source, target)
    with session_scope(engine) as s:
        assert s.get(Run, "pipe-hs").status == "failed" and s.get(Run, "only-in-target") is not None
    engine.dispose()


def test_the_command_prints_counts_and_refuses_bad_input_in_one_line(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    source, target = _source(tmp_path), f"sqlite:///{tmp_path / 'cli.db'}"
    result = runner.invoke(app, ["db", "copy", "--from", source, "--to", target])
    assert result.exit_code == 0, result.output
    assert "trajectories" in result.output and "running it again changes nothing" in result.output
    same = runner.invoke(app, ["db", "copy", "--from", source, "--to", source])
    assert same.exit_code == 2 and "same database" in same.output
    missing = runner.invoke(app, ["db", "copy", "--from", f"sqlite:///{tmp_path / 'nope.db'}", "--to", target])
    assert missing.exit_code == 2 and "no trajectory database" in missing.output
    assert not (tmp_path / "nope.db").exists()


EXPORT = Path(__file__).resolve().parents[2] / "reports" / "dbbench-main" / "rows.db.xz"


@pytest.mark.postgres
@pytest.mark.skipif(not EXPORT.exists(), reason="no committed export")
def test_the_committed_export_copies_to_postgresql(tmp_path, postgres_url):
    """reports/dbbench-main/rows.db.xz holds run ids up to 76 characters (a baseline's evaluations
    name the harnesses they compare) and bandit scores of +inf: `hs db copy` to PostgreSQL copies
    every row (turns are not in the export), the ids unchanged."""
    import lzma
    import shutil
    import sqlite3

    db = tmp_path / "rows.db"
    with lzma.open(EXPORT) as source, db.open("wb") as target:
        shutil.copyfileobj(source, target)
    with sqlite3.connect(db) as connection:  # counted before the copy migrates the source
        expected = {t.name: connection.execute(f"SELECT COUNT(*) FROM {t.name}").fetchone()[0] for t in tables()}
        long_ids = {row[0] for row in connection.execute("SELECT id FROM runs WHERE LENGTH(id) > 64")}
    assert long_ids and expected["trajectories"] > 10_000

    result = runner.invoke(app, ["db", "copy", "--from", f"sqlite:///{db}", "--to", postgres_url])
    assert result.exit_code == 0, result.output
    assert "running it again changes nothing" in result.output
    assert count_rows(postgres_url) == expected
    engine = make_engine(postgres_url)
    try:
        with session_scope(engine) as s:
            assert long_ids <= set(s.scalars(select(Run.id)))
            assert s.scalar(select(func.count()).select_from(Trajectory).where(Trajectory.run_id.in_(long_ids))) > 0
            assert s.execute(text("SELECT COUNT(*) FROM eval_scores")).scalar() > 0  # the views read them
    finally:
        engine.dispose()


def test_the_commands_errors_name_its_own_options(tmp_path, monkeypatch):
    """`hs db copy` has --from and --to, no --database-url: its one-line errors say which to fix."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("HS_DATABASE_URL", raising=False)
    target = f"sqlite:///{tmp_path / 'target.db'}"

    def error(*args: str) -> str:
        result = runner.invoke(app, ["db", "copy", *args])
        text = " ".join(result.output.split())
        assert result.exit_code == 2 and text.startswith("error:") and "Traceback" not in text, result.output
        assert "--database-url" not in text
        return text

    text = error("--from", f"sqlite:///{tmp_path / 'nope.db'}", "--to", target)
    assert "no trajectory database" in text and "point --from at an existing one" in text
    monkeypatch.setenv("HS_HOME", str(tmp_path / "home"))
    assert "point --from at an existing one" in error("--to", target)  # no --from: the default source
    (tmp_path / "rows.db.xz").write_bytes(b"")  # a committed export, still compressed
    text = error("--from", "sqlite:///rows.db", "--to", target)
    assert f"decompress it first (xz -dk {tmp_path / 'rows.db.xz'})" in text
    source = _source(tmp_path)
    text = error("--from", source, "--to", "postgresql+psycopg://postgres@127.0.0.1:9/nope")
    assert "127.0.0.1:9" in text and "change --to" in text
    text = error("--from", source, "--to", f"sqlite:///{tmp_path / 'no' / 'such' / 'folder' / 'x.db'}")
    assert "point --to elsewhere" in text


@pytest.mark.postgres
def test_a_row_the_target_refuses_stops_the_copy_in_one_line_with_nothing_written(tmp_path, postgres_url):
    import sqlite3

    source = _source(tmp_path)
    with sqlite3.connect(tmp_path / "source.db") as connection:  # foreign keys are off in a bare connection
        connection.execute(
            "INSERT INTO train_steps (id, run_id, step, mode, metrics, details, created_at) "
            "VALUES ('orphan', 'no-such-run', 0, 'grpo', '{}', '{}', '2026-01-01 00:00:00')"
        )
    result = runner.invoke(app, ["db", "copy", "--from", source, "--to", postgres_url])
    text = " ".join(result.output.split())
    assert result.exit_code == 2 and text.startswith("error:") and "Traceback" not in text, result.output
    assert "refused a row of table train_steps" in text and "nothing was copied" in text
    assert sum(count_rows(postgres_url).values()) == 0
