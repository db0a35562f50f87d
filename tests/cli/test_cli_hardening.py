"""States that used to end in a traceback or leave files behind: each is now one line on stderr,
exit status 2, and nothing created; runs and Prefect servers of a killed `hs` are tidied up."""

from __future__ import annotations

import errno
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import types
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cli.main import app

runner = CliRunner()


def _one_line_error(result) -> str:
    assert result.exit_code == 2, result.output
    text = result.output.strip()
    assert text.startswith("error:") and "Traceback" not in text and "\n" not in text, text
    return text


def _tree(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


@pytest.fixture
def empty_dir(tmp_path, monkeypatch) -> Path:
    """An empty working directory with the default database location (.hs/hs.db)."""
    monkeypatch.delenv("HS_DATABASE_URL", raising=False)
    monkeypatch.delenv("HS_HOME", raising=False)
    monkeypatch.delenv("HS_GENERATED_DIR", raising=False)
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    return work


# 1 -------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "args",
    [["traj", "list"], ["traj", "show", "abcdef123"], ["report", "training"]],
    ids=["traj-list", "traj-show", "report-training"],
)
def test_read_commands_without_a_database_say_so_and_create_nothing(empty_dir, args):
    text = _one_line_error(runner.invoke(app, args))
    assert f"no trajectory database at {empty_dir.resolve() / '.hs' / 'hs.db'}" in text
    assert "hs db upgrade" in text and "HS_DATABASE_URL" in text and "--database-url" in text
    assert _tree(empty_dir) == []


# 2 -------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "args", [["traj", "list", "--database-url"], ["db", "upgrade", "--url"]], ids=["reader", "writer"]
)
def test_sqlite_url_into_a_missing_folder_names_it_and_creates_nothing(empty_dir, args):
    text = _one_line_error(runner.invoke(app, [*args, "sqlite:///missing/dir/x.db"]))
    assert f"folder {empty_dir.resolve() / 'missing' / 'dir'} does not exist" in text
    assert _tree(empty_dir) == []


# 3 -------------------------------------------------------------------------------------------
def test_harness_check_of_a_file_that_is_not_utf8(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_bytes(b"\xff\xfe\x00bad")
    text = _one_line_error(runner.invoke(app, ["harness", "check", str(bad)]))
    assert str(bad) in text and "not UTF-8" in text and "0xff" in text


# 4 -------------------------------------------------------------------------------------------
def test_build_train_with_a_negative_n(empty_dir):
    text = _one_line_error(runner.invoke(app, ["data", "build-train", "dbbench", "--n", "-3"]))
    assert "--n -3" in text and "at least 300" in text
    assert _tree(empty_dir) == []


# 5 -------------------------------------------------------------------------------------------
# Tests run as root, and root ignores permission bits, so chmod alone proves nothing here. The
# check creates a probe file in the folder (os.open with O_CREAT), so it sees what the kernel
# says. Two ways to make the kernel say no that work as root:
#   "file":   .hs is a regular file; creating anything inside fails for root too (ENOTDIR).
#   "eacces": .hs is a real folder holding a real database, chmod 0o555, and os.open answers
#             EACCES for files created in it, as the kernel does for a non-root user. This is the
#             case the file variant cannot build: a read-only folder with a database inside.
def _deny_creating_in(folder: Path, monkeypatch) -> None:
    real_open = os.open

    def fake_open(path, flags, *args, **kwargs):
        if flags & os.O_CREAT and Path(path).parent.resolve() == folder.resolve():
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(path))
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", fake_open)


@pytest.mark.parametrize("variant", ["file", "eacces"])
def test_read_only_hs_folder(empty_dir, monkeypatch, variant):
    hs = empty_dir / ".hs"
    if variant == "file":
        hs.write_text("not a folder")
    else:
        assert runner.invoke(app, ["db", "upgrade"]).exit_code == 0
        hs.chmod(0o555)
        _deny_creating_in(hs, monkeypatch)
    before = _tree(empty_dir)
    try:
        build = _one_line_error(runner.invoke(app, ["data", "build-train", "dbbench"]))
        report = _one_line_error(runner.invoke(app, ["report", "training"]))
    finally:
        if hs.is_dir():
            hs.chmod(0o755)
    if variant == "file":
        assert f"{hs} is a file, not a folder" in build and "--out" in build and "HS_GENERATED_DIR" in build
        assert f"no trajectory database at {hs / 'hs.db'} ({hs} is a file, not a folder)" in report
    else:
        assert f"folder {hs} is not writable (Permission denied)" in build and "--out" in build
        assert f"folder {hs} is not writable (Permission denied)" in report and "hs.db-wal" in report
    assert _tree(empty_dir) == before


