"""The BFCL multi-turn environment: a fresh set of API objects per rollout, one user request per turn.

The agent calls functions (`CallAction`) as often as it likes within a turn and ends the turn by
replying to the user (`ReplyAction`); the next request then arrives as the observation (for a
miss_func task, the turn that brings the withheld function shows its signature instead). At the
end of every turn the ground truth of that turn runs on a second, private set of API objects, and
the benchmark's own checks (bfcl_eval's `state_checker` and `response_checker`) compare the two,
with the benchmark's rules: a turn whose ground truth calls something needs at least one call
from the agent, and a turn whose ground truth is empty is not checked. Success: every turn
reached and passed.

Both sets of objects live in a child process of their own (envs/bfcl/worker.py), bounded in CPU,
memory and wall-clock time per request: a call that overruns ends the episode as a failure
(error "api_timeout") and nothing else is affected.
"""

from __future__ import annotations

import copy
import importlib
import json
import select
import subprocess
import sys
import tempfile
import time

from envs.base import Action, CallAction, ReplyAction, StepResult, Verdict
from envs.bfcl.calls import clip
from envs.bfcl.data import API_MODULES, STATELESS, BfclTask
from envs.bfcl.docs import function_list

DEFAULT_MAX_ROUNDS = 30
WALL_SECONDS_PER_REQUEST = 10.0
WORKER_MEMORY_BYTES = 2 << 30
WORKER_CPU_SECONDS = 120
_SOURCE = "bfcl_eval.eval_checker.multi_turn_eval.func_source_code"


def api_objects_of(classes, initial_config: dict, long_context: bool) -> dict:
    """Fresh API objects of these classes, loaded with the task's initial state."""
    objects = {}
    for name in classes:
        obj = getattr(importlib.import_module(f"{_SOURCE}.{API_MODULES[name]}"), name)()
        if name not in STATELESS:
            obj._load_scenario(copy.deepcopy(initial_config.get(name, {})), long_context=long_context)
        objects[name] = obj
    return objects


def public_methods(objects: dict) -> set[str]:
    return {
        n for obj in objects.values() for n in dir(type(obj)) if not n.startswith("_") and callable(getattr(obj, n))
    }


class WorkerGone(RuntimeError):
    """The episode's worker overran its limits or died."""


class _Worker:
    def __init__(self) -> None:
        self.home = tempfile.TemporaryDirectory(prefix="hs-bfcl-")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "envs.bfcl.worker", str(WORKER_MEMORY_BYTES), str(WORKER_CPU_SECONDS)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            cwd=self.home.name,
            env={},  # nothing of the parent's environment (API keys, database URLs) reaches it
        )

    def ask(self, request: dict, wall_seconds: float | None = None) -> dict:
        wall_seconds = WALL_SECONDS_PER_REQUEST if wall_seconds is None else wall_seconds
        try:
            self.proc.stdin.write((json.dumps(request) + "\n").encode())
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            self.stop()
            raise WorkerGone("the API process is gone") from None
        deadline, line = time.monotonic() + wall_seconds, b""
        while not line.endswith(b"\n"):
            left = deadline - time.monotonic()
            ready, _, _ = select.select([self.proc.stdout], [], [], max(left, 0))
            if not ready:
                self.stop()
                raise WorkerGone(f"an API call ran longer than {wall_seconds:.0f} s")
            chunk = self.proc.stdout.readline()
            if not chunk:
                self.stop()
                raise WorkerGone("the API process stopped (over its memory or CPU limit)")
            line += chunk
        return json.loads(line)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        for stream in (self.proc.stdin, self.proc.stdout):
            stream.close()
        self.home.cleanup()


class BfclEnv:
    def __init__(self, task: BfclTask, max_rounds: int = DEFAULT_MAX_ROUNDS) -> None:
        if max_rounds < 1:
            raise ValueError(f"max_rounds must be >= 1, got {max_rounds}")
        self.task = task
        self.max_rounds = max_rounds
        self.rounds_used = 0
        self.done = False
        self.worker: _Worker | None = None
        self.turn_checks: list[dict] = []
        self.crash: str | None = None

    def reset(self) -> str:
        self.close()
        self.worker = _Worker()
        task = {
            "involved_classes": list(self.task.involved_classes),
            "initial_config": self.task.initial_config,
            "long_context": self.task.category == "long_context",
        }
        self.worker.ask({"op": "reset", "task": task}, wall_seconds=60.0)
        self.rounds_used, self.done, self.turn, self.crash = 0, False, 0, None
        self.turn_called = False
        self.turn_checks = []
        return self._request(0)

    def _request(self, turn: int) -> str:
        added = self.task.withheld.get(turn, [])
        parts = [self.task.turns[turn]] if self.task.turns[turn] else []
        if added:  # as signatures, as the harnesses' {function_list} shows the others
            parts.append(f"A new function is now available:\n{function_list(added)}")
        return "\n\n".join(parts)

    def step(self, action: Action) -> StepResult:
        if self.worker is None:
            raise RuntimeError("call reset() before step()")
        if self.done:
            raise RuntimeError(f"episode of {self.task.id} is over; call verify() or reset()")
        self.rounds_used += 1
        try:
            if isinstance(action, CallAction):
                result = self._call(action)
            elif isinstance(action, ReplyAction):
                result = self._end_turn()
            else:
                raise TypeError(f"BFCL takes CallAction or ReplyAction, got {action!r}")
        except WorkerGone as exc:
            self.crash, self.done = str(exc), True
            return StepResult(f"Error: {exc}; the session is over.", True, "api_timeout")
        if not self.done and self.rounds_used >= self.max_rounds:
            self.done = True
        return StepResult(result.observation, self.done, result.error, result.outcome)

    def _call(self, action: CallAction) -> StepResult:
        texts = [call.text() for call in action.calls]
        results = self.worker.ask({"op": "call", "calls": texts})["results"]
        self.turn_called = True
        failed = any(r.startswith("Error during execution") for r in results)
        lines = [f"{text} -> {clip(result)}" for text, result in zip(texts, results)]
        return StepResult("\n".join(lines), False, "call_error" if failed else None)

    def _end_turn(self) -> StepResult:
        request = {"op": "end_turn", "turn": self.turn, "truth": list(self.task.ground_truth[self.turn])}
        self.turn_checks.append(self.worker.ask({**request, "agent_called": self.turn_called})["check"])
        self.turn, self.turn_called = self.turn + 1, False
        if self.turn >= len(self.task.turns):
            self.done = True
            return StepResult("", True, outcome="finished")
        return StepResult(self._request(self.turn), False)

    def verify(self) -> Verdict:
        if self.worker is None and not self.turn_checks and self.crash is None:
            raise RuntimeError("call reset() first")
        finished = len(self.turn_checks) == len(self.task.turns)
        success = finished and all(c["valid"] for c in self.turn_checks)
        details = {
            "turns_done": len(self.turn_checks),
            "turns": len(self.task.turns),
            "checks": self.turn_checks,
            "rounds_used": self.rounds_used,
            "crash": self.crash,
        }
        return Verdict(reward=1.0 if success else 0.0, success=success, details=details)

    def close(self) -> None:
        """Stop the episode's API process; safe to call more than once."""
        if self.worker is not None:
            self.worker.stop()
            self.worker = None

    def __enter__(self) -> BfclEnv:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
