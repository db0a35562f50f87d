"""One report for every research question: `hs report --run ID [--baseline RUN ...] --out DIR`.

build_report reads the tables (analysis/research.py) for the compared methods; write_report puts
report.md and one PNG per figure into the output folder. Each section states in one sentence
what its numbers show, computed from the same table, so the text never drifts from the data.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd
from sqlalchemy.orm import Session

from analysis import comparisons, figures, research, transfer
from analysis.pool import phenomena_tables
from analysis.resources import resource_table
from analysis.runs import Method, pool_reports, resolve_methods
from analysis.statistics import wilson


@dataclass
class Report:
    methods: list[Method]
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)


def build_report(session: Session, main: str, baselines: list[str], pools: list[str] = ()) -> Report:
    """The compared methods' tables; ``pools`` names pool-report runs (the same pool under several
    policies) for the phenomena measured on their own, larger task sample."""
    methods = resolve_methods(session, main, baselines)
    stages = research.rq3_rescue_by_stage(session, methods)
    signals = research.rq2_signals(session, methods)
    tables = {
        "rq1": research.rq1_main_table(session, methods),
        "rq1_differences": comparisons.evaluation_differences(session, methods),
        "rq1_test": research.rq1_main_table(session, methods, prefix="test-"),
        "rq1_test_differences": comparisons.evaluation_differences(session, methods, prefix="test-"),
        "seeds": comparisons.seed_differences(session, methods),
        "seeds_test": comparisons.seed_differences(session, methods, prefix="test-"),
        "transfer": transfer.transfer_table(session, methods),
        "rq2": signals,
        "rq2_differences": comparisons.signal_differences(signals),
        "rq2_validation": research.rq2_validation(session, methods),
        "rq3": stages,
        "rq3_ablation": research.rq3_reanchoring_ablation(stages),
        "rq4": research.rq4_behaviours(session, methods),
        "rq4_differences": research.rq4_behaviour_differences(session, methods),
        "rq4_transfers": research.rq4_transfers(session, methods),
        "rq5": research.rq5_rank1_shares(session, methods),
        "rq5_edge": research.rq5_rank1_edge(session, methods),
        "rq6": research.rq6_outside(session, methods),
        "locality": research.locality(session, methods),
        "complementarity": research.complementarity(session, methods),
        "non_stationarity": research.non_stationarity(session, methods),
        "resources": resource_table(session, methods),
        **phenomena_tables(pool_reports(session, list(pools))),
    }
    return Report(methods, tables)


FIGURES = {  # PNG name -> (figure function, table key)
    "rq1_pass.png": (figures.rq1_figure, "rq1"),
    "rq2_h0_validation.png": (figures.rq2_figure, "rq2_validation"),
    "rq3_rescue_by_stage.png": (figures.rq3_figure, "rq3"),
    "rq4_behaviours.png": (figures.rq4_figure, "rq4"),
    "rq5_rank1_shares.png": (figures.rq5_figure, "rq5"),
    "non_stationarity.png": (figures.non_stationarity_figure, "non_stationarity"),
}


def _display(key: str, df: pd.DataFrame) -> pd.DataFrame:
    """The table as printed: behaviours one row each (policies as columns), no run ids, missing as '-'."""
    if key == "rq4" and not df.empty:
        df = df.pivot_table(index="behaviour", columns="policy", values="share", aggfunc="first", sort=False)
        df = df.reset_index().rename_axis(columns=None)
    df = df.drop(columns=[c for c in ("run_id", "effective_groups") if c in df.columns])
    return df.astype(object).where(df.notna(), None)


EMPTY = {  # what an empty table means, where it is a finding rather than missing runs
    "rq4_transfers": "_none: no evaluation task the base policy never solved under H0 was solved after training._",
    "rq3_ablation": "_needs both an adaptive and a fixed_profiles run among the compared runs._",
    "transfer": "_no trained-tasks evaluations: set evaluate.trained_tasks_k in the pipeline config._",
    "seeds_test": "_no test-split evaluation: set evaluate.test_seeds in the pipeline config._",
    "rq1_test": "_no test-split evaluation: set evaluate.test_seeds in the pipeline config._",
    "rq1_test_differences": "_no test-split evaluation: set evaluate.test_seeds in the pipeline config._",
}


def _md(key: str, df: pd.DataFrame, digits: int = 3) -> str:
    if df.empty:
        return EMPTY.get(key, "_no data: the compared runs do not include what this table needs._")
    return _display(key, df).to_markdown(index=False, floatfmt=f".{digits}f", missingval="-")


def _pm(row) -> str:
    return f"{row['pass_mean']:.2f} ± {row['pass_std']:.2f}"


def _difference(row) -> str:
    """'+8.33 Avg@k points [-2.78, +19.44], within noise' from a row of the differences table."""
    return (
        f"{row['avg_diff']:+.2f} Avg@k points [{row['avg_low']:+.2f}, {row['avg_high']:+.2f}] and "
        f"{row['pass_diff']:+.2f} Pass@k points [{row['pass_low']:+.2f}, {row['pass_high']:+.2f}] "
        f"over {row['n_tasks']} tasks: {row['verdict']}"
    )


def _differences(t: pd.DataFrame, *labels: str) -> list[str]:
    rows = t.set_index("comparison") if not t.empty else t
    return [f"{label}: {_difference(rows.loc[label])}" for label in labels if label in rows.index]


def readings(report: Report) -> dict[str, str]:
    """One plain sentence per section, computed from its table; 'beyond noise' or 'within noise'
    always comes from a 95% interval of the difference, never from the std over seeds."""
    t, main = report.tables, report.methods[0]
    out: dict[str, str] = {}
    d = t["rq1_differences"]
    headline = [
        *[f"{main.label} - {m.label} ({where})" for m in report.methods[1:] for where in ("H0", "H_best")],
        f"{main.label} - base policy (H0)",
        *[f"{m.label} - its own starting policy ({where})" for m in report.methods[1:] for where in ("H0", "H_best")],
        "Rank-1 - H0, trained",
    ]
    said = [f"dev, {x}" for x in _differences(d, *headline)]
    said += [f"test, {x}" for x in _differences(t["rq1_test_differences"], *headline)]
    if said:
        out["rq1"] = "; ".join(said) + "."
    seeds = [
        f"{split}, {r['comparison']}: {r['avg_diff']:+.2f} Avg@k points [{r['avg_low']:+.2f}, {r['avg_high']:+.2f}] "
        f"over {r['n_tasks']} tasks, {r['seeds_a']} vs {r['seeds_b']} seeds (per seed {r['per_seed_avg']}), "
        f"{r['verdict']}"
        for split, key in (("dev", "seeds"), ("test", "seeds_test"))
        for _, r in t[key].iterrows()
        if " - base policy" not in r["comparison"]
    ]
    if seeds:
        out["seeds"] = "; ".join(seeds) + "."
    moved = t["transfer"]
    if not moved.empty:
        out["transfer"] = (
            "; ".join(
                f"{r['category']}, {r['comparison']}: {r['diff']:+.2f} [{r['low']:+.2f}, {r['high']:+.2f}] over "
                f"{r['n_tasks']} tasks ({r['seeds']} seeds), {r['verdict']}"
                for _, r in moved[moved["category"] != "alive"].iterrows()
            )
            + "."
        )
    s = t["rq2_differences"]
    if not s.empty:
        out["rq2"] = (
            "; ".join(
                f"{r['signal']} {r['comparison']}: {r['difference']:+.3f} [{r['low']:+.3f}, {r['high']:+.3f}], "
                f"{r['verdict']}"
                for _, r in s[s["signal"] != "rescue_success"].iterrows()
            )
            + "."
        )
    elif not t["rq2"].empty:
        best = t["rq2"].sort_values("valid_group_ratio", ascending=False).iloc[0]
        out["rq2"] = f"The highest mean valid-group ratio is {best['method']}'s ({best['valid_group_ratio']:.3f})."
    if not t["rq3"].empty:
        per = t["rq3"].groupby("router")[["rescued", "rescues"]].sum()
        parts = []
        for router, row in per.iterrows():
            if row["rescues"]:
                w = wilson(row["rescued"], row["rescues"])
                parts.append(f"{router} {row['rescued']:.0f}/{row['rescues']:.0f} [{w.low:.2f}, {w.high:.2f}]")
            else:
                parts.append(f"{router} no rescues")
        out["rq3"] = "Rescue success over all stages (95% interval): " + ", ".join(parts) + "."
        ablation = t["rq3_ablation"].dropna(subset=["low"])  # stages where both routers had rescues
        if not ablation.empty:
            out["rq3"] += (
                " Re-anchoring ablation, adaptive - fixed_profiles: "
                + "; ".join(
                    f"stage {r['stage']} {r['difference']:+.2f} [{r['low']:+.2f}, {r['high']:+.2f}], {r['verdict']}"
                    for _, r in ablation.iterrows()
                )
                + "."
            )
    b = t["rq4_differences"]
    if not b.empty:
        parts = []
        for comparison, rows in b.groupby("comparison", sort=False):
            beyond = rows[rows["verdict"] == "beyond noise"]
            parts.append(
                f"{comparison}: "
                + (
                    ", ".join(
                        f"{r['behaviour']} {r['difference']:+.3f} [{r['low']:+.3f}, {r['high']:+.3f}]"
                        for _, r in beyond.iterrows()
                    )
                    + " beyond noise"
                    if len(beyond)
                    else f"no behaviour share differs beyond noise ({len(rows)} behaviours)"
                )
            )
        out["rq4"] = "Behaviour shares under H0, " + "; ".join(parts) + "."
    if not t["rq5"].empty and main.base_harness in set(t["rq5"]["harness"]):
        row = t["rq5"].set_index("harness").loc[main.base_harness]
        out["rq5"] = f"H0 is Rank-1 on {row['before']:.1%} of tasks before training and {row['after']:.1%} after"
        if "change_low" in row:
            out["rq5"] += f" (change [{row['change_low']:+.2f}, {row['change_high']:+.2f}], {row['verdict']})"
        out["rq5"] += "."
    outside = (
        [x for x in d["comparison"] if x.endswith("- H0, trained") and not x.startswith("Rank-1")] if len(d) else []
    )
    if outside:
        out["rq6"] = "; ".join(_differences(d, *outside)) + "."
    elif not t["rq6"].empty:
        out["rq6"] = (
            "; ".join(f"{r['method']} under {r['harness']}: Pass@k {_pm(r)}" for _, r in t["rq6"].iterrows()) + "."
        )
    loc = t["locality"]
    if not loc.empty:
        last = loc[loc["step"] == loc["step"].max()]
        beyond = last[last["verdict"] == "beyond noise"]
        out["phenomena"] = (
            f"At the last re-anchor (step {int(last['step'].iloc[0])}, {int(last['n_tasks'].iloc[0])} tasks), "
            f"{len(beyond)} of {len(last)} siblings differ from H0 beyond noise"
            + (
                ": " + ", ".join(f"{r['sibling']} {r['edge']:+.2f}" for _, r in beyond.iterrows())
                if len(beyond)
                else ""
            )
            + "."
        )
    pool = t["pool_complementarity"]
    if not pool.empty:
        loc = t["pool_locality"]
        parts = []
        for _, r in pool.iterrows():
            mine = loc[loc["policy"] == r["policy"]]
            beyond = mine[mine["verdict"] == "beyond noise"]
            parts.append(
                f"{r['policy']} ({r['n_tasks']} tasks): {len(beyond)} of {len(mine)} siblings "
                "differ from H0 beyond noise"
                + (
                    ": " + ", ".join(f"{x['sibling']} {x['edge']:+.2f}" for _, x in beyond.iterrows())
                    if len(beyond)
                    else ""
                )
                + f"; oracle union {r['oracle_union']:.2f} vs best single {r['best_single']:.2f} "
                f"[{r['union_vs_best_low']:+.2f}, {r['union_vs_best_high']:+.2f}], {r['union_vs_best_verdict']}, "
                f"vs H0 at {r['rollouts']} rollouts {r['h0_at_equal_rollouts']:.2f} "
                f"[{r['union_vs_h0_low']:+.2f}, {r['union_vs_h0_high']:+.2f}], {r['union_vs_h0_verdict']}"
            )
        out["pool"] = "; ".join(parts) + "."
    r = t["resources"]
    if len(r) > 1 and r["total_vs_main"].notna().all():
        out["resources"] = (
            f"Rollouts spent in all, relative to {main.label}'s {r['total_rollouts'].iloc[0]:,.0f}: "
            + ", ".join(f"{row['method']} {row['total_vs_main']:.2f}x" for _, row in r.iloc[1:].iterrows())
            + "."
        )
    capped = r[r["within_caps"].notna()] if len(r) else r
    if len(capped):
        over = [row["method"] for _, row in capped.iterrows() if not row["within_caps"]]
        out["resources"] = (
            out.get("resources", "")
            + f" {len(capped) - len(over)} of {len(capped)} capped methods stayed within their rollout caps"
            + (f"; over: {', '.join(over)}." if over else ".")
        ).strip()
    if len(r):
        out["resources"] = (out.get("resources", "") + " " + starting_points(r)).strip()
    return out


def starting_points(r: pd.DataFrame) -> str:
    """Whether the methods started from the same weights, from the resource table's start_weights."""
    known = r[r["start_weights"].notna()]
    unknown = ", ".join(r[r["start_weights"].isna()]["method"])
    missing = f" Starting weights not recorded for: {unknown} (runs from before the record)." if unknown else ""
    if len(known) < 2:
        return missing.strip()
    groups = known.groupby("start_weights", sort=False)["method"].apply(list)
    if len(groups) == 1:
        return f"The {len(known)} methods with a record started from the same weights ({groups.index[0]})." + missing
    sets = "; ".join(f"{digest}: {', '.join(names)}" for digest, names in groups.items())
    return (
        f"The methods started from {len(groups)} different weights ({sets}): differences between those sets "
        "include their starting points'." + missing
    )


