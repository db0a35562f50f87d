"""Hostile policy replies and failing environments: one bad episode never loses another.

Each hostile reply runs through `run_rollouts` in one batch with a normal episode of a real task
and harness (DBBench, BFCL; repair's environment is covered by tests/envs/test_repair_hostile.py):
the hostile episode ends with no reward and its failure kind, the normal one is judged normally,
nothing raises, and every episode ends within seconds. An environment that raises (reset, step,
verify; any exception type) ends only its own episode, as `env_error`.
"""

from __future__ import annotations

import json
import random
import time

import pytest

from envs.base import ENV_ERROR, AnswerAction, CallAction, ToolCall
from envs.dbbench.data import load_split
from envs.dbbench.env import DbBenchEnv
from envs.literals import MAX_DEPTH, MAX_INT_DIGITS
from harness_pool.spec import load_harness
from harness_pool.tool_view import parse_action
from rl.policy import Sampling
from rl.rollout import RolloutSpec, _as_dict, run_rollouts
from tests.doubles import ScriptedPolicy

HEX = "0x" + "f" * 5_000  # 6,021 decimal digits: str() of it raises ValueError (Python's 4,300-digit limit)
DEEP = "[" * 700 + "1" + "]" * 700  # deeper than the recursion limit of asdict (about 330 levels)
MEGABYTE = "a" * 1_000_000
SECONDS = 5.0  # "within a few seconds", per episode
pytestmark = pytest.mark.serial  # asserts wall-clock bounds: `make test` runs it alone, after the parallel pass


def _counting(data_dir):
    return next(t for t in load_split("dev", data_dir=data_dir) if t.task_type == "counting")


def _answer(task) -> str:
    return f"Action: Answer\nFinal Answer: {list(task.label)!r}"


def _pair(policy_scripts, specs, make_env, max_rounds=4, **kwargs):
    """Run the batch; every episode ends in time and nothing raises."""
    started = time.monotonic()
    policy = ScriptedPolicy(policy_scripts, **kwargs)
    results = run_rollouts(policy, specs, make_env, Sampling(), max_rounds=max_rounds)
    assert time.monotonic() - started < SECONDS * len(specs)
    assert all(r.seconds_total < SECONDS for r in results), [r.seconds_total for r in results]
    return results


# -- DBBench ---------------------------------------------------------------------------------------
DBBENCH_TEXT = {
    "hex_literal": (f"Action: Answer\nFinal Answer: [{HEX}]", "bad_literal", "1,000 digits"),
    "decimal_literal": ("Action: Answer\nFinal Answer: [" + "9" * 5_000 + "]", "bad_literal", "1,000 digits"),
    "nested_700": ("Action: Answer\nFinal Answer: " + DEEP, "bad_literal", "nested more than 20"),
    "lone_surrogate": ("Action: Answer\nFinal Answer: ['\ud800']", "bad_text", "lone surrogate"),
    "escaped_surrogate": ('Action: Answer\nFinal Answer: ["\\ud800"]', "bad_literal", "lone surrogate"),
    "megabyte_reply": (f"Action: Operation\n```sql\nSELECT '{MEGABYTE}'\n```", "reply_too_long", "200,000"),
}


@pytest.mark.parametrize("case", sorted(DBBENCH_TEXT))
def test_a_hostile_dbbench_reply_ends_only_its_own_episode(data_dir, case):
    reply, error, detail = DBBENCH_TEXT[case]
    task, h0 = _counting(data_dir), load_harness("h0")
    specs = [RolloutSpec(task, h0, 0), RolloutSpec(task, h0, 1)]
    hostile, normal = _pair([[reply], [_answer(task)]], specs, DbBenchEnv)
    assert normal.verdict.success and normal.end_reason == "answered" and normal.failure_kind is None
    assert hostile.verdict.reward == 0 and not hostile.verdict.success
    assert hostile.end_reason == hostile.failure_kind == "format_error"
    [turn] = hostile.turns
    assert turn.action_kind == "invalid" and turn.parse_error == error and detail in turn.action["detail"]
    json.dumps(turn.action)  # what the database stores


