"""The one sandbox for everything the policy or an editor writes that gets executed.

Every untrusted process of the platform starts here: the hook worker (harness_pool/hook_client.py),
the BFCL API worker (envs/bfcl/env.py), the repair test runner (envs/repair/testing.py) and the
TextWorld interpreter (envs/textworld/env.py). `sandbox.jail` builds the command on bubblewrap
(`bwrap`, Debian package `bubblewrap`): an unprivileged user, no network, a private PID
namespace (every descendant dies with the run), read-only binds of the interpreter and
libraries, size-limited tmpfs for what may be written, an empty environment, and rlimits set by
`prlimit` just before the untrusted program starts. `sandbox.process` runs such a command with a
wall-clock kill and capped output. docs/security.md says what each user of it binds and limits.

Where bubblewrap is missing the platform refuses to run untrusted kinds (SandboxUnavailable, one
line saying how to install it), unless HS_SANDBOX=none asks for the explicit fallback; every
user then reports `confinement = {"sandbox": "none", ...}` so the weaker run is on record.
"""

from sandbox.jail import (
    Layout,
    Limits,
    SandboxUnavailable,
    command,
    confinement,
    python_paths,
    sandbox_mode,
)
from sandbox.process import Finished, popen, run
from sandbox.worker import JsonWorker, WorkerGone

__all__ = [
    "Finished",
    "JsonWorker",
    "WorkerGone",
    "Layout",
    "Limits",
    "SandboxUnavailable",
    "command",
    "confinement",
    "popen",
    "python_paths",
    "run",
    "sandbox_mode",
]
