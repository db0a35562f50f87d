"""The RQ1-RQ6 report on a hand-built database (tests/analysis/handbuilt_db.py): every table's numbers
exact, every figure drawn from its table, and `hs report` writing report.md with the PNGs."""

from __future__ import annotations

import importlib.util
from datetime import datetime, timedelta
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from analysis import figures, research
from analysis.report import build_report, write_report
from analysis.runs import resolve_methods
from db.engine import make_engine, session_scope, upgrade
from db.models import Run

_spec = importlib.util.spec_from_file_location("handbuilt_db", Path(__file__).with_name("handbuilt_db.py"))
handbuilt = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(handbuilt)

MAIN, BASELINES = "pipe-hs", ["compare-grpo", "train-fp"]  # by id, by name, by id
HS, GRPO, FP = "harness_s (adaptive)", "grpo", "harness_s (fixed_profiles)"
approx = pytest.approx


@pytest.fixture
def session(db_url):
    upgrade(db_url)
    engine = make_engine(db_url)
    with session_scope(engine) as s:
        handbuilt.build(s)
    with session_scope(engine) as s:
        yield s
    engine.dispose()


@pytest.fixture
def methods(session):
    return resolve_methods(session, MAIN, BASELINES)


def _records(df, key):
    return {row[key]: row for row in df.to_dict("records")}


def test_methods_resolve_by_id_and_name(methods):
    assert [(m.label, m.run_id, m.train_run_id) for m in methods] == [
        (HS, "pipe-hs", "train-hs"),
        (GRPO, "pipe-grpo", "train-grpo"),
        (FP, "train-fp", "train-fp"),
    ]
    assert methods[0].eval_run("rank1-before") == "ev-r1b" and methods[2].evaluations == {}


def test_unknown_run_is_a_lookup_error(session):
    with pytest.raises(LookupError, match="no pipeline or training run 'nope'"):
        resolve_methods(session, "nope", [])


def test_rq1_main_table(session, methods):
    df = research.rq1_main_table(session, methods)
    got = {
        (r["method"], r["routing"]): (r["pass_mean"], r["pass_std"], r["avg_mean"], r["avg_std"], r["seeds"])
        for r in df.to_dict("records")
    }
    assert got == {
        ("base policy", "H0"): approx((25.0, 25.0, 100 / 12, 100 / 12, 2)),
        ("base policy", "Rank-1"): approx((0.0, 0.0, 0.0, 0.0, 1)),
        (HS, "H0"): approx((75.0, 25.0, 100 / 3, 50 / 3, 2)),
        (HS, "Rank-1"): approx((50.0, 0.0, 50.0, 0.0, 1)),
        (GRPO, "H0"): approx((50.0, 0.0, 25.0, 25 / 3, 2)),
    }


def test_rq2_signals_and_validation(session, methods):
    rows = _records(research.rq2_signals(session, methods), "method")
    assert rows[HS] == approx(
        {
            "method": HS,
            "updates": 4,
            "valid_group_ratio": 0.5,
            "effective_token_ratio": 0.4,
            "first_group_success": 0.25,
            "rescues": 7.0,
            "rescue_success": 2 / 7,
            "rollouts_spent": 76.0,
            "rollouts_vs_grpo": 76 / 48,
            # valid groups 1 + 2 + 0 + 1 = 4 of 8: Wilson(4, 8) = 0.5 ± 1.959964 * 0.215072 / 1.480182
            "groups": 8,
            "valid_groups": 4,
            "valid_low": 0.215213,
            "valid_high": 0.784787,
            "effective_groups": 3.2,  # (0.4 + 0.6 + 0.2 + 0.4) * 2
            # 2 of 7 rescues: centre (0.285714 + 0.274390) / 1.548780 = 0.361642, half 0.279421
            "rescued": 2,
            "rescue_low": 0.082221,
            "rescue_high": 0.641063,
        },
        abs=1e-5,
    )
    assert pd.isna(rows[GRPO]["rescue_success"]) and rows[GRPO]["valid_group_ratio"] == approx(0.25)
    assert rows[FP]["rescue_success"] == approx(1 / 3) and rows[FP]["rollouts_vs_grpo"] == approx(1.5)
    val = research.rq2_validation(session, methods)
    assert {(r["method"], r["step"]): r["h0_success"] for r in val.to_dict("records")} == approx(
        {
            (HS, 0): 0.25,
            (HS, 2): 0.5,
            (HS, 4): 0.75,
            (GRPO, 0): 0.25,
            (GRPO, 2): 0.25,
            (GRPO, 4): 0.5,
            (FP, 0): 0.25,
            (FP, 2): 0.25,
            (FP, 4): 0.25,
        }
    )


