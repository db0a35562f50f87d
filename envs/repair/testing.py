"""Running a repository copy's tests in a confined child process (envs/repair/runner.py).

One call is one process: CPU, memory, file-size and process limits, an empty environment, no
network where the kernel allows a namespace, the user nobody when started as root, a wall-clock
kill of its whole process group, and at most OUTPUT_HEAD + OUTPUT_TAIL bytes of output kept.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from envs.confinement import NOBODY
from envs.repair.runner import MARKER

RUNNER = Path(__file__).with_name("runner.py")
OUTPUT_HEAD, OUTPUT_TAIL = 16_384, 262_144


@dataclass(frozen=True)
class Limits:
    wall_seconds: float = 60.0
    cpu_seconds: int = 60
    memory_bytes: int = 2 << 30
    file_bytes: int = 16 << 20


@dataclass
class TestRun:
    outcomes: dict[str, str] = field(default_factory=dict)  # test id -> passed | failed | error | skipped
    messages: dict[str, str] = field(default_factory=dict)  # test id -> first lines of its failure
    output: str = ""  # what pytest printed (capped), without the report line
    seconds: float = 0.0
    error: str | None = None  # "tests_timeout" | "tests_crashed" | None

    def passed(self, test_id: str) -> bool:
        return self.outcomes.get(test_id) == "passed"


def hand_to_runner(repo: Path) -> None:
    """Let the runner's user write the copy (it runs as nobody when we are root)."""
    if os.geteuid() != 0:
        return
    for root, dirs, files in os.walk(repo):
        for name in [*dirs, *files]:
            os.lchown(os.path.join(root, name), NOBODY, NOBODY)
    os.lchown(repo, NOBODY, NOBODY)


def _drain(stream, keep: dict) -> None:
    head, tail, total = bytearray(), bytearray(), 0
    for chunk in iter(lambda: stream.read(65_536), b""):
        total += len(chunk)
        if len(head) < OUTPUT_HEAD:
            take = OUTPUT_HEAD - len(head)
            head += chunk[:take]
            chunk = chunk[take:]
        tail += chunk
        if len(tail) > OUTPUT_TAIL:
            del tail[: len(tail) - OUTPUT_TAIL]
    keep.update(head=bytes(head), tail=bytes(tail), total=total)


def run_tests(repo: Path, tests: list[str], limits: Limits = Limits()) -> TestRun:
    """Run these pytest ids (files, or file::test) in the copy at `repo`; never raises on test code."""
    repo = Path(repo).resolve()
    limits_json = json.dumps({"cpu_seconds": limits.cpu_seconds, "memory_bytes": limits.memory_bytes,
                              "file_bytes": limits.file_bytes})  # fmt: skip
    started = time.monotonic()
    proc = subprocess.Popen(
        [sys.executable, "-I", "-B", str(RUNNER), str(repo), limits_json, *tests],
        cwd=repo, env={}, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        start_new_session=True,
    )  # fmt: skip
    keep: dict = {}
    reader = threading.Thread(target=_drain, args=(proc.stdout, keep), daemon=True)
    reader.start()
    error = None
    try:
        proc.wait(timeout=limits.wall_seconds)
    except subprocess.TimeoutExpired:
        error = "tests_timeout"
    try:
        os.killpg(proc.pid, signal.SIGKILL)  # the runner and anything it left behind
    except ProcessLookupError:
        pass
    proc.wait()
    reader.join(timeout=10)
    head, tail = keep.get("head", b""), keep.get("tail", b"")
    cut = keep.get("total", 0) - len(head) - len(tail)
    text = head.decode("utf-8", "replace") + (f"\n[... {cut} bytes of output cut ...]\n" if cut > 0 else "")
    text += tail.decode("utf-8", "replace")
    output, _, report_line = text.rpartition("\n" + MARKER)
    run = TestRun(output=output if report_line else text, seconds=time.monotonic() - started, error=error)
    if error is None and report_line:
        try:
            report = json.loads(report_line.splitlines()[0])
            run.outcomes, run.messages = dict(report["outcomes"]), dict(report["messages"])
        except (ValueError, KeyError, TypeError):
            run.error = "tests_crashed"
    elif error is None:
        run.error = "tests_crashed"  # killed by a limit (CPU, memory) or died before reporting
    return run
