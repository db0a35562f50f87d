"""The program that runs one test command of a repair rollout, inside the sandbox.

Started by envs/repair/testing.py through sandbox.run as
`python -I -B runner.py REPO CHANNEL_FD TEST_ID...`. The sandbox is the boundary (sandbox/jail.py):
the user nobody, no network, a private PID namespace, REPO bound read-only, /tmp a small
private tmpfs (HOME and TMPDIR), an empty environment and rlimits. The tests import the copy the
policy edited, so from the first import on everything in this process may be hostile.

The report is one JSON line written to CHANNEL_FD, a pipe the parent reads apart from stdout:
{"outcomes": {test id: passed|failed|error|skipped}, "messages": {test id: text}, "exit": n}.
Test code can print anything it likes on stdout and it will never be read as a report. It can
still reach the descriptor from inside this process; so the parent accepts exactly one report
line, and the judge (envs/repair/judge.py) adds sentinel tests whose outcomes it knows in
advance and must find in that report (docs/security.md, "Repository repair", says what a
determined forger inside the process could still do).

An audit hook, installed before the tests are imported, stays as defence in depth: sockets, new
processes, signals, C library loading and writes outside /tmp are refused with a clear error.
"""

from __future__ import annotations

import json
import os
import sys

SCRATCH = "/tmp"
MAX_MESSAGE_CHARS = 300
_REFUSED = frozenset(
    {
        "socket.__new__", "socket.connect", "socket.bind", "socket.getaddrinfo", "subprocess.Popen", "os.system",
        "os.exec", "os.posix_spawn", "os.spawn", "os.fork", "os.forkpty", "os.kill", "os.killpg", "ctypes.dlopen",
        "ctypes.dlsym", "sys.addaudithook",
    }
)  # fmt: skip
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND


def guard() -> None:
    """Defence in depth: refuse what the tests have no reason to do (the sandbox is the boundary)."""
    scratch = SCRATCH.rstrip("/") + "/"

    def writable(path) -> bool:
        full = os.path.realpath(os.fsdecode(path)) if not isinstance(path, int) else scratch
        return full == SCRATCH or full.startswith(scratch)

    def hook(event: str, args: tuple) -> None:
        if event in _REFUSED:
            raise PermissionError(f"{event} is not allowed while the tests run")
        if event == "open" and args and args[0] is not None:
            mode, flags = (args[1] if len(args) > 1 else "r") or "r", args[2] if len(args) > 2 else 0
            writes = any(c in str(mode) for c in "wax+") or (isinstance(flags, int) and flags & _WRITE_FLAGS)
            if writes and not writable(args[0]) and args[0] != "/dev/null":
                raise PermissionError(f"writing {args[0]!r} is not allowed while the tests run (only {SCRATCH})")

    sys.addaudithook(hook)


class Collector:
    """A pytest plugin: every test's outcome and the first lines of its failure."""

    def __init__(self) -> None:
        self.outcomes: dict[str, str] = {}
        self.messages: dict[str, str] = {}

    def pytest_runtest_logreport(self, report) -> None:
        if report.when == "call" or report.outcome != "passed":
            outcome = report.outcome if report.when == "call" else "error" if report.failed else report.outcome
            if self.outcomes.get(report.nodeid) in (None, "passed"):
                self.outcomes[report.nodeid] = outcome
            if report.failed and report.nodeid not in self.messages:
                self.messages[report.nodeid] = _message(report.longreprtext)

    def pytest_collectreport(self, report) -> None:
        if report.failed:
            self.outcomes[report.nodeid or "<collection>"] = "error"
            self.messages[report.nodeid or "<collection>"] = _message(report.longreprtext)


def _message(text: str) -> str:
    """The failure's "E ..." lines (the assertion and its values), else its last line."""
    lines = [line[1:].strip() for line in text.splitlines() if line.startswith("E ")]
    chosen = " | ".join(line for line in lines[:3] if line) or (text.strip().splitlines() or [""])[-1]
    return chosen[:MAX_MESSAGE_CHARS]


def main() -> None:
    repo, channel, tests = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
    os.set_inheritable(channel, False)
    os.chdir(repo)
    # no plugin of this interpreter's site-packages loads itself into the project's tests (anyio's
    # imports trio when it is installed, and trio's ctypes load is refused by the guard below)
    os.environ.update(
        {"HOME": SCRATCH, "TMPDIR": SCRATCH, "PYTHONHASHSEED": "0", "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    )
    sys.path.insert(0, repo)
    import pytest

    collector = Collector()
    guard()
    args = ["-q", "-p", "no:cacheprovider", "--tb=short", "--color=no", "-o", "addopts=", "--rootdir", repo]
    code = pytest.main([*args, *tests], plugins=[collector])
    sys.stdout.flush()
    report = {"outcomes": collector.outcomes, "messages": collector.messages, "exit": int(code)}
    data = (json.dumps(report) + "\n").encode()
    while data:
        data = data[os.write(channel, data) :]
    os.close(channel)
    os._exit(0)  # no atexit handler or finaliser of the tested code runs after the report


if __name__ == "__main__":
    main()