def test_rq3_stages_and_reanchoring_ablation(session, methods):
    stages = research.rq3_rescue_by_stage(session, methods)
    assert {(r["router"], r["stage"]): (r["rescues"], r["rescue_success"]) for r in stages.to_dict("records")} == {
        ("adaptive", "0-1"): approx((3.0, 1 / 3)),
        ("adaptive", "2-3"): approx((4.0, 0.25)),
        ("fixed_profiles", "0-1"): approx((4.0, 0.5)),
        ("fixed_profiles", "2-3"): approx((2.0, 0.0)),
    }
    ablation = _records(research.rq3_reanchoring_ablation(stages), "stage")
    assert ablation["0-1"]["difference"] == approx(1 / 3 - 0.5) and ablation["2-3"]["difference"] == approx(0.25)
    assert {r["verdict"] for r in ablation.values()} == {"within noise"}  # 1 of 3 vs 2 of 4; 1 of 4 vs 0 of 2


def test_reanchoring_ablation_pools_the_seeds_of_a_router():
    def stage(router, method, name, rescues, rescued):
        return {"router": router, "method": method, "stage": name, "rescues": rescues, "rescued": rescued}

    stages = pd.DataFrame(
        [
            stage("adaptive", "harness_s seed 0", "0-9", 10, 2),
            stage("adaptive", "harness_s seed 1", "0-9", 30, 10),
            stage("fixed_profiles", "fixed seed 0", "0-9", 20, 2),
            stage("adaptive", "harness_s seed 0", "10-19", 0, 0),
            stage("adaptive", "harness_s seed 1", "10-19", 0, 0),
            stage("fixed_profiles", "fixed seed 0", "10-19", 5, 1),
        ]
    )
    rows = _records(research.rq3_reanchoring_ablation(stages), "stage")
    first = rows["0-9"]  # 12 of 40 pooled over the two seeds against 2 of 20
    assert (first["adaptive"], first["fixed_profiles"], first["difference"]) == approx((0.3, 0.1, 0.2))
    assert (first["adaptive_runs"], first["fixed_profiles_runs"]) == (2, 1)
    assert first["low"] < first["difference"] < first["high"]
    second = rows["10-19"]  # no adaptive rescue in the stage: shares, no comparison
    assert pd.isna(second["adaptive"]) and second["fixed_profiles"] == approx(0.2) and pd.isna(second["low"])