def test_the_policy_sees_why_a_bounded_literal_was_refused(data_dir):
    """With on_invalid: warn the one-line reason follows the harness's invalid message."""
    task, harness = _counting(data_dir), load_harness("format_reminder")
    specs = [RolloutSpec(task, harness, 0), RolloutSpec(task, harness, 1)]
    hostile, normal = _pair([[DBBENCH_TEXT["hex_literal"][0]], [_answer(task)]], specs, DbBenchEnv)
    assert normal.verdict.success
    assert hostile.failure_kind == "round_limit" and hostile.verdict.reward == 0
    message = hostile.turns[0].observation
    assert message.startswith(harness.tool_view.invalid_message) and "more than 1,000 digits" in message
    assert len(message.splitlines()) == len(harness.tool_view.invalid_message.splitlines()) + 1


@pytest.mark.parametrize(
    "answer",
    ["[" + "9" * 5_000 + "]", DEEP, '["\\ud800"]', json.dumps(["x" * 150_000])],
    ids=["decimal_literal", "nested_700", "escaped_surrogate", "150k_string"],
)
def test_a_hostile_json_answer_ends_only_its_own_episode(data_dir, answer):
    task, harness = _counting(data_dir), load_harness("fc_tools")
    hostile_reply = '{"name": "submit_answer", "arguments": {"answer": ' + answer + "}}"
    normal_reply = json.dumps({"name": "submit_answer", "arguments": {"answer": list(task.label)}})
    specs = [RolloutSpec(task, harness, 0), RolloutSpec(task, harness, 1)]
    hostile, normal = _pair([[hostile_reply], [normal_reply]], specs, DbBenchEnv)
    assert normal.verdict.success
    assert hostile.failure_kind == "format_error" and hostile.verdict.reward == 0
    assert hostile.turns[0].parse_error == "bad_literal"


def test_the_dbbench_verifier_judges_a_5000_digit_answer_without_raising(data_dir):
    """Not only through the rollout: the environment and its verifier take the literal directly."""
    import ast

    task = _counting(data_dir)
    huge = ast.literal_eval(HEX)
    with DbBenchEnv(task) as env:
        env.reset()
        env.step(AnswerAction([huge, [[[[huge]]]]]))
        verdict = env.verify()
    assert verdict.reward == 0 and not verdict.success


# -- environments that raise ----------------------------------------------------------------------
RAISED = {
    "ValueError": ValueError("Exceeds the limit (4300 digits) for integer string conversion\nsecond line"),
    "RecursionError": RecursionError("maximum recursion depth exceeded"),
    "UnicodeError": UnicodeEncodeError("utf-8", "\ud800", 0, 1, "surrogates not allowed"),
    "MemoryError": MemoryError(),
    "worker_crash": RuntimeError("the API process stopped (over its memory or CPU limit)"),
}


@pytest.mark.parametrize("where", ["reset", "step", "verify"])
@pytest.mark.parametrize("name", sorted(RAISED))
@pytest.mark.parametrize("continuous", [False, True], ids=["turn_by_turn", "continuous"])
def test_an_environment_that_raises_loses_only_its_own_episode(data_dir, monkeypatch, where, name, continuous):
    task, h0 = _counting(data_dir), load_harness("h0")
    exc = RAISED[name]
    original = getattr(DbBenchEnv, where)
    hostile_envs = []

    def maybe_raise(self, *args):
        if self in hostile_envs:
            raise exc
        return original(self, *args)

    monkeypatch.setattr(DbBenchEnv, where, maybe_raise)

    def make_env(t):
        env = DbBenchEnv(t)
        if not hostile_envs:  # the first episode's environment raises
            hostile_envs.append(env)
        return env

    query = "Action: Operation\n```sql\nSELECT 1\n```"
    specs = [RolloutSpec(task, h0, i) for i in range(3)]
    scripts = [[query, _answer(task)], [query, _answer(task)], [_answer(task)]]
    if where == "reset":  # it never starts a session: the scripts go to the others
        scripts = scripts[1:]
    hostile, *normal = _pair(scripts, specs, make_env, continuous=continuous)
    assert all(r.verdict.success and r.end_reason == "answered" for r in normal)
    assert hostile.end_reason == hostile.failure_kind == ENV_ERROR
    assert hostile.verdict.reward == 0 and not hostile.verdict.success
    assert hostile.verdict.details["env_error"].split(":")[0] == type(exc).__name__
    assert hostile.verdict.details["env_error_at"] == where
    assert "\n" not in hostile.verdict.details["env_error"]
    assert len(hostile.turns) == {"reset": 0, "step": 1, "verify": 2}[where]


