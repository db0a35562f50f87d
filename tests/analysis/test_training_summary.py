from analysis.training import summarise_training


def test_summary_weights_rescue_success_by_rescues_not_by_steps():
    steps = [
        {
            "step": 0,
            "train/valid_group_ratio": 1.0,
            "train/effective_token_ratio": 0.8,
            "rollout/rescues_triggered": 1.0,
            "rollout/rescue_success": 1.0,
            "rollout/rollouts_spent": 24.0,
            "time/rollout_s": 10.0,
            "time/update_s": 5.0,
        },
        {
            "step": 1,
            "train/valid_group_ratio": 0.5,
            "train/effective_token_ratio": 0.4,
            "rollout/rescues_triggered": 3.0,
            "rollout/rescue_success": 1 / 3,
            "rollout/rollouts_spent": 40.0,
            "time/rollout_s": 20.0,
            "time/update_s": 5.0,
        },
    ]
    reanchors = [
        {"step": 0, "harness": "h0", "success_rate": 0.25},
        {"step": 2, "harness": "h0", "success_rate": 0.5},
        {"step": 0, "harness": "schema_rows", "success_rate": 1.0},
    ]
    s = summarise_training(steps, reanchors)
    assert s["valid_group_ratio"] == 0.75 and abs(s["effective_token_ratio"] - 0.6) < 1e-12
    assert s["rescues_triggered"] == 4.0 and abs(s["rescue_success"] - 0.5) < 1e-12  # (1 + 1) / 4, not mean(1, 1/3)
    assert s["rollouts_spent"] == 64.0 and s["h0_validation"] == {0: 0.25, 2: 0.5} and s["seconds"] == 40.0


def test_no_rescue_means_no_rescue_success():
    s = summarise_training([{"step": 0, "rollout/rescues_triggered": 0.0}], [])
    assert s["rescue_success"] is None and s["updates"] == 1


def test_rescue_success_per_stage_between_reanchors():
    steps = [
        {"step": i, "rollout/rescues_triggered": t, "rollout/rescue_success": ok}
        for i, (t, ok) in enumerate([(2, 0.5), (0, 0.0), (1, 0.0), (3, 1.0), (2, 0.5)])
    ]
    reanchors = [{"step": a, "harness": "h0", "success_rate": 0.0} for a in (0, 2, 4, 5)]  # 5 = the final one
    stages = summarise_training(steps, reanchors)["rescue_by_stage"]
    assert stages == {
        0: {"rescues": 2, "rescue_success": 0.5},
        2: {"rescues": 4, "rescue_success": 0.75},
        4: {"rescues": 2, "rescue_success": 0.5},
    }  # no update at or after 5: no stage there
