"""BFCL multi-turn on the real tasks and API classes: splits, gold replay, isolation and bounds of
the per-rollout API process, the call parser, the tool views and whole episodes."""

from __future__ import annotations

import random
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("bfcl_eval")

from envs.base import CallAction, ReplyAction, ToolCall  # noqa: E402
from envs.bfcl import env as bfcl_env  # noqa: E402
from envs.bfcl.calls import CallError, parse_calls  # noqa: E402
from envs.bfcl.data import CATEGORIES, DATA_SHA256, data_checksums, load_split, split_of  # noqa: E402
from envs.bfcl.env import BfclEnv  # noqa: E402
from envs.bfcl.gold import check_gold  # noqa: E402
from envs.registry import behaviours  # noqa: E402
from harness_pool.spec import load_harness  # noqa: E402
from harness_pool.tool_view import parse_action  # noqa: E402
from rl.policy import Sampling  # noqa: E402
from rl.rollout import RolloutSpec, run_rollouts  # noqa: E402
from rl.sft import demo_replies  # noqa: E402
from tests.doubles import ReplayPolicy  # noqa: E402


def _base_number(task) -> int:
    return int(task.bfcl_id.rsplit("_", 1)[1])


def test_splits_never_share_a_base_task_and_the_data_is_the_pinned_data():
    assert data_checksums() == DATA_SHA256
    splits = {s: load_split(s) for s in ("train", "dev", "test")}
    assert {s: len(t) for s, t in splits.items()} == {"train": 560, "dev": 80, "test": 160}
    numbers = {s: {_base_number(t) for t in ts} for s, ts in splits.items()}
    assert not (
        numbers["train"] & numbers["dev"] or numbers["train"] & numbers["test"] or numbers["dev"] & numbers["test"]
    )
    assert all(split_of(_base_number(t)) == s for s, ts in splits.items() for t in ts)
    assert {t.category for t in splits["dev"]} == set(CATEGORIES)


def test_the_first_training_tasks_of_any_tiers_span_those_tiers():
    from collections import Counter

    first = load_split("train", limit=120, tiers=("base", "miss_param", "miss_func"))  # the warm start's tasks
    assert Counter(t.category for t in first) == {"base": 40, "miss_param": 40, "miss_func": 40}
    dev = load_split("dev")
    assert [t.category for t in dev[:20]] == ["base"] * 20  # dev and test keep BFCL's order (ids unchanged)


def _sample(split: str = "dev", per_category: int = 3):
    tasks = load_split(split)
    return [t for c in CATEGORIES for t in [x for x in tasks if x.category == c][:per_category]]


def test_gold_calls_pass_every_turn_and_replying_without_calls_does_not():
    report = check_gold("dev", tasks=_sample())
    assert report.agreement == 1.0 and report.control_passes == 0, report.format_lines()


def test_rollouts_of_one_task_do_not_share_api_state():
    task = next(t for t in load_split("dev") if t.involved_classes == ("GorillaFileSystem",))
    first, second = BfclEnv(task), BfclEnv(task)
    first.reset(), second.reset()
    first.step(CallAction((ToolCall("mkdir", (), {"dir_name": "only_in_first"}),)))
    listing = second.step(CallAction((ToolCall("ls", (), {}),))).observation
    assert "only_in_first" not in listing
    assert "only_in_first" in first.step(CallAction((ToolCall("ls", (), {}),))).observation
    first.close(), second.close()


@pytest.mark.serial
def test_a_call_that_runs_without_bound_ends_only_its_own_episode(monkeypatch):
    monkeypatch.setattr(bfcl_env, "WALL_SECONDS_PER_REQUEST", 2.0)
    task = next(t for t in load_split("dev") if "MathAPI" in t.involved_classes)
    with BfclEnv(task) as env, BfclEnv(task) as other:
        env.reset(), other.reset()
        started = time.monotonic()
        step = env.step(CallAction((ToolCall("power", (), {"base": 10, "exponent": 10**9}),)))
        assert step.error == "api_timeout" and step.done and time.monotonic() - started < 10
        assert env.verify().details["crash"] and not env.verify().success
        assert "5" in other.step(CallAction((ToolCall("add", (), {"a": 2, "b": 3}),))).observation


def test_the_api_process_sees_none_of_the_parents_environment(monkeypatch):
    monkeypatch.setenv("HS_SECRET_FOR_TEST", "x")
    worker = bfcl_env._start_worker()
    try:
        assert worker.read(60).get("ready")
        assert Path(f"/proc/{worker.proc.pid}/environ").read_bytes() == b""  # bwrap, started with none
    finally:
        worker.stop()


def test_the_sealed_api_process_refuses_network_processes_and_file_changes(tmp_path):
    probe = f"""
import os, socket, subprocess
from envs.bfcl.worker import seal
seal()
from envs.bfcl.env import api_objects_of
api_objects_of(["GorillaFileSystem", "MathAPI"], {{}}, False)  # the APIs still work once sealed
attempts = {{
    "socket": lambda: socket.socket(),
    "process": lambda: subprocess.run(["true"]),
    "write": lambda: open({str(tmp_path / "x")!r}, "w"),
    "remove": lambda: os.remove({str(tmp_path / "keep")!r}),
}}
for name, attempt in attempts.items():
    try:
        attempt()
        print(name, "allowed")
    except PermissionError:
        print(name, "refused")
print(open({str(tmp_path / "keep")!r}).read())
"""
    (tmp_path / "keep").write_text("still here")
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split("\n")[:5] == [
        "socket refused",
        "process refused",
        "write refused",
        "remove refused",
        "still here",
    ]
    assert not (tmp_path / "x").exists()


