"""Sandbox for harness code hooks `hook(ctx, nb)`.

A code hook is a small Python function an editor writes: it reads a read-only context (`ctx`,
the episode's counters, last observation, the action being taken) and a per-episode notebook
(`nb`, a dict it may keep notes in), and returns None or a dict of effects:
    {"inject": text}   a hint added to what the policy sees next (any hook point)
    {"block": text}    before_action only: refuse the action, show text, spend a round
    {"rewrite": sql}   before_action only, SQL actions: run this SQL instead

Static check (before anything runs): the source parses; the module holds only function
definitions, one of them `def hook(ctx, nb)`; every AST node is of a whitelisted kind (no
import, while, with, try, global, lambda, class, ...); no name or attribute starts with `_`;
no call or mention of eval/exec/open/getattr/type/...; size limits. At run time the hook sees
only whitelisted builtins (`range` capped), a per-call time limit stops endless loops (a line
tracer), and its output is size-limited. Memory is not bounded beyond that: keep hooks small.
"""

from __future__ import annotations

import ast
import builtins
import sys
import time
from dataclasses import dataclass
from types import MappingProxyType


class SandboxError(ValueError):
    """Hook source rejected by the static check; the message names the construct and line."""


class HookFailure(RuntimeError):
    """A hook call that failed (exception, time limit, bad output); the call has no effect."""


@dataclass(frozen=True)
class SandboxLimits:
    max_chars: int = 4000
    max_nodes: int = 1500
    seconds_per_call: float = 0.05
    max_output_chars: int = 2000
    max_range: int = 100_000


LIMITS = SandboxLimits()
HOOK_NAME = "hook"
EFFECTS = ("inject", "block", "rewrite")

_ALLOWED = tuple(getattr(ast, n) for n in (
    "Module", "FunctionDef", "arguments", "arg", "Return", "If", "For", "Break", "Continue", "Pass", "Assign",
    "AugAssign", "Expr", "BoolOp", "BinOp", "UnaryOp", "Compare", "Call", "keyword", "IfExp", "Dict", "List",
    "Tuple", "Set", "ListComp", "SetComp", "DictComp", "GeneratorExp", "comprehension", "Subscript", "Slice",
    "Attribute", "Name", "Load", "Store", "Constant", "JoinedStr", "FormattedValue", "Starred",
    "And", "Or", "Add", "Sub", "Mult", "Div", "FloorDiv", "Mod", "Not", "USub", "UAdd", "Eq", "NotEq", "Lt",
    "LtE", "Gt", "GtE", "In", "NotIn", "Is", "IsNot"))

_FORBIDDEN_NAMES = {"eval", "exec", "open", "getattr", "setattr", "delattr", "hasattr", "type", "compile",
                    "globals", "locals", "vars", "dir", "input", "breakpoint", "help", "memoryview", "object",
                    "super", "id", "classmethod", "staticmethod", "property", "exit", "quit", "print"}

_SAFE_BUILTINS = {name: getattr(builtins, name) for name in (
    "len", "min", "max", "sum", "sorted", "reversed", "enumerate", "zip", "abs", "round", "any", "all", "str",
    "int", "float", "bool", "list", "dict", "set", "tuple", "isinstance")}


def _walk(tree: ast.AST):
    """Every node with the line of its nearest located ancestor (operators carry no line)."""
    stack = [(tree, 0)]
    while stack:
        node, line = stack.pop()
        line = getattr(node, "lineno", line)
        yield node, f"line {line}"
        stack.extend((child, line) for child in ast.iter_child_nodes(node))


