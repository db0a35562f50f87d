"""Repository repair on real injected bugs (toolz, pinned sdist): the build and its splits, gold
replay, isolation of rollouts, the confined and bounded test runs, the text protocol and whole
episodes through the rollout engine."""

from __future__ import annotations

import hashlib
import random
import shutil
import time
from pathlib import Path

import pytest

from envs.base import CallAction, DataError, ToolCall
from envs.registry import behaviours
from envs.repair.data import build, load_split, split_of, task_set_dir
from envs.repair.env import RepairEnv
from envs.repair.gold import check_gold
from envs.repair.testing import Limits, run_tests
from harness_pool.spec import load_harness
from harness_pool.tool_view import parse_action
from rl.policy import Sampling
from rl.rollout import RolloutSpec, run_rollouts
from rl.sft import demo_replies
from tests.conftest import REPAIR_FILES as FILES
from tests.doubles import ReplayPolicy


@pytest.fixture(scope="module")
def generated(repair_generated):
    return repair_generated


@pytest.fixture(scope="module")
def tasks(generated):
    return load_split("train", generated_dir=generated) + load_split("dev", generated_dir=generated)


def _call(name: str, **kwargs) -> CallAction:
    return CallAction((ToolCall(name, (), kwargs),))


@pytest.mark.serial
def test_tasks_are_real_bugs_split_by_file_and_the_build_resumes(generated, tasks):
    assert {t.file for t in tasks} == set(FILES) and len(tasks) == 2
    for task in tasks:
        assert task.split == split_of(task.project, task.file)
        assert task.fail_to_pass and not set(task.fail_to_pass) & set(task.pass_to_pass)
        assert all(test in task.statement for test in task.fail_to_pass[:5])
        assert task.injection["original"] in task.diff and task.injection["replacement"] in task.diff
    index = task_set_dir(generated) / "tasks.jsonl"
    before = index.read_text()
    started = time.monotonic()
    build(generated_dir=generated, projects=("toolz",), files=FILES, max_per_file=1)  # every candidate is logged
    assert index.read_text() == before and time.monotonic() - started < 5


def test_gold_fixes_pass_and_the_untouched_bugs_do_not(tasks):
    report = check_gold(tasks=tasks)
    assert report.agreement == 1.0, report.disagreements
    assert report.control_passes == 0


def test_rollouts_never_touch_each_other_or_the_pristine_source(tasks):
    task = tasks[0]
    pristine = task.pristine / task.file
    digest = hashlib.sha256(pristine.read_bytes()).hexdigest()
    with RepairEnv(task) as first, RepairEnv(task) as second:
        first.reset(), second.reset()
        assert first.step(_call("replace", **task.gold_edit)).error is None
        assert first.repo != second.repo
        assert task.gold_edit["old"] in (second.repo / task.file).read_text()  # the other copy keeps its bug
        outside = first.step(_call("replace", path="../../outside.py", old="x", new="y"))
        assert outside.error == "call_error" and "outside the repository" in outside.observation
        assert first.verify().success and not second.verify().success
    assert hashlib.sha256(pristine.read_bytes()).hexdigest() == digest


@pytest.mark.serial
def test_a_test_run_that_loops_or_allocates_without_bound_is_stopped(tasks, tmp_path):
    task = tasks[0]
    limits = Limits(wall_seconds=5.0, cpu_seconds=2, memory_bytes=1 << 30)
    with RepairEnv(task, limits=limits) as env:
        env.reset()
        module = env.repo / task.file
        source = module.read_text()
        module.write_text("while True:\n    pass\n" + source)
        started = time.monotonic()
        observation = env.step(_call("run_tests")).observation
        assert time.monotonic() - started < 15 and "stopped" in observation or "crashed" in observation
        module.write_text("_hoard = bytearray(4 << 30)\n" + source)
        started = time.monotonic()
        run = run_tests(env.repo, list(task.test_files), limits)
        assert time.monotonic() - started < 15 and not any(o == "passed" for o in run.outcomes.values())
        assert "MemoryError" in run.output or run.error == "tests_crashed"


