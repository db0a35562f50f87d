"""Hostile code hooks, as an LLM editor could write them: none reads or changes anything outside
its episode.

Three groups: hooks the static policy refuses (so `hs harness check` and every harness load
refuse them), hooks that pass it and must fail inside the worker within the wall budget, and raw
Python run under the worker's OS confinement alone (no policy at all), which must not reach a
file, the network, the environment, a shell or more memory. Every hook below escaped or stalled
the in-process sandbox this replaced (docs/method.md §7).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from harness_pool.hook_client import HookSession, HookWorker
from harness_pool.sandbox import LIMITS, HookFailure, SandboxError, SandboxLimits, check_hook_source
from harness_pool.spec import CodeHook

SECRET = f"hs-secret-{uuid.uuid4().hex}"
WALL_MARGIN_S = 2.0  # a restart of the worker after a kill fits in this on a loaded 2-core machine
PARENT_RSS_BOUND_MB = 64  # the parent's peak RSS while every runtime-hostile hook runs (measured: 16 MB)
pytestmark = pytest.mark.serial  # asserts wall-clock bounds: `make test` runs it alone, after the parallel pass

_FRAME = "(x for x in ())"
HOSTILE_STATIC = [  # (source body of hook or whole module, what the one-line rejection names)
    (f"return {_FRAME}.gi_frame.f_back.f_globals", "'f_globals'"),
    (f"return {_FRAME}.gi_frame", "'gi_frame'"),
    (f"g = {_FRAME}\n    return g.gi_code", "'gi_code'"),
    ("return [c for c in ()].f_back", "'f_back'"),
    ("return ctx.f_globals", "'f_globals'"),
    ("return ctx.cr_frame", "'cr_frame'"),
    ("return ctx.ag_frame", "'ag_frame'"),
    ("return ctx.tb_frame", "'tb_frame'"),
    ("return {'inject': '{0.gi_frame.f_globals}'.format(" + _FRAME + ")}", "reads an attribute or index"),
    ("return {'inject': '{0[os]}'.format(ctx)}", "reads an attribute or index"),
    ("return {'inject': '{0.__class__}'.format(ctx)}", "reads an attribute or index"),
    ("return {'inject': ctx['instruction'].format_map(ctx)}", "constant template"),
    ("return {'inject': str.format('{0.x}', ctx)}", "constant template"),
    ("return ().__class__.__base__.__subclasses__()", "'__subclasses__'"),
    ("return ctx.__class__", "'__class__'"),
    ("return getattr(ctx, 'keys')", "'getattr'"),
    ("return type(ctx)", "'type'"),
    ("return __import__('os')", "'__import__'"),
    ("return eval('1')", "'eval'"),
    ("return open('/etc/passwd').read()", "'open'"),
    ("return compile('1', 'x', 'eval')", "'compile'"),
    ("def inner():\n        return nb\n    return inner()", "nested function 'inner'"),
    ("return (lambda: 1)()", "'Lambda'"),
    ("global seen\n    return None", "'Global'"),
    ("hook.calls = 1\n    return None", "assigning to the attribute 'calls'"),
    ("return {'inject': f'{1:>1000000000}'}", "format width above"),
    ("return {'inject': f'{1:>{ctx[\"round\"]}}'}", "computed format spec"),
    ("return {'inject': 'x'.ljust(1000000000)}", "'ljust' with a width"),
    ("return {'inject': '%1000000000d' % 1}", "format width above"),
    ("return {'inject': '%*d' % (ctx['round'], 1)}", "'*' width"),
    ("return {'inject': 'x' * 1000000000}", "multiplying by a constant"),
    ("while True:\n        pass", "'While'"),
    ("yield 1", "'Yield'"),
    ("try:\n        return 1\n    except Exception as e:\n        return e", "'Try'"),
    ("with ctx as c:\n        return c", "'With'"),
    ("return (n := 1)", "'NamedExpr'"),
    ("return ctx.mro", "'mro'"),
    ("return 2 ** 1000000", "'Pow'"),
]
HOSTILE_MODULES = [  # whole sources: state kept between episodes, or constructs outside a hook body
    (
        "def helper(x, seen=[]):\n    seen.append(x)\n    return seen\ndef hook(ctx, nb):\n    return None",
        "default argument values in 'helper'",
    ),
    ("def helper(x, *, memo={}):\n    return memo\ndef hook(ctx, nb):\n    return None", "default argument values"),
    ("def helper(*args):\n    return args\ndef hook(ctx, nb):\n    return None", "plain positional arguments"),
    ("def helper(x: print):\n    return x\ndef hook(ctx, nb):\n    return None", "annotation on argument 'x'"),
    ("class A:\n    pass\ndef hook(ctx, nb):\n    return None", "'ClassDef'"),
    ("async def hook(ctx, nb):\n    return None", "'AsyncFunctionDef'"),
    ("import os\ndef hook(ctx, nb):\n    return None", "'Import'"),
    ("def deco(f):\n    return f\n@deco\ndef hook(ctx, nb):\n    return None", "decorator on 'hook'"),
]

_OBS = "x" * 1000
HOSTILE_RUNTIME = [  # (hook body, ctx overrides): passes the static policy, must fail in the worker
    ("x = []\n    for i in range(990):\n        x = [x]\n    nb['deep'] = x\n    return None", {}),
    ("x = {}\n    for i in range(200):\n        x = {'k': x}\n    return {'inject': 'ok', 'more': x}", {}),
    ("return {'inject': 'x' * int(ctx['n'])}", {}),
    ("return {'inject': ctx['last_observation'] * 100000}", {}),
    ("return {'inject': 'x'.ljust(int(ctx['n']))}", {}),
    ("return {'inject': 'x'.center(int(ctx['n']))}", {}),
    ("return {'inject': 'x'.zfill(int(ctx['n']))}", {}),
    ("return {'inject': ('%' + ctx['n'] + 's') % 'x'}", {}),
    ("return {'inject': ctx['template'] % 'x'}", {"template": "%999999999s"}),
    ("s = []\n    for i in range(100000):\n        s = sorted(range(100000))\n    return None", {}),
    ("return {'inject': str(len([[0] * 100000 for i in range(100000)]))}", {}),
    ("return {'inject': str(len([ctx['last_observation'] + str(i) for i in range(100000)]))}", {}),
    ("return hook(ctx, nb)", {}),
    ("n = 10\n    for i in range(40):\n        n = n * n\n    return None", {}),  # one huge int product
    ("return {'inject': ','.join([ctx['last_observation']] * 100000)}", {}),
    ("return {'inject': ('a' * 100000).replace('a', 'aaaa')}", {}),
    ("return {'inject': str(int('9' * 100000))}", {}),
    ("return {'inject': str([i * j for i in range(100000) for j in range(100000)])}", {}),
    ("return {'inject': 'y' * 2001}", {}),
    ("nb['flood'] = 'a' * 100000\n    return None", {}),
    ("nb['bad'] = {1, 2}\n    return None", {}),
    ("ctx['queries'] = 99\n    return None", {}),
    ("return {'inject': 1}", {}),
    ("return {'steal': 'x'}", {}),
    ("return {'inject': str(nb.popitem())}", {}),  # an empty notebook: nothing of another episode
]


def _hook(body: str) -> str:
    return "def hook(ctx, nb):\n    " + body + "\n"


def _ctx(extra: dict) -> dict:
    return {
        "round": 1,
        "queries": 0,
        "last_error": False,
        "last_observation": _OBS,
        "sql_history": [],
        "action_kind": "sql",
        "action_sql": "SELECT 1",
        "instruction": "q",
        "table_name": "t",
        "n": "1000000000",
        **extra,
    }


@pytest.mark.parametrize("body, construct", HOSTILE_STATIC)
def test_the_static_policy_refuses_hostile_hook_bodies(body, construct):
    _assert_refused(_hook(body), construct)


@pytest.mark.parametrize("source, construct", HOSTILE_MODULES)
def test_the_static_policy_refuses_hostile_hook_modules(source, construct):
    _assert_refused(source, construct)


def _assert_refused(source: str, construct: str) -> None:
    with pytest.raises(SandboxError) as info:
        check_hook_source(source)
    message = str(info.value)
    assert construct in message and "\n" not in message
    with pytest.raises(ValueError, match="hook|argument|allowed|attribute|template|width|function"):
        CodeHook(at="after_step", name="x", source=source)  # so no harness holding it ever loads


@pytest.mark.parametrize("body, extra", HOSTILE_RUNTIME)
def test_hostile_hooks_fail_inside_the_worker_within_the_wall_budget(body, extra, tmp_path, monkeypatch):
    monkeypatch.setenv("HS_TEST_SECRET", SECRET)
    sentinel = tmp_path / "sentinel"
    check_hook_source(_hook(body))  # passes the policy: the worker is what stops it
    session = HookSession([("hostile", _hook(body))])
    started = time.monotonic()
    with pytest.raises(HookFailure) as info:
        session.call("hostile", _ctx({**extra, "sentinel": str(sentinel)}))
    elapsed = time.monotonic() - started
    session.close()
    assert elapsed < LIMITS.wall_seconds_per_call + WALL_MARGIN_S, f"{elapsed:.2f} s"
    assert SECRET not in str(info.value) and "\n" not in str(info.value)
    assert session.notebook == {}  # a failed call changes nothing, notebook included
    assert not sentinel.exists()
    assert HookSession([("ok", _hook("return {'inject': 'fine'}"))]).call("ok", {}) == {"inject": "fine"}


def test_one_episode_never_sees_another_episodes_state():
    keep = _hook("nb['answer'] = ctx['instruction']\n    return {'inject': str(sorted(nb.items()))}")
    first, second = HookSession([("k", keep)]), HookSession([("k", keep)])
    assert first.call("k", {"instruction": "the answer is 42"}) == {"inject": "[('answer', 'the answer is 42')]"}
    assert second.call("k", {"instruction": "other"}) == {"inject": "[('answer', 'other')]"}
    assert first.notebook == {"answer": "the answer is 42"} and second.notebook == {"answer": "other"}


def test_a_builtin_call_past_the_wall_budget_kills_and_replaces_the_worker():
    worker = HookWorker(SandboxLimits(wall_seconds_per_call=0.3, seconds_per_call=60, cpu_seconds=60))
    try:
        spin = HookSession(
            [("spin", _hook("n = 10\n    for i in range(40):\n        n = n * n\n    return None"))], worker
        )
        started = time.monotonic()
        with pytest.raises(HookFailure, match="wall-clock limit of 0.3 s exceeded; the hook worker was restarted"):
            spin.call("spin", {})
        assert time.monotonic() - started < 0.3 + WALL_MARGIN_S and worker.restarts == 1
        fine = HookSession([("ok", _hook("return {'inject': 'after'}"))], worker)
        assert fine.call("ok", {}) == {"inject": "after"} and worker.generation == 2
    finally:
        worker.close()


def test_the_kernel_stops_a_worker_past_its_cpu_seconds():
    worker = HookWorker(SandboxLimits(wall_seconds_per_call=30, seconds_per_call=60, cpu_seconds=1))
    try:
        spin = HookSession(
            [
                (
                    "spin",
                    _hook(
                        "n = 0\n    for i in range(100000):\n        for j in range(100000):\n"
                        "            n = n + 1\n    return None"
                    ),
                )
            ],
            worker,
        )
        started = time.monotonic()
        with pytest.raises(HookFailure, match="died"):
            spin.call("spin", {})
        assert time.monotonic() - started < 10
    finally:
        worker.close()


def test_a_lone_surrogate_in_a_hook_reply_is_replaced_not_raised():
    session = HookSession([("s", _hook("return {'inject': 'a\\ud800b'}"))])
    effects = session.call("s", {})
    session.close()
    assert effects["inject"].encode("utf-8") == b"a?b"


def test_the_worker_reports_its_confinement():
    worker = HookWorker()
    try:
        HookSession([("ok", _hook("return None"))], worker).call("ok", {})
        applied = worker.confinement
        assert applied["sandbox"] == "bwrap" and applied["network"] == "none" and applied["pid_namespace"]
        assert applied["memory_bytes"] == LIMITS.memory_bytes and applied["file_bytes"] == 0
        assert applied["processes"] == 0 and applied["user"] != 0
    finally:
        worker.close()


_RAW_ESCAPES = """
import json, os, socket, sys
sentinel = sys.argv[1]
out = {}
def attempt(name, fn):
    try:
        out[name] = ["ran", repr(fn())[:200]]
    except BaseException as exc:
        out[name] = ["refused", type(exc).__name__]
