"""Repository-repair tasks: bugs injected into real Python projects, judged by their own tests.

Projects are source distributions from the package registry, pinned by version and sha256
(PROJECTS), downloaded once with `pip download --no-binary :all:` and unpacked, untouched,
into `$HS_GENERATED_DIR/repair/<TASK_SET>/src/`. A task is one candidate bug from
envs/repair/mutations.py in one non-test module, kept only when the module's own test files
(tests named test_<module>*.py) pass before it and at least one of them fails after it. Per task:
the injection (the exact span and its replacement, and the diff), the gold fix (an exact
`replace` the environment can apply), FAIL_TO_PASS (tests the bug breaks) and PASS_TO_PASS
(the module's other tests, which must keep passing), and a problem statement written from the
failing tests' names and assertion messages only, never from the diff.

Splits are by source file: a file's split is a fixed function of its name (sha256 of
"project/path" mod 10: 0-2 test, 3-4 dev, 5-9 train), so no test task shares a file with a
training task, and a partial build puts every file where the full build does. The build is
deterministic for a seed and resumable (every tried candidate is logged; a rerun skips them).
"""

from __future__ import annotations

import difflib
import hashlib
import json
import logging
import os
import random
import shutil
import subprocess
import sys
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path

from envs.base import DataError
from envs.repair.mutations import Mutation, candidates

log = logging.getLogger(__name__)

BENCHMARK = "repair"
TASK_SET = "v1"  # bump when PROJECTS, the operators, the split rule or the keep rule change
SPLITS = ("train", "dev", "test")
MAX_TASKS_PER_FILE = 14
MAX_TRIES_PER_FILE = 60
MAX_FAILING_SHOWN = 5


@dataclass(frozen=True)
class Project:
    name: str
    version: str
    sha256: str  # of the sdist
    sdist: str  # its file name
    package: str  # the source package folder, relative to the unpacked root
    tests: str  # the test folder, relative to the unpacked root
    skip: tuple[str, ...] = ()  # modules whose tests cannot run confined (sockets) or that have none useful

    @property
    def folder(self) -> str:
        return f"{self.name}-{self.version}"


PROJECTS = (
    Project("toolz", "1.2.0", "9667a038e9d6ecba37995e26cb2f59ec6420b6ad8dd9677de59db9b956b08490",
            "toolz-1.2.0.tar.gz", "toolz", "toolz/tests", skip=("toolz/_signatures.py",)),
    Project("boltons", "26.2.0", "d39cfd15c1a1c3bd4d705c82252fa9edb8e4f5e8cc039f8e39afac7b1b47e92c",
            "boltons-26.2.0.tar.gz", "boltons", "tests", skip=("boltons/socketutils.py",)),
)  # fmt: skip
TIERS = tuple(p.name for p in PROJECTS)  # a task's tier is its project


def project(name: str) -> Project:
    for p in PROJECTS:
        if p.name == name:
            return p
    raise DataError(f"unknown repair project '{name}': use one of {', '.join(TIERS)}")


@dataclass(frozen=True)
class RepairTask:
    """One injected bug: the benchmark task the environment resets from."""

    id: str  # repair/<split>/<index:04d>
    split: str
    index: int
    project: str
    file: str  # the buggy module, relative to the project root
    operator: str
    line: int
    injection: dict  # {"start", "end", "original", "replacement"}: character span of the file
    diff: str  # the injection as a unified diff (the gold fix is its reverse)
    gold_edit: dict  # {"path", "old", "new"}: an exact replacement that undoes the bug
    test_files: tuple[str, ...]
    fail_to_pass: tuple[str, ...]
    pass_to_pass: tuple[str, ...]
    statement: str
    root: str  # the task set's folder (pristine sources under src/)

    benchmark = BENCHMARK

    @property
    def tier(self) -> str:
        return self.project

    @property
    def task_type(self) -> str:
        return self.operator

    @property
    def instruction(self) -> str:
        return self.statement

    @property
    def description(self) -> str:
        return self.statement

    @property
    def pristine(self) -> Path:
        return Path(self.root) / "src" / project(self.project).folder

    @property
    def record(self) -> dict:
        """What the database keeps of the task (bench_tasks.record)."""
        return {"project": self.project, "file": self.file, "operator": self.operator, "line": self.line,
                "diff": self.diff, "fail_to_pass": list(self.fail_to_pass)}  # fmt: skip

    def fields(self) -> dict[str, str]:
        """Template placeholders a harness may use."""
        return {"instruction": self.statement, "project": self.project, "failing_tests": "\n".join(self.fail_to_pass)}


