"""The BFCL multi-turn environment: a fresh set of API objects per rollout, one user request per turn.

The agent calls functions (`CallAction`) as often as it likes within a turn and ends the turn by
replying to the user (`ReplyAction`); the next request then arrives as the observation (for a
miss_func task, the turn that brings the withheld function shows its signature instead). At the
end of every turn the ground truth of that turn runs on a second, private set of API objects, and
the benchmark's own checks (bfcl_eval's `state_checker` and `response_checker`) compare the two,
with the benchmark's rules: a turn whose ground truth calls something needs at least one call
from the agent, and a turn whose ground truth is empty is not checked. Success: every turn
reached and passed.

Both sets of objects live in a sandboxed process of their own (envs/bfcl/worker.py in
sandbox/jail.py's sandbox), bounded in CPU, memory and wall-clock time per request: a call that
overruns, or a reply that is not one, ends the episode as a failure (error "api_timeout") and
nothing else is affected.
"""

from __future__ import annotations

import copy
import importlib
import sys
from pathlib import Path

import envs
import sandbox
from envs.base import Action, CallAction, ReplyAction, StepResult, Verdict
from envs.bfcl.calls import clip
from envs.bfcl.data import API_MODULES, STATELESS, BfclTask
from envs.bfcl.docs import function_list
from sandbox import JsonWorker, Layout, Limits, WorkerGone

DEFAULT_MAX_ROUNDS = 30
WALL_SECONDS_PER_REQUEST = 10.0
WORKER_MEMORY_BYTES = 2 << 30
WORKER_CPU_SECONDS = 120
STARTUP_SECONDS = 60.0
MAX_REPLY_BYTES = 4 << 20
ENVS_DIR = Path(envs.__file__).resolve().parent  # the worker imports envs.bfcl (and, through it, sandbox)
SANDBOX_DIR = Path(sandbox.__file__).resolve().parent
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


def _start_worker() -> JsonWorker:
    """The episode's API process, in the sandbox: the interpreter and this package read-only, a
    small private /tmp, no network, no new processes, memory and CPU limits."""
    layout = Layout(read_only=(str(ENVS_DIR), str(SANDBOX_DIR)), tmpfs=(("/tmp", 4 << 20),), cwd="/tmp",
                    env={"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"})  # fmt: skip
    limits = Limits(memory_bytes=WORKER_MEMORY_BYTES, cpu_seconds=WORKER_CPU_SECONDS, file_bytes=0, open_files=64)
    return JsonWorker([sys.executable, "-I", "-B", "-m", "envs.bfcl.worker"], layout, limits, MAX_REPLY_BYTES)


class BfclEnv:
    def __init__(self, task: BfclTask, max_rounds: int = DEFAULT_MAX_ROUNDS) -> None:
        if max_rounds < 1:
            raise ValueError(f"max_rounds must be >= 1, got {max_rounds}")
        self.task = task
        self.max_rounds = max_rounds
        self.rounds_used = 0
        self.done = False
        self.worker: JsonWorker | None = None
        self.turn_checks: list[dict] = []
        self.crash: str | None = None

    def reset(self) -> str:
        self.close()
        self.rounds_used, self.done, self.turn, self.crash = 0, False, 0, None
        task = {
            "involved_classes": list(self.task.involved_classes),
            "initial_config": self.task.initial_config,
            "long_context": self.task.category == "long_context",
        }
        try:
            self.worker = _start_worker()
            self.worker.read(STARTUP_SECONDS)
            self.worker.ask({"op": "reset", "task": task}, STARTUP_SECONDS)
        except WorkerGone as exc:  # the episode starts, and its first step says the APIs are gone
            self.crash = f"the API process did not start: {exc}"
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
        if self.worker is None and self.crash is None:
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
            self.close()
            return StepResult(f"Error: {exc}; the session is over.", True, "api_timeout")
        if not self.done and self.rounds_used >= self.max_rounds:
            self.done = True
        return StepResult(result.observation, self.done, result.error, result.outcome)

    def _ask(self, request: dict) -> dict:
        if self.worker is None:
            raise WorkerGone(self.crash or "the API process is gone")
        return self.worker.ask(request, WALL_SECONDS_PER_REQUEST)

    def _call(self, action: CallAction) -> StepResult:
        texts = [call.text() for call in action.calls]
        results = self._ask({"op": "call", "calls": texts}).get("results")
        if not isinstance(results, list) or len(results) != len(texts) or not all(isinstance(r, str) for r in results):
            raise WorkerGone("the API process answered something that is not a list of results")
        self.turn_called = True
        failed = any(r.startswith("Error during execution") for r in results)
        lines = [f"{text} -> {clip(result)}" for text, result in zip(texts, results)]
        return StepResult("\n".join(lines), False, "call_error" if failed else None)

    def _end_turn(self) -> StepResult:
        request = {"op": "end_turn", "turn": self.turn, "truth": list(self.task.ground_truth[self.turn])}
        check = self._ask({**request, "agent_called": self.turn_called}).get("check")
        if not isinstance(check, dict) or not isinstance(check.get("valid"), bool):
            raise WorkerGone("the API process answered something that is not a turn check")
        self.turn_checks.append(check)
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
