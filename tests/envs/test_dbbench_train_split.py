"""The generated training split: deterministic, graded, new questions, correct labels."""

import json
import re
from collections import Counter

import pytest

from envs.base import DataError
from envs.dbbench.backends import quote_ident
from envs.dbbench.data import TIERS, load_split, parse_tiers
from envs.dbbench.gold import check_gold
from envs.dbbench.sqlite_backend import SqliteBackend
from envs.dbbench.train_split import build_train_split, normalise_description, tier_sizes


@pytest.fixture(scope="module")
def built(tmp_path_factory, data_dir):
    root = tmp_path_factory.mktemp("generated")
    out = root / "dbbench" / "train.jsonl"
    records = build_train_split(out, seed=0, data_dir=data_dir)
    return root, out, records


def by_tier(records, tier):
    return [r for r in records if r["tier"] == tier]


def test_deterministic_per_seed_and_tiers(built, tmp_path, data_dir):
    _, out, _ = built
    again = tmp_path / "again.jsonl"
    build_train_split(again, seed=0, data_dir=data_dir)
    assert again.read_bytes() == out.read_bytes()
    other = tmp_path / "other.jsonl"
    build_train_split(other, seed=1, data_dir=data_dir)
    assert other.read_bytes() != out.read_bytes()
    easy_a, easy_b = tmp_path / "easy_a.jsonl", tmp_path / "easy_b.jsonl"
    build_train_split(easy_a, seed=3, data_dir=data_dir, tiers=("easy", "medium"))
    build_train_split(easy_b, seed=3, data_dir=data_dir, tiers="medium,easy")  # order-insensitive
    assert easy_a.read_bytes() == easy_b.read_bytes()


def test_size_mix_and_format(built):
    root, _, records = built
    assert len(records) >= 300
    types = Counter(r["type"][0] for r in records)
    third = len(records) / 3
    assert abs(types["INSERT"] - third) < 10 and abs(types["UPDATE"] - third) < 10
    assert len(types) == 10  # every SELECT-family type occurs
    assert all(r["source"] == "harness-s-train" for r in records)
    tasks = load_split("train", generated_dir=root)
    assert len(tasks) == len(records) and tasks[0].id == "dbbench/train/0000"
    assert all(len(t.answer_md5) == 32 for t in tasks if t.is_mutation)


def test_tiers_recorded_even_and_typed(built):
    _, _, records = built
    assert [r["tier"] for r in records] == sorted((r["tier"] for r in records), key=TIERS.index)
    sizes = Counter(r["tier"] for r in records)
    assert [sizes[t] for t in TIERS] == tier_sizes(400, TIERS) == [134, 133, 133]
    for tier in TIERS:
        types = Counter(r["type"][0] for r in by_tier(records, tier))
        third = sizes[tier] / 3
        assert abs(types["INSERT"] - third) <= 2 and abs(types["UPDATE"] - third) <= 2, (tier, types)
    assert set(Counter(r["type"][0] for r in by_tier(records, "easy"))) == {"INSERT", "UPDATE", "other", "counting"}
    medium_types = set(Counter(r["type"][0] for r in by_tier(records, "medium")))
    assert {"comparison", "aggregation-SUM", "aggregation-MIN", "aggregation-MAX", "aggregation-AVG"} <= medium_types
    assert "ranking" not in medium_types


def test_easy_descriptions_spell_the_statement(built):
    _, _, records = built
    for record in by_tier(records, "easy"):
        table = record["table"]["table_name"]
        description, task_type = record["description"], record["type"][0]
        assert f"`{table}`" in description, description
        if task_type == "INSERT":
            named = re.search(r"columns \((.*)\)", description).group(1)
            assert named == ", ".join(f"`{c}`" for c in record["heads"]), description
            # values are given in the same order as in the gold statement
            values = re.search(r"VALUES \((.*)\)$", record["label"][0]).group(1)
            assert f"({values})" in description, description
        else:  # the table and each column in the condition (and the target) in backticks
            names = 2 if task_type == "counting" else 3
            assert description.count("`") == 2 * names and description.count("'") in (2, 4), description


def test_medium_descriptions_are_prose(built):
    _, _, records = built
    medium = by_tier(records, "medium")
    assert medium and all("`" not in r["description"] for r in medium)