def test_evaluation_differences_are_paired_over_tasks(session, methods):
    from analysis.comparisons import evaluation_differences

    rows = _records(evaluation_differences(session, methods), "comparison")
    # Per task (Pass, Avg) over the 2 seeds: before d1 (0, 0), d2 (50, 16.67); after d1 (100, 50), d2 (50, 16.67).
    # Differences d1 (+100, +50), d2 (0, 0): 2 tasks, so a resample's mean is one of three values with
    # probability 1/4, 1/2, 1/4 and the 95% interval runs from the lowest to the highest.
    trained = rows[f"{HS} - base policy (H0)"]
    assert (trained["n_tasks"], trained["pass_diff"], trained["pass_low"], trained["pass_high"]) == approx(
        (2, 50.0, 0.0, 100.0)
    )
    assert (trained["avg_diff"], trained["avg_low"], trained["avg_high"]) == approx((25.0, 0.0, 50.0))
    assert trained["pass_p"] == approx(1.0) and trained["verdict"] == "within noise"  # one non-zero task
    # grpo after: d1 (0, 0), d2 (100, 50). harness_s - grpo: d1 (+100, +50), d2 (-50, -33.33).
    versus = rows[f"{HS} - {GRPO} (H0)"]
    assert (versus["pass_diff"], versus["pass_low"], versus["pass_high"]) == approx((25.0, -50.0, 100.0))
    assert (versus["avg_diff"], versus["avg_low"], versus["avg_high"]) == approx((25 / 3, -100 / 3, 50.0))
    # Rank-1 (one seed) d1 (100, 100), d2 (0, 0) minus H0 after: d1 (0, +50), d2 (-50, -16.67).
    rank1 = rows["Rank-1 - H0, trained"]
    assert (rank1["pass_diff"], rank1["avg_diff"]) == approx((-25.0, 50 / 3))
    assert rows["terse - H0, trained"]["pass_diff"] == approx(-75.0)  # terse solves nothing
    assert FP not in " ".join(rows)  # a bare training run has no evaluations to compare


def test_a_baseline_with_its_own_starting_policy_is_compared_with_it(session, methods):
    """frozen_evolution evaluates its own starting weights ('before', maybe on another machine than
    the main run): H_best is paired with those, and those with the main run's base policy."""
    from analysis.comparisons import evaluation_differences
    from analysis.runs import resolve_methods

    frozen = {
        "method": "frozen_evolution",
        "evaluations": {"before": {"run_id": "ev-terse"}, "best": {"run_id": "ev-r1"}},
    }
    session.add(Run(id="pipe-frozen", kind="pipeline", name="compare-frozen", status="completed", results=frozen))
    session.flush()
    rows = _records(evaluation_differences(session, resolve_methods(session, MAIN, ["pipe-frozen"])), "comparison")
    # ev-r1 (1 seed) d1 (100, 100), d2 (0, 0) - ev-terse (nothing solved): d1 (+100, +100), d2 (0, 0)
    own = rows["frozen_evolution - its own starting policy (H_best)"]
    assert (own["n_tasks"], own["pass_diff"], own["avg_diff"]) == approx((2, 50.0, 50.0))
    # ev-terse - ev-before (d1 (0, 0), d2 (50, 16.67)): d1 (0, 0), d2 (-50, -16.67)
    machines = rows["frozen_evolution's starting policy - base policy (H0)"]
    assert (machines["pass_diff"], machines["avg_diff"]) == approx((-25.0, -25 / 3))
    # against the main run's base policy: d1 (+100), d2 (0 - 50)
    assert rows["frozen_evolution - base policy (H_best)"]["pass_diff"] == approx(25.0)
    plain = _records(evaluation_differences(session, methods), "comparison")
    assert not [c for c in plain if "own starting policy" in c]  # grpo evaluated no starting policy


def test_signal_differences_use_group_counts(session, methods):
    from analysis.comparisons import signal_differences

    rows = {
        (r["signal"], r["comparison"]): r
        for r in signal_differences(research.rq2_signals(session, methods)).to_dict("records")
    }
    valid = rows[("valid_group_ratio", f"{HS} - {GRPO}")]
    # 4 of 8 against 2 of 8: Wilson(2, 8) = [0.071478, 0.590730]; Newcombe:
    # low 0.25 - sqrt(0.284787^2 + 0.340730^2) = -0.194073, high 0.25 + sqrt(0.284787^2 + 0.178522^2) = 0.586116
    assert (valid["difference"], valid["low"], valid["high"]) == approx((0.25, -0.194073, 0.586116), abs=1e-5)
    assert valid["verdict"] == "within noise"
    assert ("rescue_success", f"{HS} - {GRPO}") not in rows  # grpo has no rescues
    assert rows[("rescue_success", f"{HS} - {FP}")]["difference"] == approx(2 / 7 - 2 / 6)


