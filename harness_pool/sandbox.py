"""The policy for harness code hooks `hook(ctx, nb)`, and the restricted compile that runs them.

A code hook is a small Python function an editor (an LLM) writes, so it is hostile input. It
reads a read-only context (`ctx`: the episode's counters, last observation, the action being
taken) and a per-episode notebook (`nb`, a dict of JSON values it may keep notes in), and
returns None or a dict of effects:
    {"inject": text}   a hint added to what the policy sees next (any hook point)
    {"block": text}    before_action only: refuse the action, show text, spend a round
    {"rewrite": sql}   before_action only, SQL actions: run this SQL instead

Three layers, outermost first (docs/security.md says what each one stops):
1. The OS boundary (harness_pool/hook_worker.py): hooks run only in a separate worker process
   with no environment, no network, no files, an unprivileged user and address-space / CPU
   limits; the parent kills a call that overruns its wall-clock budget.
2. This static policy (`check_hook_source`), run in the parent on every harness and again in
   the worker: whitelisted syntax; one top-level `def hook(ctx, nb)` plus plain helpers; no
   nested functions, default arguments, attribute assignment, names starting with `_`, or
   attributes that reach frames, code objects or globals; `str.format` only on a constant
   template without attribute or index fields; constant sizes for repetition, padding and
   format widths.
3. RestrictedPython's guarded compile (`compile_hook`): every attribute read goes through
   `_getattr_`, every item write through `_write_`, and `*`, `%` are size-checked at run time;
   a line tracer stops Python-level loops after `seconds_per_call`.
"""

from __future__ import annotations

import ast
import builtins
import re
import string
import sys
import time
from dataclasses import dataclass
from types import MappingProxyType

from RestrictedPython import compile_restricted
from RestrictedPython.Guards import guarded_iter_unpack_sequence, guarded_unpack_sequence
from RestrictedPython.transformer import INSPECT_ATTRIBUTES, RestrictingNodeTransformer, copy_locations


class SandboxError(ValueError):
    """Hook source rejected by the static check; the message names the construct and line."""


class HookFailure(RuntimeError):
    """A hook call that failed (exception, time or memory limit, bad output); the call has no effect."""


@dataclass(frozen=True)
class SandboxLimits:
    max_chars: int = 4000  # source size
    max_nodes: int = 1500  # syntax nodes
    seconds_per_call: float = 0.05  # Python-line budget inside the worker (a tracer)
    wall_seconds_per_call: float = 1.0  # the parent kills the worker past this
    max_output_chars: int = 2000  # all effect strings together
    max_notebook_chars: int = 20_000  # the notebook as JSON, after each call
    max_range: int = 100_000  # range() length, constant repetition and widths
    max_sequence: int = 100_000  # length of a str/list/tuple built by * at run time
    memory_bytes: int = 512 * 2**20  # the worker's address space
    cpu_seconds: int = 2  # CPU seconds one call may use before the kernel stops the worker


LIMITS = SandboxLimits()
HOOK_NAME = "hook"
EFFECTS = ("inject", "block", "rewrite")

_ALLOWED = tuple(
    getattr(ast, n)
    for n in (
        "Module",
        "FunctionDef",
        "arguments",
        "arg",
        "Return",
        "If",
        "For",
        "Break",
        "Continue",
        "Pass",
        "Assign",
        "AugAssign",
        "Expr",
        "BoolOp",
        "BinOp",
        "UnaryOp",
        "Compare",
        "Call",
        "keyword",
        "IfExp",
        "Dict",
        "List",
        "Tuple",
        "Set",
        "ListComp",
        "SetComp",
        "DictComp",
        "GeneratorExp",
        "comprehension",
        "Subscript",
        "Slice",
        "Attribute",
        "Name",
        "Load",
        "Store",
        "Constant",
        "JoinedStr",
        "FormattedValue",
        "Starred",
        "And",
        "Or",
        "Add",
        "Sub",
        "Mult",
        "Div",
        "FloorDiv",
        "Mod",
        "Not",
        "USub",
        "UAdd",
        "Eq",
        "NotEq",
        "Lt",
        "LtE",
        "Gt",
        "GtE",
        "In",
        "NotIn",
        "Is",
        "IsNot",
    )
)