# 6 -------------------------------------------------------------------------------------------
def _flow_must_not_run(monkeypatch, module: str, name: str) -> None:
    def entered(*args, **kwargs):
        pytest.fail(f"the {name} flow was entered: the corrupt training split was not caught in preflight")

    monkeypatch.setitem(sys.modules, module, types.SimpleNamespace(**{name: entered}))


@pytest.mark.parametrize("line", ['{"broken', '{"description": "no type, no table"}'], ids=["json", "record"])
@pytest.mark.parametrize("command", ["train", "sft"])
def test_corrupt_training_split_line_is_caught_before_any_flow(tmp_path, train_dir, monkeypatch, command, line):
    generated = tmp_path / "generated"
    split = generated / "dbbench" / "train.jsonl"
    split.parent.mkdir(parents=True)
    lines = (train_dir / "dbbench" / "train.jsonl").read_text().splitlines(keepends=True)
    lines[6] = line + "\n"
    split.write_text("".join(lines))
    monkeypatch.setenv("HS_GENERATED_DIR", str(generated))
    monkeypatch.setenv("HS_DATABASE_URL", f"sqlite:///{tmp_path / 'hs.db'}")
    _flow_must_not_run(monkeypatch, f"flows.{command}", command)
    args = ["train", "--config", "configs/train_dbbench_smol.yaml"] if command == "train" else ["sft"]
    text = _one_line_error(runner.invoke(app, args))
    assert f"{split} line 7 " in text and "hs data build-train dbbench" in text
    assert ("not valid JSON" in text) if line.startswith('{"broken') else ("no field 'type'" in text)


