"""Hostile patches against the repair environment: forged reports, test-runner monkeypatching,
planted conftest / ini / pth / customize files, links, renames, dir_fd tricks, fifos, disk fill,
forks, the network, the parent's environment and switching off the in-process guard.

Every patch leaves the task's bug in the source. Each case asserts: no reward, nothing written
or read outside the copy (a host folder of canaries stays as it was, no new file appears), the
canary environment variable never shows in anything the episode returns, and the call comes
back within its wall budget. The last test runs a hostile episode beside a gold one in one
batch of the rollout engine: the gold one is still judged solved.
"""

from __future__ import annotations

import json
import os
import random
import time
from pathlib import Path

import pytest

from envs.base import CallAction, ToolCall
from envs.repair.data import load_split
from envs.repair.env import RepairEnv
from envs.repair.testing import Limits, run_tests
from harness_pool.spec import load_harness
from rl.policy import Sampling
from rl.rollout import RolloutSpec, run_rollouts
from rl.sft import demo_replies
from tests.doubles import ScriptedPolicy

CANARY = "hs-canary-7f3a91"
LIMITS = Limits(wall_seconds=10.0, cpu_seconds=4, memory_bytes=1 << 30, tmp_bytes=16 << 20)
BUDGET_S = 30.0  # a hostile patch's run_tests + verify together
pytestmark = pytest.mark.serial  # asserts wall-clock bounds: `make test` runs it alone, after the parallel pass
RUN_FIRST = {  # cases whose own run_tests observation is checked too (the others: the judged run only)
    "conftest_dropped_during_the_run", "shell_and_files_outside", "parent_environment_and_processes",
    "links_renames_fifo_and_dir_fd", "endless_loop",
}  # fmt: skip


@pytest.fixture(scope="module")
def task(repair_generated):
    return load_split("dev", generated_dir=repair_generated)[0]


@pytest.fixture
def host(tmp_path, monkeypatch):
    """A host folder the episode must not see or change, and a secret in the parent's environment."""
    folder = tmp_path / "host"
    folder.mkdir()
    (folder / "secret.txt").write_text(CANARY)
    os.chmod(folder / "secret.txt", 0o600)
    monkeypatch.setenv("HS_CANARY_SECRET", CANARY)
    return folder


def _prepend(env: RepairEnv, code: str):
    """The policy's own replace: hostile code at the top of the buggy module."""
    source = (env.repo / env.task.file).read_text()
    lines = source.splitlines(keepends=True)
    n = 1
    while source.count("".join(lines[:n])) != 1:
        n += 1
    old = "".join(lines[:n])
    call = ToolCall("replace", (), {"path": env.task.file, "old": old, "new": code + "\n" + old})
    result = env.step(CallAction((call,)))
    assert result.error is None, result.observation
    return old


def _host_unchanged(host: Path) -> None:
    assert sorted(p.name for p in host.iterdir()) == ["secret.txt"]
    assert (host / "secret.txt").read_text() == CANARY


def _everything_returned(env: RepairEnv, *texts: str) -> str:
    return "\n".join([*texts, json.dumps(env.verify().details)])