_FORBIDDEN_NAMES = {
    "eval",
    "exec",
    "open",
    "getattr",
    "setattr",
    "delattr",
    "hasattr",
    "type",
    "compile",
    "globals",
    "locals",
    "vars",
    "dir",
    "input",
    "breakpoint",
    "help",
    "memoryview",
    "object",
    "super",
    "id",
    "classmethod",
    "staticmethod",
    "property",
    "exit",
    "quit",
    "print",
}

# Attributes that lead from an ordinary object to frames, code, globals or the interpreter:
# RestrictedPython's list plus the async-generator, function and method ones it leaves out.
FORBIDDEN_ATTRIBUTES = frozenset(
    INSPECT_ATTRIBUTES
    | {
        "ag_frame",
        "ag_code",
        "ag_await",
        "gi_running",
        "f_lasti",
        "f_lineno",
        "co_consts",
        "co_names",
        "func_globals",
        "func_code",
        "im_func",
        "im_self",
        "mro",
        "tb_lasti",
        "tb_lineno",
    }
)
_FORMAT_METHODS = ("format", "format_map")
_WIDTH_METHODS = ("ljust", "rjust", "center", "zfill", "expandtabs")
_PERCENT_SPEC = re.compile(r"%(?:\([^)]*\))?[-#0 +]*(\*|\d*)(?:\.(\*|\d*))?[hlL]?[a-zA-Z%]")
_SPEC_WIDTH = re.compile(r"(\d+)")

_SAFE_BUILTINS = {
    name: getattr(builtins, name)
    for name in (
        "len",
        "min",
        "max",
        "sum",
        "sorted",
        "reversed",
        "enumerate",
        "zip",
        "abs",
        "round",
        "any",
        "all",
        "str",
        "int",
        "float",
        "bool",
        "list",
        "dict",
        "set",
        "tuple",
        "isinstance",
        "True",
        "False",
        "None",
    )
}


def _walk(tree: ast.AST):
    """Every node with the line of its nearest located ancestor, and its depth in function defs."""
    stack = [(tree, 0, 0)]
    while stack:
        node, line, depth = stack.pop()
        line = getattr(node, "lineno", line)
        inner = depth + isinstance(node, ast.FunctionDef)
        yield node, f"line {line}", depth
        stack.extend((child, line, inner) for child in ast.iter_child_nodes(node))


def check_hook_source(source: str, limits: SandboxLimits = LIMITS) -> ast.Module:
    """The parsed module if `source` passes the static policy; else SandboxError (one line)."""
    if not isinstance(source, str):
        raise SandboxError("hook code must be a string of Python source")
    if len(source) > limits.max_chars:
        raise SandboxError(f"hook code is {len(source)} characters; the limit is {limits.max_chars}")
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        raise SandboxError(f"hook code does not parse: {exc.msg} (line {exc.lineno})") from None
    except (ValueError, RecursionError, MemoryError) as exc:
        raise SandboxError(f"hook code does not parse: {type(exc).__name__}") from None
    nodes = list(_walk(tree))
    if len(nodes) > limits.max_nodes:
        raise SandboxError(f"hook code has {len(nodes)} syntax nodes; the limit is {limits.max_nodes}")
    for node, where, depth in nodes:
        problem = _problem(node, depth, limits)
        if problem:
            raise SandboxError(f"{problem} ({where})")
    if not all(isinstance(stmt, ast.FunctionDef) for stmt in tree.body):
        raise SandboxError("hook code may only define functions at the top level")
    hooks = [f for f in tree.body if f.name == HOOK_NAME]
    if len(hooks) != 1 or [a.arg for a in hooks[0].args.args] != ["ctx", "nb"]:
        raise SandboxError("hook code must define exactly one undecorated 'def hook(ctx, nb):'")
    return tree


