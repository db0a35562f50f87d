"""What the sandbox and the forgery-proof judge add to a repair test run.

Side by side in one run, on the same tasks, interleaved: the test runner started as a plain child
process (HS_SANDBOX=none: the same runner, rlimits only, what a run cost before the sandbox), the
same run inside the bubblewrap sandbox, and the whole judgment (`RepairEnv.verify`: a fresh
pristine tree with the policy's accepted changes and sentinel tests, then a sandboxed run).

    .venv/bin/python benchmarks/repair_test_cost.py [--tasks 6] [--repeats 3] [--split dev]

Needs the repair task set (`hs data build-repair`) and bubblewrap.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from envs.repair.data import load_split  # noqa: E402
from envs.repair.env import RepairEnv  # noqa: E402
from envs.repair.testing import run_tests  # noqa: E402
from sandbox import Layout, Limits, run, sandbox_mode  # noqa: E402

EMPTY = [sys.executable, "-I", "-c", "pass"]


def timed(fn) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=6)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--split", default="dev")
    args = parser.parse_args()
    os.environ.pop("HS_SANDBOX", None)
    assert sandbox_mode() == "bwrap", "bubblewrap is needed for the sandboxed rows"
    tasks = load_split(args.split)
    tasks = [t for i, t in enumerate(tasks) if i % max(len(tasks) // args.tasks, 1) == 0][: args.tasks]
    starts: dict[str, list[float]] = {"empty Python, plain": [], "empty Python, sandboxed": []}
    for _ in range(20):
        os.environ["HS_SANDBOX"] = "none"
        starts["empty Python, plain"].append(timed(lambda: run(EMPTY, Layout(), Limits(), 30)))
        os.environ.pop("HS_SANDBOX")
        starts["empty Python, sandboxed"].append(timed(lambda: run(EMPTY, Layout(), Limits(), 30)))
    rows: dict[str, list[float]] = {"plain child process": [], "sandboxed run": [], "judgment (verify)": []}
    for task in tasks:
        with RepairEnv(task) as env:
            env.reset()
            for _ in range(args.repeats):
                os.environ["HS_SANDBOX"] = "none"
                rows["plain child process"].append(timed(lambda: run_tests(env.repo, list(task.test_files))))
                os.environ.pop("HS_SANDBOX")
                rows["sandboxed run"].append(timed(lambda: run_tests(env.repo, list(task.test_files))))
                env._verdict = None
                rows["judgment (verify)"].append(timed(env.verify))
    first = statistics.median(starts["empty Python, plain"])
    print("start and exit of `python -I -c pass`, 20 each, interleaved")
    for name, values in starts.items():
        print(
            f"  {name:<26}{statistics.median(values) * 1000:>8.1f} ms median{statistics.median(values) / first:>8.2f}x"
        )
    base = statistics.median(rows["plain child process"])
    print(f"{len(tasks)} repair tasks ({args.split}), {args.repeats} repeats each, interleaved")
    print(f"{'':<22}{'median s':>10}{'mean s':>10}{'x plain':>10}")
    for name, values in rows.items():
        median = statistics.median(values)
        print(f"{name:<22}{median:>10.3f}{statistics.mean(values):>10.3f}{median / base:>10.2f}")


if __name__ == "__main__":
    main()
