"""Candidate bugs for a Python module, by small edits of its syntax tree.

Each candidate replaces one exact span of the source (a node's own text) with the text of a
mutated node, so the injected diff is a line or two and the rest of the file is untouched.
Operators, in our own naming:
- compare_swap: < <=, > >=, == !=, is / is not, in / not in swapped;
- arith_swap: + -, * / (// %), on a binary operation;
- bool_swap: and / or;
- off_by_one: an integer bound in a slice, an index or a range() argument moved by one;
- negate_condition: an if/while/ternary test inverted (`not (...)`);
- wrong_default: a keyword default changed (True/False flipped, an int moved by one, None -> 0);
- swap_arguments: the first two positional arguments of a call swapped;
- drop_statement: an assignment, augmented assignment or call statement replaced by `pass`.
The order of candidates is the order of the tree walk, so a seed's shuffle is reproducible.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

_COMPARE = {ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt, ast.Eq: ast.NotEq,
            ast.NotEq: ast.Eq, ast.Is: ast.IsNot, ast.IsNot: ast.Is, ast.In: ast.NotIn, ast.NotIn: ast.In}  # fmt: skip
_ARITH = {ast.Add: ast.Sub, ast.Sub: ast.Add, ast.Mult: ast.Div, ast.Div: ast.Mult, ast.FloorDiv: ast.Mod,
          ast.Mod: ast.FloorDiv}  # fmt: skip
OPERATORS = ("compare_swap", "arith_swap", "bool_swap", "off_by_one", "negate_condition", "wrong_default",
             "swap_arguments", "drop_statement")  # fmt: skip


@dataclass(frozen=True)
class Mutation:
    operator: str
    line: int  # 1-based, where the replaced span starts
    start: int  # character offsets of the replaced span in the source
    end: int
    replacement: str

    def apply(self, source: str) -> str:
        return source[: self.start] + self.replacement + source[self.end :]


def _offsets(source: str) -> list[int]:
    starts, total = [], 0
    for line in source.splitlines(keepends=True):
        starts.append(total)
        total += len(line.encode("utf-8"))
    return starts


class _Span:
    """Character offsets of a node (ast gives UTF-8 byte columns)."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.raw = source.encode("utf-8")
        self.line_starts = _offsets(source)

    def of(self, node: ast.AST) -> tuple[int, int]:
        start = self.line_starts[node.lineno - 1] + node.col_offset
        end = self.line_starts[node.end_lineno - 1] + node.end_col_offset
        return len(self.raw[:start].decode("utf-8")), len(self.raw[:end].decode("utf-8"))


def _mutated(node: ast.AST, **changes) -> ast.AST:
    copy = ast.parse(ast.unparse(node), mode="eval").body if isinstance(node, ast.expr) else None
    for key, value in changes.items():
        setattr(copy, key, value)
    return copy


def candidates(source: str) -> list[Mutation]:
    """Every candidate bug of the module, in tree-walk order (an unparseable file has none)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    span = _Span(source)
    out: list[Mutation] = []

    def add(operator: str, node: ast.AST, replacement: str) -> None:
        start, end = span.of(node)
        if source[start:end] != replacement:
            out.append(Mutation(operator, node.lineno, start, end, replacement))

    for node in ast.walk(tree):
        if isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in _COMPARE:
            add("compare_swap", node, ast.unparse(_mutated(node, ops=[_COMPARE[type(node.ops[0])]()])))
        elif isinstance(node, ast.BinOp) and type(node.op) in _ARITH:
            if isinstance(node.left, ast.Constant) and isinstance(node.left.value, str):
                continue  # string formatting with %, not arithmetic
            add("arith_swap", node, ast.unparse(_mutated(node, op=_ARITH[type(node.op)]())))
        elif isinstance(node, ast.BoolOp):
            add(
                "bool_swap",
                node,
                ast.unparse(_mutated(node, op=ast.Or() if isinstance(node.op, ast.And) else ast.And())),
            )
        elif isinstance(node, ast.Slice):
            for bound in (node.lower, node.upper):
                if isinstance(bound, ast.Constant) and type(bound.value) is int:
                    add("off_by_one", bound, str(bound.value + 1))
        elif isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) and type(node.slice.value) is int:
            add("off_by_one", node.slice, str(node.slice.value + 1 if node.slice.value >= 0 else node.slice.value - 1))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "range":
            for arg in node.args:
                if isinstance(arg, ast.Constant) and type(arg.value) is int:
                    add("off_by_one", arg, str(arg.value + 1))
            if len(node.args) == 1 and not isinstance(node.args[0], ast.Constant):
                add("off_by_one", node.args[0], f"{ast.unparse(node.args[0])} - 1")
        elif isinstance(node, (ast.If, ast.While, ast.IfExp)):
            test = node.test
            inverted = test.operand if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not) else None
            add(
                "negate_condition",
                test,
                ast.unparse(inverted) if inverted is not None else f"not ({ast.unparse(test)})",
            )
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for default in [*node.args.defaults, *(d for d in node.args.kw_defaults if d is not None)]:
                if isinstance(default, ast.Constant):
                    value = default.value
                    if isinstance(value, bool):
                        add("wrong_default", default, str(not value))
                    elif type(value) is int:
                        add("wrong_default", default, str(value + 1))
                    elif value is None:
                        add("wrong_default", default, "0")
        if (
            isinstance(node, ast.Call)
            and len(node.args) >= 2
            and not any(isinstance(a, ast.Starred) for a in node.args[:2])
        ):
            first, second = node.args[0], node.args[1]
            if ast.dump(first) != ast.dump(second):
                start, _ = span.of(first)
                _, end = span.of(second)
                replacement = f"{ast.unparse(second)}, {ast.unparse(first)}"
                if "\n" not in source[start:end]:
                    out.append(Mutation("swap_arguments", first.lineno, start, end, replacement))
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.For, ast.While, ast.If, ast.With)):
            for statement in node.body[1:] if len(node.body) > 1 else []:
                is_call = isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Call)
                if isinstance(statement, (ast.Assign, ast.AugAssign)) or is_call:
                    if statement.lineno == statement.end_lineno:
                        add("drop_statement", statement, "pass")
    return out
