"""Routing in training: profiles stored per re-anchor, the router variant reads the right version,
rescue decisions are recorded with their votes."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import select

from configs.schema import TrainConfig
from db import store
from db.engine import session_scope
from db.models import ProfileVersion, RouterDecision
from harness_pool.profiles import PairedRecord
from harness_pool.spec import load_harness
from rl.training_modes import rescue_groups
from tasks.resources import get_engine
from tasks.routing import build_router, load_profiles, record_decisions, store_profiles

H0, ROWS, LENIENT = load_harness("h0"), load_harness("schema_rows"), load_harness("lenient_answer")


@dataclass(frozen=True)
class Task:
    id: str
    task_type: str
    tier: str = "easy"
    description: str = ""
    table_name: str = "t"

    @property
    def instruction(self) -> str:
        return self.description


UPDATE = Task("u9", "UPDATE", description="Update the price of Widget to 20.")


def records(rows_wins_updates: bool) -> list[PairedRecord]:
    """schema_rows beats H0 on UPDATE tasks (or, later, loses there), lenient_answer ties H0."""
    out = []
    h0_ok = not rows_wins_updates
    for tid in ("u1", "u2"):
        for h, ok in ((H0, h0_ok), (ROWS, rows_wins_updates), (LENIENT, h0_ok)):
            out.append(
                PairedRecord(
                    bench_task_id=tid,
                    task_type="UPDATE",
                    tier="easy",
                    text="Update a row.",
                    harness_id=h.id,
                    successes=[ok],
                )
            )
    for h, ok in ((H0, True), (ROWS, True), (LENIENT, True)):
        out.append(
            PairedRecord(
                bench_task_id="c1",
                task_type="counting",
                tier="easy",
                text="How many rows?",
                harness_id=h.id,
                successes=[ok],
            )
        )
    return out


def cfg(kind: str) -> TrainConfig:
    return TrainConfig(router={"kind": kind, "voters": ["statistics"]}, pool=["schema_rows", "lenient_answer"])


def test_adaptive_reads_the_newest_profiles_and_fixed_profiles_the_first(tmp_path):
    url = f"sqlite:///{tmp_path / 'hs.db'}"
    with session_scope(get_engine(url)) as s:
        store.upsert_run(s, id="r", kind="train", name="t", status="running", config={})
        first = store_profiles(s, cfg("adaptive"), "r", 0, H0, [ROWS, LENIENT], records(rows_wins_updates=True))
        store_profiles(s, cfg("adaptive"), "r", 10, H0, [ROWS, LENIENT], records(rows_wins_updates=False))
    assert first["schema_rows"]["prefer"] >= 1 and first["lenient_answer"]["prefer"] == 0
    with session_scope(get_engine(url)) as s:
        assert len(s.scalars(select(ProfileVersion)).all()) == 4
        assert load_profiles(s, "r", 5, first_only=False)[0] == 0  # nothing newer than the step is used
        adaptive, version = build_router(cfg("adaptive"), s, "r", 12)
        assert version == 10
        fixed, first_version = build_router(cfg("fixed_profiles"), s, "r", 12)
        assert first_version == 0
        # at step 0 schema_rows was the UPDATE specialist; by step 10 it had lost that edge
        assert fixed.rank(UPDATE, [ROWS, LENIENT]).harness_ids[0] == ROWS.id
        assert adaptive.rank(UPDATE, [ROWS, LENIENT]).harness_ids[0] == LENIENT.id
        rules, _ = build_router(cfg("rules"), s, "r", 12)
        assert list(rules.rank(UPDATE, [ROWS, LENIENT]).votes) == ["rules"]


def test_rescue_decisions_are_stored_with_ranking_choice_and_votes(tmp_path):
    url = f"sqlite:///{tmp_path / 'hs.db'}"
    with session_scope(get_engine(url)) as s:
        store.upsert_run(s, id="r", kind="train", name="t", status="running", config={})
        store_profiles(s, cfg("adaptive"), "r", 0, H0, [ROWS, LENIENT], records(rows_wins_updates=True))
        router, version = build_router(cfg("adaptive"), s, "r", 3)
        groups = rescue_groups("harness_s", [UPDATE], H0, [ROWS, LENIENT], router, k=4)
        record_decisions(s, "r", 3, "adaptive", version, groups)
    with session_scope(get_engine(url)) as s:
        d = s.scalars(select(RouterDecision)).one()
        assert (d.step, d.bench_task_id, d.purpose, d.router, d.profile_version) == (3, "u9", "rescue", "adaptive", 0)
        assert d.ranking == [ROWS.id, LENIENT.id] and d.chosen == [ROWS.id, LENIENT.id, ROWS.id, LENIENT.id]
        assert d.votes["voters"]["statistics"][0] == ROWS.id and d.votes["errors"] == {}


def test_profiles_show_prints_entries_and_a_clear_error_for_an_unknown_harness(tmp_path):
    from typer.testing import CliRunner

    from cli.main import app

    url = f"sqlite:///{tmp_path / 'hs.db'}"
    with session_scope(get_engine(url)) as s:
        store.upsert_run(s, id="r", kind="train", name="t", status="running", config={})
        for h in (H0, ROWS, LENIENT):
            store.upsert_harness(
                s, id=h.id, name=h.name, benchmark=h.benchmark, parent_ids=h.parent_ids, spec=h.model_dump(mode="json")
            )
        store_profiles(s, cfg("adaptive"), "r", 0, H0, [ROWS, LENIENT], records(rows_wins_updates=True))
    out = CliRunner().invoke(app, ["profiles", "show", "schema_rows", "--database-url", url])
    assert out.exit_code == 0 and "profile of schema_rows" in out.output and "UPDATE" in out.output
    bad = CliRunner().invoke(app, ["profiles", "show", "nope", "--database-url", url])
    assert bad.exit_code == 2 and "no behaviour profile for 'nope'" in bad.output


def test_rank1_evaluation_routes_each_task_and_stores_its_choice(tmp_path, data_dir):
    from configs.schema import EvalConfig
    from tasks.evaluation import rank1_share, register_run

    url = f"sqlite:///{tmp_path / 'hs.db'}"
    with session_scope(get_engine(url)) as s:
        store.upsert_run(s, id="train-run", kind="train", name="t", status="running", config={})
        # schema_rows beats H0 on UPDATE tasks and loses on counting ones; lenient_answer ties H0 everywhere
        paired = [
            PairedRecord(bench_task_id=tid, task_type=tt, tier="easy", text="x", harness_id=h.id, successes=[ok])
            for tid, tt, outcome in (
                ("u1", "UPDATE", (False, True)),
                ("u2", "UPDATE", (False, True)),
                ("c1", "counting", (True, False)),
                ("c2", "counting", (True, False)),
            )
            for h, ok in ((H0, outcome[0]), (ROWS, outcome[1]), (LENIENT, outcome[0]))
        ]
        store_profiles(s, cfg("adaptive"), "train-run", 0, H0, [ROWS, LENIENT], paired)
    ecfg = EvalConfig(
        split="dev",
        routing="rank1",
        pool=["schema_rows", "lenient_answer"],
        profiles_run="train-run",
        router_voters=["statistics"],
        limit=60,
    )
    run = register_run.fn(ecfg, url, None)
    with session_scope(get_engine(url)) as s:
        decisions = {d.bench_task_id: d for d in s.scalars(select(RouterDecision)).all()}
        types = {t.id: t.task_type for t in __import__("tasks.resources", fromlist=["x"]).bench_tasks(ecfg.env, "dev")}
        assert len(decisions) == len(run["bench_task_ids"]) == 60
        for task_id, choice in run["choices"].items():
            assert decisions[task_id].chosen == [choice] and decisions[task_id].purpose == "rank1"
            if types[task_id] == "UPDATE":
                assert choice == ROWS.id  # its evidence beats H0 there
            elif types[task_id] == "counting":
                assert choice == H0.id  # its evidence says avoid; H0 wins the tie with lenient_answer by id
        share = rank1_share(s, run["run_id"])
    n_count = sum(types[t] == "counting" for t in run["bench_task_ids"])
    assert share["h0"] >= n_count / 60 > 0 and share["schema_rows"] > 0


def test_rank1_without_pool_or_profiles_is_a_config_error():
    import pytest

    from configs.schema import EvalConfig

    with pytest.raises(ValueError, match="routing rank1 needs pool"):
        EvalConfig(routing="rank1")
