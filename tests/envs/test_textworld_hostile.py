"""Hostile commands against the TextWorld interpreter: nothing a command does can crash, hang or
leak out of its episode. Each hostile step returns within its budget, wins nothing, and a game
played beside it (another episode of the same game) still wins."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

pytest.importorskip("textworld")

from envs.base import CommandAction  # noqa: E402
from envs.textworld.data import load_split  # noqa: E402
from envs.textworld.env import (  # noqa: E402
    MAX_COMMAND_BYTES,
    STEP_WALL_SECONDS,
    WORKER,
    TextWorldEnv,
)
from harness_pool.spec import load_harness  # noqa: E402
from rl.policy import Sampling  # noqa: E402
from rl.rollout import RolloutSpec, run_rollouts  # noqa: E402
from tests.doubles import ScriptedPolicy  # noqa: E402

BUDGET = STEP_WALL_SECONDS + 2.0  # a step's wall clock, and the kill of a stuck interpreter
pytestmark = pytest.mark.serial  # asserts wall-clock bounds: `make test` runs it alone, after the parallel pass


@pytest.fixture(scope="module")
def games(tmp_path_factory):
    """Dev games 0 (q1: one winning command) and 1 (q2: two), generated once for this module."""
    return load_split("dev", limit=2, generated_dir=tmp_path_factory.mktemp("generated"))


@pytest.fixture
def quiet_cwd(tmp_path, monkeypatch):
    """An empty working folder for the test process: no game may write into it."""
    monkeypatch.chdir(tmp_path)
    yield tmp_path
    assert list(tmp_path.iterdir()) == [], "the interpreter wrote into the rollout process's folder"


def timed_step(env: TextWorldEnv, command: str):
    started = time.monotonic()
    result = env.step(CommandAction(command))
    assert time.monotonic() - started < BUDGET
    return result


def wins(task, env: TextWorldEnv | None = None) -> bool:
    """Play the walkthrough (in `env`, already reset, or a fresh one)."""
    own = env is None
    env = env or TextWorldEnv(task)
    try:
        if own:
            env.reset()
        for command in task.walkthrough:
            env.step(CommandAction(command))
        return env.verify().success
    finally:
        env.close()


@pytest.mark.parametrize(
    "command,sent",
    [
        pytest.param("go\x00east", None, id="nul-inside"),
        pytest.param("\x00", None, id="nul-alone"),
        pytest.param("look \ud800", None, id="lone-surrogate"),
        pytest.param("look\x1b[2J", None, id="escape-sequence"),
        pytest.param("a" * 197 + "\U0001f600", "a" * 197, id="multibyte-cut"),
        pytest.param("x" * 100_000, "x" * MAX_COMMAND_BYTES, id="100k-chars"),
    ],
)
def test_a_hostile_command_is_refused_or_cut_and_harms_nothing(games, quiet_cwd, command, sent):
    task = games[0]
    hostile, bystander = TextWorldEnv(task), TextWorldEnv(task)
    try:
        hostile.reset(), bystander.reset()
        result = timed_step(hostile, command)
        assert not result.done and result.outcome is None
        if sent is None:  # refused in the parent: the round counts, the game never sees it
            assert result.observation.startswith("Error: ") and result.error == "invalid_command"
            assert hostile.commands == [] and hostile.rounds_used == 1
        else:  # cut to what the interpreter reads, at a character boundary, and played
            assert not result.observation.startswith("Error") and result.error == "inadmissible"
            assert hostile.commands == [sent] and len(sent.encode()) <= MAX_COMMAND_BYTES
        assert timed_step(hostile, "look").error is None  # the game is still there
        verdict = hostile.verify()
        assert verdict.reward == 0.0 and verdict.details["commands"] == [*([sent] if sent else []), "look"]
        assert wins(task, bystander)  # the episode beside it is untouched
    finally:
        hostile.close(), bystander.close()


@pytest.mark.parametrize("command", ["go\x00east", "look \ud800", "a" * 197 + "\U0001f600"])
def test_behind_the_filter_the_sandbox_still_contains_the_interpreter(games, monkeypatch, command):
    """With the command filter switched off, a NUL crashes the interpreter (SIGSEGV) and a lone
    surrogate or a cut character fails in it: each ends only its own episode, as env_error."""
    monkeypatch.setattr("envs.textworld.env.clean_command", lambda raw: (raw, None))
    with TextWorldEnv(games[0]) as env:
        env.reset()
        result = timed_step(env, command)
        assert result.done and result.error == "env_error" and result.observation.startswith("Error: ")
        verdict = env.verify()
        assert verdict.reward == 0.0 and "stopped" in verdict.details["error"] and env.worker is None


def test_out_of_world_commands_are_refused_in_any_clause(games):
    refused = ["save", "SAVE", "Restore", "look. save", "look then script", "take key, script", "transcriptxyz"]
    refused += ["print_state", "tw-extra-infos inventory", "restart", "quit", "q", "undo", "verbose", "#random"]
    with TextWorldEnv(games[0], max_rounds=len(refused) + 1) as env:
        env.reset()
        for command in refused:
            result = timed_step(env, command)
            assert result.error == "invalid_command" and result.observation.startswith("Error: "), command
        assert env.commands == [] and env.rounds_used == len(refused)  # every refused command used its round
        assert timed_step(env, "examine save").error is not None  # a meta word as an object is only a word
        assert env.commands == ["examine save"] and env.done and not env.verify().success


def test_save_in_one_episode_cannot_be_restored_in_another(games, quiet_cwd):
    task = games[1]  # q2: the first walkthrough command changes the world without winning
    first, second = TextWorldEnv(task), TextWorldEnv(task)
    try:
        first.reset(), second.reset()
        assert timed_step(first, "save").error == "invalid_command"
        first.step(CommandAction(task.walkthrough[0]))
        # even asked behind the filter's back, a save lands in the first sandbox's own tmpfs
        assert "Ok" in first.worker.ask({"op": "step", "command": "save"}, STEP_WALL_SECONDS)["state"]["feedback"]
        assert timed_step(second, "restore").error == "invalid_command"
        restored = second.worker.ask({"op": "step", "command": "restore"}, STEP_WALL_SECONDS)["state"]["feedback"]
        assert "Ok" not in restored
        second.step(CommandAction(task.walkthrough[1]))  # without the first step the quest is not done
        assert not second.verify().success and second.verify().reward == 0.0
        assert wins(task)
    finally:
        first.close(), second.close()


def test_a_transcript_is_refused_and_could_only_be_written_inside_the_sandbox(games, quiet_cwd):
    with TextWorldEnv(games[0]) as env:
        env.reset()
        assert timed_step(env, "script").error == "invalid_command"
        started = env.worker.ask({"op": "step", "command": "script"}, STEP_WALL_SECONDS)["state"]["feedback"]
        assert "transcript" in started.lower()
        env.step(CommandAction("look"))
        assert env.verify().details["commands"] == ["look"]
    # the quiet_cwd fixture checks that no file appeared in the test process's folder


def _interpreter_pid(env: TextWorldEnv) -> int:
    """The worker's python inside the sandbox: a descendant of the sandbox's first process."""
    parents = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
                parents[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
    root = env.worker.proc.pid
    for pid in parents:
        ancestor = pid
        while ancestor in parents and ancestor != root:
            ancestor = parents[ancestor]
        if ancestor == root and pid != root:
            try:
                argv = (Path("/proc") / str(pid) / "cmdline").read_bytes().decode(errors="replace").split("\0")
            except OSError:
                continue
            if os.path.basename(argv[0]) != "bwrap" and str(WORKER) in argv:
                return pid
    raise AssertionError("no interpreter process found")


def test_a_killed_interpreter_ends_its_episode_with_an_error_observation(games):
    task = games[0]
    env, bystander = TextWorldEnv(task), TextWorldEnv(task)
    try:
        env.reset(), bystander.reset()
        assert env.step(CommandAction("look")).error is None
        os.kill(_interpreter_pid(env), signal.SIGKILL)
        result = timed_step(env, task.walkthrough[0])
        assert result.done and result.error == "env_error" and result.observation.startswith("Error: ")
        verdict = env.verify()  # never raises
        assert verdict.reward == 0.0 and not verdict.success and "stopped" in verdict.details["error"]
        with pytest.raises(RuntimeError, match="is over"):
            env.step(CommandAction("look"))
        assert wins(task, bystander)
    finally:
        env.close(), bystander.close()


def test_a_hostile_episode_beside_a_walkthrough_in_one_batch(games, quiet_cwd):
    task = games[1]
    hostile = ["Action: go\x00east", "Action: \x00", "Action: look. save", "Action: " + "a" * 197 + "\U0001f600"]
    policy = ScriptedPolicy([hostile, [f"Action: {c}" for c in task.walkthrough]])
    h0 = load_harness("h0", "textworld")
    started = time.monotonic()
    bad, good = run_rollouts(policy, [RolloutSpec(task, h0, 0), RolloutSpec(task, h0, 1)], TextWorldEnv, Sampling(),
                             max_rounds=4)  # fmt: skip
    assert time.monotonic() - started < 30
    assert good.verdict.success and good.end_reason == "finished"
    assert not bad.verdict.success and bad.verdict.reward == 0.0 and bad.end_reason == "round_limit"
    assert [t.observation.startswith("Error: ") for t in bad.turns] == [True, True, True, False]
    assert bad.verdict.details["commands"] == ["a" * 197]


def test_a_crashed_interpreter_is_recorded_as_env_error_beside_a_winning_episode(games, monkeypatch):
    """Behind the filter, a NUL kills the interpreter: the rollout engine records that episode as
    env_error (reward 0) and the walkthrough beside it still wins."""
    monkeypatch.setattr("envs.textworld.env.clean_command", lambda raw: (raw, None))
    task = games[1]
    policy = ScriptedPolicy([["Action: go\x00east"], [f"Action: {c}" for c in task.walkthrough]])
    h0 = load_harness("h0", "textworld")
    bad, good = run_rollouts(policy, [RolloutSpec(task, h0, 0), RolloutSpec(task, h0, 1)], TextWorldEnv, Sampling(),
                             max_rounds=len(task.walkthrough))  # fmt: skip
    assert good.verdict.success
    assert bad.end_reason == "env_error" and bad.failure_kind == "env_error" and bad.verdict.reward == 0.0
    assert bad.verdict.details["env_error"].startswith("Error: the game stopped")
