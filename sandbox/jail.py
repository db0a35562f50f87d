"""The bubblewrap command line for one untrusted process.

Inside the sandbox the process runs as uid 65534 in its own user, PID, network, IPC, UTS and
cgroup namespaces, cannot create further user namespaces, sees a file system made only of
what `Layout` names (read-only binds at their host paths, size-limited tmpfs mounts, a fresh
/proc and a minimal /dev), starts with an empty environment, and has its rlimits set by
`prlimit` just before the untrusted program is executed.

Started as root, the sandbox user must not be host root: the kernel exempts the host's root
user from RLIMIT_NPROC, and its files would be the sandbox's own. So the command has two stages:
a privileged bwrap only stages the same binds in a private mount namespace, with every
directory above them world-searchable (the Python installation may live under a 0700 home),
then `setpriv` becomes the host user nobody and the unprivileged bwrap builds the real sandbox.
Run as an ordinary user, only the second stage runs, as that user.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
import sysconfig
from dataclasses import dataclass, field
from pathlib import Path

SANDBOX_UID = 65534  # nobody, inside the sandbox; also the host user when started as root
SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
SYSTEM_FILES = ("/etc/ld.so.cache",)
PRLIMIT, SETPRIV = "/usr/bin/prlimit", "/usr/bin/setpriv"
INSTALL_HINT = "install bubblewrap (apt-get install bubblewrap), or set HS_SANDBOX=none to run it unconfined"


class SandboxUnavailable(RuntimeError):
    """No sandbox can be built here; the message says how to get one."""


@dataclass(frozen=True)
class Limits:
    memory_bytes: int = 1 << 30  # RLIMIT_AS
    cpu_seconds: int = 60  # RLIMIT_CPU, for the whole process
    file_bytes: int = 16 << 20  # RLIMIT_FSIZE: the largest file it may write
    open_files: int = 64  # RLIMIT_NOFILE
    processes: int = 0  # RLIMIT_NPROC of the sandbox user: 0 = no new process or thread


@dataclass(frozen=True)
class Layout:
    """What the sandboxed process sees; host paths keep their names inside."""

    read_only: tuple[str, ...] = ()  # host files or folders, bound read-only
    writable: tuple[str, ...] = ()  # host folders bound read-write (owned by SANDBOX_UID when root)
    tmpfs: tuple[tuple[str, int], ...] = (("/tmp", 64 << 20),)  # (path, size in bytes), private and empty
    cwd: str = "/tmp"
    python: bool = True  # bind the interpreter, its standard library and its site-packages
    env: dict = field(default_factory=dict)  # the whole environment inside


def sandbox_mode() -> str:
    """'bwrap', or 'none' when HS_SANDBOX=none asks for the unconfined fallback; raises if neither."""
    wanted = os.environ.get("HS_SANDBOX", "bwrap").strip().lower() or "bwrap"
    if wanted == "none":
        return "none"
    if wanted != "bwrap":
        raise SandboxUnavailable(f"HS_SANDBOX={wanted!r} is not a sandbox; use HS_SANDBOX=bwrap (default) or none")
    problem = _bwrap_problem()
    if problem:
        raise SandboxUnavailable(f"untrusted code needs a sandbox and {problem}: {INSTALL_HINT}")
    return "bwrap"


@functools.cache
def _bwrap_problem() -> str | None:
    if shutil.which("bwrap") is None:
        return "bwrap is not installed"
    for tool in (PRLIMIT, *([SETPRIV] if os.geteuid() == 0 else [])):
        if not os.access(tool, os.X_OK):
            return f"{tool} (util-linux) is missing"
    probe = _bwrap_command(["/usr/bin/true"], Layout(python=False, tmpfs=(), cwd="/"), Limits())
    try:
        done = subprocess.run(probe, env={}, capture_output=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"bwrap could not start ({exc})"
    if done.returncode != 0:
        return f"bwrap fails here ({done.stderr.decode(errors='replace').strip()[:200]})"
    return None


@functools.cache
def python_paths() -> tuple[str, ...]:
    """The interpreter's installation, its standard library and every site-packages folder."""
    paths = {sys.base_prefix, sys.prefix, os.path.dirname(os.path.realpath(sys.executable))}
    paths |= {p for key, p in sysconfig.get_paths().items() if key in ("stdlib", "platstdlib", "purelib", "platlib")}
    paths |= {p for p in sys.path if "site-packages" in p or "dist-packages" in p}
    return _outermost(os.path.realpath(p) for p in paths if p and os.path.exists(p))


def _outermost(paths) -> tuple[str, ...]:
    """The paths without any that another one contains."""
    kept: list[str] = []
    for p in sorted(set(paths)):
        if not any(p == k or p.startswith(k.rstrip("/") + "/") for k in kept):
            kept.append(p)
    return tuple(kept)


