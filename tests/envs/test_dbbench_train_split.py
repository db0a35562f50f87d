"""The generated training split: deterministic, large enough, new questions, correct labels."""

from collections import Counter

import pytest

from envs.dbbench.data import load_split
from envs.dbbench.gold import check_gold
from envs.dbbench.train_split import build_train_split, normalise_description


@pytest.fixture(scope="module")
def built(tmp_path_factory, data_dir):
    root = tmp_path_factory.mktemp("generated")
    out = root / "dbbench" / "train.jsonl"
    records = build_train_split(out, seed=0, data_dir=data_dir)
    return root, out, records


def test_deterministic_per_seed(built, tmp_path, data_dir):
    _, out, _ = built
    again = tmp_path / "again.jsonl"
    build_train_split(again, seed=0, data_dir=data_dir)
    assert again.read_bytes() == out.read_bytes()
    other = tmp_path / "other.jsonl"
    build_train_split(other, seed=1, data_dir=data_dir)
    assert other.read_bytes() != out.read_bytes()


def test_size_mix_and_format(built):
    root, _, records = built
    assert len(records) >= 300
    types = Counter(r["type"][0] for r in records)
    third = len(records) / 3
    assert abs(types["INSERT"] - third) < 10 and abs(types["UPDATE"] - third) < 10
    assert len(types) == 10  # every SELECT-family type occurs
    assert all(r["source"] == "harness-s-train" and r["tier"] is None for r in records)
    tasks = load_split("train", generated_dir=root)
    assert len(tasks) == len(records) and tasks[0].id == "dbbench/train/0000"
    assert all(len(t.answer_md5) == 32 for t in tasks if t.is_mutation)


def test_no_validation_or_test_description_reused(built, data_dir):
    _, _, records = built
    upstream = {normalise_description(t.description)
                for split in ("dev", "standard") for t in load_split(split, data_dir=data_dir)}
    generated = [normalise_description(r["description"]) for r in records]
    assert not upstream & set(generated)
    assert len(set(generated)) == len(generated)


def test_gold_replay_reproduces_every_label_sqlite(built):
    root, _, _ = built
    report = check_gold("train", "sqlite", generated_dir=root, replay_select_sql=True)
    assert report.disagreements == [], "\n".join(report.format_lines())


@pytest.mark.mysql
def test_gold_replay_reproduces_labels_mysql(built, mysql_url):
    root, _, _ = built
    tasks = load_split("train", generated_dir=root)[::4]  # a quarter keeps the run short
    report = check_gold("train", "mysql", tasks=tasks, mysql_url=mysql_url, replay_select_sql=True)
    assert report.disagreements == [], "\n".join(report.format_lines())
