"""The evolution flow end to end: offline editor, Prefect tasks, database rows, frozen pool, resume."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import func, select

from configs.schema import EvolveConfig
from db.engine import make_engine, session_scope
from db.models import EvolutionCandidate, Pool, RolloutGroup, Run, Trajectory
from harness_pool.pool_store import load_pool
from rl.policy import ChatSession, Generation


def evolve_cfg(tmp_path: Path, **changes) -> EvolveConfig:
    base = dict(
        name="evo",
        rounds=2,
        parents_per_round=2,
        children_per_parent=2,
        tiers=["easy"],
        diagnose={"n_tasks": 6, "k": 1, "min_support": 1},
        validation={"max_tasks": 30, "n_controls": 2, "k": 1, "min_fixed": 1, "max_broken": 0},
        sampling={"temperature": 1.0, "top_p": 1.0, "max_new_tokens": 24},
        env={"max_rounds": 2},
        pool={"root": str(tmp_path / "pools"), "dvc": False},
        results_dir=str(tmp_path / "results"),
    )
    base.update(changes)
    return EvolveConfig.model_validate(base)


class ScalarAnswers:
    """Test double of the Policy contract: answers every task with its gold label as a bare scalar
    ('Final Answer: 3'), which H0's protocol rejects as answer_not_list. Stands in for a policy
    whose answers are right but whose format only a lenient sibling accepts."""

    name, max_context_tokens = "scalar-answers", 10_000

    def __init__(self, labels: dict[str, str]):
        self.labels = labels

    def start(self, messages):
        return ChatSession(messages=list(messages), pending_text="")

    def extend(self, session, messages):
        session.messages += messages

    def reset_context(self, session, messages):
        session.messages = list(messages)

    def generate(self, sessions, sampling):
        out = []
        for s in sessions:
            opening = s.messages[1]["content"]
            label = next((v for d, v in self.labels.items() if opening.startswith(d)), "0")
            out.append(Generation(text=f"Action: Answer\nFinal Answer: {label}"))
        return out


@pytest.mark.slow
def test_a_lenient_sibling_is_found_validated_selected_and_frozen(tmp_path, train_dir, prefect_api, monkeypatch):
    from flows.evolve import evolve
    from tasks import evolution
    from tasks.resources import bench_task

    cfg = evolve_cfg(tmp_path)
    tasks = [bench_task(cfg.env, i) for i in evolution.diagnosis_task_ids(cfg)]
    labels = {t.description: str(t.label[0]) for t in tasks if not t.is_mutation and len(t.label) == 1}
    assert labels, "the sample needs a single-value SELECT task"
    monkeypatch.setattr(evolution, "get_policy", lambda _: ScalarAnswers(labels))
    url = f"sqlite:///{tmp_path / 'hs.db'}"
    result = evolve(cfg, database_url=url)

    first = result["rounds"][0]
    assert first["parents"] == 1 and first["valid"] >= 1 and first["selected"]
    with session_scope(make_engine(url)) as s:
        cands = s.scalars(select(EvolutionCandidate).where(EvolutionCandidate.round == 1)).all()
        assert len(cands) == 2
        valid = [c for c in cands if c.status == "valid"]
        assert valid and all("answer_not_list" in c.root_causes for c in valid)
        for c in cands:
            assert set(c.fixed) <= set(c.details["targeted"]) and set(c.broken) <= set(c.details["controls"])
            assert len(c.validation_tasks) <= 30
        lenient = next(c for c in valid if c.selected)
        assert len(lenient.fixed) == len(labels)  # every single-value SELECT task is now answered right
        pool = s.scalars(select(Pool)).one()
        assert s.get(Run, result["run_id"]).status == "completed"
        diagnosed = s.scalar(select(func.count()).select_from(RolloutGroup).where(RolloutGroup.role == "diagnose"))
    manifest, base, siblings = load_pool(result["version"], "dbbench", tmp_path / "pools")
    assert base.name == "h0" and len(siblings) == result["size"] - 1 >= 1
    assert {m.id for m in manifest.members} == {m["id"] for m in pool.members}
    assert lenient.harness_id in {sib.id for sib in siblings}
    # round 2 diagnosed the selected children; their own children keep the lineage
    assert diagnosed == len(tasks) * (1 + len(first["selected"]))
    assert any(sib.parent_ids == [lenient.harness_id] for sib in siblings) or result["rounds"][-1]["valid"] == 0


@pytest.mark.slow
def test_offline_evolution_with_the_real_policy_and_resume(tmp_path, train_dir, prefect_api):
    from flows.evolve import evolve

    cfg = evolve_cfg(tmp_path, rounds=1, diagnose={"n_tasks": 3, "k": 1, "min_support": 1})
    url = f"sqlite:///{tmp_path / 'hs.db'}"
    result = evolve(cfg, database_url=url)
    with session_scope(make_engine(url)) as s:
        trajs = {t.id: t.created_at for t in s.scalars(select(Trajectory)).all()}
        cands = s.scalars(select(EvolutionCandidate)).all()
        h0_groups = s.scalars(select(RolloutGroup).where(RolloutGroup.role == "diagnose")).all()
    assert len(h0_groups) == 3 and all(g.k == 1 for g in h0_groups)
    assert 1 <= len(cands) <= 2 and all(c.status in ("valid", "invalid", "rejected") for c in cands)
    assert all(c.root_causes for c in cands)  # every candidate names what it targets
    assert result["size"] == 1 + sum(c.status == "valid" for c in cands)

    again = evolve(cfg, database_url=url)  # persisted task results: nothing runs twice
    assert again["pool_id"] == result["pool_id"] and again["rounds"] == result["rounds"]
    with session_scope(make_engine(url)) as s:
        assert {t.id: t.created_at for t in s.scalars(select(Trajectory)).all()} == trajs


@pytest.mark.slow
def test_pool_report_measures_locality_and_complementarity(tmp_path, train_dir, prefect_api, monkeypatch):
    import json

    from configs.schema import PoolReportConfig
    from flows.pool_report import pool_report
    from harness_pool.pool_store import freeze_pool
    from harness_pool.spec import load_harness
    from tasks import evolution
    from tasks import pool_report as report_tasks
    from tasks.resources import bench_task

    freeze_pool(
        load_harness("h0"),
        [load_harness("lenient_answer"), load_harness("schema_rows")],
        "dbbench",
        "p1",
        tmp_path / "pools",
    )
    cfg = PoolReportConfig(
        version="p1",
        pool_root=str(tmp_path / "pools"),
        n_tasks=6,
        k=1,
        tiers=["easy"],
        sampling={"temperature": 1.0, "top_p": 1.0, "max_new_tokens": 24},
        env={"max_rounds": 2},
        results_dir=str(tmp_path / "results"),
        report_dir=str(tmp_path / "reports"),
    )
    url = f"sqlite:///{tmp_path / 'hs.db'}"
    run = report_tasks.register_pool_report.fn(cfg, url, None)
    tasks = [bench_task(cfg.env, i) for i in run["task_ids"]]
    labels = {t.description: str(t.label[0]) for t in tasks if not t.is_mutation and len(t.label) == 1}
    monkeypatch.setattr(evolution, "get_policy", lambda _: ScalarAnswers(labels))
    report = pool_report(cfg, database_url=url)

    fixable = len(labels)  # scalar answers are right, and only lenient_answer accepts them
    assert fixable
    assert (
        report["locality"]["lenient_answer"]["fixed"] == fixable and report["locality"]["lenient_answer"]["broken"] == 0
    )
    assert report["locality"]["schema_rows"]["fixed"] == 0
    c = report["complementarity"]
    assert c["h0_at_k"] == 0.0 and c["h0_at_equal_rollouts"] == 0.0 and c["equal_rollouts"] == 2
    assert (
        c["oracle_union"] == c["best_single"] == pytest.approx(fixable / 6)
        and c["best_single_name"] == "lenient_answer"
    )
    assert report["overlap"] == {"lenient_answer|schema_rows": 0.0}
    assert json.loads(open(report["path"]).read())["locality"]["lenient_answer"]["fixed"] == fixable
    assert report["path"].endswith("pool-dbbench-p1.json")  # a named report (--set name=...) gets its own file
    with session_scope(make_engine(url)) as s:  # what `hs report --pool-report` reads
        assert s.get(Run, run["run_id"]).results["locality"] == report["locality"]
    with session_scope(make_engine(url)) as s:
        h0_groups = s.scalars(
            select(RolloutGroup).where(RolloutGroup.role == "report", RolloutGroup.harness_id == load_harness("h0").id)
        ).all()
        assert len(h0_groups) == 6 and all(g.k == 2 for g in h0_groups)  # H0 at the pool's rollout count

    # the same report on a new database: every row comes from the cache, the figures are the same
    from tests.flows.test_cache_and_database import every_id

    monkeypatch.setattr(evolution, "get_policy", lambda _: pytest.fail("a cached report ran the policy"))
    other = f"sqlite:///{tmp_path / 'other.db'}"
    again = pool_report(cfg, database_url=other)
    assert again["locality"] == report["locality"] and again["complementarity"] == report["complementarity"]
    assert every_id(other) == every_id(url)


def test_named_pool_reports_of_one_pool_get_their_own_files():
    from configs.schema import PoolReportConfig
    from tasks.pool_report import report_file_name

    assert report_file_name(PoolReportConfig(version="v1")) == "pool-dbbench-v1.json"
    assert report_file_name(PoolReportConfig(version="v1", name="pool-u10")) == "pool-dbbench-v1-pool-u10.json"
