"""Gold replay through the real environment and verifier agrees with the recorded labels."""

from dataclasses import replace

import pytest

from envs.dbbench.gold import check_gold


def _assert_full_agreement(report):
    lines = report.format_lines()
    assert report.disagreements == [], "\n".join(lines)
    assert lines[-1] == "agreement: 100.0%"
    assert report.total == 60 and report.per_type["INSERT"] == (20, 20)


def test_dev_gold_sqlite(data_dir):
    _assert_full_agreement(check_gold("dev", "sqlite", data_dir=data_dir))


@pytest.mark.mysql
def test_dev_gold_mysql(data_dir, mysql_url):
    _assert_full_agreement(check_gold("dev", "mysql", data_dir=data_dir, mysql_url=mysql_url))


def test_report_lines_name_disagreements(dev_tasks):
    tasks = [dev_tasks[19], replace(dev_tasks[20], answer_md5="0" * 32), dev_tasks[21]]
    report = check_gold("dev", tasks=tasks)
    lines = report.format_lines()
    assert lines[-1] == "agreement: 66.7%"
    assert any(line.startswith("  DISAGREE dbbench/dev/0020 [INSERT]") for line in lines)
