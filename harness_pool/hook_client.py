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
import sys
import threading
import uuid
from pathlib import Path

import harness_pool
from harness_pool.sandbox import LIMITS, HookFailure, SandboxLimits
from sandbox import JsonWorker, Layout, Limits, WorkerGone, confinement

PACKAGE_DIR = Path(harness_pool.__file__).resolve().parent
STARTUP_TIMEOUT_S = 60.0
MAX_REPLY_BYTES = 1 << 20
LIFETIME_CPU_SECONDS = 7 * 24 * 3600  # the worker re-arms a per-call CPU limit below this itself


def worker_sandbox(limits: SandboxLimits = LIMITS) -> tuple[Layout, Limits]:
    """The hook worker's file system (the interpreter and this package, read-only) and limits."""
    layout = Layout(read_only=(str(PACKAGE_DIR),), tmpfs=(), cwd="/")
    return layout, Limits(memory_bytes=limits.memory_bytes, cpu_seconds=LIFETIME_CPU_SECONDS, file_bytes=0,
                          open_files=32, processes=0)  # fmt: skip


class HookWorker:
    def __init__(self, limits: SandboxLimits = LIMITS):
        self.limits = limits
        self.confinement: dict = {}
        self.generation = 0  # bumped at every (re)start; sessions re-open their hooks when it moves
        self.restarts = 0
        self._lock = threading.Lock()
        self._worker: JsonWorker | None = None

    # -- process lifecycle --------------------------------------------------------------------
    def _alive(self) -> bool:
        return self._worker is not None and self._worker.alive()

    def _start(self) -> None:
        """Start the worker; SandboxUnavailable (not a HookFailure: the run must stop, not go on
        without its hooks) when no sandbox can be had here."""
        self._stop()
        layout, limits = worker_sandbox(self.limits)
        try:
            self._worker = JsonWorker([sys.executable, "-I", "-B", "-m", "harness_pool.hook_worker"], layout, limits,
                                      MAX_REPLY_BYTES)  # fmt: skip
            hello = self._worker.read(STARTUP_TIMEOUT_S)
        except WorkerGone as exc:
            self._worker = None
            raise HookFailure(f"the hook worker did not start: {exc}") from None
        if not hello.get("ready"):
            self._stop()
            raise HookFailure(f"the hook worker did not start: {hello.get('error', hello)}")
        self.confinement = confinement(layout, limits)
        self.generation += 1

    def _stop(self) -> None:
        worker, self._worker = self._worker, None
        if worker is not None:
            worker.stop()

    def close(self) -> None:
        with self._lock:
            self._stop()

    # -- one request, one reply ---------------------------------------------------------------
    def _exchange(self, payload: dict, timeout: float) -> dict:
        try:
            return self._worker.ask(payload, timeout)
        except WorkerGone as exc:
            self._worker = None
            self.restarts += 1
            raise HookFailure(f"{exc}; the hook worker was restarted") from None

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
            raise HookFailure(clean_text(str(reply["error"]))[:500])
        effects, notebook = reply.get("effects"), reply.get("nb")
        if not isinstance(effects, dict) or not isinstance(notebook, dict):
            raise HookFailure("the hook worker's reply has no effects and notebook")
        session.notebook = clean_json(notebook)
        return {str(k): clean_text(v) if isinstance(v, str) else v for k, v in effects.items()}

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


def clean_text(text: str) -> str:
    """The text with lone surrogates (not encodable as UTF-8) replaced."""
    return text.encode("utf-8", "replace").decode("utf-8")


def clean_json(value):
    """A JSON value (depth already checked by the worker protocol) with every string cleaned."""
    if isinstance(value, str):
        return clean_text(value)
    if isinstance(value, list):
        return [clean_json(v) for v in value]
    if isinstance(value, dict):
        return {clean_text(str(k)): clean_json(v) for k, v in value.items()}
    return value


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