SECTIONS = [
    (
        "rq1",
        "RQ1: main table",
        ["rq1", "rq1_differences", "rq1_test", "rq1_test_differences"],
        "Pass@k / Avg@k (%, mean ± std over seeds) under H0 and under Rank-1; then paired differences on the same "
        "tasks (percent points; 95% paired-bootstrap interval over tasks, 10,000 seeded resamples; sign-flip "
        "permutation p-value). A difference is beyond noise when its interval excludes 0 and p < 0.05. The "
        "rq1_test tables are the same on the whole test split, where the pipeline evaluated it.",
    ),
    (
        "seeds",
        "Training seeds as replication",
        ["seeds", "seeds_test"],
        "Each method's runs that differ only in their training seed (train.seed) pooled: the difference of the "
        "means over seeds of the mean Avg@k / Pass@k over tasks, with a 95% two-level bootstrap interval (tasks "
        "resampled, paired, and each side's seeds resampled, 10,000 seeded resamples), so the interval holds the "
        "training run's noise as well as the evaluation's; seeds_a / seeds_b: the runs on each side; per_seed_avg: "
        "seed S against seed S (against the base policy: every seed), paired over tasks; spread: the standard "
        "deviation of a side's per-seed Avg@k. Beyond noise as in RQ1: the interval excludes 0 and the sign-flip "
        "test over tasks (on each side's mean over seeds) gives p < 0.05. With one seed each this is the RQ1 "
        "comparison. seeds_test: the same on the test split.",
    ),
    (
        "transfer",
        "Transfer on the rescued tasks",
        ["transfer"],
        "Every training task the main run drew, by what its first H0 group gave: rescued (dead, and the rescue "
        "had a success), dead and not rescued (the control), alive. Its H0 Avg@k at the end of training (the "
        "trained-tasks evaluations: fresh seeds) under the main method, under each other method trained with the "
        "same seed (the same tasks; for GRPO a dead group gave no signal) and under the warm start; a_avg / b_avg: "
        "the two sides' means, diff: a - b in points, paired over (seed, task) with seeds pooled (95% paired "
        "bootstrap, sign-flip p).",
    ),
    (
        "rq2",
        "RQ2: training signals",
        ["rq2", "rq2_differences", "rq2_validation"],
        "Valid-group ratio (groups with both a success and a failure), effective-token ratio, rescues and rollouts "
        "spent per training run, with 95% Wilson intervals over groups; the main run minus each other run "
        "(Newcombe interval, two-proportion z test; the effective-token ratio is treated as a share of groups, "
        "an approximation since tokens are clustered in groups); H0 validation success at every re-anchor.",
    ),
    (
        "rq3",
        "RQ3: rescue success by router",
        ["rq3", "rq3_ablation"],
        "Share of rescue groups with at least one success, per training stage (updates between re-anchors), with "
        "95% Wilson intervals; the re-anchoring ablation compares adaptive with fixed_profiles (first profiles, "
        "never re-anchored), with Newcombe intervals of the difference.",
    ),
    (
        "rq4",
        "RQ4: behaviours under H0 and transfer",
        ["rq4", "rq4_differences", "rq4_transfers"],
        "Share of H0 evaluation trajectories showing each of the benchmark's behaviours; the trained policy's "
        "share minus the base policy's and GRPO's (95% Newcombe interval, z test; trajectories treated as "
        "independent, which narrows the interval somewhat since one task's rollouts resemble each other); unseen "
        "tasks the base policy never solved and the trained policy did, with the behaviours seen there.",
    ),
    (
        "rq5",
        "RQ5: router dependency",
        ["rq5", "rq5_edge"],
        "Share of evaluation tasks on which each harness is ranked first, before and after training, with the "
        "95% Newcombe interval of the change; Rank-1's edge over H0 in Pass@k / Avg@k points (its interval is in "
        "the RQ1 differences).",
    ),
    (
        "rq6",
        "RQ6: harnesses outside the pool",
        ["rq6"],
        "The trained policy under harnesses it never trained under (in_pool = the base harness).",
    ),
    (
        "phenomena",
        "Locality, complementarity, non-stationarity",
        ["locality", "complementarity", "non_stationarity"],
        "From the main run's paired validation at each re-anchor: per sibling, tasks fixed and broken relative to H0, "
        "and its edge (fixed - broken) / tasks with a 95% paired-bootstrap interval; H0 vs best single sibling vs "
        "the oracle union, with the interval of the union's gain over the best single; each sibling's success edge "
        "over H0 by re-anchor.",
    ),
    (
        "resources",
        "Resources: rollouts and wall time per method",
        ["resources"],
        "Rollouts spent per method: search (the evolution behind its pool, when its run is in this database, plus "
        "a baseline's harness selection), training (the groups updates were formed from) and validation (the "
        "re-anchors); the total as a multiple of the main run's; the API tokens of the evolution's editor; the "
        "config's rollout caps and whether the method stayed within them; wall time of the evolution and training "
        "runs; the weights each method started from (sha256 prefix: a warm start rebuilt elsewhere keeps its name, "
        "not its weights).",
    ),
    (
        "pool",
        "Locality, complementarity, non-stationarity on a larger task sample (pool reports)",
        ["pool_locality", "pool_complementarity", "pool_non_stationarity"],
        "From `hs pool report` runs of the frozen pool under several policies, on the same training tasks: every "
        "sibling k rollouts per task and H0 k x (number of siblings). Per sibling, tasks fixed and broken against "
        "H0's first k rollouts and its edge with a 95% paired-bootstrap interval; the oracle union against the best "
        "single sibling and against H0 resampled at the same rollout count (paired intervals of the gains); each "
        "sibling's edge under each policy, in the order given, as training moves the policy.",
    ),
]