def test_a_close_that_raises_does_not_skip_the_other_closes(data_dir, monkeypatch):
    task, h0 = _counting(data_dir), load_harness("h0")
    closed = []
    original = DbBenchEnv.close

    def close(self):  # reset() closes first, with no database yet: only the closes after the episode count
        if self.db is None:
            return
        closed.append(self)
        original(self)
        if len(closed) == 1:
            raise OSError("disk gone")

    monkeypatch.setattr(DbBenchEnv, "close", close)
    results = _pair([[_answer(task)]] * 2, [RolloutSpec(task, h0, i) for i in range(2)], DbBenchEnv)
    assert all(r.verdict.success for r in results) and len(closed) == 2


def test_recording_an_action_does_not_recurse_without_bound():
    deep: list = [1]
    for _ in range(5_000):
        deep = [deep]
    record = _as_dict(AnswerAction([deep, int("9" * 4_000) ** 2]))
    assert record["type"] == "AnswerAction" and "bits>" in record["values"][1]


def test_every_view_bounds_its_literals_before_anything_recurses_over_them():
    nested = "[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1)
    ok = "[" * MAX_DEPTH + "]" * MAX_DEPTH
    assert parse_action("dbbench_text_v1", f"Action: Answer\nFinal Answer: {ok}").kind == "answer"
    assert parse_action("dbbench_text_v1", f"Action: Answer\nFinal Answer: {nested}").error == "bad_literal"
    digits = "9" * MAX_INT_DIGITS
    assert parse_action("dbbench_text_v1", f"Action: Answer\nFinal Answer: [{digits}]").kind == "answer"
    assert parse_action("dbbench_text_v1", f"Action: Answer\nFinal Answer: [{digits}9]").error == "bad_literal"
    for protocol, call in [
        ("textworld_json_v1", {"name": "act", "arguments": {"command": "go", "x": json.loads(nested)}}),
        ("repair_json_v1", {"name": "search", "arguments": {"text": "x", "deep": json.loads(nested)}}),
        ("bfcl_json_v1", {"name": "ls", "arguments": {"a": json.loads(nested)}}),
    ]:
        parsed = parse_action(protocol, json.dumps(call))
        assert parsed.error == "bad_literal" and "nested more than 20" in parsed.detail, protocol


# -- BFCL ------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def bfcl():
    pytest.importorskip("bfcl_eval")
    from envs.bfcl.data import load_split as bfcl_split
    from envs.bfcl.env import BfclEnv
    from rl.sft import demo_replies

    task = min((t for t in bfcl_split("train") if t.category == "base"), key=lambda t: len(t.turns))
    filesystem = next(t for t in bfcl_split("dev") if t.involved_classes == ("GorillaFileSystem",))
    return task, demo_replies(task, random.Random(0)), filesystem, BfclEnv