@pytest.mark.parametrize(
    "text",
    [
        "__import__('os').system('true')",  # a call of something that is not a listed name
        "ls(a=__import__('os'))",  # a non-literal argument
        "os.system('true')",  # an attribute call
        "ls(**{'a': True})",
        "x = ls()",
        "",
    ],
)
def test_the_call_parser_accepts_only_named_calls_with_literal_arguments(text):
    with pytest.raises(CallError):
        parse_calls(text)


def test_the_call_parser_reads_lists_and_positional_arguments():
    calls = parse_calls("[cd(folder='docs'), sort('a.txt'), ls(a=True)]")
    assert [c.text() for c in calls] == ["cd(folder='docs')", "sort('a.txt')", "ls(a=True)"]


def test_tool_views():
    text = "I list the files.\nAction: call\n```python\n[cd(folder='docs'), ls()]\n```"
    parsed = parse_action("bfcl_text_v1", text)
    assert parsed.kind == "call" and [c.name for c in parsed.action.calls] == ["cd", "ls"]
    assert parse_action("bfcl_text_v1", "Action: reply\nAll done.").action == ReplyAction("All done.")
    assert parse_action("bfcl_text_v1", "Action: call\n```python\nimport os\n```").error == "bad_call"
    assert parse_action("bfcl_text_v1", "Sure!").error == "no_action"
    calls = parse_action("bfcl_json_v1", '[{"name": "send", "arguments": {"to": {"name": "bo"}}}, {"name": "ls"}]')
    assert [c.name for c in calls.action.calls] == ["send", "ls"]  # the nested "name" is an argument, not a call
    assert parse_action("bfcl_json_v1", '{"name": "reply", "arguments": {"text": "ok"}}').action == ReplyAction("ok")


def test_demonstration_episodes_pass_through_the_rollout_engine():
    h0 = load_harness("h0", "bfcl")
    for task in _sample("train", per_category=1):
        replies = demo_replies(task, random.Random(0))
        [result] = run_rollouts(ReplayPolicy(replies), [RolloutSpec(task, h0, 0)], BfclEnv, Sampling(), max_rounds=30)
        assert result.verdict.success and result.end_reason == "finished", (task.bfcl_id, result.verdict.details)
        assert {t.action_kind for t in result.turns} <= {"call", "reply"}


def test_a_reply_without_calls_fails_with_its_failure_kind_and_tag():
    task = next(t for t in load_split("dev") if t.category == "base")
    [result] = run_rollouts(
        ReplayPolicy(["Action: reply\nDone."]), [RolloutSpec(task, load_harness("h0", "bfcl"), 0)], BfclEnv, Sampling()
    )
    assert not result.verdict.success and result.failure_kind == "no_call"
    assert "replied_without_call" in result.behaviour_tags
    assert set(result.behaviour_tags) <= set(behaviours("bfcl"))  # what RQ4 lists


def test_the_signature_list_says_what_the_json_documents_say_in_far_fewer_characters():
    import json

    from envs.bfcl.docs import function_list

    task = next(t for t in load_split("train") if t.involved_classes == ("GorillaFileSystem",))
    listed = function_list(task.functions)
    as_json = task.fields()["functions"]
    assert task.fields()["function_list"] == listed and len(listed) < len(as_json) / 2
    assert listed.count("This tool belongs to the Gorilla file system") == 1  # the app's paragraph once
    lines = listed.splitlines()
    for doc in task.functions:  # every function, every argument, its type and what it returns
        (line,) = [x for x in lines if x.startswith(doc["name"] + "(")]
        for name, spec in doc["parameters"]["properties"].items():
            assert f"{name}: {spec['type']}" in line and f"  {name}: " in listed
        for field in (doc.get("response") or {}).get("properties") or {}:
            assert field in line.split(" -> ", 1)[1]
    du = next(d for d in task.functions if d["name"] == "du")
    assert "human_readable: boolean = false" in listed and "human_readable" not in du["parameters"]["required"]
    assert json.loads(as_json.splitlines()[0])["name"] == task.functions[0]["name"]  # {functions} stays JSON


def test_a_withheld_function_arrives_as_its_signature():
    task = next(t for t in load_split("dev") if t.category == "miss_func")
    turn, (added, *_) = next(iter(task.withheld.items()))
    env = BfclEnv(task)
    try:
        env.reset()
        text = env._request(turn)
    finally:
        env.close()
    assert "A new function is now available:" in text and f"\n{added['name']}(" in text and '"parameters"' not in text


def test_ground_truth_with_the_longest_call_arguments_passes():
    """long_context tasks post tweets of about 4,300 characters: the bound on a reply's calls lets them through."""
    long_ones = [
        t for t in load_split("train") if t.bfcl_id in ("multi_turn_long_context_8", "multi_turn_long_context_18")
    ]
    report = check_gold("train", tasks=long_ones)
    assert len(long_ones) == 2 and report.agreement == 1.0, report.format_lines()
