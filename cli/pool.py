"""`hs pool`: show, list, diff and freeze versioned harness pools (harness_pool/pool_store.py), and
`hs pool report`, which runs a pool to measure it (flows/pool_report.py).

The commands are thin: they parse options, call the pool store and render rich tables. A
HarnessError (unknown version, tampered file, conflicting freeze) prints one line on stderr and
exits with status 2, like the other `hs` commands (`hs pool report` catches every known user
error through cli/errors.py).
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from cli import views
from cli.errors import user_errors
from cli.options import DatabaseUrl, Sets
from envs.registry import DEFAULT_BENCHMARK
from harness_pool.pool_store import (
    DEFAULT_ROOT,
    PoolManifest,
    diff_pools,
    freeze_pool,
    list_pools,
    load_pool,
    version_with_dvc,
)
from harness_pool.spec import HarnessError, load_harness

pool_app = typer.Typer(help="Frozen harness pools.", no_args_is_help=True)

Benchmark = Annotated[str, typer.Option(help="Benchmark whose pools to use")]
Root = Annotated[Optional[Path], typer.Option(help="Pools folder; default harness_pool/pools")]


def _user_errors(fn):
    """A HarnessError becomes `error: <message>` on stderr and exit status 2."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except HarnessError as exc:
            Console(stderr=True).print(f"[red]error:[/red] {exc}", markup=True, highlight=False, soft_wrap=True)
            raise typer.Exit(2) from None

    return wrapper


def _out() -> Console:
    return Console(highlight=False, soft_wrap=True)


def _header(manifest: PoolManifest) -> str:
    base = next(m for m in manifest.members if m.id == manifest.base_id)
    return (
        f"pool {manifest.benchmark}/{manifest.version} · id {manifest.pool_id[:12]} · "
        f"base {base.name} ({base.id[:12]}) · created by {manifest.created_by or '-'}"
    )


@pool_app.command("show")
@_user_errors
def pool_show(
    version: Annotated[str, typer.Argument(help="Pool version, or the path of a version folder")],
    benchmark: Benchmark = DEFAULT_BENCHMARK,
    root: Root = None,
):
    """Members of a pool version, with their parents and the edit that made them."""
    manifest, _, _ = load_pool(version, benchmark, root or DEFAULT_ROOT)
    names = {m.id: m.name for m in manifest.members}
    table = Table(title=f"{len(manifest.members)} harnesses")
    for col in ("name", "id", "parent", "round", "root causes", "edit"):
        table.add_column(col, no_wrap=col in ("name", "id"), overflow="fold")
    for m in manifest.members:
        parents = ", ".join(names.get(p, p[:12]) for p in m.parent_ids) or "-"
        table.add_row(
            m.name,
            m.id[:12],
            parents,
            "-" if m.round is None else str(m.round),
            "\n".join(m.root_causes) or "-",
            m.edit or "-",
        )
    console = _out()
    console.print(_header(manifest))
    console.print(table)


@pool_app.command("list")
@_user_errors
def pool_list(benchmark: Benchmark = DEFAULT_BENCHMARK, root: Root = None):
    """All frozen versions of a benchmark's pool."""
    folder = root or DEFAULT_ROOT
    manifests = list_pools(benchmark, folder)
    console = _out()
    if not manifests:
        console.print(f"no pool versions under {folder / benchmark}; create one with: hs pool freeze VERSION")
        return
    table = Table(title=f"{benchmark} pools")
    for col in ("version", "harnesses", "pool id", "created by"):
        table.add_column(col, no_wrap=True)
    for m in manifests:
        table.add_row(m.version, str(len(m.members)), m.pool_id[:12], m.created_by or "-")
    console.print(table)


def _diff_text(diff: str) -> Text:
    styles = {"+": "green", "-": "red", "@": "cyan"}
    text = Text()
    for line in diff.splitlines(keepends=True):
        text.append(line, style=styles.get(line[:1], ""))
    return text