def command(argv: list[str], layout: Layout, limits: Limits) -> list[str]:
    """The full command line that runs `argv` confined (or, under HS_SANDBOX=none, rlimited only)."""
    if sandbox_mode() == "none":
        return [*_prlimit(limits), *argv]
    return _bwrap_command(argv, layout, limits)


def confinement(layout: Layout, limits: Limits) -> dict:
    """What a run under this layout gets, for reports and the record."""
    mode = sandbox_mode()
    base = {"sandbox": mode, "memory_bytes": limits.memory_bytes, "cpu_seconds": limits.cpu_seconds,
            "file_bytes": limits.file_bytes, "processes": limits.processes}  # fmt: skip
    if mode == "none":
        return {**base, "user": os.geteuid(), "network": "host", "pid_namespace": False}
    return {**base, "user": SANDBOX_UID if os.geteuid() == 0 else os.geteuid(), "network": "none",
            "pid_namespace": True, "writable": [*layout.writable, *(p for p, _ in layout.tmpfs)]}  # fmt: skip


def _prlimit(limits: Limits) -> list[str]:
    return [
        PRLIMIT, f"--as={limits.memory_bytes}", f"--cpu={limits.cpu_seconds}", f"--fsize={limits.file_bytes}",
        f"--nofile={limits.open_files}", f"--nproc={limits.processes}", "--core=0", "--",
    ]  # fmt: skip


def _system_binds() -> list[str]:
    args: list[str] = []
    for path in SYSTEM_DIRS:
        if os.path.islink(path):
            args += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            args += ["--ro-bind", path, path]
    for path in SYSTEM_FILES:
        args += ["--perms", "0755", "--dir", os.path.dirname(path), "--ro-bind-try", path, path]
    return args


def _binds(layout: Layout) -> tuple[list[str], list[str]]:
    read_only = list(layout.read_only) + (list(python_paths()) if layout.python else [])
    read_only = [os.path.realpath(p) for p in read_only if os.path.exists(p)]
    writable = [os.path.realpath(p) for p in layout.writable]
    return list(_outermost(read_only)), writable


def _ancestors(paths) -> list[str]:
    """Every folder above these paths, outermost first, made world-searchable inside."""
    found: set[str] = set()
    for p in paths:
        for parent in Path(p).parents:
            if str(parent) != "/" and not any(str(parent).startswith(s) for s in SYSTEM_DIRS):
                found.add(str(parent))
    args: list[str] = []
    for folder in sorted(found, key=lambda f: (f.count("/"), f)):
        args += ["--perms", "0755", "--dir", folder]
    return args


def _bind_args(read_only: list[str], writable: list[str]) -> list[str]:
    """The binds at their host paths, every folder above them created world-searchable first."""
    args = _ancestors([*read_only, *writable])
    for path in read_only:
        args += ["--ro-bind", path, path]
    for path in writable:
        args += ["--bind", path, path]
    return args


def _bwrap_command(argv: list[str], layout: Layout, limits: Limits) -> list[str]:
    read_only, writable = _binds(layout)
    inner = ["bwrap", "--unshare-all", "--unshare-user", "--disable-userns", "--die-with-parent", "--new-session",
             "--uid", str(SANDBOX_UID), "--gid", str(SANDBOX_UID), *_system_binds(),
             "--proc", "/proc", "--dev", "/dev"]  # fmt: skip
    for path, size in layout.tmpfs:
        inner += ["--size", str(size), "--tmpfs", path]
    inner += _bind_args(read_only, writable)
    inner += ["--remount-ro", "/dev", "--remount-ro", "/"]  # writable: only the sized tmpfs and the writable binds
    inner += ["--chdir", layout.cwd, "--clearenv"]
    for key, value in layout.env.items():
        inner += ["--setenv", str(key), str(value)]
    inner += ["--", *_prlimit(limits), *argv]
    if os.geteuid() != 0:
        return inner
    # Root: stage the binds as root, then become the host's nobody and build the sandbox from there.
    outer = ["bwrap", "--die-with-parent", *_system_binds(), "--bind", "/proc", "/proc", "--dev", "/dev"]
    outer += ["--size", str(1 << 20), "--tmpfs", "/tmp"]  # where the inner bwrap builds its new root
    outer += _bind_args(read_only, writable)
    outer += ["--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID", "--",
              SETPRIV, f"--reuid={SANDBOX_UID}", f"--regid={SANDBOX_UID}", "--clear-groups", "--"]  # fmt: skip
    return outer + inner


def hand_over(folder: Path) -> None:
    """Give a folder (and everything in it) to the sandbox user, so a writable bind is writable."""
    if os.geteuid() != 0:
        return
    for root, dirs, files in os.walk(folder):
        for name in [*dirs, *files]:
            os.lchown(os.path.join(root, name), SANDBOX_UID, SANDBOX_UID)
    os.lchown(folder, SANDBOX_UID, SANDBOX_UID)
