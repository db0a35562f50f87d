import hashlib

import pytest

from db.ids import stable_id


def test_stable_id_is_sha256_prefix_of_unit_separated_parts():
    expected = hashlib.sha256("run-a\x1f3\x1fdbbench/dev/0007".encode()).hexdigest()[:32]
    assert stable_id("run-a", 3, "dbbench/dev/0007") == expected
    assert len(expected) == 32


def test_stable_id_is_deterministic_and_separates_parts():
    assert stable_id("a", 1) == stable_id("a", "1")
    assert stable_id("ab", "c") != stable_id("a", "bc")
    assert stable_id("a", None) != stable_id("a")


def test_stable_id_needs_parts():
    with pytest.raises(ValueError):
        stable_id()