def test_the_tests_run_without_network_secrets_or_files_outside_the_copy(tmp_path, monkeypatch):
    monkeypatch.setenv("HS_SECRET_FOR_TEST", "x")
    repo = tmp_path / "repo"
    repo.mkdir()
    outside = tmp_path / "outside.txt"
    outside.write_text("host file")
    (repo / "test_escape.py").write_text(
        f"""import os, socket, subprocess
import pytest

def test_no_secret():
    assert "HS_SECRET_FOR_TEST" not in os.environ

@pytest.mark.parametrize("attempt", [
    lambda: socket.create_connection(("127.0.0.1", 5432), timeout=1),
    lambda: subprocess.run(["true"]),
    lambda: open({str(outside)!r}).read(),
    lambda: os.remove({str(outside)!r}),
])
def test_refused(attempt):
    with pytest.raises(OSError):
        attempt()

def test_a_write_beside_the_copy_stays_in_the_sandbox():
    try:
        open({str(tmp_path / "new.txt")!r}, "w").write("inside")
    except OSError:
        pass

def test_own_copy_is_read_only_and_tmp_is_writable():
    with pytest.raises(OSError):
        open("scratch.txt", "w")
    open("/tmp/scratch.txt", "w").write("ok")
"""
    )
    monkeypatch.chdir(tmp_path)
    run = run_tests(Path("repo"), ["test_escape.py"])  # a relative path, as under HS_GENERATED_DIR=.hs/data
    assert run.error is None and run.outcomes and set(run.outcomes.values()) == {"passed"}, run.output[-2000:]
    assert outside.read_text() == "host file" and not (tmp_path / "new.txt").exists()


@pytest.mark.parametrize(
    ("text", "kind", "error"),
    [
        ("Action: read_file toolz/itertoolz.py 10-40", "call", None),
        ("Action: search def take", "call", None),
        ("Action: replace a.py\n```old\nx = 1\n```\n```new\nx = 2\n```", "call", None),
        ("Action: replace a.py\n```\nx = 1\n```", "invalid", "bad_arguments"),
        ("Action: read_file a.py ten", "invalid", "bad_arguments"),
        ("Action: rm -rf /", "invalid", "unknown_function"),
        ("I am done.", "invalid", "no_action"),
        ('{"name": "run_tests", "arguments": {}}', "call", None),
    ],
)
def test_the_text_and_json_views(text, kind, error):
    protocol = "repair_json_v1" if text.startswith("{") else "repair_text_v1"
    parsed = parse_action(protocol, text)
    assert (parsed.kind, parsed.error) == (kind, error)


def test_demonstration_episodes_fix_the_bug_through_the_rollout_engine(tasks):
    h0 = load_harness("h0", "repair")
    replies = demo_replies(tasks[0], random.Random(0), inspect_prob=1.0)
    [result] = run_rollouts(ReplayPolicy(replies), [RolloutSpec(tasks[0], h0, 0)], RepairEnv, Sampling(), max_rounds=10)
    assert result.verdict.success and result.end_reason == "finished", result.verdict.details
    assert {"read_before_edit", "ran_tests_before_submit"} <= set(result.behaviour_tags)
    assert set(result.behaviour_tags) <= set(behaviours("repair"))


def test_a_submit_without_an_edit_fails_with_its_kind(tasks):
    [result] = run_rollouts(
        ReplayPolicy(["Action: submit"]),
        [RolloutSpec(tasks[0], load_harness("h0", "repair"), 0)],
        RepairEnv,
        Sampling(),
    )
    assert not result.verdict.success and result.failure_kind == "no_edit"


def test_a_damaged_index_is_one_clear_error(generated, tmp_path):
    copy = tmp_path / "copy"
    shutil.copytree(task_set_dir(generated), task_set_dir(copy))
    index = task_set_dir(copy) / "tasks.jsonl"
    index.write_text(index.read_text() + "{not json\n")
    with pytest.raises(DataError, match="is not JSON"):
        load_split("train", generated_dir=copy)
