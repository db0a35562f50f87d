"""Starting sandboxed processes, and running one to the end with a wall clock and capped output.

`popen` is for long-lived workers that speak a line protocol (hooks, BFCL APIs, the TextWorld
interpreter); `run` is for one command (a repair test run). Both start the sandbox in a new
session, so `kill` takes the whole process group, and bubblewrap's PID namespace takes every
process the untrusted program started, detached or not.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from dataclasses import dataclass

from sandbox.jail import Layout, Limits, command, sandbox_mode

CHANNEL_FD = "{channel_fd}"  # in argv: replaced by the descriptor number of the side channel


@dataclass
class Finished:
    returncode: int | None
    output: str  # stdout + stderr: the first `head` and the last `tail` bytes, with a note of the cut
    output_bytes: int
    channel: bytes  # what the program wrote to its side channel (at most `channel_bytes`)
    channel_overflow: bool
    seconds: float
    timed_out: bool


def popen(argv: list[str], layout: Layout, limits: Limits, **kwargs) -> subprocess.Popen:
    """Start `argv` in the sandbox; kwargs go to Popen (stdin/stdout/stderr, pass_fds)."""
    kwargs.setdefault("stdin", subprocess.DEVNULL)
    # bwrap gets no environment and sets Layout.env inside; the unconfined fallback gets Layout.env itself
    env = dict(layout.env) if sandbox_mode() == "none" else {}
    cwd = layout.cwd if os.path.isdir(layout.cwd) else "/"
    return subprocess.Popen(command(argv, layout, limits), env=env, cwd=cwd, start_new_session=True, **kwargs)


def kill(proc: subprocess.Popen) -> None:
    """SIGKILL the sandbox's process group (the PID namespace goes with it) and reap it."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc.wait()


def _drain(stream, keep: dict, head_bytes: int, tail_bytes: int) -> None:
    head, tail, total = bytearray(), bytearray(), 0
    for chunk in iter(lambda: stream.read(65_536), b""):
        total += len(chunk)
        if len(head) < head_bytes:
            take = head_bytes - len(head)
            head += chunk[:take]
            chunk = chunk[take:]
        tail += chunk
        if len(tail) > tail_bytes:
            del tail[: len(tail) - tail_bytes]
    keep.update(head=bytes(head), tail=bytes(tail), total=total)


def run(
    argv: list[str],
    layout: Layout,
    limits: Limits,
    wall_seconds: float,
    head_bytes: int = 16_384,
    tail_bytes: int = 65_536,
    channel_bytes: int = 0,
) -> Finished:
    """Run `argv` confined to the end or to `wall_seconds`, whichever comes first; never raises on
    what the program does. With channel_bytes > 0 the program gets a side channel (a pipe whose
    write end replaces CHANNEL_FD in argv) that the parent reads apart from stdout."""
    started = time.monotonic()
    read_end = write_end = None
    if channel_bytes:
        read_end, write_end = os.pipe()
        argv = [a.replace(CHANNEL_FD, str(write_end)) for a in argv]
    proc = popen(argv, layout, limits, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                 pass_fds=(write_end,) if write_end is not None else ())  # fmt: skip
    keep: dict = {}
    readers = [threading.Thread(target=_drain, args=(proc.stdout, keep, head_bytes, tail_bytes), daemon=True)]
    channel: dict = {}
    if read_end is not None:
        os.close(write_end)
        stream = os.fdopen(read_end, "rb")
        readers.append(threading.Thread(target=_drain, args=(stream, channel, channel_bytes, 0), daemon=True))
    for reader in readers:
        reader.start()
    timed_out = False
    try:
        proc.wait(timeout=wall_seconds)
    except subprocess.TimeoutExpired:
        timed_out = True
    kill(proc)  # the program and anything it left behind
    for reader in readers:
        reader.join(timeout=10)
    if read_end is not None:
        stream.close()
    head, tail = keep.get("head", b""), keep.get("tail", b"")
    cut = keep.get("total", 0) - len(head) - len(tail)
    text = head.decode("utf-8", "replace") + (f"\n[... {cut} bytes of output cut ...]\n" if cut > 0 else "")
    text += tail.decode("utf-8", "replace")
    return Finished(
        returncode=proc.returncode, output=text, output_bytes=keep.get("total", 0),
        channel=channel.get("head", b""), channel_overflow=channel.get("total", 0) > channel_bytes,
        seconds=time.monotonic() - started, timed_out=timed_out,
    )  # fmt: skip
