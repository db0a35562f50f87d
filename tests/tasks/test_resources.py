from collections import Counter

from configs.schema import EnvConfig
from tasks.resources import bench_tasks


def test_every_nth_task_keeps_the_type_mix_of_a_type_sorted_split(data_dir):
    tasks = bench_tasks(EnvConfig(), "standard", every=3)
    assert len(tasks) == 100 and tasks[0].id == "dbbench/standard/0000" and tasks[1].id == "dbbench/standard/0003"
    counts = Counter(t.task_type for t in tasks)
    assert set(counts) == {
        "INSERT",
        "UPDATE",
        "other",
        "counting",
        "comparison",
        "ranking",
        "aggregation-SUM",
        "aggregation-MIN",
        "aggregation-MAX",
        "aggregation-AVG",
    }
    assert 30 <= counts["INSERT"] <= 36 and 30 <= counts["UPDATE"] <= 36
    assert [t.id for t in bench_tasks(EnvConfig(), "standard", every=3, limit=2)] == [t.id for t in tasks[:2]]