def check_hook_source(source: str, limits: SandboxLimits = LIMITS) -> ast.Module:
    """The parsed module if `source` passes the static check; else SandboxError (one line)."""
    if len(source) > limits.max_chars:
        raise SandboxError(f"hook code is {len(source)} characters; the limit is {limits.max_chars}")
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        raise SandboxError(f"hook code does not parse: {exc.msg} (line {exc.lineno})") from None
    nodes = list(_walk(tree))
    if len(nodes) > limits.max_nodes:
        raise SandboxError(f"hook code has {len(nodes)} syntax nodes; the limit is {limits.max_nodes}")
    for node, where in nodes:
        if not isinstance(node, _ALLOWED):
            raise SandboxError(f"'{type(node).__name__}' is not allowed in hook code ({where})")
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult) and _big_constant(node, limits):
            raise SandboxError(f"multiplying by a constant above {limits.max_range} is not allowed ({where})")
        name = _name_of(node)
        if name is not None and name.startswith("_"):
            raise SandboxError(f"name '{name}' starts with '_', which is not allowed in hook code ({where})")
        if name in _FORBIDDEN_NAMES and not isinstance(node, ast.keyword):
            raise SandboxError(f"'{name}' is not allowed in hook code ({where})")
    if not all(isinstance(stmt, ast.FunctionDef) for stmt in tree.body):
        raise SandboxError("hook code may only define functions at the top level")
    hooks = [f for f in tree.body if f.name == HOOK_NAME]
    if len(hooks) != 1 or [a.arg for a in hooks[0].args.args] != ["ctx", "nb"] or hooks[0].decorator_list:
        raise SandboxError("hook code must define exactly one undecorated 'def hook(ctx, nb):'")
    return tree


def _name_of(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, (ast.FunctionDef, ast.keyword)):
        return node.name if isinstance(node, ast.FunctionDef) else node.arg
    if isinstance(node, ast.arg):
        return node.arg
    return None


def _big_constant(node: ast.BinOp, limits: SandboxLimits) -> bool:
    return any(isinstance(side, ast.Constant) and isinstance(side.value, int) and abs(side.value) > limits.max_range
               for side in (node.left, node.right))


class _Deadline:
    """A line tracer that raises once the wall-clock budget of one call is spent."""

    def __init__(self, seconds: float):
        self.until = time.perf_counter() + seconds

    def __call__(self, frame, event, arg):
        if time.perf_counter() > self.until:
            raise HookFailure("time limit exceeded")
        return self


class CompiledHook:
    """A checked hook, ready to call; each call is time- and output-limited."""

    def __init__(self, source: str, name: str = HOOK_NAME, limits: SandboxLimits = LIMITS):
        tree = check_hook_source(source, limits)
        self.name, self.limits = name, limits

        def capped_range(*args):
            r = range(*args)
            if len(r) > limits.max_range:
                raise HookFailure(f"range of {len(r)} items is over the limit of {limits.max_range}")
            return r

        namespace = {"__builtins__": {**_SAFE_BUILTINS, "range": capped_range}}
        exec(compile(tree, f"<hook {name}>", "exec"), namespace)  # noqa: S102 - checked source, no builtins
        self._fn = namespace[HOOK_NAME]

    def __call__(self, ctx: dict, nb: dict) -> dict[str, str]:
        """The hook's effects ({} for none). Raises HookFailure on any error."""
        previous = sys.gettrace()
        sys.settrace(_Deadline(self.limits.seconds_per_call))
        try:
            out = self._fn(MappingProxyType(dict(ctx)), nb)
        except HookFailure:
            raise
        except Exception as exc:  # any error inside the hook: no effect, reported by the caller
            raise HookFailure(f"{type(exc).__name__}: {exc}") from None
        finally:
            sys.settrace(previous)
        return self._effects(out)

    def _effects(self, out) -> dict[str, str]:
        if out is None:
            return {}
        if not isinstance(out, dict) or not set(out) <= set(EFFECTS):
            raise HookFailure(f"a hook returns None or a dict with keys among {list(EFFECTS)}")
        if not all(isinstance(v, str) for v in out.values()):
            raise HookFailure("hook effects must be strings")
        if sum(len(v) for v in out.values()) > self.limits.max_output_chars:
            raise HookFailure(f"hook output is over {self.limits.max_output_chars} characters")
        return dict(out)