# -- patches that run inside the judged test process ---------------------------------------------
# What a forger computes: every test function of every test file, reported passed.
FORGED = (
    "import json as _json, os as _os, re as _re\n"
    "_outcomes = {}\n"
    "for _root, _dirs, _files in _os.walk('.'):\n"
    "    for _f in _files:\n"
    "        if _f.startswith('test_') and _f.endswith('.py'):\n"
    "            _p = _os.path.join(_root, _f)[2:]\n"
    "            for _t in _re.findall(r'^def (test_\\w+)', open(_p).read(), _re.M):\n"
    "                _outcomes[_p + '::' + _t] = 'passed'\n"
    "_report = _json.dumps({'outcomes': _outcomes, 'messages': {}, 'exit': 0})\n"
)
MARKER = "@@hs-repair-report@@ "  # the old runner's report line prefix on stdout
PASSING_CONFTEST = (
    "import pytest\n@pytest.hookimpl(hookwrapper=True)\ndef pytest_runtest_makereport(item, call):\n"
    "    outcome = yield\n    outcome.get_result().outcome = 'passed'\n"
)
IN_PROCESS = {
    "runtest_noop": "import _pytest.python\n_pytest.python.Function.runtest = lambda self: None",
    "atexit_second_report": FORGED + f"import atexit\natexit.register(lambda: print('\\n{MARKER}' + _report))",
    "saved_stdout_then_exit": FORGED
    + f"_fd = _os.dup(1)\n_os.write(_fd, ('\\n{MARKER}' + _report + '\\n').encode())\n_os._exit(0)",
    "forged_report_on_every_descriptor_then_exit": FORGED + "for _n in _os.listdir('/proc/self/fd'):\n"
    "    try:\n"
    f"        _os.write(int(_n), ('\\n{MARKER}' + _report + '\\n').encode())\n"
    "    except OSError:\n"
    "        pass\n"
    "_os._exit(0)",
    "every_report_passed": (
        "import _pytest.reports\n"
        "_orig = _pytest.reports.TestReport.from_item_and_call\n"
        "def _forge(item, call):\n"
        "    r = _orig(item, call)\n"
        "    r.outcome, r.longrepr = 'passed', None\n"
        "    return r\n"
        "_pytest.reports.TestReport.from_item_and_call = staticmethod(_forge)"
    ),
    "assertions_swallowed": (
        "import _pytest.python\n"
        "_orig = _pytest.python.Function.runtest\n"
        "def _quiet(self):\n"
        "    try:\n"
        "        _orig(self)\n"
        "    except BaseException:\n"
        "        pass\n"
        "_pytest.python.Function.runtest = _quiet"
    ),
    "forged_report_before_the_real_one": FORGED + "for _n in _os.listdir('/proc/self/fd'):\n"
    "    try:\n"
    "        _os.write(int(_n), (_report + '\\n').encode())\n"
    "    except OSError:\n"
    "        pass",
    "conftest_dropped_during_the_run": (
        "import os\n"
        "try:\n"
        f"    open(os.path.join(os.getcwd(), 'conftest.py'), 'w').write({PASSING_CONFTEST!r})\n"
        "except OSError:\n"
        "    pass"
    ),
    "shell_and_files_outside": (
        "import os, subprocess\n"
        "for _cmd in (lambda: subprocess.run(['sh', '-c', 'id > {host}/escaped'], check=False),\n"
        "             lambda: os.system('touch {host}/escaped'),\n"
        "             lambda: open('{host}/escaped', 'w').write('x'),\n"
        "             lambda: print(open('{host}/secret.txt').read())):\n"
        "    try:\n"
        "        _cmd()\n"
        "    except Exception as exc:\n"
        "        print('refused', exc)"
    ),
    "guard_bypassed_with_fork_exec": (
        "import _posixsubprocess, os\n"
        "try:\n"
        "    _posixsubprocess.fork_exec(['/bin/sh', '-c', 'touch {host}/escaped'], [b'/bin/sh'], True, (), None, None,"
        " -1, -1, -1, -1, -1, -1, -1, -1, False, False, -1, None, None, None, -1, None, False)\n"
        "except Exception as exc:\n"
        "    print('refused', exc)"
    ),
    "guard_bypassed_with_ctypes": (
        "import ctypes\n"
        "try:\n"
        "    ctypes.CDLL(None).system(b'touch {host}/escaped')\n"
        "except Exception as exc:\n"
        "    print('refused', exc)"
    ),
    "parent_environment_and_processes": (
        "import os\n"
        "seen = dict(os.environ)\n"
        "for _pid in os.listdir('/proc'):\n"
        "    if _pid.isdigit():\n"
        "        try:\n"
        "            seen[_pid] = open(f'/proc/{{_pid}}/environ').read()\n"
        "        except OSError:\n"
        "            pass\n"
        "raise AssertionError(repr(seen))"
    ),
    "network_to_a_host_service": (
        "import socket\n"
        "try:\n"
        "    socket.create_connection(('127.0.0.1', 5432), timeout=1)\n"
        "    raise SystemExit('connected')\n"
        "except OSError as exc:\n"
        "    print('refused', exc)"
    ),
    "fork_bomb_and_detached_child": (
        "import os\n"
        "for _ in range(50):\n"
        "    try:\n"
        "        if os.fork() == 0:\n"
        "            os.setsid()\n"
        "            import time; time.sleep(600)\n"
        "    except OSError:\n"
        "        break"
    ),
    "disk_fill": (
        "import os\n"
        "try:\n"
        "    with open('/tmp/fill', 'wb') as _f:\n"
        "        for _ in range(4096):\n"
        "            _f.write(b'x' * (1 << 20))\n"
        "except OSError as exc:\n"
        "    print('refused', exc)"
    ),
    "links_renames_fifo_and_dir_fd": (
        "import os\n"
        "_steps = [lambda: os.symlink('{host}/secret.txt', 'toolz/tests/test_recipes.py'),\n"
        "          lambda: os.link('{host}/secret.txt', 'linked.txt'),\n"
        "          lambda: os.rename('toolz/tests', 'gone'),\n"
        "          lambda: os.mkfifo('fifo'),\n"
        "          lambda: os.open('escaped', os.O_CREAT | os.O_WRONLY, dir_fd=os.open('{host}', os.O_RDONLY)),\n"
        "          lambda: os.open('escaped', os.O_CREAT | os.O_WRONLY, dir_fd=os.open('/', os.O_RDONLY))]\n"
        "for _step in _steps:\n"
        "    try:\n"
        "        _step()\n"
        "    except Exception as exc:\n"
        "        print('refused', exc)"
    ),
    "kills_its_parent": "import os, signal\ntry:\n    os.kill(os.getppid(), signal.SIGKILL)\nexcept OSError:\n    pass",
    "endless_loop": "while True:\n    pass",
    "output_flood": "import sys\nfor _ in range(200_000):\n    sys.stdout.write('@@hs-repair-report@@ {}\\n' * 10)",
}