attempt("write_sentinel", lambda: open(sentinel, "w").write("x"))
attempt("write_tmp", lambda: open("/tmp/x", "w").write("x"))
attempt("read_passwd", lambda: open("/etc/passwd").read())
attempt("read_every_environ", lambda: [open(f"/proc/{p}/environ").read() for p in os.listdir("/proc") if p.isdigit()])
attempt("shell", lambda: os.system("touch " + sentinel) == 0 or 1 / 0)
attempt("fork", os.fork)
attempt("network", lambda: socket.create_connection(("127.0.0.1", 5432), timeout=1))
attempt("memory", lambda: len(bytearray(1 << 30)))
expected_tops = set(sys.argv[2].split(",")) | {"usr", "bin", "lib", "lib64", "sbin", "proc", "dev", "etc", "tmp"}
attempt("listdir_root", lambda: [p for p in os.listdir("/") if p not in expected_tops] and 1 / 0)
out["environ"] = dict(os.environ)
out["uid"] = os.getuid()
print(json.dumps(out))
"""


def test_the_os_confinement_alone_stops_raw_python(tmp_path, monkeypatch):
    """No policy here: raw Python under the hook worker's sandbox, as if hook code had escaped
    RestrictedPython and the checks."""
    from harness_pool.hook_client import worker_sandbox
    from sandbox import run
    from sandbox.jail import python_paths

    monkeypatch.setenv("HS_TEST_SECRET", SECRET)
    sentinel = tmp_path / "sentinel"
    layout, limits = worker_sandbox()
    bound = (*python_paths(), *layout.read_only, *layout.writable)
    tops = ",".join(sorted({p.strip("/").split("/")[0] for p in bound}))  # the checkout may live anywhere
    done = run([sys.executable, "-I", "-c", _RAW_ESCAPES, str(sentinel), tops], layout, limits, wall_seconds=60)
    assert done.returncode == 0, done.output[-2000:]
    out = json.loads(done.output)
    for name in ("write_sentinel", "write_tmp", "read_passwd", "fork", "memory", "network"):
        assert out[name][0] == "refused", (name, out[name])
    assert out["shell"][0] == "refused" and out["listdir_root"][0] == "ran"
    assert SECRET not in done.output and not sentinel.exists() and "HS_TEST_SECRET" not in out["environ"]


_PARENT_PEAK = """
import json, sys
sys.path.insert(0, sys.argv[1])
from harness_pool.hook_client import HookSession
from harness_pool.sandbox import HookFailure
cases = json.loads(sys.argv[2])
failed = 0
for source, ctx in cases:
    try:
        HookSession([("h", source)]).call("h", ctx)
    except HookFailure:
        failed += 1
