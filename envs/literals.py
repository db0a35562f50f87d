"""Bounds on the literal values a policy's reply carries (final answers, call arguments).

A parsed literal reaches code that recurses over it (`dataclasses.asdict`, JSON encoding, a
verifier's flattening) and code that prints it (`str()` of an int over 4,300 digits raises
ValueError), so every tool view checks a literal here before anything else touches it, and a
literal over a bound is a parse error the policy sees, never an exception. The walk is
iterative, so checking a hostile value cannot itself recurse too deep.
"""

from __future__ import annotations

import re

MAX_DEPTH = 20  # nested lists, tuples, sets and dicts
MAX_INT_DIGITS = 1_000  # decimal digits of one integer
MAX_ITEMS = 10_000  # values in one literal, containers and scalars together
MAX_CHARS = 100_000  # characters of all its strings together (and of a literal's source text)

_INT_BOUND = 10**MAX_INT_DIGITS
_SURROGATE = re.compile("[\ud800-\udfff]")


class LiteralLimit(Exception):
    """A literal over one of the bounds; the message says which, in one line. Not a ValueError, so
    parsers that pass over undecodable JSON do not swallow it."""


def has_surrogate(text: str) -> bool:
    """A lone surrogate: text that cannot be encoded as UTF-8 (a database or tokenizer would raise)."""
    return _SURROGATE.search(text) is not None


def literal_problem(value: object) -> str | None:
    """Why `value` is not a bounded literal (one line), or None when it is."""
    return literals_problem([value])


def literals_problem(values: list) -> str | None:
    """Why `values` (a call's arguments, say) are not bounded literals together, or None."""
    stack: list[tuple[object, int]] = [(value, 0) for value in values]  # (value, containers around it)
    if len(stack) > MAX_ITEMS:
        return f"it holds more than {MAX_ITEMS:,} values"
    items = chars = 0
    while stack:
        item, depth = stack.pop()
        items += 1
        if isinstance(item, (str, bytes)):
            chars += len(item)
            if chars > MAX_CHARS:
                return f"its strings hold more than {MAX_CHARS:,} characters"
            if isinstance(item, str) and has_surrogate(item):
                return "a string holds a lone surrogate (text that is not valid Unicode)"
        elif isinstance(item, int) and not isinstance(item, bool):
            if abs(item) >= _INT_BOUND:
                return f"an integer has more than {MAX_INT_DIGITS:,} digits"
        elif item is None or isinstance(item, (bool, float, complex)):
            pass
        elif isinstance(item, (list, tuple, set, frozenset, dict)):
            if depth + 1 > MAX_DEPTH:
                return f"it is nested more than {MAX_DEPTH} levels deep"
            size = 2 * len(item) if isinstance(item, dict) else len(item)
            if items + len(stack) + size > MAX_ITEMS:
                return f"it holds more than {MAX_ITEMS:,} values"
            children = (x for pair in item.items() for x in pair) if isinstance(item, dict) else item
            stack.extend((child, depth + 1) for child in children)
        else:
            return f"a value of type {type(item).__name__} is not a literal"
    return None


def check_literal(value: object, what: str = "the value") -> None:
    """LiteralLimit("<what> is not allowed: <why>") when `value` is over a bound."""
    problem = literal_problem(value)
    if problem is not None:
        raise LiteralLimit(f"{what} is not allowed: {problem}")


def bounded_int(text: str) -> int:
    """`int(text)` for JSON decoders (`parse_int=`): LiteralLimit past MAX_INT_DIGITS digits, where
    `int()` would raise a ValueError that a decoder reports as mere bad JSON (or pass over 4,300)."""
    if len(text.lstrip("-")) > MAX_INT_DIGITS:
        raise LiteralLimit(f"an integer has more than {MAX_INT_DIGITS:,} digits")
    return int(text)