def _table_rows(db, task):
    result = db.execute(f"SELECT * FROM {quote_ident(task.table_name)}")
    assert result.error is None and not result.truncated
    return result.rows


def test_easy_update_changes_exactly_one_cell(built):
    root, _, _ = built
    updates = [t for t in load_split("train", generated_dir=root, tiers=("easy",)) if t.task_type == "UPDATE"]
    assert len(updates) >= 40
    for task in updates:
        with SqliteBackend() as db:
            db.create_table(task.table_name, task.columns, task.rows)
            before = _table_rows(db, task)
            assert db.execute(task.gold_sql).error is None
            after = _table_rows(db, task)
        assert len(before) == len(after)
        changed = [
            (r, c)
            for r, (old, new) in enumerate(zip(before, after))
            for c, (a, b) in enumerate(zip(old, new))
            if a != b
        ]
        assert len(changed) == 1, (task.id, task.description, changed)


def test_no_validation_or_test_description_reused(built, data_dir):
    _, _, records = built
    upstream = {
        normalise_description(t.description)
        for split in ("dev", "standard")
        for t in load_split(split, data_dir=data_dir)
    }
    generated = [normalise_description(r["description"]) for r in records]
    assert not upstream & set(generated)
    assert len(set(generated)) == len(generated)


def test_gold_replay_reproduces_every_label_sqlite(built):
    root, _, records = built
    report = check_gold("train", "sqlite", generated_dir=root, replay_select_sql=True)
    assert report.disagreements == [], "\n".join(report.format_lines())
    assert report.total == len(records)


def test_single_tier_build(tmp_path, data_dir):
    out = tmp_path / "dbbench" / "train.jsonl"
    records = build_train_split(out, seed=0, n_tasks=300, data_dir=data_dir, tiers=("easy",))
    assert len(records) == 300 and {r["tier"] for r in records} == {"easy"}
    report = check_gold("train", "sqlite", generated_dir=tmp_path, replay_select_sql=True)
    assert report.disagreements == [], "\n".join(report.format_lines())


def test_load_split_filters_tiers(built):
    root, _, records = built
    everything = load_split("train", generated_dir=root)
    easy_medium = load_split("train", generated_dir=root, tiers=("easy", "medium"))
    assert {t.tier for t in easy_medium} == {"easy", "medium"}
    assert len(easy_medium) == sum(r["tier"] in ("easy", "medium") for r in records)
    hard = load_split("train", generated_dir=root, tiers=parse_tiers("hard"), limit=5)
    assert len(hard) == 5 and all(t.tier == "hard" for t in hard)
    # ids keep the line index, so a task has the same id whichever tiers are loaded
    assert {t.id: t.description for t in everything}[hard[0].id] == hard[0].description


def test_bad_tiers_raise_one_line_data_error(built):
    root, _, _ = built
    for bad in (("easy", "expert"), ()):
        with pytest.raises(DataError, match="easy, medium, hard") as info:
            load_split("train", generated_dir=root, tiers=bad)
        assert "\n" not in str(info.value)
    with pytest.raises(DataError, match="'trivial'"):
        parse_tiers("easy,trivial")
    with pytest.raises(DataError):
        parse_tiers(" , ")
    assert parse_tiers(" Hard, easy,easy ") == ("easy", "hard")


def test_untiered_file_with_tier_filter_says_rebuild(tmp_path, built):
    _, out, _ = built
    legacy = tmp_path / "dbbench" / "train.jsonl"
    legacy.parent.mkdir(parents=True)
    lines = [json.loads(line) | {"tier": None} for line in out.read_text(encoding="utf-8").splitlines()[:3]]
    legacy.write_text("".join(json.dumps(r) + "\n" for r in lines), encoding="utf-8")
    assert len(load_split("train", generated_dir=tmp_path)) == 3
    with pytest.raises(DataError, match="build-train dbbench --tiers easy"):
        load_split("train", generated_dir=tmp_path, tiers=("easy",))


@pytest.mark.mysql
def test_gold_replay_reproduces_labels_mysql(built, mysql_url):
    root, _, _ = built
    tasks = load_split("train", generated_dir=root)[::4]  # a quarter keeps the run short
    report = check_gold("train", "mysql", tasks=tasks, mysql_url=mysql_url, replay_select_sql=True)
    assert report.disagreements == [], "\n".join(report.format_lines())