def test_rq4_behaviours_and_transfers(session, methods):
    df = research.rq4_behaviours(session, methods)
    got = {(r["policy"], r["behaviour"]): r["share"] for r in df.to_dict("records")}
    assert got == approx(
        {
            ("base policy", "inspected_first"): 0.25,
            ("base policy", "repeated_query"): 0.0,
            ("base policy", "answered_without_query"): 0.5,
            ("base policy", "rechecked_mutation"): 0.0,
            (GRPO, "inspected_first"): 0.0,
            (GRPO, "repeated_query"): 1 / 3,
            (GRPO, "answered_without_query"): 0.0,
            (GRPO, "rechecked_mutation"): 0.0,
            (HS, "inspected_first"): 0.75,
            (HS, "repeated_query"): 0.0,
            (HS, "answered_without_query"): 0.0,
            (HS, "rechecked_mutation"): 1 / 6,
        }
    )
    transfers = research.rq4_transfers(session, methods).to_dict("records")
    assert transfers == [
        {
            "bench_task_id": "d1",
            "task_type": "select",
            "before": "0/6",
            "after": "3/6",
            "before_behaviours": "answered_without_query x3",
            "after_behaviours": "inspected_first x6, rechecked_mutation x2",
        }
    ]


def test_rq4_behaviour_differences_by_hand(session, methods, tmp_path):
    """inspected_first: 9 of 12 H0 trajectories after, 3 of 12 before. Wilson(9/12): centre
    (0.75 + 3.8415/24) / (1 + 3.8415/12) = 0.68938, half 1.96 * sqrt(0.75*0.25/12 + 3.8415/576) /
    1.32012 = 0.22169 -> [0.46769, 0.91107]; 3/12 mirrors it: [0.08893, 0.53231]. Newcombe: 0.5 -/+
    sqrt(0.28231^2 + 0.28231^2) and sqrt(0.16107^2 + 0.16107^2) -> [0.10074, 0.72779]; pooled z test:
    0.5 / sqrt(0.25 * 2/12) = 2.4495 -> p = 0.01431."""
    df = research.rq4_behaviour_differences(session, methods)
    rows = {(r["comparison"], r["behaviour"]): r for r in df.to_dict("records")}
    r = rows[f"{HS} - base policy", "inspected_first"]
    assert (r["main"], r["other"], r["difference"]) == approx((0.75, 0.25, 0.5))
    assert (r["low"], r["high"], r["p"]) == approx((0.10074, 0.72779, 0.01431), abs=1e-4)
    assert r["verdict"] == "beyond noise"
    assert rows[f"{HS} - base policy", "rechecked_mutation"]["verdict"] == "within noise"  # 2/12 vs 0/12
    assert rows[f"{HS} - grpo", "repeated_query"]["difference"] == approx(-1 / 3)
    assert len(df) == 8  # 4 behaviours x (base policy, grpo)
    text = write_report(build_report(session, MAIN, BASELINES), tmp_path).read_text()
    assert f"{HS} - base policy: inspected_first +0.500 [+0.101, +0.728], answered_without_query -0.500" in text


def test_rq5_rank1_shares_and_edge(session, methods):
    shares = _records(research.rq5_rank1_shares(session, methods), "harness")
    assert list(shares) == ["h0", "sib_a"]
    assert (shares["h0"]["before"], shares["h0"]["after"]) == approx((0.0, 0.5))
    assert (shares["sib_a"]["before"], shares["sib_a"]["after"]) == approx((1.0, 0.5))
    # H0: 1 of 2 tasks after vs 0 of 2 before. Wilson(1, 2) = 0.5 -+ 0.405469, Wilson(0, 2) = [0, 0.657620];
    # Newcombe: 0.5 - sqrt(0.405469^2 + 0.657620^2) = -0.272573, 0.5 + 0.405469 = 0.905469
    assert (shares["h0"]["change_low"], shares["h0"]["change_high"]) == approx((-0.272573, 0.905469), abs=1e-5)
    edge = _records(research.rq5_rank1_edge(session, methods), "when")
    assert (edge["before"]["pass_edge"], edge["before"]["avg_edge"]) == approx((-25.0, -100 / 12))
    assert (edge["after"]["pass_edge"], edge["after"]["avg_edge"]) == approx((-25.0, 50 - 100 / 3))


