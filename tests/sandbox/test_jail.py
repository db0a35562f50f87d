"""The sandbox itself (sandbox/): raw Python inside it reaches no file, network, process, secret or
memory beyond what its Layout and Limits give, every descendant dies with it, and without
bubblewrap the platform refuses with one line unless HS_SANDBOX=none asks for the fallback."""

from __future__ import annotations

import json
import os
import sys
import time

import pytest

from sandbox import Layout, Limits, SandboxUnavailable, confinement, jail, run, sandbox_mode

SECRET = "hs-sandbox-secret-5d1"

PROBE = r"""
import json, os, socket, sys
out = {"uid": os.getuid(), "environ": dict(os.environ), "pid": os.getpid()}
def attempt(name, fn):
    try:
        out[name] = ["ran", repr(fn())[:100]]
    except BaseException as exc:
        out[name] = ["refused", type(exc).__name__]
host = sys.argv[1]
attempt("read_host_file", lambda: open(host + "/secret.txt").read())
attempt("write_host", lambda: open(host + "/escaped", "w").write("x"))
attempt("write_root", lambda: open("/escaped", "w").write("x"))
attempt("write_dev_shm", lambda: open("/dev/shm/escaped", "w").write("x"))
attempt("read_shadow", lambda: open("/etc/shadow").read())
attempt("network", lambda: socket.create_connection(("127.0.0.1", 5432), timeout=1))
attempt("fork", os.fork)
attempt("memory", lambda: len(bytearray(1 << 30)))
attempt("fill_tmp", lambda: open("/tmp/fill", "wb").write(b"x" * (8 << 20)))
attempt("write_tmp", lambda: open("/tmp/small", "w").write("ok"))
import ctypes
attempt("new_user_namespace", lambda: ctypes.CDLL(None).unshare(0x10000000) == 0 or 1 / 0)
def join_then_connect():
    for pid in [p for p in os.listdir("/proc") if p.isdigit()]:  # every namespace it can see: its own
        fd = os.open(f"/proc/{pid}/ns/net", os.O_RDONLY)
        ctypes.CDLL(None).setns(fd, 0)
    socket.create_connection(("127.0.0.1", 5432), timeout=1)
attempt("join_a_network_namespace", join_then_connect)
print(json.dumps(out))
"""


@pytest.fixture
def host(tmp_path, monkeypatch):
    folder = tmp_path / "host"
    folder.mkdir()
    (folder / "secret.txt").write_text(SECRET)
    monkeypatch.setenv("HS_SANDBOX_TEST_SECRET", SECRET)
    monkeypatch.delenv("HS_SANDBOX", raising=False)
    return folder


def test_raw_python_inside_reaches_nothing_outside_its_layout(host):
    layout = Layout(tmpfs=(("/tmp", 4 << 20),), env={"ONLY": "this"})
    limits = Limits(memory_bytes=512 << 20, cpu_seconds=10)
    done = run([sys.executable, "-I", "-c", PROBE, str(host)], layout, limits, wall_seconds=60)
    assert done.returncode == 0, done.output[-2000:]
    out = json.loads(done.output)
    for name in ("read_host_file", "write_host", "write_root", "write_dev_shm", "read_shadow", "network", "fork",
                 "memory", "fill_tmp", "new_user_namespace", "join_a_network_namespace"):  # fmt: skip
        assert out[name][0] == "refused", (name, out[name])
    assert out["write_tmp"][0] == "ran" and out["environ"]["ONLY"] == "this"
    assert set(out["environ"]) <= {"ONLY", "PWD", "LC_CTYPE"}  # PWD from bwrap, LC_CTYPE from Python itself
    assert "HS_SANDBOX_TEST_SECRET" not in out["environ"] and SECRET not in done.output
    assert out["uid"] == jail.SANDBOX_UID and out["pid"] < 10  # its own PID namespace
    assert sorted(p.name for p in host.iterdir()) == ["secret.txt"]


def test_a_writable_bind_is_written_as_the_unprivileged_user(tmp_path, monkeypatch):
    monkeypatch.delenv("HS_SANDBOX", raising=False)
    folder = tmp_path / "out"
    folder.mkdir()
    jail.hand_over(folder)
    code = f"open({str(folder / 'made')!r}, 'w').write('x')"
    done = run([sys.executable, "-I", "-c", code], Layout(writable=(str(folder),)), Limits(), wall_seconds=60)
    assert done.returncode == 0, done.output
    owner = (folder / "made").stat().st_uid
    assert owner != 0 and (os.geteuid() != 0 or owner == jail.SANDBOX_UID)


def test_every_descendant_dies_with_the_run(tmp_path, monkeypatch):
    """A child that leaves its session and sleeps does not outlive the sandbox."""
    monkeypatch.delenv("HS_SANDBOX", raising=False)
    folder = tmp_path / "beat"
    folder.mkdir()
    jail.hand_over(folder)
    code = (
        "import os, time\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        "    while True:\n"
        f"        open({str(folder / 'heartbeat')!r}, 'w').write(str(time.time()))\n"
        "        time.sleep(0.1)\n"
        "time.sleep(0.5)\n"
    )
    limits = Limits(processes=64)  # forks allowed here, to show the PID namespace ends them
    done = run([sys.executable, "-I", "-c", code], Layout(writable=(str(folder),)), limits, wall_seconds=30)
    assert done.returncode == 0, done.output
    beat = folder / "heartbeat"
    assert beat.exists()
    last = beat.read_text()
    time.sleep(0.6)
    assert beat.read_text() == last


@pytest.mark.serial
def test_the_wall_clock_kills_a_run_and_its_output_is_capped(monkeypatch):
    monkeypatch.delenv("HS_SANDBOX", raising=False)
    code = "import sys\nsys.stdout.write('y' * 5_000_000)\nsys.stdout.flush()\nwhile True:\n    pass"
    started = time.monotonic()
    done = run([sys.executable, "-I", "-c", code], Layout(), Limits(), wall_seconds=2, head_bytes=100, tail_bytes=100)
    assert done.timed_out and time.monotonic() - started < 10
    assert done.output_bytes >= 5_000_000 and len(done.output) < 400 and "bytes of output cut" in done.output


def test_without_bubblewrap_untrusted_kinds_refuse_with_one_line(monkeypatch):
    monkeypatch.delenv("HS_SANDBOX", raising=False)
    monkeypatch.setattr(jail.shutil, "which", lambda name: None)
    jail._bwrap_problem.cache_clear()
    try:
        with pytest.raises(SandboxUnavailable, match="apt-get install bubblewrap.*HS_SANDBOX=none") as caught:
            sandbox_mode()
        assert "\n" not in str(caught.value)
        monkeypatch.setenv("HS_SANDBOX", "none")
        assert sandbox_mode() == "none" and confinement(Layout(), Limits())["sandbox"] == "none"
        monkeypatch.setenv("HS_SANDBOX", "docker")
        with pytest.raises(SandboxUnavailable, match="HS_SANDBOX=bwrap"):
            sandbox_mode()
    finally:
        jail._bwrap_problem.cache_clear()


def test_the_explicit_fallback_still_limits_and_reports_itself(monkeypatch):
    monkeypatch.setenv("HS_SANDBOX", "none")
    done = run([sys.executable, "-I", "-c", "bytearray(1 << 30)"], Layout(), Limits(memory_bytes=256 << 20), 30)
    assert done.returncode != 0 and "MemoryError" in done.output
