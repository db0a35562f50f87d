"""Running a repository copy's tests in the sandbox (envs/repair/runner.py inside sandbox.run).

One call is one sandbox: the copy bound read-only (nothing a test run writes survives it, so a
run cannot leave a conftest.py or a symlink behind), /tmp a private tmpfs of `tmp_bytes`, the
user nobody, no network, a private PID namespace, CPU / memory / file-size / process limits, an
empty environment, a wall-clock kill, and at most `OUTPUT_HEAD + OUTPUT_TAIL` bytes of output
kept. The outcomes come back on a side channel, never from what the tests print.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from pathlib import Path

from sandbox import Layout, confinement, run
from sandbox import Limits as SandboxLimits
from sandbox.process import CHANNEL_FD

RUNNER = Path(__file__).with_name("runner.py")
OUTPUT_HEAD, OUTPUT_TAIL = 16_384, 262_144
MAX_REPORT_BYTES = 4 << 20


@dataclass(frozen=True)
class Limits:
    wall_seconds: float = 60.0
    cpu_seconds: int = 60
    memory_bytes: int = 2 << 30
    file_bytes: int = 16 << 20
    tmp_bytes: int = 64 << 20  # everything the run may write, together


@dataclass
class TestRun:
    outcomes: dict[str, str] = field(default_factory=dict)  # test id -> passed | failed | error | skipped
    messages: dict[str, str] = field(default_factory=dict)  # test id -> first lines of its failure
    output: str = ""  # what pytest printed (capped)
    seconds: float = 0.0
    error: str | None = None  # "tests_timeout" | "tests_crashed" | "tests_tampered" | None
    confinement: dict = field(default_factory=dict)

    def passed(self, test_id: str) -> bool:
        return self.outcomes.get(test_id) == "passed"


def run_tests(repo: Path, tests: list[str], limits: Limits = Limits()) -> TestRun:
    """Run these pytest ids (files, or file::test) in the copy at `repo`; never raises on test code."""
    repo = Path(repo).resolve()
    layout = Layout(read_only=(str(repo), str(RUNNER)), tmpfs=(("/tmp", limits.tmp_bytes),), cwd=str(repo))
    box = SandboxLimits(memory_bytes=limits.memory_bytes, cpu_seconds=limits.cpu_seconds,
                        file_bytes=limits.file_bytes, open_files=256, processes=0)  # fmt: skip
    argv = [sys.executable, "-I", "-B", str(RUNNER), str(repo), CHANNEL_FD, *tests]
    done = run(argv, layout, box, limits.wall_seconds, OUTPUT_HEAD, OUTPUT_TAIL, channel_bytes=MAX_REPORT_BYTES)
    result = TestRun(output=done.output, seconds=done.seconds, confinement=confinement(layout, box))
    if done.timed_out:
        result.error = "tests_timeout"
    elif not done.channel:
        result.error = "tests_crashed"  # killed by a limit (CPU, memory) or died before reporting
    else:
        result.outcomes, result.messages, result.error = _read_report(done.channel, done.channel_overflow)
    return result


def _read_report(channel: bytes, overflow: bool) -> tuple[dict, dict, str | None]:
    """Exactly one JSON line of the runner's shape; anything else means the channel was written to
    by someone else (the tests), and the run is "tests_tampered"."""
    lines = channel.split(b"\n")
    if overflow or len(lines) != 2 or lines[1]:
        return {}, {}, "tests_tampered"
    try:
        report = json.loads(lines[0])
        outcomes, messages = report["outcomes"], report["messages"]
        if not all(isinstance(k, str) and isinstance(v, str) for d in (outcomes, messages) for k, v in d.items()):
            raise TypeError
        if set(report) != {"outcomes", "messages", "exit"}:
            raise KeyError
    except (ValueError, KeyError, TypeError, AttributeError, RecursionError):
        return {}, {}, "tests_tampered"
    return dict(outcomes), dict(messages), None