def test_rq6_outside_harnesses(session, methods):
    rows = _records(research.rq6_outside(session, methods), "harness")
    assert set(rows) == {"h0", "terse"}
    assert (rows["h0"]["pass_mean"], rows["h0"]["in_pool"]) == (approx(75.0), True)
    assert (rows["terse"]["pass_mean"], rows["terse"]["in_pool"]) == (approx(0.0), False)


def test_phenomena(session, methods):
    loc = {
        (r["step"], r["sibling"]): (r["solved"], r["fixed"], r["broken"])
        for r in research.locality(session, methods).to_dict("records")
    }
    edge = {(r["step"], r["sibling"]): r for r in research.locality(session, methods).to_dict("records")}
    # step 4, sib_a: per-task differences (+1, -1, -1, -1); a resample's count of +1s is Binomial(4, 1/4):
    # P(0) = 0.316 puts the 2.5% quantile at -1, P(<= 2) = 0.949 and P(<= 3) = 0.996 the 97.5% at +0.5.
    assert (edge[(4, "sib_a")]["edge"], edge[(4, "sib_a")]["edge_low"], edge[(4, "sib_a")]["edge_high"]) == approx(
        (-0.5, -1.0, 0.5)
    )
    assert edge[(4, "sib_a")]["verdict"] == "within noise"
    assert loc == {
        (0, "sib_a"): (2, 1, 0),
        (0, "sib_b"): (0, 0, 1),
        (2, "sib_a"): (2, 1, 1),
        (2, "sib_b"): (1, 1, 2),
        (4, "sib_a"): (1, 1, 3),
        (4, "sib_b"): (1, 0, 2),
    }
    comp = _records(research.complementarity(session, methods), "step")
    assert [v for s in (0, 2, 4) for v in (comp[s]["h0"], comp[s]["best_single"], comp[s]["oracle_union"])] == approx(
        [0.25, 0.5, 0.5, 0.5, 0.5, 0.5, 0.75, 0.25, 0.5]
    )
    assert comp[0]["best_single_name"] == "sib_a"
    edges = _records(research.non_stationarity(session, methods), "sibling")
    assert [edges["sib_a"][f"step {s}"] for s in (0, 2, 4)] == approx([0.25, 0.0, -0.5])
    assert [edges["sib_b"][f"step {s}"] for s in (0, 2, 4)] == approx([-0.25, -0.25, -0.5])


def _bar_heights(fig, label):
    from matplotlib.container import BarContainer

    return [
        p.get_height()
        for c in fig.axes[0].containers
        if isinstance(c, BarContainer) and c.get_label() == label
        for p in c.patches
    ]


def test_figures_plot_their_tables(session, methods):
    report = build_report(session, MAIN, BASELINES)
    t = report.tables
    rq1 = figures.rq1_figure(t["rq1"])
    h0 = t["rq1"][t["rq1"]["routing"] == "H0"]
    assert _bar_heights(rq1, "H0") == approx(list(h0["pass_mean"]))  # methods in table order, all have H0
    rank1 = _bar_heights(rq1, "Rank-1")
    assert rank1[:2] == approx([0.0, 50.0])  # base policy, harness_s; grpo has no Rank-1 bar value
    rq2 = figures.rq2_figure(t["rq2_validation"])
    lines = {line.get_label(): list(line.get_ydata()) for line in rq2.axes[0].get_lines()}
    assert lines[HS] == approx([0.25, 0.5, 0.75]) and lines[GRPO] == approx([0.25, 0.25, 0.5])
    rq3 = figures.rq3_figure(t["rq3"])
    assert _bar_heights(rq3, "adaptive") == approx([1 / 3, 0.25])
    assert _bar_heights(rq3, "fixed_profiles") == approx([0.5, 0.0])
    rq4 = figures.rq4_figure(t["rq4"])
    assert _bar_heights(rq4, HS) == approx([0.75, 0.0, 0.0, 1 / 6])
    assert _bar_heights(rq4, "base policy") == approx([0.25, 0.0, 0.5, 0.0])
    rq5 = figures.rq5_figure(t["rq5"])
    assert _bar_heights(rq5, "before") == approx([0.0, 1.0]) and _bar_heights(rq5, "after") == approx([0.5, 0.5])
    ns = figures.non_stationarity_figure(t["non_stationarity"])
    lines = {
        line.get_label(): list(line.get_ydata())
        for line in ns.axes[0].get_lines()
        if not line.get_label().startswith("_")
    }
    assert lines["sib_a"] == approx([0.25, 0.0, -0.5])