def task_set_dir(generated_dir: Path | str | None = None) -> Path:
    root = Path(generated_dir or os.environ.get("HS_GENERATED_DIR") or ".hs/data")
    return root / BENCHMARK / TASK_SET


def split_of(project_name: str, path: str) -> str:
    bucket = int(hashlib.sha256(f"{project_name}/{path}".encode()).hexdigest(), 16) % 10
    return "test" if bucket < 3 else "dev" if bucket < 5 else "train"


# -- sources ---------------------------------------------------------------------------------
def fetch(p: Project, root: Path) -> Path:
    """The project's pristine source folder, downloaded and checked on first use."""
    target = root / "src" / p.folder
    if (target / ".complete").is_file():
        return target
    sdists = root / "sdists"
    sdists.mkdir(parents=True, exist_ok=True)
    archive = sdists / p.sdist
    if not archive.is_file():
        result = subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:", "--quiet",
             "-d", str(sdists), f"{p.name}=={p.version}"],
            capture_output=True, text=True, timeout=600,
        )  # fmt: skip
        if result.returncode != 0 or not archive.is_file():
            tail = (result.stderr or result.stdout).strip().splitlines()[-1:] or ["no output"]
            raise DataError(f"could not download {p.name}=={p.version} from the package index ({tail[0]})")
    digest = hashlib.sha256(archive.read_bytes()).hexdigest()
    if digest != p.sha256:
        archive.unlink()
        raise DataError(f"{archive.name} has sha256 {digest}, expected {p.sha256}: deleted; run the build again")
    staging = Path(tempfile.mkdtemp(prefix="hs-repair-", dir=root))
    with tarfile.open(archive) as tar:
        tar.extractall(staging, filter="data")
    shutil.rmtree(target, ignore_errors=True)
    target.parent.mkdir(parents=True, exist_ok=True)
    (staging / p.folder).rename(target)
    shutil.rmtree(staging, ignore_errors=True)
    (target / ".complete").write_text(p.sha256)
    return target


def modules_with_tests(p: Project, source: Path) -> list[tuple[str, tuple[str, ...]]]:
    """(module path, its test files) for every non-test module that has test_<stem>*.py files."""
    tests_dir = source / p.tests
    out = []
    for module in sorted((source / p.package).rglob("*.py")):
        rel = module.relative_to(source).as_posix()
        if rel.startswith(p.tests + "/") or rel in p.skip or module.name.startswith("_"):
            continue
        tests = tuple(sorted(t.relative_to(source).as_posix() for t in tests_dir.glob(f"test_{module.stem}*.py")))
        if tests:
            out.append((rel, tests))
    return out


# -- the build ---------------------------------------------------------------------------------
def _working_copy(source: Path, root: Path) -> Path:
    work = Path(tempfile.mkdtemp(prefix="hs-repair-work-", dir=root))
    shutil.copytree(source, work / "repo")
    return work / "repo"


def _statement(p: Project, failing: list[str], messages: dict[str, str]) -> str:
    lines = [
        f"Some tests of {p.name} {p.version} fail. Find the bug in the project's source code (the tests are "
        "correct) and fix it, so that these tests pass and every other test still passes.",
        "",
        "Failing tests:",
    ]
    for test in failing[:MAX_FAILING_SHOWN]:
        message = messages.get(test, "").strip()
        lines.append(f"- {test}" + (f"\n  {message[:200]}" if message else ""))
    if len(failing) > MAX_FAILING_SHOWN:
        lines.append(f"- and {len(failing) - MAX_FAILING_SHOWN} more")
    return "\n".join(lines)


