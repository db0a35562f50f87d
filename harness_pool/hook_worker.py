"""The hook worker: the only process that executes harness code hooks.

Started by harness_pool/hook_client.py as `python -I -B -m harness_pool.hook_worker MEMORY_BYTES`
inside the platform's sandbox (sandbox/jail.py: the user nobody, no network, a private PID
namespace, a file system of nothing but the read-only interpreter, its libraries and this
package, an empty environment, no file writes, no new processes, address-space and CPU limits).
The CPU limit is re-armed before each call, so one call cannot use more than its share.

Protocol: one JSON object per line on stdin, one reply per line on stdout. Plain JSON crosses
the boundary, so no object of the parent ever reaches hook code.
    {"op": "open", "episode": id, "hooks": [{"name", "source"}], "limits": {...}} -> {"ok": true}
    {"op": "call", "episode": id, "hook": name, "ctx": {...}, "nb": {...}} -> {"effects": {...}, "nb": {...}}
    {"op": "close", "episode": id} -> {"ok": true}
Every episode is a fresh compile of its hooks: nothing survives from one episode to the next but
what the parent sends back in, and the parent sends only that episode's notebook.
"""

from __future__ import annotations

import json
import math
import os
import resource
import sys

from harness_pool.sandbox import HookFailure, SandboxError, SandboxLimits, call_hook, compile_hook

MAX_REQUEST_BYTES = 4 << 20
MAX_EPISODES = 4096


def _arm_cpu_limit(seconds: int) -> None:
    """The kernel stops this process (SIGXCPU) once one call uses `seconds` more CPU seconds."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    used = math.ceil(usage.ru_utime + usage.ru_stime)
    _, hard = resource.getrlimit(resource.RLIMIT_CPU)
    soft = used + seconds
    resource.setrlimit(resource.RLIMIT_CPU, (soft if hard == resource.RLIM_INFINITY else min(soft, hard), hard))


class Worker:
    def __init__(self) -> None:
        self.episodes: dict[str, dict] = {}
        self.limits: dict[str, SandboxLimits] = {}

    def handle(self, request: dict) -> dict:
        op = request.get("op")
        episode = str(request.get("episode"))
        if op == "open":
            limits = SandboxLimits(**request.get("limits", {}))
            if len(self.episodes) >= MAX_EPISODES:
                self.episodes.pop(next(iter(self.episodes)))
            self.episodes[episode] = {h["name"]: compile_hook(h["source"], h["name"], limits) for h in request["hooks"]}
            self.limits[episode] = limits
            return {"ok": True}
        if op == "close":
            self.episodes.pop(episode, None)
            self.limits.pop(episode, None)
            return {"ok": True}
        if op == "call":
            hooks = self.episodes.get(episode)
            if hooks is None:
                return {"error": "unknown episode", "reopen": True}
            limits = self.limits[episode]
            nb = request.get("nb") or {}
            _arm_cpu_limit(limits.cpu_seconds)
            effects = call_hook(hooks[request["hook"]], request.get("ctx") or {}, nb, limits)
            try:
                size = len(json.dumps(nb))
            except (TypeError, ValueError):
                raise HookFailure(
                    "the notebook may only hold JSON values (str, number, bool, None, list, dict)"
                ) from None
            if size > limits.max_notebook_chars:
                raise HookFailure(
                    f"the notebook is {size} characters as JSON; the limit is {limits.max_notebook_chars}"
                )
            return {"effects": effects, "nb": nb}
        return {"error": f"unknown op {op!r}"}


def _reply(out, payload: dict) -> None:
    try:
        text = json.dumps(payload)
    except (TypeError, ValueError):
        text = json.dumps({"error": "the notebook may only hold JSON values (str, number, bool, None, list, dict)"})
    out.write(text + "\n")
    out.flush()


def serve() -> None:
    os.environ.clear()
    worker = Worker()
    stdin, stdout = sys.stdin.buffer, sys.stdout
    _reply(stdout, {"ready": True})
    while True:
        line = stdin.readline(MAX_REQUEST_BYTES)
        if not line:
            return
        if not line.endswith(b"\n"):  # over the limit: skip the rest of it, keep the protocol in step
            while line and not line.endswith(b"\n"):
                line = stdin.readline(MAX_REQUEST_BYTES)
            _reply(stdout, {"error": f"request over {MAX_REQUEST_BYTES} bytes"})
            continue
        try:
            payload = worker.handle(json.loads(line))
        except (HookFailure, SandboxError) as exc:
            payload = {"error": str(exc)}
        except MemoryError:
            payload = {"error": "memory limit exceeded"}
        except Exception as exc:  # noqa: BLE001 - a bad request must not end the worker
            payload = {"error": f"{type(exc).__name__}: {str(exc)[:200]}"}
        _reply(stdout, payload)


if __name__ == "__main__":
    serve()
