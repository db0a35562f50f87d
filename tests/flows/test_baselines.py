"""The paper's baselines of another shape than a training mode (flows/baselines/), with the real
SmolLM2 at tiny budgets: frozen-policy evolution deploys the pool's best harness, no training."""

from __future__ import annotations

import pandas as pd
import pytest
from sqlalchemy import func, select

from analysis.report import build_report
from configs.pipeline import PipelineConfig
from configs.schema import ConfigError, load_config
from db.engine import make_engine, session_scope
from db.models import Run, Trajectory
from harness_pool.pool_store import load_pool
from harness_pool.selection import ranked_harnesses
from tests.flows.test_pipeline_flow import tiny_pipeline


def best_harness(success: dict[str, float]) -> str:
    """H_best as the baselines pick it: the first of the ranking (success order given = H0, pool order)."""
    return ranked_harnesses(success, list(success))[0]


def test_ranked_harnesses_put_the_highest_success_first_and_ties_go_to_the_earlier():
    order = ["h0", "a", "b"]
    assert ranked_harnesses({"h0": 0.2, "a": 0.5, "b": 0.5}, order) == ["a", "b", "h0"]
    assert ranked_harnesses({"h0": 0.0, "a": 0.0, "b": 0.0}, order) == ["h0", "a", "b"]
    with pytest.raises(ValueError, match="no harness"):
        ranked_harnesses({}, [])


def test_a_harnessx_baseline_needs_evolution_and_its_mode():
    with pytest.raises(ConfigError, match="set evolve and train.mode harnessx"):
        load_config(PipelineConfig, "configs/quickstart.yaml", sets=["baseline=harnessx"])


def test_a_frozen_evolution_baseline_needs_a_pool():
    with pytest.raises(ConfigError, match="searches a pool"):
        load_config(
            PipelineConfig,
            "configs/quickstart.yaml",
            sets=["baseline=frozen_evolution", "pool_version=null", "train.pool=[]", "train.mode=grpo"],
        )


def test_a_deployment_without_before_evaluates_only_what_the_baseline_made():
    """evaluate.before false (the committed WHALE, HarnessForge): the starting policy under H0 is
    the comparison's base-policy row, not evaluated again; on and off, the rest is unchanged."""
    from tasks.baselines import deployment_configs
    from tasks.pipeline import training_config

    for before, labels in ((True, ["before", "after", "best"]), (False, ["after", "best"])):
        cfg = load_config(PipelineConfig, "configs/baselines/whale.yaml", sets=[f"evaluate.before={before}"])
        train_cfg = training_config(cfg, cfg.pool_version)
        deployed = deployment_configs(cfg, train_cfg, "whale-policy", "pool:v1/answer")
        assert list(deployed) == [*labels, *(f"test-{label}" for label in labels)]
        assert (deployed["best"].checkpoint, deployed["best"].harness) == ("whale-policy", "pool:v1/answer")