@pytest.mark.parametrize("name", sorted(IN_PROCESS))
def test_a_hostile_patch_gets_no_reward_and_reaches_nothing(task, host, name):
    code = IN_PROCESS[name].replace("{host}", str(host))
    started = time.monotonic()
    with RepairEnv(task, limits=LIMITS) as env:
        env.reset()
        old = _prepend(env, code)
        observation = env.step(CallAction((ToolCall("run_tests"),))).observation if name in RUN_FIRST else ""
        if name == "conftest_dropped_during_the_run":  # then revert the visible edit
            source = (env.repo / task.file).read_text()
            env.step(CallAction((ToolCall("replace", (), {"path": task.file, "old": code + "\n" + old, "new": old}),)))
            assert (env.repo / task.file).read_text() != source
        returned = _everything_returned(env, observation)
        verdict = env.verify()
        assert not verdict.success and verdict.reward == 0.0, (name, verdict.details)
        assert not (env.repo / "conftest.py").exists() and not (env.repo / "fifo").exists()
    assert time.monotonic() - started < BUDGET_S
    assert CANARY not in returned
    _host_unchanged(host)


def test_the_in_process_forgeries_are_caught_as_tampered(task, host):
    """A forgery that would have made the tests look green is named: the sentinels or the channel."""
    for name in (
        "runtest_noop",
        "every_report_passed",
        "assertions_swallowed",
        "forged_report_before_the_real_one",
    ):
        with RepairEnv(task, limits=LIMITS) as env:
            env.reset()
            _prepend(env, IN_PROCESS[name])
            verdict = env.verify()
            assert verdict.details["tests_error"] == "tests_tampered", (name, verdict.details)


def test_an_edit_that_breaks_the_import_is_not_fixed_and_not_tampered(task):
    """Seen with the real warm-started policy: its edit raised NameError at import, pytest stopped
    at collection and no sentinel ran; that is a failed fix, not a forgery."""
    with RepairEnv(task, limits=LIMITS) as env:
        env.reset()
        _prepend(env, "undefined_name_at_import")
        verdict = env.verify()
        assert not verdict.success and verdict.details["tests_error"] is None, verdict.details
        assert verdict.details["sentinels_off"] == []


def test_test_output_that_looks_like_a_report_is_never_read_as_one(task, tmp_path):
    run = run_tests(task.pristine, ["toolz/tests/test_recipes.py"], LIMITS)
    assert run.error is None and run.outcomes
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "test_forge.py").write_text(
        "import os, json\n"
        "def test_fails():\n    assert False\n"
        "def test_prints():\n"
        "    print('\\n@@hs-repair-report@@ ' + json.dumps({'outcomes': {'test_forge.py::test_fails': 'passed'}}))\n"
    )
    forged = run_tests(repo, ["test_forge.py"], LIMITS)
    assert forged.outcomes.get("test_forge.py::test_fails") == "failed"