def _gold_edit(path: str, mutated: str, original: str, mutation: Mutation) -> dict:
    """The smallest run of whole lines around the bug that is unique in the buggy file."""
    first = mutated.count("\n", 0, mutation.start)
    last = first + mutation.replacement.count("\n")
    lines, fixed = mutated.splitlines(keepends=True), original.splitlines(keepends=True)
    delta = len(fixed) - len(lines)
    for context in range(0, 6):
        lo, hi = max(first - context, 0), last + 1
        old = "".join(lines[lo:hi])
        if mutated.count(old) == 1:
            return {"path": path, "old": old, "new": "".join(fixed[lo : hi + delta])}
    old = "".join(lines[max(first - 6, 0) : last + 1])
    return {"path": path, "old": old, "new": "".join(fixed[max(first - 6, 0) : last + 1 + delta])}


def _log_path(root: Path) -> Path:
    return root / "tried.jsonl"


def _read_log(root: Path) -> dict[tuple, dict]:
    path = _log_path(root)
    if not path.is_file():
        return {}
    out = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            r = json.loads(line)
            out[(r["project"], r["file"], r["start"], r["end"], r["replacement"])] = r
    return out


def build(
    generated_dir: Path | str | None = None,
    projects: tuple[str, ...] | None = None,
    files: tuple[str, ...] | None = None,
    max_per_file: int = MAX_TASKS_PER_FILE,
    seed: int = 0,
) -> Path:
    """Generate (or continue generating) the task set; returns the index path (tasks.jsonl)."""
    from envs.repair.testing import run_tests

    root = task_set_dir(generated_dir)
    root.mkdir(parents=True, exist_ok=True)
    tried = _read_log(root)
    with _log_path(root).open("a", encoding="utf-8") as journal:
        for p in PROJECTS:
            if projects and p.name not in projects:
                continue
            source = fetch(p, root)
            repo = _working_copy(source, root)
            try:
                for path, tests in modules_with_tests(p, source):
                    if files and path not in files:
                        continue
                    _build_module(p, path, tests, source, repo, tried, journal, max_per_file, seed, run_tests)
            finally:
                shutil.rmtree(repo.parent, ignore_errors=True)
    return write_index(root)


def _build_module(p, path, tests, source, repo, tried, journal, max_per_file, seed, run_tests) -> None:
    original = (source / path).read_text(encoding="utf-8")
    baseline_key = (p.name, path, -1, -1, "")
    if baseline_key not in tried:
        run = run_tests(repo, list(tests))
        if run.error or not run.outcomes:  # not logged: the next build tries again
            tail = run.output.strip().splitlines()[-3:]
            raise DataError(f"the tests of {p.name} ({', '.join(tests)}) did not run here ({run.error}): {tail}")
        passing = sorted(t for t, o in run.outcomes.items() if o == "passed")
        record = {"project": p.name, "file": path, "start": -1, "end": -1, "replacement": "", "passing": passing}
        journal.write(json.dumps(record) + "\n")
        journal.flush()
        tried[baseline_key] = record
    passing = set(tried[baseline_key]["passing"])
    if not passing:
        log.info("repair %s: %s has no passing tests here; skipped", p.name, path)
        return
    pool = candidates(original)
    random.Random(f"{seed}:{p.name}:{path}").shuffle(pool)
    kept = sum(1 for k, r in tried.items() if k[:2] == (p.name, path) and r.get("kept"))
    attempts = sum(1 for k in tried if k[:2] == (p.name, path) and k[2] >= 0)
    for mutation in pool:
        if kept >= max_per_file or attempts >= MAX_TRIES_PER_FILE:
            break
        key = (p.name, path, mutation.start, mutation.end, mutation.replacement)
        if key in tried:
            continue
        attempts += 1
        mutated = mutation.apply(original)
        (repo / path).write_text(mutated, encoding="utf-8")
        try:
            run = run_tests(repo, list(tests))
        finally:
            (repo / path).write_text(original, encoding="utf-8")
        broken = sorted(t for t in passing if not run.passed(t))
        clean = run.error is None and not any(o == "error" for o in run.outcomes.values())
        record = {"project": p.name, "file": path, "start": mutation.start, "end": mutation.end,
                  "replacement": mutation.replacement, "operator": mutation.operator, "line": mutation.line,
                  "kept": bool(broken) and clean}  # fmt: skip
        if record["kept"]:
            kept += 1
            record.update(
                fail_to_pass=broken,
                pass_to_pass=sorted(passing - set(broken)),
                test_files=list(tests),
                statement=_statement(p, broken, run.messages),
                original=original[mutation.start : mutation.end],
                diff="".join(
                    difflib.unified_diff(original.splitlines(True), mutated.splitlines(True), f"a/{path}", f"b/{path}")
                ),  # fmt: skip
                gold_edit=_gold_edit(path, mutated, original, mutation),
            )
        journal.write(json.dumps(record) + "\n")
        journal.flush()
        tried[key] = record
        log.info("repair %s: %s line %d %s: %s", p.name, path, mutation.line, mutation.operator,
                 f"kept ({len(broken)} failing)" if record["kept"] else "not kept")  # fmt: skip