def _problem(node: ast.AST, depth: int, limits: SandboxLimits) -> str | None:
    """Why `node` breaks the policy, or None."""
    if not isinstance(node, _ALLOWED):
        return f"'{type(node).__name__}' is not allowed in hook code"
    name = _name_of(node)
    if name is not None and name.startswith("_"):
        return f"name '{name}' starts with '_', which is not allowed in hook code"
    if name in _FORBIDDEN_NAMES and not isinstance(node, ast.keyword):
        return f"'{name}' is not allowed in hook code"
    if isinstance(node, ast.FunctionDef):
        return _function_problem(node, depth)
    if isinstance(node, ast.Attribute):
        return _attribute_problem(node, limits)
    if isinstance(node, ast.arg) and node.annotation is not None:
        return f"the annotation on argument '{node.arg}' is not allowed"
    if isinstance(node, ast.BinOp):
        return _binop_problem(node, limits)
    if isinstance(node, ast.FormattedValue):
        return _fstring_problem(node, limits)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _WIDTH_METHODS:
        if any(_big_int(arg, limits) for arg in node.args):
            return f"'{node.func.attr}' with a width above {limits.max_range} is not allowed"
    return None


def _function_problem(node: ast.FunctionDef, depth: int) -> str | None:
    args = node.args
    if depth > 0:
        return f"the nested function '{node.name}' is not allowed; define helpers at the top level"
    if node.decorator_list:
        return f"the decorator on '{node.name}' is not allowed"
    if args.defaults or args.kw_defaults:
        return f"default argument values in '{node.name}' are not allowed (they keep state between calls)"
    if args.vararg or args.kwarg or args.kwonlyargs or args.posonlyargs:
        return f"'{node.name}' may only take plain positional arguments"
    if node.returns is not None:
        return f"the return annotation on '{node.name}' is not allowed"
    return None


def _attribute_problem(node: ast.Attribute, limits: SandboxLimits) -> str | None:
    if node.attr in FORBIDDEN_ATTRIBUTES:
        return f"the attribute '{node.attr}' is not allowed in hook code (it reaches the interpreter)"
    if not isinstance(node.ctx, ast.Load):
        return f"assigning to the attribute '{node.attr}' is not allowed; keep notes in nb"
    if node.attr in _FORMAT_METHODS:
        if not (isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)):
            return f"'.{node.attr}' is only allowed on a constant template string; use an f-string"
        return template_problem(node.value.value, limits)
    return None


def _binop_problem(node: ast.BinOp, limits: SandboxLimits) -> str | None:
    if isinstance(node.op, ast.Mult) and (_big_int(node.left, limits) or _big_int(node.right, limits)):
        return f"multiplying by a constant above {limits.max_range} is not allowed"
    if isinstance(node.op, ast.Mod) and isinstance(node.left, ast.Constant) and isinstance(node.left.value, str):
        return percent_problem(node.left.value, limits)
    return None


def _fstring_problem(node: ast.FormattedValue, limits: SandboxLimits) -> str | None:
    spec = node.format_spec
    if spec is None:
        return None
    if not all(isinstance(part, ast.Constant) for part in spec.values):
        return "a computed format spec inside an f-string is not allowed"
    return _width_problem("".join(str(part.value) for part in spec.values), limits)


def template_problem(template: str, limits: SandboxLimits = LIMITS) -> str | None:
    """Why a str.format template is unsafe, or None: attribute/index fields walk objects from inside a
    string, big widths build huge strings. The same policy bounds harness templates (harness_pool/spec.py)."""
    try:
        fields = list(string.Formatter().parse(template))
    except ValueError as exc:
        return f"the format template does not parse: {exc}"
    for _, field, spec, _ in fields:
        if field and ("." in field or "[" in field):
            return f"the format field '{{{field}}}' reads an attribute or index, which is not allowed"
        if spec and "{" in spec:
            return "a nested format spec is not allowed"
        problem = _width_problem(spec, limits) if spec else None
        if problem:
            return problem
    return None


