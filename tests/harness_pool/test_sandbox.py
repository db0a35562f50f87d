"""The code-hook sandbox: static rejections name the construct; calls run in the worker, time- and output-limited."""

from __future__ import annotations

import pytest

from harness_pool.hook_client import HookSession
from harness_pool.sandbox import HookFailure, SandboxError, SandboxLimits, check_hook_source

GOOD = """
def hook(ctx, nb):
    nb["seen"] = nb.get("seen", 0) + 1
    if ctx["action_kind"] == "answer" and ctx["queries"] == 0:
        return {"block": "Query `" + ctx["table_name"] + "` first."}
    return None
"""


@pytest.mark.parametrize(
    "source, construct",
    [
        ("import os\ndef hook(ctx, nb):\n    return None", "'Import'"),
        ("def hook(ctx, nb):\n    from os import path\n    return None", "'ImportFrom'"),
        ("def hook(ctx, nb):\n    return ().__class__.__bases__", "'__bases__'"),
        ("def hook(ctx, nb):\n    return ctx._mapping", "'_mapping'"),
        ("def hook(ctx, nb):\n    return eval('1')", "'eval'"),
        ("def hook(ctx, nb):\n    return exec('x = 1')", "'exec'"),
        ("def hook(ctx, nb):\n    return open('/etc/passwd').read()", "'open'"),
        ("def hook(ctx, nb):\n    return getattr(ctx, 'copy')", "'getattr'"),
        ("def hook(ctx, nb):\n    return type(ctx)", "'type'"),
        ("def hook(ctx, nb):\n    f = eval\n    return None", "'eval'"),
        ("def hook(ctx, nb):\n    while True:\n        pass", "'While'"),
        ("def hook(ctx, nb):\n    with ctx as c:\n        pass", "'With'"),
        ("def hook(ctx, nb):\n    global x\n    return None", "'Global'"),
        ("def hook(ctx, nb):\n    return (lambda: 1)()", "'Lambda'"),
        ("class A:\n    pass\ndef hook(ctx, nb):\n    return None", "'ClassDef'"),
        ("def hook(ctx, nb):\n    try:\n        return 1\n    except Exception:\n        return 2", "'Try'"),
        ("def hook(ctx, nb):\n    return 'x' * 10000000", "multiplying"),
        ("x = 1\ndef hook(ctx, nb):\n    return None", "only define functions"),
        ("def other(ctx, nb):\n    return None", "def hook(ctx, nb)"),
        ("def hook(ctx):\n    return None", "def hook(ctx, nb)"),
        ("def hook(ctx, nb)\n    return None", "does not parse"),
        ("def hook(ctx, nb):\n    return 2 ** 64", "'Pow' is not allowed in hook code (line 2)"),
        ("def hook(ctx, nb):\n    def inner():\n        return 1\n    return None", "nested function 'inner'"),
        ("def helper(x, seen=[]):\n    return x\ndef hook(ctx, nb):\n    return None", "default argument values"),
        ("def helper(x, *, seen=1):\n    return x\ndef hook(ctx, nb):\n    return None", "default argument values"),
        ("def hook(ctx, nb):\n    return {'inject': '{0.gi_frame}'.format(ctx)}", "reads an attribute or index"),
        ("def hook(ctx, nb):\n    t = ctx['instruction']\n    return {'inject': t.format(ctx)}", "constant template"),
        ("def hook(ctx, nb):\n    return (x for x in ()).gi_frame", "'gi_frame' is not allowed"),
        ("def hook(ctx, nb):\n    nb.seen = 1\n    return None", "assigning to the attribute 'seen'"),
        ("def hook(ctx, nb):\n    return {'inject': f'{1:>1000000000}'}", "format width above"),
        ("def hook(ctx, nb):\n    return {'inject': 'x'.ljust(1000000000)}", "'ljust' with a width"),
        ("def hook(ctx, nb):\n    return {'inject': '%*s' % (5, 'x')}", "'*' width"),
    ],
)
def test_static_check_rejects_with_the_offending_construct(source, construct):
    with pytest.raises(SandboxError, match=None) as info:
        check_hook_source(source)
    assert construct in str(info.value) and "\n" not in str(info.value)


def test_oversize_code_is_rejected():
    body = "".join(f"    x{i} = {i}\n" for i in range(400))
    with pytest.raises(SandboxError, match="characters; the limit is 4000"):
        check_hook_source("def hook(ctx, nb):\n" + body + "    return None\n")
    with pytest.raises(SandboxError, match="syntax nodes"):
        check_hook_source(GOOD, SandboxLimits(max_nodes=20))


def _call(source: str, ctx: dict | None = None, nb: dict | None = None) -> dict:
    session = HookSession([("t", source)])
    session.notebook = dict(nb or {})
    try:
        return session.call("t", ctx or {})
    finally:
        session.close()


def test_a_good_hook_runs_with_a_read_only_context_and_a_notebook():
    session = HookSession([("good", GOOD)])
    ctx = {"action_kind": "answer", "queries": 0, "table_name": "Sales"}
    assert session.call("good", ctx) == {"block": "Query `Sales` first."}
    assert session.call("good", {**ctx, "queries": 1}) == {}
    assert session.notebook == {"seen": 2}  # the notebook persists across calls of one episode
    assert HookSession([("good", GOOD)]).notebook == {}  # and never into the next episode
    with pytest.raises(HookFailure, match="only change dicts and lists, not mappingproxy"):
        _call("def hook(ctx, nb):\n    ctx['queries'] = 5\n    return None", {"queries": 0})


def test_an_endless_loop_is_stopped_by_the_time_limit():
    with pytest.raises(HookFailure, match="time limit"):
        _call(
            "def hook(ctx, nb):\n    n = 0\n    for i in range(100000):\n"
            "        for j in range(100000):\n            n = n + 1\n    return None"
        )
    with pytest.raises(HookFailure, match="range of"):
        _call("def hook(ctx, nb):\n    return {'inject': str(len(range(10000000)))}")


def test_hidden_builtins_and_bad_outputs_fail_the_call():
    with pytest.raises(HookFailure, match="NameError"):
        _call("def hook(ctx, nb):\n    return {'inject': repr(ctx)}")
    with pytest.raises(HookFailure, match="keys among"):
        _call("def hook(ctx, nb):\n    return {'force': 'x'}")
    with pytest.raises(HookFailure, match="over 2000 characters"):
        _call("def hook(ctx, nb):\n    return {'inject': 'ab' * 5000}")
