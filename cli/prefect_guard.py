"""The temporary Prefect API dies with the `hs` process that started it, however that process ends.

Without ``PREFECT_API_URL``, Prefect 3 starts its API in a subprocess
(``SubprocessASGIServer._run_uvicorn_command``: ``python -m uvicorn ...
prefect.server.api.server:create_app``) and stops it from an ``atexit`` hook. A process killed
with SIGKILL (or by the OOM killer) runs no atexit hook, so the server would outlive it, holding
its port and the Prefect database. Prefect offers no hook into that ``Popen`` call, so
:func:`install` wraps the method at runtime (site-packages stay untouched): every server it
spawns gets a watchdog, this file run as a script (standard library only, ``python -I -S``, a
few MB), which polls its parent (the `hs` process) and terminates the server once the parent is
gone (SIGTERM, SIGKILL after 5 s). It exits by itself when the server stops first.

Why not ``prctl(PR_SET_PDEATHSIG)`` in a ``preexec_fn``: Prefect's ``Popen`` call takes none, and
the parent-death signal fires when the *thread* that started the child exits, not the process;
Prefect may start the server from a short-lived thread, and its server would then be killed
while `hs` still needs it. Polling ``getppid()`` sees only the death of the whole process.

:func:`install` costs nothing for commands that never start a flow: it patches the server
module when something imports it (a finder on ``sys.meta_path``), or at once if it is loaded.
"""

from __future__ import annotations

import os
import signal
import sys
import time

SERVER_MODULE = "prefect.server.api.server"
POLL_S = 0.2
GRACE_S = 5.0


def _start_time(pid: int) -> int | None:
    """Start time (clock ticks since boot) of a live process; None if gone, a zombie, or no /proc."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            fields = handle.read().rsplit(")", 1)[-1].split()
    except OSError:
        return None
    if not fields or fields[0] in ("Z", "X"):
        return None
    try:
        return int(fields[19])
    except (IndexError, ValueError):
        return None


def _alive(pid: int, started: int | None) -> bool:
    """Process ``pid`` still runs and is the one that started at ``started`` (not a recycled pid)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    if started is None or not os.path.exists("/proc/self/stat"):
        return True
    return _start_time(pid) == started


def watch(parent: int, server: int, started: int | None) -> None:
    """Until ``server`` exits: once ``parent`` is gone, terminate ``server`` (the watchdog's loop)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is for `hs`, which then stops its server itself
    while _alive(server, started):
        if os.getppid() != parent:  # reparented: `hs` has died
            for sig, wait_s in ((signal.SIGTERM, GRACE_S), (signal.SIGKILL, GRACE_S)):
                if not _alive(server, started):
                    return
                try:
                    os.kill(server, sig)
                except ProcessLookupError:
                    return
                deadline = time.monotonic() + wait_s
                while time.monotonic() < deadline and _alive(server, started):
                    time.sleep(0.05)
            return
        time.sleep(POLL_S)


def start_watchdog(server_pid: int):
    """Start the watchdog of ``server_pid`` (a child of this process); returns its Popen."""
    import subprocess

    started = _start_time(server_pid)
    return subprocess.Popen(
        [
            sys.executable,
            "-I",
            "-S",
            os.path.abspath(__file__),
            str(os.getpid()),
            str(server_pid),
            str(started if started is not None else -1),
        ],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        close_fds=True,
    )


_WATCHDOGS: list = []  # keep the Popen objects: no "still running" warning at exit


def patch_server_class(module) -> bool:
    """Wrap ``SubprocessASGIServer._run_uvicorn_command`` so each server it starts is watched."""
    cls = getattr(module, "SubprocessASGIServer", None)
    original = getattr(cls, "_run_uvicorn_command", None)
    if original is None or getattr(original, "_hs_guarded", False):
        return original is not None

    def _run_uvicorn_command(self):
        process = original(self)
        try:
            _WATCHDOGS.append(start_watchdog(process.pid))
        except OSError:  # no watchdog: the server still works, it only might outlive a killed `hs`
            pass
        return process

    _run_uvicorn_command._hs_guarded = True  # type: ignore[attr-defined]
    _run_uvicorn_command.__wrapped__ = original  # type: ignore[attr-defined]
    cls._run_uvicorn_command = _run_uvicorn_command
    return True


class _PatchOnImport:
    """A meta-path finder that patches the Prefect server module right after it is executed."""

    def find_spec(self, fullname, path, target=None):
        if fullname != SERVER_MODULE:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                break
        else:
            return None
        loader = spec.loader
        exec_module = getattr(loader, "exec_module", None)
        if exec_module is None:
            return spec

        def exec_and_patch(module):
            exec_module(module)
            patch_server_class(module)

        loader.exec_module = exec_and_patch  # this spec's own loader instance only
        return spec


def install() -> None:
    """Guard every temporary Prefect API this process starts (idempotent, cheap)."""
    module = sys.modules.get(SERVER_MODULE)
    if module is not None:
        patch_server_class(module)
    elif not any(isinstance(finder, _PatchOnImport) for finder in sys.meta_path):
        sys.meta_path.insert(0, _PatchOnImport())


if __name__ == "__main__":  # the watchdog: python -I -S prefect_guard.py PARENT_PID SERVER_PID START_TIME
    _parent, _server, _started = (int(arg) for arg in sys.argv[1:4])
    watch(_parent, _server, None if _started < 0 else _started)
