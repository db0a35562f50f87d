"""The repair environment: one rollout, one private copy of the buggy repository.

reset() copies the project's pristine source into a fresh temporary folder and injects the
task's bug, so no rollout can see another's edits or touch the pristine source. The policy acts
through CallAction with these functions (a tool view turns its text into them):
  list_files(path=".")                 files under a folder of the copy
  read_file(path, start=1, end=None)   numbered lines (at most READ_LINES per call)
  search(text, path=".")               lines of .py files containing the text
  replace(path, old, new)              replace the one exact occurrence of `old`
  run_tests(tests=None)                the task's test files (or these test ids), confined
  submit()                             end the episode
Every observation is capped; a bad call is an error observation, never an exception, and the
environment never follows a link inside the copy. Success (envs/repair/judge.py): in a fresh
pristine tree that takes only the policy's changes to the package's own modules, with sentinel
tests added, every FAIL_TO_PASS and every PASS_TO_PASS test passes in a fresh sandbox, and the
sentinels come back as they must (else the episode is `tampered`, reward 0).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from envs.base import Action, CallAction, StepResult, ToolCall, Verdict
from envs.repair.data import RepairTask, project
from envs.repair.judge import build_tree, tampered
from envs.repair.testing import Limits, TestRun, run_tests

DEFAULT_MAX_ROUNDS = 20
READ_LINES = 120
MAX_OBSERVATION_CHARS = 6_000
MAX_LISTED = 200
MAX_MATCHES = 40
MAX_EDIT_CHARS = 20_000
TEST_LIMITS = Limits()
FUNCTIONS = ("list_files", "read_file", "search", "replace", "run_tests", "submit")


class CallRefused(ValueError):
    """A call the environment answers with an error observation."""


def cap(text: str, limit: int = MAX_OBSERVATION_CHARS) -> str:
    return text if len(text) <= limit else text[:limit] + f"\n[output cut at {limit} characters]"


class RepairEnv:
    """Environment protocol implementation for one repair task and one rollout."""

    def __init__(self, task: RepairTask, max_rounds: int = DEFAULT_MAX_ROUNDS, limits: Limits = TEST_LIMITS) -> None:
        if max_rounds < 1:
            raise ValueError(f"max_rounds must be >= 1, got {max_rounds}")
        self.task, self.max_rounds, self.limits = task, max_rounds, limits
        self.rounds_used = 0
        self.done = False
        self.home: tempfile.TemporaryDirectory | None = None
        self.repo: Path | None = None
        self.edited: list[str] = []  # paths replace() changed, in order
        self.test_runs = 0
        self._verdict: Verdict | None = None

    # -- lifecycle ---------------------------------------------------------------------------
    def reset(self) -> str:
        self.close()
        self.home = tempfile.TemporaryDirectory(prefix="hs-repair-rollout-")
        self.repo = Path(self.home.name) / "repo"
        shutil.copytree(self.task.pristine, self.repo, ignore=shutil.ignore_patterns(".complete", "__pycache__"))
        target = self.repo / self.task.file
        source = target.read_text(encoding="utf-8")
        inj = self.task.injection
        if source[inj["start"] : inj["end"]] != inj["original"]:
            raise RuntimeError(f"{self.task.id}: the pristine {self.task.file} does not match the task; rebuild")
        target.write_text(source[: inj["start"]] + inj["replacement"] + source[inj["end"] :], encoding="utf-8")
        self.rounds_used, self.done, self.edited, self.test_runs, self._verdict = 0, False, [], 0, None
        p = project(self.task.project)
        return (
            f"{self.task.statement}\n\nThe repository of {p.name} is your working directory: its source is in "
            f"{p.package}/ and its tests in {p.tests}/."
        )

    def close(self) -> None:
        if self.home is not None:
            self.home.cleanup()
            self.home, self.repo = None, None

    def __enter__(self) -> RepairEnv:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- steps -------------------------------------------------------------------------------
    def step(self, action: Action) -> StepResult:
        if self.repo is None:
            raise RuntimeError("call reset() before step()")
        if self.done:
            raise RuntimeError(f"episode of {self.task.id} is over; call verify() or reset()")
        if not isinstance(action, CallAction) or not action.calls:
            raise TypeError(f"repair takes CallAction with at least one call, got {action!r}")
        self.rounds_used += 1
        outputs, error, outcome = [], None, None
        for call in action.calls:
            try:
                text, finished = self._call(call)
            except CallRefused as exc:
                text, finished, error = f"Error: {exc}", False, "call_error"
            except TypeError as exc:  # wrong or missing arguments
                text, finished, error = f"Error: {call.name}: {exc}", False, "call_error"
            outputs.append(text)
            if finished:
                outcome = "submitted"
                break
        self.done = outcome is not None or self.rounds_used >= self.max_rounds
        return StepResult(observation=cap("\n\n".join(outputs)), done=self.done, error=error, outcome=outcome)

    def _call(self, call: ToolCall) -> tuple[str, bool]:
        if call.name not in FUNCTIONS:
            raise CallRefused(f"unknown function '{call.name}'; the functions are {', '.join(FUNCTIONS)}")
        if call.name == "submit":
            return "Submitted.", True
        return getattr(self, f"_{call.name}")(*call.args, **call.kwargs), False

    def _path(self, path, must_exist: bool = True) -> Path:
        if not isinstance(path, str) or not path.strip():
            raise CallRefused("path must be a non-empty string relative to the repository")
        asked = Path(os.path.abspath(self.repo / path.strip()))
        full = asked.resolve()
        if full != self.repo.resolve() and self.repo.resolve() not in full.parents:
            raise CallRefused(f"{path} is outside the repository")
        if full != asked:
            raise CallRefused(f"{path} goes through a link; links in the repository are not followed")
        if must_exist and not full.exists():
            raise CallRefused(f"{path} does not exist; list_files shows what does")
        return full

    def _rel(self, full: Path) -> str:
        return full.relative_to(self.repo.resolve()).as_posix()

    def _list_files(self, path: str = ".") -> str:
        folder = self._path(path)
        if not folder.is_dir():
            raise CallRefused(f"{path} is a file, not a folder")
        names = sorted(
            self._rel(f) for f in folder.rglob("*")
            if _plain_file(f) and not any(part in ("__pycache__", ".scratch") for part in f.parts)
        )  # fmt: skip
        shown = names[:MAX_LISTED]
        more = f"\n[{len(names) - MAX_LISTED} more files]" if len(names) > MAX_LISTED else ""
        return "\n".join(shown) + more if shown else "(no files)"

    def _read_file(self, path: str, start: int = 1, end: int | None = None) -> str:
        full = self._path(path)
        if not full.is_file():
            raise CallRefused(f"{path} is a folder; list_files shows its files")
        if not _plain_file(full):
            raise CallRefused(f"{path} is not a plain file of the repository")
        if not isinstance(start, int) or (end is not None and not isinstance(end, int)):
            raise CallRefused("start and end are line numbers")
        lines = full.read_text(encoding="utf-8", errors="replace").splitlines()
        start = max(start, 1)
        end = min(end if end is not None else start + READ_LINES - 1, start + READ_LINES - 1, len(lines))
        if start > len(lines):
            raise CallRefused(f"{path} has {len(lines)} lines")
        body = "\n".join(f"{n:>5} {lines[n - 1]}" for n in range(start, end + 1))
        return f"{self._rel(full)} lines {start}-{end} of {len(lines)}:\n{body}"

    def _search(self, text: str, path: str = ".") -> str:
        if not isinstance(text, str) or not text.strip():
            raise CallRefused("search needs non-empty text")
        folder = self._path(path)
        files = [folder] if folder.is_file() else sorted(folder.rglob("*.py"))
        files = [f for f in files if _plain_file(f)]
        matches = []
        for f in files:
            for n, line in enumerate(f.read_text(encoding="utf-8", errors="replace").splitlines(), start=1):
                if text in line:
                    matches.append(f"{self._rel(f)}:{n}: {line.strip()[:160]}")
        if not matches:
            return f"no line contains {text!r}"
        more = f"\n[{len(matches) - MAX_MATCHES} more matches]" if len(matches) > MAX_MATCHES else ""
        return "\n".join(matches[:MAX_MATCHES]) + more

    def _replace(self, path: str, old: str, new: str) -> str:
        full = self._path(path)
        if not full.is_file() or not _plain_file(full):
            raise CallRefused(f"{path} is not a plain file of the repository")
        if not isinstance(old, str) or not isinstance(new, str) or not old:
            raise CallRefused("replace needs the exact text to replace (old) and its replacement (new)")
        if len(new) > MAX_EDIT_CHARS:
            raise CallRefused(f"the replacement is longer than {MAX_EDIT_CHARS} characters")
        source = full.read_text(encoding="utf-8")
        count = source.count(old)
        if count != 1:
            raise CallRefused(
                f"the text to replace occurs {count} times in {path}; "
                + ("copy it exactly from read_file" if count == 0 else "include more surrounding lines")
            )
        full.write_text(source.replace(old, new, 1), encoding="utf-8")
        self.edited.append(self._rel(full))
        return f"Replaced 1 occurrence in {self._rel(full)}."

    def _run_tests(self, tests=None) -> str:
        if tests is None:
            ids = list(self.task.test_files)
        elif isinstance(tests, str):
            ids = tests.split()
        elif isinstance(tests, (list, tuple)) and all(isinstance(t, str) for t in tests):
            ids = list(tests)
        else:
            raise CallRefused("tests is a list of test ids (file or file::test), or omitted for the task's tests")
        for test in ids:
            self._path(test.split("::")[0])
        self.test_runs += 1
        return _summary(run_tests(self.repo, ids, self.limits))

    # -- judgement ---------------------------------------------------------------------------
    def verify(self) -> Verdict:
        """Judge a fresh pristine tree with the policy's accepted changes (envs/repair/judge.py)."""
        if self._verdict is not None:
            return self._verdict
        if self.repo is None:
            raise RuntimeError("no repository: call reset() first, and verify() before close()")
        with tempfile.TemporaryDirectory(prefix="hs-repair-judge-") as home:
            tree = build_tree(self.task, self.repo, Path(home))
            run = run_tests(tree.root, list(self.task.test_files), self.limits)
        forged = tampered(run.outcomes, tree.sentinels) if run.error is None else []
        error = "tests_tampered" if forged else run.error
        f2p = [t for t in self.task.fail_to_pass if run.passed(t)]
        p2p_broken = [t for t in self.task.pass_to_pass if not run.passed(t)]
        success = error is None and len(f2p) == len(self.task.fail_to_pass) and not p2p_broken
        details = {
            "fail_to_pass_passed": len(f2p), "fail_to_pass": len(self.task.fail_to_pass),
            "pass_to_pass_broken": p2p_broken[:20], "tests_error": error, "edited": list(self.edited),
            "judged": tree.accepted, "dropped": tree.dropped[:20], "sentinels_off": forged[:4],
            "test_runs": self.test_runs, "rounds_used": self.rounds_used, "test_seconds": round(run.seconds, 2),
            "confinement": run.confinement.get("sandbox"),
        }  # fmt: skip
        self._verdict = Verdict(reward=1.0 if success else 0.0, success=success, details=details)
        return self._verdict


def _plain_file(path: Path) -> bool:
    """A regular file with one link, not a link itself (what the parent reads or edits)."""
    try:
        info = path.lstat()
    except OSError:
        return False
    return path.is_file() and not path.is_symlink() and info.st_nlink == 1


def _summary(run: TestRun) -> str:
    if run.error == "tests_timeout":
        return "The test run was stopped: it passed its time limit."
    if run.error == "tests_tampered":
        return "The test run's report was tampered with; no outcome is shown."
    if run.error == "tests_crashed" and not run.outcomes:
        return cap("The test run crashed before reporting:\n" + run.output[-2_000:], 2_500)
    counts: dict[str, int] = {}
    for outcome in run.outcomes.values():
        counts[outcome] = counts.get(outcome, 0) + 1
    head = ", ".join(f"{n} {o}" for o, n in sorted(counts.items())) or "no tests ran"
    failing = [t for t, o in run.outcomes.items() if o in ("failed", "error")]
    lines = [f"Tests: {head}."]
    lines += [f"FAILED {t}\n  {run.messages.get(t, '')[:300]}" for t in failing[:10]]
    if len(failing) > 10:
        lines.append(f"[{len(failing) - 10} more failing]")
    return "\n".join(lines)