OPTIONAL_SECTIONS = {"pool"}  # left out when the report was asked for none (hs report --pool-report)


def write_report(report: Report, out_dir: Path, command: str = "", prepare: str = "") -> Path:
    """report.md and its figures in ``out_dir``. ``command`` reproduces it; ``prepare`` is a step to
    run once before it on a fresh checkout (e.g. decompressing the committed export it reads)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    pictures: dict[str, str] = {}
    for name, (draw, key) in FIGURES.items():
        fig = draw(report.tables[key])
        if fig is not None:
            fig.savefig(out_dir / name, dpi=80)
            plt.close(fig)
            pictures[key] = name
    said = readings(report)
    lines = ["# harness-s report", ""]
    if command:
        lines += [
            f"Reproduce: `{prepare}` (once, on a fresh checkout), then `{command}`"
            if prepare
            else f"Reproduce: `{command}`",
            "",
        ]
    lines += ["Compared runs:", ""] + [
        f"- **{m.label}**: run `{m.run_id}`"
        + (f", training run `{m.train_run_id}`" if m.train_run_id else "")
        + (f", evaluations: {', '.join(sorted(m.evaluations))}" if m.evaluations else "")
        for m in report.methods
    ]
    for key, title, table_keys, explain in SECTIONS:
        if key in OPTIONAL_SECTIONS and all(report.tables[k].empty for k in table_keys):
            continue
        lines += ["", f"## {title}", "", explain, ""]
        if key in said:
            lines += [f"**Reading:** {said[key]}", ""]
        for table_key in table_keys:
            lines += [f"`{table_key}`", "", _md(table_key, report.tables[table_key]), ""]
            if table_key in pictures:
                lines += [f"![{table_key}]({pictures[table_key]})", ""]
    path = out_dir / "report.md"
    path.write_text("\n".join(lines) + "\n")
    return path
