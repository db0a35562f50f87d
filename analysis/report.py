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

from analysis import figures, research
from analysis.runs import Method, resolve_methods


@dataclass
class Report:
    methods: list[Method]
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)


def build_report(session: Session, main: str, baselines: list[str]) -> Report:
    methods = resolve_methods(session, main, baselines)
    stages = research.rq3_rescue_by_stage(session, methods)
    tables = {
        "rq1": research.rq1_main_table(session, methods),
        "rq2": research.rq2_signals(session, methods),
        "rq2_validation": research.rq2_validation(session, methods),
        "rq3": stages,
        "rq3_ablation": research.rq3_reanchoring_ablation(stages),
        "rq4": research.rq4_behaviours(session, methods),
        "rq4_transfers": research.rq4_transfers(session, methods),
        "rq5": research.rq5_rank1_shares(session, methods),
        "rq5_edge": research.rq5_rank1_edge(session, methods),
        "rq6": research.rq6_outside(session, methods),
        "locality": research.locality(session, methods),
        "complementarity": research.complementarity(session, methods),
        "non_stationarity": research.non_stationarity(session, methods),
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
    df = df.drop(columns=[c for c in ("run_id",) if c in df.columns])
    return df.astype(object).where(df.notna(), None)


EMPTY = {  # what an empty table means, where it is a finding rather than missing runs
    "rq4_transfers": "_none: no evaluation task the base policy never solved under H0 was solved after training._",
    "rq3_ablation": "_needs both an adaptive and a fixed_profiles run among the compared runs._",
}


def _md(key: str, df: pd.DataFrame, digits: int = 3) -> str:
    if df.empty:
        return EMPTY.get(key, "_no data: the compared runs do not include what this table needs._")
    return _display(key, df).to_markdown(index=False, floatfmt=f".{digits}f", missingval="-")


def _pm(row) -> str:
    return f"{row['pass_mean']:.2f} ± {row['pass_std']:.2f}"


def readings(report: Report) -> dict[str, str]:
    """One plain sentence per section, computed from its table."""
    t, main = report.tables, report.methods[0].label
    out: dict[str, str] = {}
    h0 = t["rq1"][t["rq1"]["routing"] == "H0"].set_index("method")
    if main in h0.index:
        others = [f"{m} {_pm(h0.loc[m])}" for m in h0.index if m != main]
        out["rq1"] = (
            f"Under H0, {main} reaches Pass@k {_pm(h0.loc[main])}"
            + (f" against {', '.join(others)}." if others else ".")
            + " Differences smaller than the std over seeds are not evidence either way."
        )
    if not t["rq2"].empty:
        best = t["rq2"].sort_values("valid_group_ratio", ascending=False).iloc[0]
        out["rq2"] = f"The highest mean valid-group ratio is {best['method']}'s ({best['valid_group_ratio']:.3f})."
    if not t["rq3"].empty:
        total = t["rq3"].assign(ok=t["rq3"]["rescues"] * t["rq3"]["rescue_success"].fillna(0.0))
        per = total.groupby("router")[["ok", "rescues"]].sum()
        out["rq3"] = (
            "Rescue success over all stages: "
            + ", ".join(f"{r} {row['ok']:.0f}/{row['rescues']:.0f}" for r, row in per.iterrows())
            + "."
        )
    if not t["rq4"].empty:
        wide = t["rq4"].pivot_table(index="behaviour", columns="policy", values="share", aggfunc="first")
        if "base policy" in wide.columns and main in wide.columns:
            delta = (wide[main] - wide["base policy"]).sort_values()
            out["rq4"] = (
                f"Largest change under H0 from the base policy to {main}: {delta.index[-1]} "
                f"{delta.iloc[-1]:+.3f}, {delta.index[0]} {delta.iloc[0]:+.3f}."
            )
    if not t["rq5"].empty and "h0" in set(t["rq5"]["harness"]):
        row = t["rq5"].set_index("harness").loc["h0"]
        out["rq5"] = f"H0 is Rank-1 on {row['before']:.1%} of tasks before training and {row['after']:.1%} after."
    if not t["rq6"].empty:
        out["rq6"] = (
            "; ".join(f"{r['method']} under {r['harness']}: Pass@k {_pm(r)}" for _, r in t["rq6"].iterrows()) + "."
        )
    return out


SECTIONS = [
    ("rq1", "RQ1: main table", ["rq1"], "Pass@k / Avg@k (%, mean ± std over seeds) under H0 and under Rank-1."),
    (
        "rq2",
        "RQ2: training signals",
        ["rq2", "rq2_validation"],
        "Valid-group ratio (groups with both a success and a failure), effective-token ratio, rescues and rollouts "
        "spent per training run; H0 validation success at every re-anchor.",
    ),
    (
        "rq3",
        "RQ3: rescue success by router",
        ["rq3", "rq3_ablation"],
        "Share of rescue groups with at least one success, per training stage (updates between re-anchors); the "
        "re-anchoring ablation compares adaptive with fixed_profiles (first profiles, never re-anchored).",
    ),
    (
        "rq4",
        "RQ4: behaviours under H0 and transfer",
        ["rq4", "rq4_transfers"],
        "Share of H0 evaluation trajectories showing each DBBench behaviour; unseen tasks the base policy never "
        "solved and the trained policy did, with the behaviours seen there.",
    ),
    (
        "rq5",
        "RQ5: router dependency",
        ["rq5", "rq5_edge"],
        "Share of evaluation tasks on which each harness is ranked first, before and after training; Rank-1's edge "
        "over H0 in Pass@k / Avg@k points.",
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
        "From the main run's paired validation at each re-anchor: per sibling, tasks fixed and broken relative to H0; "
        "H0 vs best single sibling vs the oracle union; each sibling's success edge over H0 by re-anchor.",
    ),
]


def write_report(report: Report, out_dir: Path, command: str = "") -> Path:
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
        lines += [f"Reproduce: `{command}`", ""]
    lines += ["Compared runs:", ""] + [
        f"- **{m.label}**: run `{m.run_id}`"
        + (f", training run `{m.train_run_id}`" if m.train_run_id else "")
        + (f", evaluations: {', '.join(sorted(m.evaluations))}" if m.evaluations else "")
        for m in report.methods
    ]
    for key, title, table_keys, explain in SECTIONS:
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