def test_write_report_and_cli(db_url, session, tmp_path):
    report = build_report(session, MAIN, BASELINES)
    path = write_report(report, tmp_path / "r", "hs report ...")
    text = path.read_text()
    assert (
        f"dev, {HS} - {GRPO} (H0): +8.33 Avg@k points [-33.33, +50.00] and +25.00 Pass@k points [-50.00, +100.00] "
        "over 2 tasks: within noise" in text
    )
    assert "H0 is Rank-1 on 0.0% of tasks before training and 50.0% after (change [" in text
    assert "valid_group_ratio harness_s (adaptive) - grpo: +0.250 [-0.194, +0.586], within noise" in text
    assert "At the last re-anchor (step 4, 4 tasks), 0 of 2 siblings differ from H0 beyond noise." in text
    assert "rescue success over all stages" in text.lower() and "adaptive 2/7" in text and "fixed_profiles 2/6" in text
    pngs = sorted(p.name for p in (tmp_path / "r").glob("*.png"))
    assert pngs == sorted(
        [
            "rq1_pass.png",
            "rq2_h0_validation.png",
            "rq3_rescue_by_stage.png",
            "rq4_behaviours.png",
            "rq5_rank1_shares.png",
            "non_stationarity.png",
        ]
    )
    assert all((tmp_path / "r" / p).stat().st_size > 1000 for p in pngs)

    from cli.main import app

    out = tmp_path / "cli"
    result = CliRunner().invoke(
        app, ["report", "--run", "compare-hs", "--baseline", "pipe-grpo", "--out", str(out), "--database-url", db_url]
    )
    assert result.exit_code == 0, result.output
    assert "comparing harness_s (adaptive), grpo" in result.output
    assert "| grpo" in (out / "report.md").read_text() and "nan" not in (out / "report.md").read_text()
    bad = CliRunner().invoke(app, ["report", "--run", "nope", "--out", str(out), "--database-url", db_url])
    assert bad.exit_code == 2 and "no pipeline or training run 'nope'" in bad.output


def test_a_baseline_alone_reports_without_the_missing_parts(session, tmp_path):
    """A GRPO pipeline as the main run: no router stages, no Rank-1, no base-policy evaluation."""
    report = build_report(session, "pipe-grpo", [])
    assert report.tables["rq3"].empty and report.tables["rq5"].empty and report.tables["rq4_transfers"].empty
    assert report.tables["rq4"]["policy"].unique().tolist() == ["grpo"]  # listed once, though it is also 'the GRPO'
    text = write_report(report, tmp_path, "").read_text()
    assert "_no data: the compared runs do not include what this table needs._" in text
    assert "_none: no evaluation task the base policy never solved" in text
    assert sorted(p.name for p in tmp_path.glob("*.png")) == [
        "rq1_pass.png",
        "rq2_h0_validation.png",
        "rq4_behaviours.png",
    ]


def test_the_base_harness_gets_a_rank1_row_even_when_never_chosen(session, methods):
    from sqlalchemy import update

    from db.models import RouterDecision

    session.execute(
        update(RouterDecision).where(RouterDecision.run_id == "ev-r1").values(chosen=[handbuilt.H["sib_b"]])
    )
    shares = _records(research.rq5_rank1_shares(session, methods), "harness")
    assert (shares["h0"]["before"], shares["h0"]["after"]) == (0.0, 0.0)
    assert shares["sib_b"]["after"] == approx(1.0) and shares["sib_a"]["before"] == approx(1.0)


