"""The pipeline's results table: training line with the valid-group interval, paired differences."""

from analysis import pipeline_results

RESULTS = {
    "k": 3,
    "seeds": 1,
    "checkpoint": "run-u3",
    "pool_version": "v1",
    "train_run_id": "run",
    "evaluations": {
        "before": {"harness": "h0", "n_tasks": 10, "pass": {"mean": 10.0, "std": 0.0}, "avg": {"mean": 6.67, "std": 0}},
        "after": {"harness": "h0", "n_tasks": 10, "pass": {"mean": 20.0, "std": 0.0}, "avg": {"mean": 10.0, "std": 0}},
    },
    "training": {
        "updates": 3,
        "valid_group_ratio": 5 / 6,
        "valid_group_interval": [0.4365, 0.9699],
        "effective_token_ratio": 0.819,
        "rescues_triggered": 1,
        "rescue_success": 1.0,
        "rollouts_spent": 28,
        "h0_validation": {"0": 0.5, "3": 0.0},
    },
    "differences": {
        "after - before (H0)": {
            "n_tasks": 10,
            "avg_diff": 3.33,
            "avg_low": -3.33,
            "avg_high": 10.0,
            "pass_diff": 10.0,
            "pass_low": 0.0,
            "pass_high": 30.0,
            "verdict": "within noise",
        }
    },
}


def test_training_lines_show_the_interval_and_the_paired_difference():
    lines = pipeline_results.training_lines(RESULTS)
    assert "valid-group ratio 0.833 [0.44, 0.97]" in lines[0] and "success 1.00" in lines[0]
    assert lines[2] == (
        "after - before (H0): Avg@3 +3.33 [-3.33, +10.00], Pass@3 +10.00 [+0.00, +30.00] points over 10 tasks: "
        "within noise"
    )
    labelled = {**RESULTS, "evaluations": {**RESULTS["evaluations"], "test-rank1": RESULTS["evaluations"]["after"]}}
    assert pipeline_results.rows(labelled)[-1][:2] == ["test-rank1", "rank-1 router"]
    md = pipeline_results.markdown("quickstart", RESULTS)
    assert "| after | h0 | 10 | 20.00 ± 0.00 | 10.00 ± 0.00 |" in md and "within noise" in md


def test_results_without_intervals_still_render():
    old = {**RESULTS, "training": {k: v for k, v in RESULTS["training"].items() if k != "valid_group_interval"}}
    old.pop("differences")
    lines = pipeline_results.training_lines(old)
    assert "valid-group ratio 0.833 ·" in lines[0] and len(lines) == 2