def percent_problem(template: str, limits: SandboxLimits) -> str | None:
    """Why a %-template is unsafe (a '*' width or a width/precision above the limit), or None."""
    for match in _PERCENT_SPEC.finditer(template):
        for size in match.groups():
            if size == "*":
                return "a '*' width in a %-template is not allowed"
            if size and _above(size, limits.max_range):
                return f"a format width above {limits.max_range} is not allowed"
    return None


def _width_problem(spec: str, limits: SandboxLimits) -> str | None:
    if any(_above(n, limits.max_range) for n in _SPEC_WIDTH.findall(spec)):
        return f"a format width above {limits.max_range} is not allowed"
    return None


def _above(digits: str, limit: int) -> bool:
    """int(digits) > limit, without int() of a number too long for Python to convert (over 4,300 digits)."""
    digits = digits.lstrip("0") or "0"
    return len(digits) > len(str(limit)) or int(digits) > limit


def _name_of(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.FunctionDef):
        return node.name
    if isinstance(node, ast.keyword):
        return node.arg
    if isinstance(node, ast.arg):
        return node.arg
    return None


def _big_int(node: ast.AST, limits: SandboxLimits) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, int) and abs(node.value) > limits.max_range


# ------------------------------------------------------------------ restricted compile (worker side)


class _HookTransformer(RestrictingNodeTransformer):
    """RestrictedPython's policy, plus run-time size checks on `a * b` and `a % b`."""

    def visit_BinOp(self, node):  # noqa: N802 - ast.NodeVisitor's naming
        node = self.node_contents_visit(node)
        guard = {ast.Mult: "_mul_", ast.Mod: "_mod_"}.get(type(node.op))
        if guard is None:
            return node
        call = ast.Call(func=ast.Name(guard, ast.Load()), args=[node.left, node.right], keywords=[])
        copy_locations(call, node)
        return call


class _Guards:
    """The run-time guards RestrictedPython's compiled code calls (`_getattr_`, `_write_`, ...)."""

    def __init__(self, limits: SandboxLimits):
        self.limits = limits

    def sized(self, value):
        if isinstance(value, (str, list, tuple, bytes)) and len(value) > self.limits.max_sequence:
            raise HookFailure(f"a value of {len(value)} items is over the limit of {self.limits.max_sequence}")
        return value

    def mul(self, left, right):
        for seq, times in ((left, right), (right, left)):
            if isinstance(seq, (str, list, tuple, bytes)) and isinstance(times, int):
                if len(seq) * max(times, 0) > self.limits.max_sequence:
                    raise HookFailure(f"repetition to {len(seq) * times} items is over {self.limits.max_sequence}")
        return left * right

    def mod(self, left, right):
        if isinstance(left, str):
            problem = percent_problem(left, self.limits)
            if problem:
                raise HookFailure(problem)
            return self.sized(left % right)
        return left % right

    def getattr(self, obj, name):
        if not isinstance(name, str) or name.startswith("_") or name in FORBIDDEN_ATTRIBUTES:
            raise HookFailure(f"the attribute {name!r} is not allowed")
        if isinstance(obj, type) and name in _FORMAT_METHODS:
            raise HookFailure(f"'{obj.__name__}.{name}' is not allowed; call it on a constant template")
        value = getattr(obj, name)
        if isinstance(obj, str) and name in _FORMAT_METHODS:
            problem = template_problem(obj, self.limits)
            if problem:
                raise HookFailure(problem)
            return lambda *a, **k: self.sized(value(*a, **k))
        if isinstance(obj, str) and name in _WIDTH_METHODS:

            def checked(*args):
                if any(isinstance(a, int) and a > self.limits.max_range for a in args):
                    raise HookFailure(f"'{name}' with a width above {self.limits.max_range} is not allowed")
                return value(*args)

            return checked
        if isinstance(obj, str) and name in ("replace", "join"):
            return lambda *a, **k: self.sized(value(*a, **k))
        return value

    @staticmethod
    def write(obj):
        if isinstance(obj, (dict, list)):
            return obj
        raise HookFailure(f"a hook may only change dicts and lists, not {type(obj).__name__}")

    def inplace(self, op: str, left, right):
        if op == "*=":
            return self.mul(left, right)
        if op == "%=":
            return self.mod(left, right)
        operators = {
            "+=": lambda a, b: a + b,
            "-=": lambda a, b: a - b,
            "/=": lambda a, b: a / b,
            "//=": lambda a, b: a // b,
        }
        if op not in operators:
            raise HookFailure(f"the operator {op} is not allowed")
        return self.sized(operators[op](left, right))

    def capped_range(self, *args):
        r = range(*args)
        if len(r) > self.limits.max_range:
            raise HookFailure(f"range of {len(r)} items is over the limit of {self.limits.max_range}")
        return r


