import pytest

from analysis.metrics import pass_avg, summarise


def test_pass_and_avg_by_hand():
    # task a: 1 of 3 solved, task b: 0 of 3, task c: 3 of 3
    pass_k, avg_k = pass_avg({"a": [True, False, False], "b": [False] * 3, "c": [True] * 3})
    assert pass_k == pytest.approx(200 / 3)  # 2 of 3 tasks solved at least once
    assert avg_k == pytest.approx(100 * (1 / 3 + 0 + 1) / 3)


def test_summary_over_seeds_and_types():
    rows = []
    outcomes = {0: {"a": [True, False], "b": [False, False]}, 1: {"a": [False, False], "b": [True, True]}}
    for seed, per_task in outcomes.items():
        for task_id, succ in per_task.items():
            for s in succ:
                rows.append(
                    {
                        "seed": seed,
                        "bench_task_id": task_id,
                        "task_type": "INSERT" if task_id == "a" else "counting",
                        "success": s,
                    }
                )
    m = summarise(rows)
    # seed 0: pass 50, avg 25; seed 1: pass 50, avg 50
    assert m["overall"]["pass"] == {"mean": 50.0, "std": 0.0}
    assert m["overall"]["avg"]["mean"] == pytest.approx(37.5) and m["overall"]["avg"]["std"] == pytest.approx(12.5)
    # INSERT (task a): seed 0 pass 100 avg 50; seed 1 pass 0 avg 0
    assert m["per_type"]["INSERT"]["pass"] == {"mean": 50.0, "std": 50.0}
    assert m["per_type"]["counting"]["avg"]["mean"] == pytest.approx(50.0)
    assert m["per_seed"][1] == {"pass": 50.0, "avg": 50.0}
    assert m["overall"]["n_tasks"] == 2
