"""Hand-written cases for the DBBench answer rules (verifier.py)."""

import pytest

from envs.dbbench.verifier import items_match, mutation_ok, normalise_item, verify_answer


@pytest.mark.parametrize(
    ("answer", "label", "expected"),
    [
        (["45%"], ["45"], True),  # percent sign stripped
        (["45 %"], ["45.0"], True),
        (["1,234"], ["1234"], True),  # thousands separators
        (["3,729.7"], ["3729.7"], True),
        (["1,5"], ["15"], False),  # not a thousands pattern: stays text
        ([None], ["0"], True),  # null-like values count as zero
        (["null"], ["0"], True),
        (["NaN"], ["0.0"], True),
        ([""], ["0"], True),
        (["None"], ["none"], True),
        ([12.004], ["12"], True),  # within 1e-2
        (["12.02"], ["12"], False),  # outside 1e-2
        ([1], ["1.0"], True),
        (["  'Dallas' "], ["Dallas"], True),  # whitespace and copied quotes
        (['"House of Cards"'], ["House of Cards"], True),
        (["dallas"], ["Dallas"], False),  # text stays case-sensitive
        (["b", "a"], ["a", "b"], True),  # several values: sets
        (["a", "a", "b"], ["a", "b"], True),  # repeats do not matter
        (["a"], ["a", "b"], False),  # missing value
        (["a", "b", "c"], ["a", "b"], False),  # extra value
        ([], ["a"], False),
        (["2.0", "3"], ["3", "2"], True),  # numeric tolerance inside sets
        ([("a",), ("b",)], ["a", "b"], True),  # row tuples are flattened
    ],
)
def test_verify_answer(answer, label, expected):
    assert verify_answer("other", answer, label) is expected


def test_normalise_item_examples():
    assert normalise_item(" '12%' ") == "12"
    assert normalise_item(float("nan")) == "0"
    assert normalise_item("1,000,000.5") == "1000000.5"


def test_items_match_is_symmetric():
    assert items_match("1,000", 1000.004) and items_match(1000.004, "1,000")


def test_mutation_types_are_rejected():
    with pytest.raises(ValueError):
        verify_answer("INSERT", [], ["INSERT INTO t VALUES (1)"])


def test_mutation_ok():
    md5 = "09aa8fbf72f39362970f95a1276b957c"
    assert mutation_ok(md5, md5)
    assert mutation_ok(md5.upper(), md5)
    assert mutation_ok(md5, f"[('{md5}',)]")  # upstream's printed form
    assert not mutation_ok("", md5)
    assert not mutation_ok(None, md5)
    assert not mutation_ok(md5, None)
    assert not mutation_ok("0" * 32, md5)