def compile_hook(source: str, name: str = HOOK_NAME, limits: SandboxLimits = LIMITS):
    """A fresh `hook` function: the policy checked again, then RestrictedPython's guarded compile.

    Every call gets new globals, so nothing one compile keeps can reach another. Only the hook
    worker calls this; the parent never executes hook code.
    """
    check_hook_source(source, limits)
    try:
        code = compile_restricted(source, f"<hook {name}>", "exec", policy=_HookTransformer)
    except SyntaxError as exc:
        raise SandboxError(f"hook code rejected: {exc.msg if hasattr(exc, 'msg') else exc}") from None
    guards = _Guards(limits)
    namespace = {
        "__builtins__": {**_SAFE_BUILTINS, "range": guards.capped_range},
        "__name__": "hook",
        "_getattr_": guards.getattr,
        "_getitem_": lambda obj, key: obj[key],
        "_getiter_": iter,
        "_write_": guards.write,
        "_inplacevar_": guards.inplace,
        "_mul_": guards.mul,
        "_mod_": guards.mod,
        "_iter_unpack_sequence_": guarded_iter_unpack_sequence,
        "_unpack_sequence_": guarded_unpack_sequence,
    }
    exec(code, namespace)  # noqa: S102 - checked, restricted code with no real builtins, in the worker
    return namespace[HOOK_NAME]


class _Deadline:
    """A line tracer that raises once the budget of one call is spent (Python-level loops)."""

    def __init__(self, seconds: float):
        self.until = time.perf_counter() + seconds

    def __call__(self, frame, event, arg):
        if time.perf_counter() > self.until:
            raise HookFailure("time limit exceeded")
        return self


def call_hook(fn, ctx: dict, nb: dict, limits: SandboxLimits = LIMITS) -> dict[str, str]:
    """Run one compiled hook on a read-only ctx; its validated effects. Raises HookFailure."""
    frozen = MappingProxyType({k: tuple(v) if isinstance(v, list) else v for k, v in ctx.items()})
    previous = sys.gettrace()
    sys.settrace(_Deadline(limits.seconds_per_call))
    try:
        out = fn(frozen, nb)
    except HookFailure:
        raise
    except MemoryError:
        raise HookFailure("memory limit exceeded") from None
    except RecursionError:
        raise HookFailure("recursion limit exceeded") from None
    except Exception as exc:  # noqa: BLE001 - any error inside the hook: no effect, reported by the caller
        raise HookFailure(f"{type(exc).__name__}: {str(exc)[:200]}") from None
    finally:
        sys.settrace(previous)
    return validate_effects(out, limits)


def validate_effects(out, limits: SandboxLimits = LIMITS) -> dict[str, str]:
    if out is None:
        return {}
    if not isinstance(out, dict) or not set(out) <= set(EFFECTS):
        raise HookFailure(f"a hook returns None or a dict with keys among {list(EFFECTS)}")
    if not all(isinstance(v, str) for v in out.values()):
        raise HookFailure("hook effects must be strings")
    if sum(len(v) for v in out.values()) > limits.max_output_chars:
        raise HookFailure(f"hook output is over {limits.max_output_chars} characters")
    return {k: str(v) for k, v in out.items()}