@pool_app.command("diff")
@_user_errors
def pool_diff(
    a: Annotated[str, typer.Argument(help="Older pool version (or folder)")],
    b: Annotated[str, typer.Argument(help="Newer pool version (or folder)")],
    benchmark: Benchmark = DEFAULT_BENCHMARK,
    root: Root = None,
):
    """What changed between two pool versions: members added, removed, edited (with their YAML diff)."""
    folder = root or DEFAULT_ROOT
    old, _, _ = load_pool(a, benchmark, folder)
    new, _, _ = load_pool(b, benchmark, folder)
    diff = diff_pools(old, new)
    console = _out()
    console.print(f"{old.version} -> {new.version}")
    for m in diff["only_b"]:
        console.print(Text(f"added    {m.name} ({m.id[:12]})", style="green"))
    for m in diff["only_a"]:
        console.print(Text(f"removed  {m.name} ({m.id[:12]})", style="red"))
    for c in diff["changed"]:
        console.print(Text(f"changed  {c['name']} ({c['a'].id[:12]} -> {c['b'].id[:12]})", style="yellow"))
        console.print(_diff_text(c["diff"]))
    console.print(f"unchanged: {len(diff['same'])}")


@pool_app.command("freeze")
@_user_errors
def pool_freeze(
    version: Annotated[str, typer.Argument(help="New version name, e.g. seed-v1")],
    harness: Annotated[str, typer.Option(help="Base harness (H0): built-in name or YAML path")] = "h0",
    sibling: Annotated[Optional[list[str]], typer.Option(help="Sibling harness name or YAML path; repeat")] = None,
    benchmark: Benchmark = DEFAULT_BENCHMARK,
    root: Root = None,
    created_by: Annotated[Optional[str], typer.Option(help="Who made the pool, e.g. an evolution run id")] = None,
    dvc: Annotated[
        bool, typer.Option("--dvc/--no-dvc", help="Commit and tag it with DVC when the repository uses DVC")
    ] = True,
):
    """Freeze harness files into a new pool version (idempotent for the same members)."""
    base = load_harness(harness, benchmark)
    siblings = [load_harness(s, benchmark) for s in sibling or []]
    manifest = freeze_pool(base, siblings, benchmark, version, root or DEFAULT_ROOT, created_by=created_by)
    console = _out()
    console.print(
        f"froze {len(manifest.members)} harnesses as pool {benchmark}/{manifest.version} "
        f"(id {manifest.pool_id[:12]}) at {manifest.directory}"
    )
    if not dvc:
        return
    tag = version_with_dvc(manifest.directory, f"pool-{benchmark}-{manifest.version}")
    console.print(f"versioned with DVC: git tag {tag}" if tag else "DVC is not initialised here; not versioned")


@pool_app.command("report")
@user_errors
def pool_report_cmd(
    version: str = typer.Argument(..., help="Pool version (hs pool list)"),
    warm_start: Annotated[Optional[str], typer.Option(help="SFT config whose checkpoint is the policy")] = None,
    model: Annotated[
        Optional[str], typer.Option(help="Policy model or checkpoint name (instead of --warm-start)")
    ] = None,
    n_tasks: Annotated[Optional[int], typer.Option("--n-tasks", help="Training tasks to report on")] = None,
    k: Annotated[Optional[int], typer.Option(help="Rollouts per sibling and task (H0 gets k x siblings)")] = None,
    database_url: DatabaseUrl = None,
    set_: Sets = None,
):
    """Locality (tasks each sibling fixes/breaks vs H0), complementarity (oracle union vs best single
    vs H0 at equal rollouts) and pairwise repair overlap, measured by running the pool."""
    from cli.checks import check_training_split, open_database
    from configs.schema import PoolReportConfig, load_config
    from tasks.pool_report import report_run_id

    overrides = {"version": version, "warm_start": warm_start, "policy.model": model, "n_tasks": n_tasks, "k": k}
    cfg = load_config(PoolReportConfig, None, overrides, set_)
    report_run_id(cfg)  # a run id too long for the database: one line, before Prefect starts
    load_pool(cfg.version, cfg.env.benchmark, Path(cfg.pool_root))  # an unknown version fails here, in one line
    check_training_split(cfg.env.benchmark, cfg.env.data_dir)
    open_database(database_url, write=True)
    from flows.pool_report import pool_report

    views.print_pool_report(Console(), pool_report(cfg, database_url=database_url))
