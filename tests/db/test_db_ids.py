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


class _Cfg:
    def __init__(self, name: str):
        self.name = name

    def identity(self, exclude=frozenset()):
        return "{}"


def test_run_ids_longer_than_the_database_holds_are_refused_in_one_line():
    from db.ids import RUN_ID_MAX, RunIdTooLong, run_id
    from db.models import RUN_ID

    assert RUN_ID_MAX + len("-u1000") <= RUN_ID and len("sft-") + RUN_ID_MAX <= RUN_ID  # derived names fit
    longest = "n" * (RUN_ID_MAX - 13)  # "-" + 12 hex digits
    assert len(run_id("eval", _Cfg(longest))) == RUN_ID_MAX
    with pytest.raises(RunIdTooLong) as info:
        run_id("eval", _Cfg(longest + "xyz"))
    message = str(info.value)
    assert "\n" not in message and f"{RUN_ID_MAX + 3} characters" in message
    assert "by at least 3 characters" in message and "--set name=" in message
    with pytest.raises(RunIdTooLong, match="by at least 5 characters"):
        run_id("train", _Cfg(longest), tag="grpo")  # the tag counts too


def test_the_committed_runs_keep_their_ids():
    """Widening the columns changed no id: the baselines' long evaluation ids are made as before."""
    from configs.pipeline import PipelineConfig
    from configs.schema import CONFIG_DIR, load_config
    from tasks.pipeline import pipeline_run_id, training_config
    from tasks.run_identity import train_run_id

    cfg = load_config(PipelineConfig, CONFIG_DIR / "main" / "harness_s.yaml")
    assert pipeline_run_id(cfg) == "main-harness-s-2f260559849b"
    assert train_run_id(training_config(cfg, cfg.pool_version)) == "main-harness-s-train-harness_s-7b06f7b1473a"