def test_an_export_of_the_reported_runs_gives_the_same_report(db_url, session, tmp_path):
    """`hs db copy --run ... --no-turns` keeps exactly what the report reads: the same report.md."""
    from analysis.runs import runs_of
    from db.copy import count_rows

    session.commit()
    session.add(Run(id="unrelated", kind="eval", name="other", config={}))  # not part of the report
    session.commit()
    from cli.main import app

    export = f"sqlite:///{tmp_path / 'rows.db'}"
    runner = CliRunner()
    args = ["db", "copy", "--from", db_url, "--to", export, "--no-turns"]
    result = runner.invoke(app, [*args, *[x for r in [MAIN, *BASELINES] for x in ("--run", r)]])
    assert result.exit_code == 0, result.output
    rows = count_rows(export)
    assert rows["turns"] == 0 and rows["runs"] == len(runs_of(resolve_methods(session, MAIN, BASELINES)))
    original = write_report(build_report(session, MAIN, BASELINES), tmp_path / "a").read_text()
    engine = make_engine(export)
    with session_scope(engine) as s:
        again = write_report(build_report(s, MAIN, BASELINES), tmp_path / "b").read_text()
    engine.dispose()
    assert again == original
    unknown = runner.invoke(app, [*args, "--run", "nope"])
    assert unknown.exit_code == 2 and "no pipeline or training run 'nope'" in unknown.output


def test_pool_reports_under_two_policies_join_the_report_and_its_export(db_url, session, tmp_path):
    """`hs report --pool-report A --pool-report B`: the pool section from finished pool-report runs,
    in the order given; `hs db copy --run A` exports them; an unknown one is a one-line error."""
    from analysis.pool import pool_report
    from cli.main import app

    h0 = {"t1": [True, False], "t2": [False, False], "t3": [False, False]}
    for name, sib in (
        ("pool-warm", {"t1": [True], "t2": [True], "t3": [False]}),
        ("pool-u4", {"t1": [False], "t2": [False], "t3": [False]}),
    ):
        session.add(
            Run(
                id=f"{name}-id",
                kind="pool_report",
                name=name,
                config={},
                status="completed",
                results={"policy": name, **pool_report(h0, {"sib_a": sib}, k=1)},
            )
        )
    session.commit()
    report = build_report(session, MAIN, BASELINES, ["pool-warm", "pool-u4"])
    text = write_report(report, tmp_path / "r").read_text()
    assert "## Locality, complementarity, non-stationarity on a larger task sample" in text
    # warm start: sib_a fixes t2 (H0's first rollout solves t1 only): +0.33; u4: breaks t1: -0.33
    assert "pool-warm (3 tasks): 0 of 1 siblings differ from H0 beyond noise" in text
    assert "| sib_a     | +0.333 [" in text and "| -0.333 [" in text
    assert (
        "on a larger task sample"
        not in write_report(build_report(session, MAIN, BASELINES), tmp_path / "n").read_text()
    )

    export = f"sqlite:///{tmp_path / 'rows.db'}"
    args = ["db", "copy", "--from", db_url, "--to", export, "--no-turns", "--run", MAIN, "--run", "pool-warm"]
    assert CliRunner().invoke(app, args).exit_code == 0
    engine = make_engine(export)
    with session_scope(engine) as s:
        assert s.get(Run, "pool-warm-id").results["n_tasks"] == 3 and s.get(Run, "pool-u4-id") is None
    engine.dispose()
    bad = CliRunner().invoke(
        app, ["report", "--run", MAIN, "--pool-report", "nope", "--out", str(tmp_path / "x"), "--database-url", db_url]
    )
    assert bad.exit_code == 2 and "no finished pool report 'nope'" in bad.output


