"""The repair judge: a reward the judged code cannot write.

The episode's copy is evidence, not the thing that is tested. The judge builds a fresh tree
from the pristine source and takes from the copy only the policy's changes to the package's own
modules (`accepted`): an existing `.py` file of the package, outside the test folder, not a
`conftest.py`, `sitecustomize.py` or `usercustomize.py`, a regular file with one link, read
without following a link. Everything else the copy differs in (tests, configuration, new
files) is dropped and listed. To every judged test file it appends two sentinel tests with
fresh random names, one that must pass and one that must fail; the run happens in a fresh
sandbox (envs/repair/testing.py) and its report comes back on a side channel. A report without
both sentinels at their known outcomes, or with a second report line, is `tampered`: reward 0.
"""

from __future__ import annotations

import os
import random
import secrets
import shutil
import stat
from dataclasses import dataclass, field
from pathlib import Path

from envs.repair.data import RepairTask, project

REFUSED_NAMES = frozenset({"conftest.py", "sitecustomize.py", "usercustomize.py", "__main__.py"})
MAX_FILE_BYTES = 4 << 20
_PAIRS = (  # a true and a false assertion about the same plain computation
    ("sorted([3, 1, 2]) == [1, 2, 3]", "sorted([3, 1, 2]) == [3, 2, 1]"),
    ("sum(range(10)) == 45", "sum(range(10)) == 46"),
    ("'abc'.upper() == 'ABC'", "'abc'.upper() == 'abc'"),
    ("len({1, 2, 2, 3}) == 3", "len({1, 2, 2, 3}) == 4"),
    ("max([4, 9, 2]) == 9", "max([4, 9, 2]) == 4"),
)


@dataclass
class JudgedTree:
    root: Path  # the tree the judge tests (repo inside a fresh temporary folder)
    accepted: list[str] = field(default_factory=list)  # package modules taken from the episode's copy
    dropped: list[str] = field(default_factory=list)  # what differed and was not taken, with why
    sentinels: dict[str, str] = field(default_factory=dict)  # test id -> the outcome it must have


def allowed(task: RepairTask, rel: str) -> bool:
    """Whether the policy's version of this pristine file may enter the judged tree."""
    p = project(task.project)
    name = rel.rsplit("/", 1)[-1]
    return (
        rel.startswith(p.package.rstrip("/") + "/")
        and rel.endswith(".py")
        and not rel.startswith(p.tests.rstrip("/") + "/")
        and name not in REFUSED_NAMES
        and not name.endswith(".pth")
    )


def read_regular(root: Path, rel: str) -> bytes | None:
    """The file's bytes when every part of root/rel is a plain folder and it is a regular file with
    one link, opened without following a link; else None."""
    folder = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        parts = rel.split("/")
        for part in parts[:-1]:
            inner = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=folder)
            os.close(folder)
            folder = inner
        fd = os.open(parts[-1], os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=folder)
    except OSError:
        return None
    finally:
        os.close(folder)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_nlink != 1 or info.st_size > MAX_FILE_BYTES:
            return None
        with os.fdopen(fd, "rb", closefd=False) as handle:
            return handle.read(MAX_FILE_BYTES + 1)
    finally:
        os.close(fd)


def build_tree(task: RepairTask, episode_repo: Path, into: Path) -> JudgedTree:
    """The pristine source plus the policy's accepted changes, with sentinel tests added, at into/repo."""
    repo = into / "repo"
    shutil.copytree(task.pristine, repo, ignore=shutil.ignore_patterns(".complete", "__pycache__"), symlinks=True)
    tree = JudgedTree(root=repo)
    for path in sorted(task.pristine.rglob("*")):
        if not path.is_file() or "__pycache__" in path.parts:
            continue
        rel = path.relative_to(task.pristine).as_posix()
        pristine = path.read_bytes()
        theirs = read_regular(episode_repo, rel)
        if rel == task.file:  # the copy started with the bug in it
            inj = task.injection
            text = pristine.decode("utf-8")
            pristine = (text[: inj["start"]] + inj["replacement"] + text[inj["end"] :]).encode("utf-8")
            (repo / rel).write_bytes(pristine)
        if theirs is None:
            if rel == task.file or allowed(task, rel):
                tree.dropped.append(f"{rel} (not a plain file any more: the buggy version is judged)")
            continue
        if theirs == pristine:
            continue
        if allowed(task, rel):
            (repo / rel).write_bytes(theirs)
            tree.accepted.append(rel)
        else:
            tree.dropped.append(f"{rel} (only the package's own modules are judged)")
    for path in _new_files(episode_repo, task.pristine):
        tree.dropped.append(f"{path} (a new file)")
    tree.sentinels = add_sentinels(repo, task.test_files)
    return tree


def _new_files(episode_repo: Path, pristine: Path, limit: int = 20) -> list[str]:
    found = []
    for root, dirs, files in os.walk(episode_repo):  # os.walk does not follow links into folders
        dirs[:] = [d for d in dirs if d not in ("__pycache__", ".scratch")]
        for name in files:
            rel = Path(root, name).relative_to(episode_repo).as_posix()
            if not (pristine / rel).is_file() and len(found) < limit:
                found.append(rel)
    return found


def add_sentinels(repo: Path, test_files: tuple[str, ...]) -> dict[str, str]:
    """Append a must-pass and a must-fail test with fresh random names to each test file."""
    rng = random.Random(secrets.randbits(64))
    expected: dict[str, str] = {}
    for test_file in test_files:
        passing, failing = rng.choice(_PAIRS)
        names = [f"test_{secrets.token_hex(4)}_{rng.choice(['case', 'check', 'value', 'basic'])}" for _ in range(2)]
        block = f"\n\ndef {names[0]}():\n    assert {passing}\n\n\ndef {names[1]}():\n    assert {failing}\n"
        with (repo / test_file).open("a", encoding="utf-8") as handle:
            handle.write(block)
        expected[f"{test_file}::{names[0]}"] = "passed"
        expected[f"{test_file}::{names[1]}"] = "failed"
    return expected


def tampered(outcomes: dict[str, str], sentinels: dict[str, str]) -> list[str]:
    """The sentinels whose reported outcome is not the one they must have. A sentinel that is
    missing because collection failed (an edit that breaks an import stops pytest before any test
    runs) is not tampering when nothing passed at all: the episode gets nothing either way."""
    collection_failed = any(o == "error" and "::" not in t for t, o in outcomes.items())
    collection_failed = collection_failed and "passed" not in outcomes.values()
    return [
        f"{t} {outcomes.get(t, 'missing')}, expected {o}"
        for t, o in sentinels.items()
        if outcomes.get(t) != o and not (collection_failed and t not in outcomes)
    ]