# -- files the parent finds in the copy ----------------------------------------------------------
def test_planted_files_are_dropped_by_the_judge(task, host):
    """Whatever reached the copy besides the package's modules (a conftest.py, pytest and setup
    configuration, a .pth or sitecustomize, a new test file, an edited test) is not judged."""
    with RepairEnv(task, limits=LIMITS) as env:
        env.reset()
        for rel in ("conftest.py", "toolz/conftest.py", "toolz/tests/conftest.py"):
            (env.repo / rel).write_text(PASSING_CONFTEST)
        (env.repo / "pytest.ini").write_text("[pytest]\npython_functions = nothing_matches\n")
        (env.repo / "setup.cfg").write_text("[tool:pytest]\npython_files = nothing_matches\n")
        (env.repo / "toolz" / "hs.pth").write_text("import os\n")
        (env.repo / "toolz" / "sitecustomize.py").write_text("raise SystemExit\n")
        test_file = env.repo / task.test_files[0]
        test_file.write_text("def test_nothing():\n    pass\n")
        verdict = env.verify()
        assert not verdict.success, verdict.details
        dropped = " ".join(verdict.details["dropped"])
        assert "conftest.py (a new file)" in dropped and task.test_files[0] in dropped
        assert verdict.details["tests_error"] is None  # judged normally: the bug is still there
    _host_unchanged(host)


def test_links_in_the_copy_are_never_followed_by_the_parent(task, host):
    with RepairEnv(task, limits=LIMITS) as env:
        env.reset()
        secret = host / "secret.txt"
        test_file = env.repo / task.test_files[0]
        test_file.unlink()
        test_file.symlink_to(secret)  # a test file replaced by a link to a host file
        (env.repo / "toolz" / "linked.py").symlink_to(secret)
        os.link(secret, env.repo / "toolz" / "hard.py")
        os.mkfifo(env.repo / "toolz" / "pipe.py")
        (env.repo / "toolz" / "outside").symlink_to(host, target_is_directory=True)
        texts = []
        for call in (
            ToolCall("search", (), {"text": "canary"}),
            ToolCall("search", (), {"text": "hs", "path": "toolz"}),
            ToolCall("list_files"),
            ToolCall("read_file", (), {"path": "toolz/linked.py"}),
            ToolCall("read_file", (), {"path": "toolz/hard.py"}),
            ToolCall("read_file", (), {"path": "toolz/outside/secret.txt"}),
            ToolCall("read_file", (), {"path": task.test_files[0]}),
            ToolCall("replace", (), {"path": "toolz/hard.py", "old": CANARY, "new": "changed"}),
        ):
            started = time.monotonic()
            texts.append(env.step(CallAction((call,))).observation)
            assert time.monotonic() - started < 5
        verdict = env.verify()
        assert not verdict.success
    assert CANARY not in "\n".join(texts) + json.dumps(verdict.details)
    assert (host / "secret.txt").read_text() == CANARY and not (host / "secret.txt").is_symlink()
    assert sorted(p.name for p in host.iterdir()) == ["secret.txt"]


# -- one bad episode, one good one, one batch ----------------------------------------------------
def test_a_hostile_episode_leaves_the_rest_of_its_batch_alone(task, host):
    first_line = (task.pristine / task.file).read_text().splitlines(keepends=True)[0]
    hostile_code = "import os, signal\nos.kill(os.getppid(), signal.SIGKILL)\nos.kill(1, signal.SIGKILL)\n"
    hostile = [
        f"Action: replace {task.file}\n```old\n{first_line}```\n```new\n{hostile_code}{first_line}```",
        "Action: run_tests",
        "Action: submit",
    ]
    gold = demo_replies(task, random.Random(0), inspect_prob=0.0)
    h0 = load_harness("h0", "repair")
    specs = [RolloutSpec(task, h0, 0), RolloutSpec(task, h0, 1)]
    policy = ScriptedPolicy([gold, hostile])
    results = run_rollouts(policy, specs, lambda t: RepairEnv(t, limits=LIMITS), Sampling(), max_rounds=8)
    assert results[0].verdict.success, results[0].verdict.details
    assert not results[1].verdict.success and results[1].verdict.details["judged"] == [task.file]
    _host_unchanged(host)
