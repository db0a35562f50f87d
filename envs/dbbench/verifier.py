"""DBBench success rules, as pure functions (no database, no I/O).

SELECT-family tasks are judged by comparing the agent's final answer list with the label;
INSERT/UPDATE tasks by comparing the table's final hash with the recorded md5. The
normalisation below forgives formatting that carries no information (a percent sign, thousands
separators, quotes the model wrapped around a value, "1.0" vs "1") but not a wrong value or a
missing/extra item.

The answer is the policy's, so judging it never raises: an integer too long for `str()` (Python
stops at 4,300 digits) is a marker that matches no label, and nesting is flattened without
recursion.
"""

from __future__ import annotations

import math
import re

from envs.dbbench.data import MUTATION_TYPES, parse_answer_md5

FLOAT_TOLERANCE = 1e-2
# Values that mean "nothing there"; upstream treats them as zero (labels such as "none" for an
# empty result then match an answer of None/null/0).
_NULL_WORDS = frozenset({"", "none", "null", "nan"})
_QUOTES = "'\"`"
_THOUSANDS = re.compile(r"^[-+]?\d{1,3}(,\d{3})+(\.\d+)?$")
_MAX_SHOWN_INT_BITS = 14_000  # about 4,200 digits, under Python's int-to-str limit


def normalise_item(value: object) -> str:
    """Canonical text of one answer/label item, before the numeric check."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "0"
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > _MAX_SHOWN_INT_BITS:
        return f"<integer of {value.bit_length()} bits>"  # no label is that long; str() would raise
    try:
        text = str(value).strip()
    except (ValueError, RecursionError, MemoryError):  # e.g. a container holding such an integer
        return f"<unprintable {type(value).__name__}>"
    # Peel quotes the model copied from SQL or a tuple repr ('x' or "x"), possibly nested.
    while len(text) >= 2 and text[0] == text[-1] and text[0] in _QUOTES:
        text = text[1:-1].strip()
    text = text.replace("%", "").strip()
    if _THOUSANDS.match(text):
        text = text.replace(",", "")
    if text.lower() in _NULL_WORDS:
        return "0"
    return text


def _as_number(text: str) -> float | None:
    try:
        number = float(text)
    except ValueError:
        return None
    return number if math.isfinite(number) else None


def items_match(answer: object, label: object) -> bool:
    """Equal as numbers within FLOAT_TOLERANCE when both are numeric, else equal as text."""
    a, b = normalise_item(answer), normalise_item(label)
    na, nb = _as_number(a), _as_number(b)
    if na is not None and nb is not None:
        return abs(na - nb) <= FLOAT_TOLERANCE
    return a == b


def _flatten(values: list) -> list:
    """A harness may hand over row tuples ([('a',), ('b',)]); the verifier judges the cells, in order
    (iteratively: however deep the nesting, no recursion)."""
    flat: list = []
    stack = [iter(values)]
    while stack:
        value = next(stack[-1], _END)
        if value is _END:
            stack.pop()
        elif isinstance(value, (list, tuple)):
            stack.append(iter(value))
        else:
            flat.append(value)
    return flat


_END = object()


def _covers(source: list, target: list) -> bool:
    return all(any(items_match(s, t) for t in target) for s in source)


def verify_answer(task_type: str, answer_values: list, label: list) -> bool:
    """True when the answer list matches the label list.

    One value vs one label: item comparison. Otherwise both lists are compared as sets: every
    answer item must match some label item and vice versa, so order and repeated items do not
    matter, but a missing or an extra distinct value fails.
    """
    if task_type in MUTATION_TYPES:
        raise ValueError(f"{task_type} tasks are judged by the table hash (mutation_ok), not by the answer")
    answer, gold = _flatten(list(answer_values)), _flatten(list(label))
    if len(answer) == 1 and len(gold) == 1:
        return items_match(answer[0], gold[0])
    return _covers(answer, gold) and _covers(gold, answer)


def mutation_ok(table_hash: str | None, answer_md5: str | None) -> bool:
    """The final table hash equals the recorded md5 (accepts the bare md5 or upstream's printed form)."""
    expected = parse_answer_md5(answer_md5) if answer_md5 and len(answer_md5) != 32 else answer_md5
    if not table_hash or not expected:
        return False
    return table_hash.strip().lower() == expected.strip().lower()
