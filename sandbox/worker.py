"""A long-lived sandboxed worker that answers one JSON line per request.

The hook worker, the BFCL API worker and the TextWorld interpreter each speak this protocol:
the parent writes one JSON object per line on the worker's stdin and reads one JSON object per
line from its stdout. The parent trusts nothing it reads: a reply that does not come within the
wall-clock limit, is over `max_reply_bytes`, is not UTF-8, is not one JSON object, or nests
deeper than `MAX_DEPTH` ends the worker (SIGKILL of its sandbox) and raises `WorkerGone`, which
callers turn into an error observation or a failed hook call.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import time

from sandbox.jail import Layout, Limits
from sandbox.process import kill, popen

MAX_DEPTH = 64


class WorkerGone(RuntimeError):
    """The worker overran a limit, died, or answered something that is not a reply."""


def depth(value, limit: int = MAX_DEPTH) -> int:
    """Nesting depth of a JSON value, without recursion; stops counting past `limit`."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, level = stack.pop()
        deepest = max(deepest, level)
        if deepest > limit:
            return deepest
        if isinstance(item, dict):
            stack.extend((v, level + 1) for v in item.values())
        elif isinstance(item, list):
            stack.extend((v, level + 1) for v in item)
    return deepest


def decode_reply(line: bytes) -> dict:
    """One reply line as a dict, or WorkerGone saying what was wrong with it."""
    try:
        text = line.decode("utf-8")
        reply = json.loads(text)
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise WorkerGone(f"the worker's reply is not one JSON line ({type(exc).__name__})") from None
    if not isinstance(reply, dict):
        raise WorkerGone("the worker's reply is not a JSON object")
    if depth(reply) > MAX_DEPTH:
        raise WorkerGone(f"the worker's reply nests deeper than {MAX_DEPTH}")
    return reply


class JsonWorker:
    """One sandboxed process, started now, asked with `ask`, ended with `stop` (or by a limit)."""

    def __init__(self, argv: list[str], layout: Layout, limits: Limits, max_reply_bytes: int = 1 << 20):
        self.max_reply_bytes = max_reply_bytes
        self.proc: subprocess.Popen | None = popen(
            argv, layout, limits, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
        )
        self.owner = os.getpid()
        self._buffer = b""

    def alive(self) -> bool:
        return self.proc is not None and self.owner == os.getpid() and self.proc.poll() is None

    def ask(self, request: dict, wall_seconds: float) -> dict:
        """Send one request and wait for its reply; WorkerGone (worker stopped) on any failure."""
        if not self.alive():
            raise WorkerGone("the worker is not running")
        try:
            self.proc.stdin.write((json.dumps(request) + "\n").encode())
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            self._fail("the worker had died")
        return self.read(wall_seconds)

    def read(self, wall_seconds: float) -> dict:
        """The next reply line (the first one, `{"ready": ...}`, too)."""
        fd = self.proc.stdout.fileno()
        deadline = time.monotonic() + wall_seconds
        while b"\n" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                self._fail(f"wall-clock limit of {wall_seconds:g} s exceeded")
            ready, _, _ = select.select([fd], [], [], left)
            if not ready:
                continue
            chunk = os.read(fd, 65_536)
            if not chunk:
                self._fail("the worker died (over its memory or CPU limit, or killed)")
            self._buffer += chunk
            if len(self._buffer) > self.max_reply_bytes:
                self._fail(f"the worker's reply is over {self.max_reply_bytes} bytes")
        line, self._buffer = self._buffer.split(b"\n", 1)
        try:
            return decode_reply(line)
        except WorkerGone as exc:
            self._fail(str(exc))

    def _fail(self, why: str):
        self.stop()
        raise WorkerGone(why)

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is None or self.owner != os.getpid():
            return
        kill(proc)
        for stream in (proc.stdin, proc.stdout):
            try:
                stream.close()
            except OSError:
                pass
