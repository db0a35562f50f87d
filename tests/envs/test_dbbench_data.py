"""Loading, checksums and the user-facing errors of envs.dbbench.data."""

import shutil
from pathlib import Path

import pytest

import envs.dbbench.data as data
from envs.base import DataError
from envs.dbbench.data import PINNED_SHA256, load_split, parse_answer_md5


def test_dev_split_loads(dev_tasks):
    assert len(dev_tasks) == 60
    first = dev_tasks[0]
    assert first.id == "dbbench/dev/0000" and first.benchmark == "dbbench"
    assert first.instruction == first.description + "\n" + first.add_description
    mutations = [t for t in dev_tasks if t.is_mutation]
    assert len(mutations) == 40
    assert all(len(t.answer_md5) == 32 and t.gold_sql == t.label[0] for t in mutations)
    assert dev_tasks[20].answer_md5 == "09aa8fbf72f39362970f95a1276b957c"
    selects = [t for t in dev_tasks if not t.is_mutation]
    assert all(t.answer_md5 is None and t.gold_sql for t in selects)


def test_limit_and_env_var(data_dir, monkeypatch):
    monkeypatch.setenv("HS_DATA_DIR", str(data_dir))
    assert [t.index for t in load_split("dev", limit=3, download=False)] == [0, 1, 2]


def test_parse_answer_md5():
    assert parse_answer_md5("[('09aa8fbf72f39362970f95a1276b957c',)]") == "09aa8fbf72f39362970f95a1276b957c"
    assert parse_answer_md5(None) is None


def test_missing_data_dir_says_how_to_fix(tmp_path):
    with pytest.raises(DataError) as err:
        load_split("dev", data_dir=tmp_path / "nowhere", download=False)
    message = str(err.value)
    assert "not found at" in message and "HS_DATA_DIR" in message and "dbbench/dev.jsonl" in message
    assert "\n" not in message


def test_failed_download_is_a_data_error(tmp_path, monkeypatch):
    monkeypatch.setitem(data.UPSTREAM_URLS, "dev", (tmp_path / "absent.jsonl").as_uri())
    with pytest.raises(DataError, match="HS_DATA_DIR.*download failed"):
        load_split("dev", data_dir=tmp_path / "dl")
    assert not (tmp_path / "dl").exists()  # a failed fetch leaves no folder behind


def test_download_checks_and_stores_the_file(tmp_path, monkeypatch, data_dir):
    # A file:// URL exercises the real download path without network access.
    monkeypatch.setitem(data.UPSTREAM_URLS, "dev", (data_dir / "dbbench" / "dev.jsonl").as_uri())
    tasks = load_split("dev", data_dir=tmp_path / "dl")
    assert len(tasks) == 60 and (tmp_path / "dl" / "dbbench" / "dev.jsonl").is_file()


def test_checksum_mismatch(tmp_path, data_dir):
    target = tmp_path / "dbbench" / "dev.jsonl"
    target.parent.mkdir(parents=True)
    shutil.copy(data_dir / "dbbench" / "dev.jsonl", target)
    with target.open("a") as handle:
        handle.write("\n")
    with pytest.raises(DataError, match=f"expected {PINNED_SHA256['dev']}"):
        load_split("dev", data_dir=tmp_path, download=False)


def test_missing_train_split_points_to_the_builder(tmp_path):
    with pytest.raises(DataError, match="hs data build-train dbbench"):
        load_split("train", generated_dir=tmp_path)


def test_unknown_split(tmp_path):
    with pytest.raises(DataError, match="dev, standard, train"):
        load_split("test", data_dir=Path(tmp_path))
