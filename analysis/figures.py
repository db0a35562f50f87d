"""Matplotlib figures of the report, each drawn from exactly one DataFrame of analysis/research.py.

Every function returns a Figure (the Agg backend: no display needed) or None when its table is
empty; report.py saves them as small PNGs. Bars and lines are drawn in the table's row order, so
a test can read the plotted values back and compare them with the table.
"""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

SIZE = (6.4, 3.6)


def _grouped_bars(ax, groups: list[str], series: dict[str, list[float]], errors: dict[str, list[float]] | None = None):
    width = 0.8 / max(len(series), 1)
    x = np.arange(len(groups))
    for i, (name, values) in enumerate(series.items()):
        ax.bar(
            x + i * width - 0.4 + width / 2,
            values,
            width,
            label=name,
            yerr=(errors or {}).get(name),
            capsize=3 if errors else 0,
        )
    ax.set_xticks(x, groups, rotation=20, ha="right", fontsize=8)
    ax.legend(fontsize=8)


def rq1_figure(df: pd.DataFrame, k: int = 3) -> Figure | None:
    """Pass@k per method, H0 and Rank-1 side by side, std over seeds as error bars."""
    if df.empty:
        return None
    fig, ax = plt.subplots(figsize=SIZE)
    methods = list(dict.fromkeys(df["method"]))
    series, errors = {}, {}
    for routing in ("H0", "Rank-1"):
        part = df[df["routing"] == routing].set_index("method")
        if part.empty:
            continue
        series[routing] = [float(part["pass_mean"].get(m, np.nan)) for m in methods]
        errors[routing] = [float(part["pass_std"].get(m, 0.0)) for m in methods]
    _grouped_bars(ax, methods, series, errors)
    ax.set_ylabel(f"Pass@{k} (%)")
    ax.set_title("RQ1: Pass@k under H0 and Rank-1")
    fig.tight_layout()
    return fig


def rq2_figure(validation: pd.DataFrame) -> Figure | None:
    """H0 validation success at each re-anchor, one line per method."""
    if validation.empty:
        return None
    fig, ax = plt.subplots(figsize=SIZE)
    for method, part in validation.groupby("method", sort=False):
        part = part.sort_values("step")
        ax.plot(part["step"], part["h0_success"], marker="o", label=method)
    ax.set_xlabel("update (re-anchor step)")
    ax.set_ylabel("H0 validation success")
    ax.set_title("RQ2: H0 validation success per checkpoint")
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def rq3_figure(stages: pd.DataFrame) -> Figure | None:
    """Rescue success per training stage, one bar series per router variant (named by the router;
    by the method where a router has several, e.g. training seeds), missing = no rescue."""
    if stages.empty:
        return None
    fig, ax = plt.subplots(figsize=SIZE)
    order = list(dict.fromkeys(stages.sort_values("first_update")["stage"]))
    series = {}
    methods_per_router = stages.groupby("router")["method"].nunique()
    for (router, method), part in stages.groupby(["router", "method"], sort=False):
        values = part.set_index("stage")["rescue_success"]
        name = router if methods_per_router[router] == 1 else method
        series[name] = [float(values[s]) if s in values and pd.notna(values[s]) else 0.0 for s in order]
    _grouped_bars(ax, [f"updates {s}" for s in order], series)
    ax.set_ylabel("rescue groups with a success")
    ax.set_title("RQ3: rescue success per stage and router")
    fig.tight_layout()
    return fig


def rq4_figure(behaviours: pd.DataFrame) -> Figure | None:
    """Share of H0 trajectories with each behaviour, one bar series per policy."""
    if behaviours.empty:
        return None
    fig, ax = plt.subplots(figsize=SIZE)
    tags = list(dict.fromkeys(behaviours["behaviour"]))
    series = {
        policy: [float(part.set_index("behaviour")["share"][t]) for t in tags]
        for policy, part in behaviours.groupby("policy", sort=False)
    }
    _grouped_bars(ax, tags, series)
    ax.set_ylabel("share of trajectories")
    ax.set_title("RQ4: behaviours under H0")
    fig.tight_layout()
    return fig


def rq5_figure(shares: pd.DataFrame) -> Figure | None:
    """Share of tasks on which each harness is Rank-1, before and after training."""
    if shares.empty:
        return None
    fig, ax = plt.subplots(figsize=SIZE)
    _grouped_bars(ax, list(shares["harness"]), {"before": list(shares["before"]), "after": list(shares["after"])})
    ax.set_ylabel("share of tasks ranked first")
    ax.set_title("RQ5: Rank-1 harness before vs after training")
    fig.tight_layout()
    return fig


def non_stationarity_figure(edges: pd.DataFrame) -> Figure | None:
    """Each sibling's edge over H0 across re-anchors."""
    steps = [c for c in edges.columns if c != "sibling"]
    if edges.empty or not steps:
        return None
    fig, ax = plt.subplots(figsize=SIZE)
    x = [int(c.removeprefix("step ")) for c in steps]
    for _, row in edges.iterrows():
        ax.plot(x, [row[c] for c in steps], marker="o", label=row["sibling"])
    ax.axhline(0.0, color="grey", linewidth=0.8)
    ax.set_xlabel("update (re-anchor step)")
    ax.set_ylabel("validation success - H0's")
    ax.set_title("Non-stationarity: sibling edge over H0")
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    return fig