# VmHWM, not ru_maxrss: Linux carries ru_maxrss over exec from the (v)forking pytest process
peak_kb = next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM"))
print(json.dumps({"failed": failed, "peak_mb": peak_kb / 1024}))
"""


def test_the_parent_stays_small_while_every_hostile_hook_runs():
    cases = [(_hook(body), _ctx(extra)) for body, extra in HOSTILE_RUNTIME]
    result = subprocess.run(
        [sys.executable, "-c", _PARENT_PEAK, str(Path(__file__).parents[2]), json.dumps(cases)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    out = json.loads(result.stdout)
    assert out["failed"] == len(cases)
    assert out["peak_mb"] < PARENT_RSS_BOUND_MB, out


def test_hostile_hooks_in_a_real_episode_change_nothing_outside_it(data_dir, tmp_path, monkeypatch):
    """The rollout engine with the real environment: every hook point runs hostile hooks."""
    from envs.dbbench.data import load_split
    from envs.dbbench.env import DbBenchEnv
    from harness_pool.spec import load_harness
    from rl.policy import Sampling
    from rl.rollout import RolloutSpec, run_rollouts
    from tests.rl.test_rollout import ReplayPolicy

    monkeypatch.setenv("HS_TEST_SECRET", SECRET)
    points = ("on_init", "before_model_call", "before_action", "after_step")
    hooks = [
        CodeHook(at=point, name=f"h{i}-{point}", source=_hook(body))
        for i, (body, _) in enumerate(HOSTILE_RUNTIME[:8])
        for point in points
    ]
    harness = load_harness("h0").model_copy(update={"code_hooks": hooks})
    task = next(t for t in load_split("dev", data_dir) if t.task_type == "counting")
    policy = ReplayPolicy(["Action: Operation\n```sql\nSELECT 1\n```", "Action: Answer\nFinal Answer: [1]"])
    started = time.monotonic()
    [result] = run_rollouts(policy, [RolloutSpec(task, harness, 0)], DbBenchEnv, Sampling())
    assert time.monotonic() - started < len(hooks) * 2 * (LIMITS.wall_seconds_per_call + WALL_MARGIN_S)
    errors = [e for t in result.turns for e in t.hook_events if e.get("effect") == "hook_error"]
    assert len(errors) >= len(hooks) and result.end_reason == "answered"
    stored = json.dumps([t.__dict__ for t in result.turns], default=str)
    assert SECRET not in stored and "hs-hook-root" not in stored