def write_index(root: Path) -> Path:
    """tasks.jsonl from the log of tried candidates: kept ones, split by file, numbered per split."""
    kept = [r for r in _read_log(root).values() if r.get("kept")]
    kept.sort(key=lambda r: (r["project"], r["file"], r["start"], r["end"], r["replacement"]))
    counters = {s: 0 for s in SPLITS}
    lines = []
    for r in kept:
        split = split_of(r["project"], r["file"])
        record = {"id": f"{BENCHMARK}/{split}/{counters[split]:04d}", "split": split, "index": counters[split],
                  **{k: r[k] for k in ("project", "file", "operator", "line", "diff", "gold_edit", "test_files",
                                       "fail_to_pass", "pass_to_pass", "statement")},
                  "injection": {k: r[k] for k in ("start", "end", "original", "replacement")}}  # fmt: skip
        counters[split] += 1
        lines.append(json.dumps(record))
    index = root / "tasks.jsonl"
    index.write_text("\n".join(lines) + ("\n" if lines else ""), encoding="utf-8")
    return index


def load_split(
    split: str, generated_dir: Path | str | None = None, limit: int | None = None, tiers: tuple[str, ...] | None = None
) -> list[RepairTask]:
    if split not in SPLITS:
        raise DataError(f"Unknown repair split '{split}': use one of {', '.join(SPLITS)}")
    root = task_set_dir(generated_dir)
    index = root / "tasks.jsonl"
    if not index.is_file():
        raise DataError(f"no repair tasks at {root}: run `hs data build-repair` (or set HS_GENERATED_DIR)")
    tasks = []
    for n, line in enumerate(index.read_text(encoding="utf-8").splitlines()):
        if not line.strip():
            continue
        try:
            r = json.loads(line)
        except json.JSONDecodeError as exc:
            raise DataError(f"{index} line {n + 1} is not JSON ({exc}): run `hs data build-repair` again") from exc
        if r["split"] != split or (tiers and r["project"] not in tiers):
            continue
        tasks.append(
            RepairTask(
                id=r["id"],
                split=split,
                index=r["index"],
                project=r["project"],
                file=r["file"],
                operator=r["operator"],
                line=r["line"],
                injection=r["injection"],
                diff=r["diff"],
                gold_edit=r["gold_edit"],
                test_files=tuple(r["test_files"]),
                fail_to_pass=tuple(r["fail_to_pass"]),
                pass_to_pass=tuple(r["pass_to_pass"]),
                statement=r["statement"],
                root=str(root),
            )  # fmt: skip
        )
    return tasks[:limit] if limit else tasks