BFCL_CASES = {
    "hex_literal": ("h0", f"Action: call\n```python\n[cd(folder={HEX})]\n```", "bad_literal"),
    "nested_700": ("h0", f"Action: call\n```python\n[cd(folder={DEEP})]\n```", "bad_call"),
    "lone_surrogate": ("h0", "Action: call\n```python\n[cd(folder='\ud800')]\n```", "bad_text"),
    "escaped_surrogate": ("h0", "Action: call\n```python\n[cd(folder='\\ud800')]\n```", "bad_literal"),
    "megabyte_reply": ("h0", f"Action: reply\n{MEGABYTE}", "reply_too_long"),
    "keyword_injection": (
        "json_tools",
        json.dumps({"name": "cd", "arguments": {"folder='document') #": 1}}),
        "bad_call",
    ),
    "name_injection": ("json_tools", json.dumps({"name": "cd(folder='document')\n#", "arguments": {}}), "bad_call"),
    "json_hex_digits": ("json_tools", '{"name": "cd", "arguments": {"folder": ' + "9" * 5_000 + "}}", "bad_literal"),
}


@pytest.mark.parametrize("case", sorted(BFCL_CASES))
def test_a_hostile_bfcl_reply_ends_only_its_own_episode(bfcl, case):
    task, replies, filesystem, env_class = bfcl
    harness, reply, error = BFCL_CASES[case]
    specs = [
        RolloutSpec(filesystem, load_harness(harness, "bfcl"), 0),
        RolloutSpec(task, load_harness("h0", "bfcl"), 0),
    ]
    hostile, normal = _pair([[reply], replies], specs, env_class, max_rounds=30)
    assert normal.verdict.success and normal.end_reason == "finished", normal.verdict.details
    assert hostile.end_reason == hostile.failure_kind == "format_error" and hostile.verdict.reward == 0
    [turn] = hostile.turns
    assert turn.action_kind == "invalid" and turn.parse_error == error, turn.action
    json.dumps(turn.action)


def test_a_bfcl_call_runs_exactly_as_recorded_or_not_at_all(bfcl):
    """Calls built directly (not by a tool view) reach the environment: a keyword that is not an
    identifier and a 5,000-digit argument are refused by the API process, and nothing raises."""
    import ast

    from envs.bfcl.calls import CallError, parse_calls

    injected = ToolCall("cd", (), {"folder='document') #": "x"})
    assert injected.text() == "cd(**{\"folder='document') #\": 'x'})"
    with pytest.raises(CallError, match="not allowed"):
        parse_calls(injected.text())
    quoted = ToolCall("cd(folder='a')\n#").text()  # a name that is not one is written as a string
    assert quoted == "\"cd(folder='a')\\n#\"()"
    with pytest.raises(CallError, match="by name"):
        parse_calls(quoted)
    huge = ToolCall("cd", (), {"folder": ast.literal_eval(HEX)})
    assert huge.text() == "cd(folder=<int too large to show>)"
    _, _, filesystem, env_class = bfcl
    with env_class(filesystem) as env:
        env.reset()
        before = env.step(CallAction((ToolCall("pwd"),))).observation.split("->")[1]
        step = env.step(CallAction((injected, huge)))
        assert step.error == "call_error" and step.observation.count("Error during execution") == 2
        assert env.step(CallAction((ToolCall("pwd"),))).observation.split("->")[1] == before
        assert not env.verify().success


def test_a_missing_sandbox_stops_the_batch_instead_of_failing_each_episode(monkeypatch):
    """SandboxUnavailable is a set-up error, not an episode's: run_rollouts lets it through."""
    from sandbox import SandboxUnavailable

    class NeedsSandbox:
        rounds_used, max_rounds = 0, 3

        def reset(self):
            raise SandboxUnavailable("untrusted code needs a sandbox and bwrap is not installed: install bubblewrap")

        def close(self):
            pass

    h0 = load_harness("h0", "dbbench")
    task = load_split("dev", limit=1)[0]
    with pytest.raises(SandboxUnavailable):
        run_rollouts(ScriptedPolicy([["Action: Answer\nFinal Answer: [1]"]]), [RolloutSpec(task, h0, 0)],
                     lambda t: NeedsSandbox(), Sampling())  # fmt: skip