# 7 -------------------------------------------------------------------------------------------
def _free_pid() -> int:
    """A pid that no process has right now (one that just exited and was reaped)."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_run_left_running_by_a_dead_process_is_marked_crashed(tmp_path):
    from db import store
    from db.engine import make_engine, session_scope
    from db.models import Run
    from flows.ownership import claim_run, owner_record

    url = f"sqlite:///{tmp_path / 'hs.db'}"
    assert runner.invoke(app, ["db", "upgrade", "--url", url]).exit_code == 0
    host = socket.gethostname()
    owners = {
        "dead": {"pid": _free_pid(), "host": host, "started": 1},
        "alive": owner_record(),
        "elsewhere": {"pid": _free_pid(), "host": host + "-elsewhere", "started": 1},
    }
    engine = make_engine(url)
    with session_scope(engine) as s:
        for name, owner in owners.items():
            store.upsert_run(
                s,
                id=f"train-{name}",
                kind="train",
                name=name,
                status="running",
                config={"mode": "grpo"},
                results={"owner": owner},
            )
        store.upsert_run(s, id="train-legacy", kind="train", name="legacy", status="running", config={})

    result = runner.invoke(app, ["traj", "list", "--database-url", url])
    assert result.exit_code == 0, result.output
    notes = [line for line in result.output.splitlines() if line.startswith("note:")]
    assert len(notes) == 1 and "run train-dead (train) was left 'running'" in notes[0]
    assert f"its process {owners['dead']['pid']} on {host} ended without finishing it" in notes[0]
    with session_scope(engine) as s:
        status = {r.id: r for r in s.query(Run).all()}
    assert status["train-dead"].status == "failed" and status["train-dead"].finished_at is not None
    assert "marked crashed" in status["train-dead"].results["crashed"]
    assert {status[f"train-{n}"].status for n in ("alive", "elsewhere", "legacy")} == {"running"}

    listing = runner.invoke(app, ["report", "training", "--database-url", url])
    assert listing.exit_code == 0 and "note:" not in listing.output  # marked once
    assert "crashed" in listing.output.split("train-dead", 1)[1].splitlines()[0]

    claim_run("train-dead", url)  # what the flow does when the same command is started again
    with session_scope(engine) as s:
        resumed = s.get(Run, "train-dead")
    assert resumed.status == "running" and resumed.finished_at is None and "crashed" not in resumed.results
    assert resumed.results["owner"]["pid"] == os.getpid()
    engine.dispose()


def _children(pid: int) -> dict[int, str]:
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[-1].split()
        if int(fields[1]) == pid:
            found[int(entry.name)] = cmdline
    return found


def _gone(pid: int) -> bool:
    try:
        return (Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()[0]) in ("Z", "X")
    except OSError:
        return True


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc (Linux)")
def test_temporary_prefect_api_dies_with_a_killed_hs(tmp_path):
    """A real `hs` starts the temporary Prefect API; kill -9 it while it waits for the API."""
    env = {k: v for k, v in os.environ.items() if k not in ("PREFECT_API_URL", "PREFECT_PROFILE")}
    env.update(PREFECT_HOME=str(tmp_path / "prefect"), PREFECT_SERVER_EPHEMERAL_ENABLED="true")
    hs = shutil.which("hs", path=str(Path(sys.executable).parent))
    proc = subprocess.Popen(
        [hs, "rerun", "00000000-0000-0000-0000-000000000000"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    server = None
    try:
        deadline = time.monotonic() + 90
        while server is None and time.monotonic() < deadline and proc.poll() is None:
            server = next((pid for pid, cmd in _children(proc.pid).items() if "uvicorn" in cmd), None)
            time.sleep(0.05)
        assert server is not None, "hs never started the temporary Prefect API"
        assert not _gone(server)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        deadline = time.monotonic() + 20
        while not _gone(server) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _gone(server), "the temporary Prefect API outlived the killed hs"
    finally:
        if proc.poll() is None:
            proc.kill()
        if server is not None and not _gone(server):
            os.kill(server, signal.SIGKILL)


def test_rerun_sees_a_flow_run_whose_owner_died_as_crashed(tmp_path):
    """Prefect still says RUNNING after kill -9; `hs rerun` asks this project's run row."""
    from db import store
    from db.engine import make_engine, session_scope
    from flows.ownership import owner_record
    from infra.rerun import owner_is_gone

    url = f"sqlite:///{tmp_path / 'hs.db'}"
    assert not owner_is_gone("f-dead", url) and not (tmp_path / "hs.db").exists()  # no database: nothing created
    assert runner.invoke(app, ["db", "upgrade", "--url", url]).exit_code == 0
    engine = make_engine(url)
    with session_scope(engine) as s:
        for flow_run, owner in (
            ("f-dead", {"pid": _free_pid(), "host": socket.gethostname(), "started": 1}),
            ("f-alive", owner_record()),
        ):
            store.upsert_run(
                s,
                id=f"eval-{flow_run}",
                kind="eval",
                name=flow_run,
                status="running",
                config={},
                results={"owner": owner},
                prefect_flow_run_id=flow_run,
            )
    engine.dispose()
    assert owner_is_gone("f-dead", url)
    assert not owner_is_gone("f-alive", url) and not owner_is_gone("f-unknown", url)


def test_resuming_training_into_a_database_without_its_updates_says_so_before_any_flow(
    tmp_path, train_dir, monkeypatch
):
    """The trainer state on disk says 2 updates are done; a new database has none of them."""
    import json

    from configs.schema import TrainConfig, load_config
    from tasks.run_identity import train_run_id
    from tasks.train_checkpoints import state_dir

    monkeypatch.setenv("HS_GENERATED_DIR", str(train_dir))
    monkeypatch.setenv("HS_DATABASE_URL", f"sqlite:///{tmp_path / 'new.db'}")
    states = tmp_path / "state"
    cfg = load_config(TrainConfig, Path("configs/train_dbbench_smol.yaml"), {}, [f"state_dir={states}"])
    folder = state_dir(cfg, train_run_id(cfg))
    folder.mkdir(parents=True)
    (folder / "progress.json").write_text(json.dumps({"updates": 2}))
    _flow_must_not_run(monkeypatch, "flows.train", "train")
    text = _one_line_error(
        runner.invoke(app, ["train", "--config", "configs/train_dbbench_smol.yaml", "--set", f"state_dir={states}"])
    )
    assert f"its trainer state in {folder} has 2 finished updates" in text
    assert "no rows for 2 of them (updates 0..1)" in text and "hs db copy --from OLD_URL" in text