@pytest.mark.slow
def test_frozen_evolution_selects_on_validation_and_deploys_h_best(tmp_path, train_dir, prefect_api, monkeypatch):
    from flows.baselines.frozen_evolution import frozen_evolution
    from tasks.pipeline import pipeline_run_id

    monkeypatch.setenv("HS_CHECKPOINT_DIR", str(tmp_path / "ckpt"))
    url = f"sqlite:///{tmp_path / 'hs.db'}"
    cfg = tiny_pipeline(
        tmp_path,
        name="frozen",
        baseline="frozen_evolution",
        evaluate={"split": "dev", "limit": 2, "k": 1, "seeds": 1, "group_concurrency": 2},
    )
    result = frozen_evolution(cfg, database_url=url)

    _, h0, siblings = load_pool("v1")
    search = result["search"]
    assert list(search["validation_success"]) == [h0.name, *[s.name for s in siblings]]  # H0 first, pool order
    assert search["best"] == best_harness(search["validation_success"])
    assert list(result["evaluations"]) == ["before", "best"] and "training" not in result
    assert result["budget"]["selection_rollouts"] == 5 * 1 * 1  # 5 harnesses x 1 validation task x k 1
    assert result["budget"]["training_rollouts"] == 0 and result["budget"]["evolution_rollouts"] is None
    chosen = ([h0] + siblings)[list(search["validation_success"]).index(search["best"])]
    with session_scope(make_engine(url)) as s:
        for name, run_id in search["selection_runs"].items():  # each candidate ran on the same validation tasks
            run = s.get(Run, run_id)
            assert run.config["task_ids"] == s.get(Run, search["selection_runs"][h0.name]).config["task_ids"]
            assert run.config["policy"]["model"] == "smollm2-135m"
        deployed = s.scalars(
            select(Trajectory.harness_id).where(Trajectory.run_id == result["evaluations"]["best"]["run_id"])
        ).all()
        assert set(deployed) == {chosen.id}
        row = s.get(Run, pipeline_run_id(cfg))
        assert row.kind == "pipeline" and row.results["method"] == "frozen_evolution"
        n_traj = s.scalar(select(func.count()).select_from(Trajectory))

        report = build_report(s, "frozen", [])
        rq1 = {(r["method"], r["routing"]) for r in report.tables["rq1"].to_dict("records")}
        assert rq1 == {("base policy", "H0"), ("frozen_evolution", "H_best")}
        (resources,) = report.tables["resources"].to_dict("records")
        assert (resources["search_rollouts"], resources["training_rollouts"]) == (5, 0)
        assert resources["editor_tokens"] is None  # pool v1's evolution is not in this database
        assert resources["search_hours"] > 0 and pd.isna(resources["training_hours"])  # the selections' wall time
        assert "frozen_evolution - base policy (H_best)" in set(report.tables["rq1_differences"]["comparison"])

    again = frozen_evolution(cfg, database_url=url)  # resumed: every evaluation is cached, nothing reruns
    assert again["search"] == search
    with session_scope(make_engine(url)) as s:
        assert s.scalar(select(func.count()).select_from(Trajectory)) == n_traj


@pytest.mark.slow
def test_whale_and_harness_forge_search_collect_fine_tune_and_deploy(tmp_path, train_dir, prefect_api, monkeypatch):
    """One round each at tiny budgets: the rounds, the pairs and the budget are on record, and the
    deployed evaluations use the policy and harness the search chose."""
    from flows.baselines.harness_forge import harness_forge
    from flows.baselines.whale import whale

    monkeypatch.setenv("HS_CHECKPOINT_DIR", str(tmp_path / "ckpt"))
    url = f"sqlite:///{tmp_path / 'hs.db'}"
    tiny = {
        "evaluate": {"split": "dev", "limit": 1, "k": 1, "seeds": 1, "group_concurrency": 2},
        "rft": {"rounds": 1, "tasks_per_round": 1, "k": 2, "harnesses": 1, "steps": 1, "batch_size": 1},
    }
    capped = {"search_rollouts": 10, "training_rollouts": 4}  # exactly what it plans: held, not refused
    result = whale(tiny_pipeline(tmp_path, name="whale", baseline="whale", budget=capped, **tiny), database_url=url)
    (one,) = result["rounds"]
    assert one["harnesses"] == [best_harness(one["success"])]  # the round's current harness: its search's best
    policy = one["checkpoint"]
    assert (policy == "smollm2-135m") == (one["examples"] == 0)  # fine-tuned only on successes
    expected = {"before", "best"} | ({"after"} if policy != "smollm2-135m" else set())
    assert set(result["evaluations"]) == expected and result["checkpoint"] == policy
    # search: 2 searches x 5 harnesses x 1 validation task x k 1; training: 1 task x k 2 under 1 harness
    assert (result["budget"]["selection_rollouts"], result["budget"]["training_rollouts"]) == (10, 2)

    forged = harness_forge(tiny_pipeline(tmp_path, name="forge", baseline="harness_forge", **tiny), database_url=url)
    (branch,) = forged["pairs"]  # one branch: the starting policy's best harness
    assert branch == best_harness(forged["search"]["validation_success"])
    assert forged["search"]["best"] == branch and forged["checkpoint"] == forged["pairs"][branch]["checkpoint"]
    # search: the branch ranking (5 harnesses) + the pair's validation (1); training: 1 task x k 2
    assert (forged["budget"]["selection_rollouts"], forged["budget"]["training_rollouts"]) == (6, 2)
    _, h0, siblings = load_pool("v1")
    chosen = {h.name: h.id for h in [h0, *siblings]}[branch]
    with session_scope(make_engine(url)) as s:
        deployed = s.scalars(
            select(Trajectory.harness_id).where(Trajectory.run_id == forged["evaluations"]["best"]["run_id"])
        ).all()
        assert set(deployed) == {chosen}
        report = build_report(s, "whale", ["forge"])
        rows = report.tables["resources"].set_index("method")
        assert rows.loc["harness_forge", "training_rollouts"] == 2 and rows.loc["whale", "search_rollouts"] == 10
        assert rows.loc["whale", "caps"] == "search 10, training 4" and rows.loc["whale", "within_caps"]
        assert rows.loc["harness_forge", "within_caps"] is None  # no caps set
        assert (rows.loc[["whale", "harness_forge"], ["search_hours", "training_hours"]] > 0).all().all()
        # whale's wall time: its 2 searches of 5 harnesses; its collection and, with a success, its fine-tuning
        budget = result["budget"]
        assert len(budget["search_run_ids"]) == 10 and len(budget["training_run_ids"]) == 1 + (one["examples"] > 0)