def test_the_resource_table_tells_which_methods_started_from_the_same_weights(session, methods, tmp_path):
    """A warm start rebuilt elsewhere keeps its name, not its weights: the runs' recorded digests
    (training: init_weights; a method without training: its 'before' evaluation's weights, else
    its first harness selection's) show it."""
    from analysis.report import starting_points
    from analysis.resources import resource_table
    from rl.checkpoints import weights_digest

    folder = tmp_path / "ckpt"
    folder.mkdir()
    (folder / "model.safetensors").write_bytes(b"first build")
    first = weights_digest(folder)
    (folder / "model.safetensors").write_bytes(b"other build")  # same name, other weights
    other = weights_digest(folder)
    assert len(first) == 64 and first != other and weights_digest(tmp_path) is None  # no weight files

    table = _records(resource_table(session, methods), "method")
    assert all(row["start_weights"] is None for row in table.values())  # runs from before the record
    assert starting_points(resource_table(session, methods)).startswith("Starting weights not recorded for: " + HS)
    session.get(Run, "train-hs").config = {**session.get(Run, "train-hs").config, "init_weights": first}
    session.get(Run, "train-grpo").config = {**session.get(Run, "train-grpo").config, "init_weights": first}
    session.get(Run, "train-fp").config = {**session.get(Run, "train-fp").config, "init_weights": other}
    session.flush()
    r = resource_table(session, methods)
    assert list(r["start_weights"]) == [first[:12], first[:12], other[:12]]
    assert starting_points(r) == (
        f"The methods started from 2 different weights ({first[:12]}: {HS}, {GRPO}; {other[:12]}: {FP}): "
        "differences between those sets include their starting points'."
    )
    session.get(Run, "train-fp").config = {**session.get(Run, "train-fp").config, "init_weights": first}
    session.flush()
    assert starting_points(resource_table(session, methods)) == (
        f"The 3 methods with a record started from the same weights ({first[:12]})."
    )
    pipe = session.get(Run, "pipe-hs")  # without a training run's record: the 'before' evaluation's
    session.get(Run, "train-hs").config = {
        k: v for k, v in session.get(Run, "train-hs").config.items() if k != "init_weights"
    }
    session.get(Run, pipe.results["evaluations"]["before"]["run_id"]).config = {"weights": other}
    session.flush()
    assert resource_table(session, methods)["start_weights"].iloc[0] == other[:12]

    # neither a training run nor a 'before' evaluation (WHALE, HarnessForge): the first selection's
    from dataclasses import replace

    from analysis.resources import start_weights

    t0 = datetime(2026, 12, 4, 22, 0)
    for run_id, weights, minutes in (("search-late", other, 30), ("search-early", first, 0)):
        created = t0 + timedelta(minutes=minutes)
        config = {"weights": weights}
        session.add(
            Run(id=run_id, kind="evaluation", name=run_id, config=config, status="completed", created_at=created)
        )
    session.flush()
    searcher = replace(methods[0], train_run_id=None, evaluations={}, search_runs=("search-late", "search-early"))
    assert start_weights(session, searcher) == first[:12]
    assert start_weights(session, replace(searcher, search_runs=())) is None


def test_the_rescue_figure_draws_each_seed_of_a_router_as_its_own_series():
    """Two training seeds of one adaptive method: one bar series each (a series per router would
    have met two values for one stage)."""
    import pandas as pd

    from analysis import figures
    from analysis.research import RESCUE_STAGE_TABLE

    rows = [
        ["adaptive", f"harness_s (adaptive) seed {seed}", stage, first, 60, hits, hits / 60, None, None]
        for seed, hits in ((0, 5), (1, 8))
        for stage, first in (("0-9", 0), ("10-19", 10))
    ]
    fig = figures.rq3_figure(pd.DataFrame(rows, columns=RESCUE_STAGE_TABLE))
    labels = [text.get_text() for text in fig.axes[0].get_legend().get_texts()]
    assert labels == ["harness_s (adaptive) seed 0", "harness_s (adaptive) seed 1"]
