"""The parent's side of the hook boundary: one long-lived worker process, one session per episode.

`HookWorker` owns a confined worker process (harness_pool/hook_worker.py), started on first use,
shared by every episode of the process (calls are serialised by a lock), and replaced when it
dies or overruns: a call that takes longer than `wall_seconds_per_call` is killed with the
process (SIGKILL), fails with HookFailure, and the next call starts a new worker. After a fork the
child never touches its parent's worker; it starts its own.

`HookSession` is one episode's view: its hooks are compiled fresh in the worker when the episode
opens (and again, transparently, if the worker was replaced), and its notebook travels as JSON
with every call, so one episode's state can never reach another's.
"""

from __future__ import annotations

import atexit
import json
import os
import select
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

from harness_pool.sandbox import LIMITS, HookFailure, SandboxLimits

WORKER_SCRIPT = Path(__file__).with_name("hook_worker.py")
PROJECT_ROOT = Path(__file__).resolve().parents[1]
STARTUP_TIMEOUT_S = 60.0
MAX_REPLY_BYTES = 1 << 20


class HookWorker:
    def __init__(self, limits: SandboxLimits = LIMITS):
        self.limits = limits
        self.confinement: dict = {}
        self.generation = 0  # bumped at every (re)start; sessions re-open their hooks when it moves
        self.restarts = 0
        self._lock = threading.Lock()
        self._proc: subprocess.Popen | None = None
        self._owner = os.getpid()
        self._root: str | None = None
        self._buffer = b""

    # -- process lifecycle --------------------------------------------------------------------
    def _alive(self) -> bool:
        return self._proc is not None and self._owner == os.getpid() and self._proc.poll() is None

    def _start(self) -> None:
        if self._owner != os.getpid():  # a forked child: its parent's worker and pipes are not ours
            self._proc, self._root, self._owner = None, None, os.getpid()
        self._stop()
        self._root = tempfile.mkdtemp(prefix="hs-hook-root-")
        os.chmod(self._root, 0o555)  # empty and read-only: the worker's whole file system after chroot
        command = [
            sys.executable,
            "-I",
            str(WORKER_SCRIPT),
            self._root,
            str(PROJECT_ROOT),
            str(self.limits.memory_bytes),
        ]
        self._proc = subprocess.Popen(
            command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env={},
            cwd=self._root,
            close_fds=True,
        )
        self._buffer = b""
        hello = self._read_line(STARTUP_TIMEOUT_S)
        if not hello.get("ready"):
            self._stop()
            raise HookFailure(f"the hook worker did not start: {hello.get('error', hello)}")
        self.confinement = hello["confinement"]
        self.generation += 1

    def _stop(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None and self._owner == os.getpid():
            proc.kill()
            proc.wait()
            for stream in (proc.stdin, proc.stdout):
                stream.close()
        if self._root is not None:
            shutil.rmtree(self._root, ignore_errors=True)
            self._root = None

    def close(self) -> None:
        with self._lock:
            self._stop()

    # -- one request, one reply ---------------------------------------------------------------
    def _read_line(self, timeout: float) -> dict:
        assert self._proc is not None and self._proc.stdout is not None
        fd = self._proc.stdout.fileno()
        deadline = time.monotonic() + timeout
        while b"\n" not in self._buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                self._kill(f"wall-clock limit of {timeout:g} s exceeded")
            ready, _, _ = select.select([fd], [], [], remaining)
            if not ready:
                continue
            chunk = os.read(fd, 65536)
            if not chunk:
                self._kill("the hook worker died (memory or CPU limit)")
            self._buffer += chunk
            if len(self._buffer) > MAX_REPLY_BYTES:
                self._kill(f"the hook's reply is over {MAX_REPLY_BYTES} bytes")
        line, self._buffer = self._buffer.split(b"\n", 1)
        return json.loads(line)

    def _kill(self, why: str):
        self._stop()
        self.restarts += 1
        raise HookFailure(f"{why}; the hook worker was restarted")

    def _exchange(self, payload: dict, timeout: float) -> dict:
        assert self._proc is not None and self._proc.stdin is not None
        try:
            self._proc.stdin.write((json.dumps(payload) + "\n").encode())
            self._proc.stdin.flush()
        except (BrokenPipeError, OSError):
            self._kill("the hook worker had died")
        return self._read_line(timeout)

    def call(self, session: HookSession, hook: str, ctx: dict) -> dict[str, str]:
        """One hook call for `session`: the effects, with `session.notebook` updated on success."""
        with self._lock:
            if not self._alive():
                self._start()
            for attempt in range(2):
                if session.generation != self.generation:
                    self._open(session)
                reply = self._exchange(
                    {"op": "call", "episode": session.id, "hook": hook, "ctx": ctx, "nb": session.notebook},
                    self.limits.wall_seconds_per_call,
                )
                if reply.get("reopen") and attempt == 0:  # the worker evicted this episode: compile again
                    session.generation = None
                    continue
                break
        if "error" in reply:
            raise HookFailure(reply["error"])
        session.notebook = reply["nb"]
        return reply["effects"]

    def _open(self, session: HookSession) -> None:
        limits = {
            k: getattr(self.limits, k)
            for k in (
                "seconds_per_call",
                "max_output_chars",
                "max_notebook_chars",
                "max_range",
                "max_sequence",
                "cpu_seconds",
            )
        }
        reply = self._exchange(
            {
                "op": "open",
                "episode": session.id,
                "limits": limits,
                "hooks": [{"name": n, "source": s} for n, s in session.sources],
            },
            STARTUP_TIMEOUT_S,
        )
        if "error" in reply:
            raise HookFailure(f"hook code did not compile in the worker: {reply['error']}")
        session.generation = self.generation

    def forget(self, session: HookSession) -> None:
        with self._lock:
            if self._alive() and session.generation == self.generation:
                self._exchange({"op": "close", "episode": session.id}, STARTUP_TIMEOUT_S)


class HookSession:
    """One episode's code hooks: compiled fresh in the worker, with their own JSON notebook."""

    def __init__(self, sources: list[tuple[str, str]], worker: HookWorker | None = None):
        self.sources = sources  # (name, source) pairs
        self.worker = worker or shared_worker()
        self.id = uuid.uuid4().hex
        self.notebook: dict = {}
        self.generation: int | None = None

    def call(self, hook: str, ctx: dict) -> dict[str, str]:
        return self.worker.call(self, hook, ctx)

    def close(self) -> None:
        if self.generation is not None:
            self.worker.forget(self)
            self.generation = None


_SHARED: HookWorker | None = None
_SHARED_LOCK = threading.Lock()


def shared_worker() -> HookWorker:
    """The process's worker, created on first use and stopped at exit."""
    global _SHARED
    with _SHARED_LOCK:
        if _SHARED is None:
            _SHARED = HookWorker()
            atexit.register(_SHARED.close)
        return _SHARED