@pytest.mark.slow
def test_harnessx_alternates_evolution_rounds_with_segments_sharing_one_replay_buffer(
    tmp_path, train_dir, prefect_api, monkeypatch
):
    from flows.baselines.harnessx import harnessx

    monkeypatch.setenv("HS_CHECKPOINT_DIR", str(tmp_path / "ckpt"))
    url = f"sqlite:///{tmp_path / 'hs.db'}"
    cfg = tiny_pipeline(
        tmp_path,
        name="hx",
        pool_version=None,
        evolve={
            "name": "hx-evolve",
            "rounds": 1,
            "parents_per_round": 1,
            "children_per_parent": 1,
            "tiers": ["easy"],
            "diagnose": {"n_tasks": 2, "k": 1, "min_support": 1},
            "validation": {"max_tasks": 4, "n_controls": 1, "k": 1},
            "sampling": {"max_new_tokens": 12},
            "env": {"max_rounds": 1},
            "pool": {"root": str(tmp_path / "pools"), "dvc": False, "version": "unused"},
            "results_dir": str(tmp_path / "results"),
            "wandb": "disabled",
        },
        coupling={"rounds": 2},
        evaluate={"split": "dev", "limit": 1, "k": 1, "seeds": 1, "rank1": False, "group_concurrency": 2},
    )
    cfg = PipelineConfig.model_validate(
        {
            **cfg.model_dump(),
            "baseline": "harnessx",
            "train": {**cfg.train.model_dump(), "mode": "harnessx", "updates": 2},
        }
    )
    result = harnessx(cfg, database_url=url)

    first, second = result["segments"]
    with session_scope(make_engine(url)) as s:
        one, two = s.get(Run, first).config, s.get(Run, second).config
        assert two["replay"]["from_runs"] == [first] and one["replay"]["from_runs"] == []  # one buffer throughout
        assert two["init"] == f"{first}-u1" and one["init"] == "smollm2-135m"  # the policy carries over
        assert two["pool"][-2:] == result["pools"] and one["pool"][-1:] == result["pools"][:1]  # the pool grows
        evolved = [s.get(Run, r).config for r in result["evolutions"]]
        assert [e["policy"]["model"] for e in evolved] == ["smollm2-135m", f"{first}-u1"]
        assert result["checkpoint"] == f"{second}-u1" and {"before", "after"} <= set(result["evaluations"])
        segment_rollouts = s.scalar(
            select(func.count()).select_from(Trajectory).where(Trajectory.run_id.in_([first, second]))
        )
        budget = result["budget"]
        assert budget["training_rollouts"] == 2 * 1 * 2  # 2 updates x 1 task x K 2, no rescue in harnessx
        assert budget["training_rollouts"] + budget["validation_rollouts"] == segment_rollouts
        assert budget["search_rollouts"] > 0
        report = build_report(s, "hx", [])
        (row,) = report.tables["resources"].to_dict("records")
        assert (row["method"], row["training_rollouts"]) == ("harnessx", 4)
        assert row["editor_tokens"] == 0 and row["search_hours"] > 0  # its own evolutions, offline operators
        (signals,) = report.tables["rq2"].to_dict("records")
        assert signals["updates"] == 2 and signals["rollouts_spent"] == 4  # both segments' updates
