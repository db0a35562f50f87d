"""Confining a child process that runs untrusted code: a hook worker (harness_pool/hook_worker.py)
or a repair test run (envs/repair/runner.py). Linux; each step is applied where the platform
allows it, and the returned dict says which were."""

from __future__ import annotations

import ctypes
import os
import resource

PR_SET_PDEATHSIG, PR_SET_NO_NEW_PRIVS, PR_SET_DUMPABLE = 1, 38, 4
CLONE_NEWUSER, CLONE_NEWNET = 0x10000000, 0x40000000
NOBODY = 65534


def confine(rlimits: dict[str, int], chroot_to: str | None = None, drop_to_nobody: bool = True) -> dict:
    """Die with the parent; a new network namespace; chroot (when given); the user nobody (when
    started as root and drop_to_nobody); no new privileges; then the rlimits (name -> value)."""
    libc = ctypes.CDLL(None, use_errno=True)
    applied: dict = {"die_with_parent": libc.prctl(PR_SET_PDEATHSIG, 9, 0, 0, 0) == 0}
    libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
    was_root = os.geteuid() == 0
    applied["network_namespace"] = libc.unshare(CLONE_NEWNET if was_root else CLONE_NEWUSER | CLONE_NEWNET) == 0
    if chroot_to is not None:
        try:
            os.chroot(chroot_to)
            os.chdir("/")
            applied["chroot"] = True
        except OSError:
            applied["chroot"] = False
    if was_root and drop_to_nobody:
        os.setgroups([])
        os.setgid(NOBODY)
        os.setuid(NOBODY)
    applied["uid"] = os.getuid()
    applied["no_new_privs"] = libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0
    for name, value in rlimits.items():
        try:
            resource.setrlimit(getattr(resource, name), (value, value))
            applied[name] = value
        except (ValueError, OSError):
            applied[name] = None
    return applied
