"""The process that holds one BFCL episode's API objects (run as `python -m envs.bfcl.worker`).

The policy's calls reach only public methods of the API objects, with literal arguments, but a
method can still be asked for unbounded work (`power(base=10, exponent=10**9)`, a million digits
of precision) or change process-wide state (mpmath's precision is global). So each rollout's
objects live in their own process in the platform's sandbox (sandbox/jail.py: the user nobody,
no network, a private PID namespace, the interpreter and the envs package read-only, a small
private /tmp, no file writes, no new processes, memory and CPU limits, an empty environment);
the parent kills it when a request overruns its wall-clock limit. An audit hook, installed
before the first request, stays as defence in depth: it refuses sockets, new processes,
signals, library loading and any change to the file system (the APIs only simulate files in
memory). Requests and replies are JSON lines on stdin/stdout; the first line out is
{"ready": true}:
  {"op": "reset", "task": {...}}                          -> {"ok": true}
  {"op": "call", "calls": ["cd(folder='x')", ...]}        -> {"results": ["...", ...]}
  {"op": "end_turn", "turn": i, "truth": [...], "agent_called": bool} -> {"check": {...}}
"""

from __future__ import annotations

import json
import sys

_REFUSED_EVENTS = frozenset(
    {
        "socket.__new__",
        "socket.connect",
        "socket.bind",
        "socket.getaddrinfo",
        "socket.sendto",
        "socket.sendmsg",
        "subprocess.Popen",
        "os.system",
        "os.exec",
        "os.posix_spawn",
        "os.spawn",
        "os.fork",
        "os.forkpty",
        "os.kill",
        "os.killpg",
        "ctypes.dlopen",
        "os.remove",
        "os.rename",
        "os.rmdir",
        "os.mkdir",
        "os.chmod",
        "os.chown",
        "os.link",
        "os.symlink",
        "os.truncate",
        "os.putenv",
        "os.unsetenv",
        "os.chdir",
        "shutil.rmtree",
        "shutil.copyfile",
        "shutil.move",
        "webbrowser.open",
        "urllib.Request",
        "http.client.connect",
        "ftplib.connect",
        "smtplib.connect",
    }
)
_WRITE_FLAGS = 0o1 | 0o2 | 0o100 | 0o1000 | 0o2000  # O_WRONLY | O_RDWR | O_CREAT | O_TRUNC | O_APPEND


class Refused(PermissionError):
    """An API method tried to leave the process's in-memory world."""


def _refuse_the_outside(event: str, args: tuple) -> None:
    if event in _REFUSED_EVENTS:
        raise Refused(f"{event} is not allowed in the BFCL API process")
    if event == "open" and len(args) >= 3:
        mode, flags = args[1], args[2]
        if (isinstance(mode, str) and any(c in mode for c in "wax+")) or (
            isinstance(flags, int) and flags & _WRITE_FLAGS
        ):
            raise Refused(f"opening {args[0]!r} for writing is not allowed in the BFCL API process")


def seal() -> None:
    """Import what the episodes need, then refuse the outside world for the rest of the process."""
    import importlib

    import bfcl_eval.eval_checker.multi_turn_eval.multi_turn_checker  # noqa: F401 - imported before sealing

    import envs.bfcl.calls  # noqa: F401
    from envs.bfcl.env import _SOURCE, API_MODULES

    for module in set(API_MODULES.values()):
        importlib.import_module(f"{_SOURCE}.{module}")
    sys.dont_write_bytecode = True
    sys.addaudithook(_refuse_the_outside)


class Episode:
    def __init__(self, task: dict):
        from envs.bfcl.env import api_objects_of, public_methods

        self.task = task
        self.objects = api_objects_of(task["involved_classes"], task["initial_config"], task["long_context"])
        self.truth = api_objects_of(task["involved_classes"], task["initial_config"], task["long_context"])
        self.allowed, self.everything = public_methods(self.objects), public_methods(self.truth)
        self.all_results: list[str] = []

    def call(self, texts: list[str]) -> list[str]:
        from envs.bfcl.calls import CallError, parse_calls, run_call

        results = []
        for text in texts:
            try:
                [call] = parse_calls(text)
            except (CallError, ValueError) as exc:
                results.append(f"Error during execution: {exc}")
                continue
            results.append(run_call(self.objects, self.allowed, call))
        self.all_results += results
        return results

    def end_turn(self, turn: int, truth: list[str], agent_called: bool) -> dict:
        from bfcl_eval.eval_checker.multi_turn_eval.multi_turn_checker import response_checker, state_checker

        from envs.bfcl.calls import parse_calls, run_call

        truth_results = [
            run_call(self.truth, self.everything, c) for t in truth for c in parse_calls(t, max_chars=None)
        ]
        if not truth:
            return {"turn": turn, "checked": False, "valid": True}
        if not agent_called:
            return {"turn": turn, "checked": True, "valid": False, "error": "no call in a turn that needs one"}
        if not state_checker(self.objects, self.truth)["valid"]:
            return {"turn": turn, "checked": True, "valid": False, "error": "state differs from the ground truth"}
        response = response_checker(self.all_results, truth_results, turn)
        if not response["valid"]:
            missing = [str(m)[:200] for m in response["details"]["missing_items"]]
            return {"turn": turn, "checked": True, "valid": False, "error": "missing results", "missing": missing}
        return {"turn": turn, "checked": True, "valid": True}


def main() -> None:
    seal()
    episode = None
    sys.stdout.write(json.dumps({"ready": True}) + "\n")
    sys.stdout.flush()
    for line in sys.stdin:
        request = json.loads(line)
        if request["op"] == "reset":
            episode, reply = Episode(request["task"]), {"ok": True}
        elif request["op"] == "call":
            reply = {"results": episode.call(request["calls"])}
        else:
            reply = {"check": episode.end_turn(request["turn"], request["truth"], request["agent_called"])}
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
