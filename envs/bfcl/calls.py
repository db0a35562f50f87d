"""Function calls against BFCL's API objects, parsed and run without `eval`.

A call is written in Python call syntax, `name(arg, key=value)`, several as a list
`[cd(folder='docs'), ls()]`. We parse with `ast` and accept only a bare function name and literal
arguments (strings, numbers, booleans, None, and lists, tuples, dicts and sets of those), so the
policy's text can reach nothing but the public methods of the task's API objects. Sizes are
capped: the text, the number of calls, and every argument as a literal (envs/literals.py: depth,
integer digits, values, characters), so a call that could not be recorded, printed or sent to the
API process whole is refused before it runs. A call built from JSON (the JSON tool view) passes
`check_call`: its name and keywords must be identifiers, since the API process runs the call's
text and a keyword like `folder='x') #` would run as a different call. A call that fails becomes
the text "Error during execution: ..." as an observation; results are turned into text the way the
benchmark's checker compares them (strings as they are, dicts as JSON, anything else with str()).
"""

from __future__ import annotations

import ast
import json

from envs.base import ToolCall, is_plain_name
from envs.literals import literals_problem

MAX_CALL_CHARS = 12_000  # one reply's calls, as text (long_context ground truth posts ~4,300-character tweets)
MAX_CALLS = 16  # per reply
MAX_RESULT_CHARS = 4_000  # one call's result, as text


class CallError(ValueError):
    """A call that cannot be run (the message is what the agent sees)."""


class CallLimit(CallError):
    """A call whose arguments are over the literal bounds (envs/literals.py)."""


def parse_calls(text: str, max_chars: int | None = MAX_CALL_CHARS) -> list[ToolCall]:
    """`[f(a=1), g('x')]`, `f(a=1)` or `f(a=1); g()` -> calls; CallError with the reason otherwise.
    `max_chars` bounds the policy's text (None: the benchmark's own ground truth)."""
    text = (text or "").strip()
    if max_chars is not None and len(text) > max_chars:
        raise CallError(f"the calls are longer than {max_chars} characters")
    if not text:
        raise CallError("no function call")
    try:
        tree = ast.parse(text, mode="exec")
    except SyntaxError as exc:
        raise CallError(f"not valid call syntax ({exc.msg})") from None
    nodes = []
    for statement in tree.body:
        if not isinstance(statement, ast.Expr):
            raise CallError("only function calls are allowed")
        value = statement.value
        nodes.extend(value.elts if isinstance(value, (ast.List, ast.Tuple)) else [value])
    if len(nodes) > MAX_CALLS:
        raise CallError(f"more than {MAX_CALLS} calls in one reply")
    calls = [_call(node) for node in nodes]
    if max_chars is not None:  # the benchmark's own ground truth is trusted
        for call in calls:
            check_call(call)
    return calls


def _call(node: ast.AST) -> ToolCall:
    if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name):
        raise CallError("each item must be a call of a listed function by name, e.g. ls()")
    if any(k.arg is None for k in node.keywords):
        raise CallError(f"{node.func.id}: **arguments are not allowed")
    try:
        args = tuple(ast.literal_eval(a) for a in node.args)
        kwargs = {k.arg: ast.literal_eval(k.value) for k in node.keywords}
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        raise CallError(f"{node.func.id}: arguments must be literal values (strings, numbers, lists, ...)") from None
    return ToolCall(node.func.id, args, kwargs)


def check_call(call: ToolCall) -> None:
    """CallError (one line) unless the call's text runs exactly this call: a plain function name,
    keywords that are identifiers, and arguments within the literal bounds."""
    if not isinstance(call.name, str) or not is_plain_name(call.name):
        raise CallError(f"{_head(call.name)} is not a function name (ASCII letters, digits and _ only)")
    for key in call.kwargs:
        if not isinstance(key, str) or not is_plain_name(key):
            raise CallError(f"{call.name}: {_head(key)} is not an argument name (ASCII letters, digits and _ only)")
    problem = literals_problem([*call.args, *call.kwargs.values()])
    if problem is not None:
        raise CallLimit(f"{call.name}: the arguments are not allowed: {problem}")


def _head(value: object) -> str:
    """A short, printable quote of a name the policy gave (which may be anything JSON holds)."""
    return repr(value[:60]) if isinstance(value, str) else f"a {type(value).__name__}"


def as_text(value) -> str:
    """A result as the benchmark's checker compares it."""
    if isinstance(value, str):
        text = value
    elif isinstance(value, dict):
        try:
            text = json.dumps(value)
        except (TypeError, ValueError):
            text = str(value)
    else:
        text = str(value)
    return text


def run_call(objects: dict, allowed: set[str], call: ToolCall) -> str:
    """Run one call on the API object that has the method; its result (or error) as text."""
    if call.name not in allowed:
        return f"Error during execution: no function named {call.name!r} is available"
    for obj in objects.values():
        method = getattr(type(obj), call.name, None)
        if callable(method) and not call.name.startswith("_"):
            try:
                return as_text(getattr(obj, call.name)(*call.args, **call.kwargs))
            except Exception as exc:  # noqa: BLE001 - the API's own errors are observations
                return f"Error during execution: {exc}"
    return f"Error during execution: no function named {call.name!r} is available"


def clip(text: str) -> str:
    return text if len(text) <= MAX_RESULT_CHARS else text[:MAX_RESULT_CHARS] + " ...[cut]"
