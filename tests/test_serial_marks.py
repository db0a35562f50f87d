"""`make test` runs two test workers, then the tests marked `serial` alone: a test that asserts a
wall-clock bound must carry that marker (or its module must), or a neighbour's training step on
the other core would count against its bound."""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parent
CLOCKS = ("time.monotonic()", "time.perf_counter()", "time.time()")


def _is_clock_difference(node: ast.AST) -> bool:
    return isinstance(node, ast.BinOp) and isinstance(node.op, ast.Sub) and ast.unparse(node.left) in CLOCKS


def _is_serial_mark(node: ast.AST) -> bool:
    return ast.unparse(node) in ("pytest.mark.serial", "[pytest.mark.serial]")


def _asserts_wall_clock(function: ast.FunctionDef) -> bool:
    """An assert on `clock() - start`, directly or through a name assigned from it."""
    durations = {
        target.id
        for node in ast.walk(function)
        if isinstance(node, ast.Assign) and _is_clock_difference(node.value)
        for target in node.targets
        if isinstance(target, ast.Name)
    }
    for node in ast.walk(function):
        if isinstance(node, ast.Assert):
            parts = list(ast.walk(node.test))
            if any(_is_clock_difference(p) for p in parts) or any(
                isinstance(p, ast.Name) and p.id in durations for p in parts
            ):
                return True
    return False


def unmarked_wall_clock_asserts(source: str) -> list[str]:
    """Functions of a test module that assert a wall-clock bound outside the `serial` group."""
    module = ast.parse(source)
    module_serial = any(
        isinstance(node, ast.Assign)
        and any(isinstance(t, ast.Name) and t.id == "pytestmark" for t in node.targets)
        and _is_serial_mark(node.value)
        for node in module.body
    )
    if module_serial:
        return []
    found = []
    for node in module.body:
        if isinstance(node, ast.FunctionDef) and _asserts_wall_clock(node):
            marked = any(_is_serial_mark(d) for d in node.decorator_list)
            if not (node.name.startswith("test") and marked):  # a helper's bound needs the module's mark
                found.append(node.name)
    return found


def test_every_wall_clock_assert_runs_in_the_serial_group():
    offenders = {
        str(path.relative_to(TESTS)): names
        for path in sorted(TESTS.rglob("test_*.py"))
        if (names := unmarked_wall_clock_asserts(path.read_text(encoding="utf-8")))
    }
    assert offenders == {}, f"mark these @pytest.mark.serial (or the module: pytestmark): {offenders}"


def test_the_check_finds_an_unmarked_bound_and_accepts_a_marked_one():
    bound = "def {name}():\n    started = time.monotonic()\n    work()\n    assert time.monotonic() - started < 1\n"
    through_a_name = "def test_b():\n    elapsed = time.perf_counter() - t0\n    assert elapsed < 2\n"
    assert unmarked_wall_clock_asserts(bound.format(name="test_a")) == ["test_a"]
    assert unmarked_wall_clock_asserts(through_a_name) == ["test_b"]
    assert unmarked_wall_clock_asserts("@pytest.mark.serial\n" + bound.format(name="test_a")) == []
    assert unmarked_wall_clock_asserts(bound.format(name="_helper")) == ["_helper"]
    module_mark = "pytestmark = pytest.mark.serial\n" + bound.format(name="_helper")
    assert unmarked_wall_clock_asserts(module_mark) == []
    deadline_loop = "def test_c():\n    while time.monotonic() < deadline:\n        poll()\n    assert done\n"
    assert unmarked_wall_clock_asserts(deadline_loop) == []
