"""The process that runs one test command of a repair rollout (`python -I -B runner.py ...`).

The tests import the repository copy the policy edited, so they run agent-written code: this
process confines itself before it imports anything from that copy:
- it dies with its parent and gains no privileges;
- a new network namespace (no interface but a down loopback) when the kernel allows it;
- when started as root, the unprivileged user nobody (the parent hands it a copy nobody owns),
  if nobody can read the Python installation (a pyenv under /root cannot be);
- rlimits: address space, CPU seconds, file size, open files, no new processes, no core dumps;
- an empty environment (the parent starts it with one) and a scratch HOME/TMPDIR inside the copy;
- an audit hook, installed before the tests are imported and irremovable, that refuses opening
  any file outside the copy and the Python installation, writing outside the copy, sockets,
  new processes, signals and loading C libraries. (An audit hook stops code that uses Python's
  own APIs; it is not a boundary against a deliberate memory exploit through ctypes, which the
  user nobody, where applied, still is.)
The parent kills it on its wall-clock limit and caps what it reads of the output.

Usage: runner.py REPO LIMITS_JSON TEST_ID... ; the last line of stdout is MARKER + JSON
{"outcomes": {test id: passed|failed|error|skipped}, "messages": {test id: text}, "exit": n,
"confinement": {...}}. Test code could print a line of its own that looks like it, so a reward
from this runner is as trustworthy as the test files are: the environment restores them to the
pristine copy before it judges an episode (envs/repair/env.py).
"""

from __future__ import annotations

import json
import os
import sys

if __name__ == "__main__":  # started as a script with -I: the platform is not on sys.path
    sys.path.append(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from envs.confinement import confine  # noqa: E402

MARKER = "@@hs-repair-report@@ "
MAX_MESSAGE_CHARS = 300


def _world_readable(path: str) -> bool:
    """Every directory from / down to `path` can be entered by any user."""
    path = os.path.realpath(path)
    while True:
        if not os.stat(path).st_mode & 0o001:
            return False
        parent = os.path.dirname(path)
        if parent == path:
            return True
        path = parent


def confine_runner(limits: dict) -> dict:
    """Apply every confinement the platform allows; returns what was applied."""
    rlimits = {"RLIMIT_AS": limits["memory_bytes"], "RLIMIT_CPU": limits["cpu_seconds"],
               "RLIMIT_FSIZE": limits["file_bytes"], "RLIMIT_NOFILE": 256, "RLIMIT_NPROC": 0,
               "RLIMIT_CORE": 0}  # fmt: skip
    return confine(rlimits, drop_to_nobody=all(_world_readable(p) for p in _python_dirs()))


def _python_dirs() -> list[str]:
    import sysconfig

    paths = {sys.prefix, sys.base_prefix, sys.exec_prefix, os.path.dirname(os.path.realpath(sys.executable))}
    paths |= {p for key, p in sysconfig.get_paths().items() if key in ("stdlib", "platstdlib", "purelib", "platlib")}
    return sorted(os.path.realpath(p) for p in paths)


_REFUSED = frozenset(
    {
        "socket.__new__", "socket.connect", "socket.bind", "socket.getaddrinfo", "subprocess.Popen", "os.system",
        "os.exec", "os.posix_spawn", "os.spawn", "os.fork", "os.forkpty", "os.kill", "os.killpg", "ctypes.dlopen",
        "ctypes.dlsym", "ctypes.cdata", "sys.addaudithook",
    }
)  # fmt: skip
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
_CHANGES = frozenset({"os.remove", "os.rename", "os.rmdir", "os.mkdir", "os.chmod", "os.chown", "os.link",
                      "os.symlink", "os.truncate", "os.utime", "shutil.rmtree"})  # fmt: skip


def jail(repo: str) -> None:
    """Refuse, from now on, what the tests have no reason to do (see the module docstring)."""
    repo = os.path.realpath(repo)
    readable = tuple(p.rstrip("/") + "/" for p in [repo, *_python_dirs()]) + ("/dev/null", "/dev/urandom")

    def inside(path, roots) -> bool:
        if isinstance(path, int):
            return True  # an already open descriptor
        full = os.path.realpath(os.fsdecode(path))
        return any(full == r.rstrip("/") or full.startswith(r) for r in roots)

    def hook(event: str, args: tuple) -> None:
        if event in _REFUSED:
            raise PermissionError(f"{event} is not allowed while the tests run")
        if event == "open" and args and args[0] is not None:
            mode, flags = (args[1] if len(args) > 1 else "r") or "r", args[2] if len(args) > 2 else 0
            writes = any(c in str(mode) for c in "wax+") or (isinstance(flags, int) and flags & _WRITE_FLAGS)
            if not inside(args[0], (repo + "/", "/dev/null") if writes else readable):
                raise PermissionError(f"opening {args[0]!r} is not allowed while the tests run")
        elif event in _CHANGES and args and not inside(args[0], (repo + "/",)):
            raise PermissionError(f"{event} outside the repository is not allowed while the tests run")

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
    repo, limits, tests = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3:]
    applied = confine_runner(limits)
    os.chdir(repo)
    scratch = os.path.join(repo, ".scratch")
    os.makedirs(scratch, exist_ok=True)
    os.environ.update({"HOME": scratch, "TMPDIR": scratch, "PYTHONHASHSEED": "0"})
    sys.path.insert(0, repo)
    import pytest

    collector = Collector()
    jail(repo)
    args = ["-q", "-p", "no:cacheprovider", "--tb=short", "--color=no", "-o", "addopts=", "--rootdir", repo]
    code = pytest.main([*args, *tests], plugins=[collector])
    sys.stdout.flush()
    report = {"outcomes": collector.outcomes, "messages": collector.messages, "exit": int(code), "confinement": applied}
    sys.stdout.write("\n" + MARKER + json.dumps(report) + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
