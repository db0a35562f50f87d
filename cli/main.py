"""`hs`: the command line of harness-s (typer). Each command is a thin shell over flows/domain.

Known user errors (bad config, missing data, unreachable database or model) print one line
saying how to fix them and exit with status 2; nothing already recorded is touched.
"""

from __future__ import annotations

from cli.environment import apply_defaults

apply_defaults()  # before Prefect or transformers is imported

import os  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Annotated, Optional  # noqa: E402

import typer  # noqa: E402
from rich.console import Console  # noqa: E402

from cli import prefect_guard, views  # noqa: E402
from cli.editor import editor_app  # noqa: E402
from cli.errors import flow_failed, user_errors  # noqa: E402
from cli.options import BenchmarkOption, DatabaseUrl, Sets  # noqa: E402
from cli.pool import pool_app  # noqa: E402
from cli.preflight import check_launch, eval_preflight, train_preflight  # noqa: E402
from rl.training_modes import modes_help  # noqa: E402

prefect_guard.install()  # a temporary Prefect API started by this process dies with it, even on kill -9

app = typer.Typer(
    help="harness-s: learning from sibling harnesses.", no_args_is_help=True, pretty_exceptions_enable=False
)
db_app = typer.Typer(help="Trajectory database.", no_args_is_help=True)
env_app = typer.Typer(help="Benchmark environments.", no_args_is_help=True)
data_app = typer.Typer(help="Benchmark data.", no_args_is_help=True)
traj_app = typer.Typer(help="Inspect stored trajectories.", no_args_is_help=True)
report_app = typer.Typer(
    help="Reports from the database: the RQ1-RQ6 report (--run), or a subcommand.",
    no_args_is_help=True,
    invoke_without_command=True,
)
harness_app = typer.Typer(help="Harness files: check, patch.", no_args_is_help=True)
profiles_app = typer.Typer(help="Behaviour profiles of siblings (induced at every re-anchor).", no_args_is_help=True)
app.add_typer(db_app, name="db")
app.add_typer(env_app, name="env")
app.add_typer(data_app, name="data")
app.add_typer(traj_app, name="traj")
app.add_typer(report_app, name="report")
app.add_typer(harness_app, name="harness")
app.add_typer(pool_app, name="pool")
app.add_typer(editor_app, name="editor")
app.add_typer(profiles_app, name="profiles")


def console() -> Console:
    """A console per command, so a table takes the terminal's width (COLUMNS) when it runs, not at import."""
    return Console()


def warm_start_for(path: str, model: str | None):
    """The SFT config --warm-start names; it sets the model, so --model/--checkpoint conflict with it."""
    from configs.schema import ConfigError
    from tasks.run_identity import sft_config_at

    if model:
        raise ConfigError("--warm-start already names the model: drop --model/--checkpoint or drop --warm-start")
    return sft_config_at(path)


def _benchmark(name: str) -> str:
    from configs.schema import ConfigError
    from envs.registry import names

    if name not in names():
        raise ConfigError(f"unknown benchmark '{name}': the platform has {', '.join(names())}")
    return name


@db_app.command("upgrade")
@user_errors
def db_upgrade(
    url: Annotated[
        Optional[str],
        typer.Option(
            "--database-url", "--url", help="Database URL; default $HS_DATABASE_URL or .hs/hs.db (--url: the old name)"
        ),
    ] = None,
):
    """Create or migrate the trajectory database to the latest schema."""
    from cli.checks import open_database
    from db.engine import mask_url, upgrade

    target = open_database(url, write=True)
    upgrade(target)
    console().print(f"database at {mask_url(target)} is at the latest revision")


@env_app.command("check-gold")
@user_errors
def check_gold(
    benchmark: str = typer.Argument("dbbench"),
    split: Annotated[
        str, typer.Option(help="a split of the benchmark (`hs env check-gold BENCH --split x` lists them when wrong)")
    ] = "dev",
    backend: Annotated[str, typer.Option(help="DBBench: sqlite or mysql")] = "sqlite",
    limit: Annotated[Optional[int], typer.Option(help="First N tasks only")] = None,
):
    """Replay the gold solutions through the environment and verifier; prints agreement per type."""
    from configs.schema import ConfigError, EnvConfig
    from envs.registry import benchmark as registered

    bench = registered(_benchmark(benchmark))
    if split not in bench.splits:
        raise ConfigError(f"--split {split}: {bench.name} has the splits {', '.join(bench.splits)}; give one of them")
    report = bench.check_gold(split, limit, EnvConfig(benchmark=bench.name, backend=backend))
    terminal = console()
    for line in report.format_lines():
        terminal.print(line, highlight=False)


@data_app.command("build-train")
@user_errors
def build_train(
    benchmark: str = typer.Argument("dbbench"),
    seed: Annotated[int, typer.Option(help="Generator seed")] = 0,
    n_tasks: Annotated[int, typer.Option("--n", help="Number of tasks")] = 400,
    tiers: Annotated[str, typer.Option(help="Difficulty tiers, e.g. easy,medium,hard")] = "easy,medium,hard",
    out: Annotated[
        Optional[Path], typer.Option(help="Output JSONL; default $HS_GENERATED_DIR/dbbench/train.jsonl")
    ] = None,
):
    """Generate the training split over the real tables (never reusing a test description)."""
    from cli.checks import check_output_folder
    from configs.schema import ConfigError
    from envs.dbbench.data import parse_tiers
    from envs.dbbench.train_split import MIN_TASKS, build_train_split

    _benchmark(benchmark)
    if n_tasks < MIN_TASKS:
        raise ConfigError(
            f"--n {n_tasks}: the training split needs at least {MIN_TASKS} tasks; give --n "
            f"{MIN_TASKS} or more (default 400)"
        )
    target = out or Path(os.environ.get("HS_GENERATED_DIR", ".hs/data")) / "dbbench" / "train.jsonl"
    check_output_folder(target, "the training split", "pass --out or set HS_GENERATED_DIR to a writable folder")
    records = build_train_split(target, seed=seed, n_tasks=n_tasks, tiers=parse_tiers(tiers))
    counts = {t: sum(r["tier"] == t for r in records) for t in parse_tiers(tiers)}
    console().print(
        f"wrote {len(records)} training tasks to {target} ({', '.join(f'{k}: {v}' for k, v in counts.items())})"
    )


@data_app.command("build-textworld")
@user_errors
def build_textworld(
    split: Annotated[str, typer.Option(help="train, dev or test")] = "dev",
    limit: Annotated[Optional[int], typer.Option(help="First N games only")] = None,
):
    """Generate a TextWorld split's games (resumable: games already built are kept)."""
    import logging

    from envs.textworld.data import build_split, split_dir

    logging.getLogger("envs.textworld.data").setLevel(logging.INFO)
    logging.basicConfig(format="%(message)s")
    path = build_split(split, limit)
    n = sum(1 for line in path.read_text().splitlines() if line.strip())
    console().print(f"{n} TextWorld {split} games at {split_dir(split)} (index {path.name})")


@data_app.command("build-repair")
@user_errors
def build_repair(
    project: Annotated[Optional[str], typer.Option(help="Only this project (toolz, boltons)")] = None,
    per_file: Annotated[int, typer.Option("--per-file", help="Tasks kept per source module at most")] = 14,
    seed: Annotated[int, typer.Option(help="Seed of the candidate order")] = 0,
):
    """Inject bugs into the pinned projects and keep those their own tests catch (resumable)."""
    import logging

    from envs.repair.data import build, load_split, task_set_dir
    from envs.repair.data import project as known_project

    if project:
        known_project(project)  # an unknown name: one line listing the projects, before anything is fetched
    logging.getLogger("envs.repair.data").setLevel(logging.INFO)
    logging.basicConfig(format="%(message)s")
    build(projects=(project,) if project else None, max_per_file=per_file, seed=seed)
    counts = {split: len(load_split(split)) for split in ("train", "dev", "test")}
    console().print(f"repair tasks at {task_set_dir()}: " + ", ".join(f"{k} {v}" for k, v in counts.items()))


@app.command("eval")
@user_errors
def eval_cmd(
    config: Annotated[Optional[Path], typer.Option(help="YAML config (configs/eval_dbbench.yaml)")] = None,
    benchmark: BenchmarkOption = None,
    split: Annotated[
        Optional[str], typer.Option(help="dev (validation) or the test split: standard (DBBench), test (TextWorld)")
    ] = None,
    harness: Annotated[Optional[str], typer.Option(help="Harness name or YAML path")] = None,
    k: Annotated[Optional[int], typer.Option(help="Rollouts per task and seed")] = None,
    seeds: Annotated[Optional[int], typer.Option(help="Independent runs")] = None,
    limit: Annotated[Optional[int], typer.Option(help="First N tasks only")] = None,
    every: Annotated[
        Optional[int], typer.Option(help="Every Nth task (a stratified subsample of type-sorted splits)")
    ] = None,
    backend: Annotated[Optional[str], typer.Option(help="SQL backend: sqlite or mysql")] = None,
    model: Annotated[
        Optional[str], typer.Option(help="Policy model: built-in name, checkpoint name or HF directory")
    ] = None,
    checkpoint: Annotated[
        Optional[str],
        typer.Option(
            help="Checkpoint name from the registry to evaluate (also the label recorded with every trajectory)"
        ),
    ] = None,
    warm_start: Annotated[
        Optional[str],
        typer.Option(help="SFT config (configs/sft_*.yaml) whose checkpoint to evaluate; built on first use"),
    ] = None,
    tiers: Annotated[
        Optional[str], typer.Option(help="Training-split tiers when --split train, e.g. easy,medium")
    ] = None,
    concurrency: Annotated[Optional[int], typer.Option(help="Rollout groups in flight")] = None,
    routing: Annotated[
        Optional[str], typer.Option(help="h0 (default) or rank1: each task under the router's top harness")
    ] = None,
    pool: Annotated[Optional[str], typer.Option(help="rank1: sibling harnesses, comma-separated")] = None,
    profiles_run: Annotated[
        Optional[str], typer.Option("--profiles-run", help="rank1: training run whose profiles to use")
    ] = None,
    database_url: DatabaseUrl = None,
    set_: Sets = None,
):
    """Evaluate a frozen policy under one harness (or Rank-1 routing): Pass@k / Avg@k, every trajectory stored."""
    from configs.schema import ConfigError, EvalConfig, load_config

    sft_cfg = warm_start_for(warm_start, model or checkpoint) if warm_start else None
    if sft_cfg:
        from tasks.sft import checkpoint_name

        model = checkpoint = checkpoint_name(sft_cfg)
    overrides = {
        "env.benchmark": _benchmark(benchmark) if benchmark else sft_cfg and sft_cfg.env.benchmark,
        "split": split,
        "harness": harness,
        "k": k,
        "seeds": seeds,
        "limit": limit,
        "every": every,
        "env.backend": backend,
        "policy.model": model or checkpoint,
        "group_concurrency": concurrency,
        "checkpoint": checkpoint,
        "tiers": tiers.split(",") if tiers else None,
        "routing": routing,
        "pool": pool.split(",") if pool else None,
        "profiles_run": profiles_run,
    }
    cfg = load_config(EvalConfig, config, overrides, set_)
    if sft_cfg and sft_cfg.env.benchmark != cfg.env.benchmark:
        raise ConfigError(
            f"the warm start {warm_start} is trained on {sft_cfg.env.benchmark}, not {cfg.env.benchmark}: "
            f"pass --benchmark {sft_cfg.env.benchmark} or another SFT config"
        )
    eval_preflight(cfg, database_url, check_model=not sft_cfg)  # a warm start is built below on first use
    from flows.evaluate import evaluate
    from flows.sft import ensure_warm_start

    try:
        ensure_warm_start(sft_cfg, database_url)
        result = evaluate(cfg, database_url=database_url)
    except Exception as exc:  # noqa: BLE001 - Prefect has logged the traceback; rows already written are kept
        flow_failed("evaluation", exc)
    views.print_metrics(console(), cfg, result)


@app.command("sft")
@user_errors
def sft_cmd(
    config: Annotated[Optional[Path], typer.Option(help="YAML config (configs/sft_dbbench_smol.yaml)")] = None,
    steps: Annotated[Optional[int], typer.Option(help="Optimizer updates")] = None,
    lora: Annotated[Optional[bool], typer.Option("--lora/--full", help="LoRA adapters or all weights")] = None,
    tiers: Annotated[Optional[str], typer.Option(help="Training tiers, e.g. easy,medium")] = None,
    n_tasks: Annotated[Optional[int], typer.Option("--n-tasks", help="First N training tasks")] = None,
    benchmark: BenchmarkOption = None,
    database_url: DatabaseUrl = None,
    set_: Sets = None,
):
    """Warm-start the policy on protocol demonstrations; prints the checkpoint name to evaluate."""
    from cli.checks import check_training_split, open_database
    from configs.schema import SftConfig, load_config

    overrides = {
        "env.benchmark": benchmark and _benchmark(benchmark),
        "steps": steps,
        "lora": lora,
        "n_tasks": n_tasks,
        "tiers": [t.strip() for t in tiers.split(",")] if tiers else None,
    }
    cfg = load_config(SftConfig, config, overrides, set_)
    check_training_split(cfg.env.benchmark, cfg.env.data_dir)
    open_database(database_url, write=True)
    from flows.sft import sft

    try:
        result = sft(cfg, database_url=database_url)
    except Exception as exc:  # noqa: BLE001 - Prefect has logged the traceback; the registry never holds half a checkpoint
        flow_failed("warm start", exc)
    terminal = console()
    terminal.print(
        f"checkpoint {result['checkpoint']} ({result['demonstrations']} demonstrations, "
        f"{len(result['failed_replays'])} failed replays); held-out loss "
        f"{result['heldout_loss_before']} -> {result['heldout_loss_after']}"
    )
    terminal.print(f"evaluate it: hs eval --model {result['checkpoint']} --checkpoint {result['checkpoint']}")


@app.command("train")
@user_errors
def train_cmd(
    config: Annotated[Optional[Path], typer.Option(help="YAML config (configs/train_dbbench_smol.yaml)")] = None,
    mode: Annotated[Optional[str], typer.Option(help=f"Training mode: {modes_help()}")] = None,
    updates: Annotated[Optional[int], typer.Option(help="GRPO updates (raise it to extend a finished run)")] = None,
    batch_tasks: Annotated[Optional[int], typer.Option("--batch-tasks", help="Benchmark tasks per update")] = None,
    k: Annotated[Optional[int], typer.Option(help="Rollouts per group")] = None,
    init: Annotated[
        Optional[str], typer.Option(help="Starting weights (model or checkpoint name); disables warm_start")
    ] = None,
    benchmark: BenchmarkOption = None,
    database_url: DatabaseUrl = None,
    set_: Sets = None,
):
    """Train the policy with GRPO (+ harness rescue); starting the same command again resumes."""
    from configs.schema import TrainConfig, load_config

    overrides = {
        "env.benchmark": benchmark and _benchmark(benchmark),
        "mode": mode,
        "updates": updates,
        "batch_tasks": batch_tasks,
        "k": k,
        "init": init,
    }
    cfg = load_config(TrainConfig, config, overrides, set_)
    if init:
        cfg = cfg.model_copy(update={"warm_start": None})
    from rl.data_parallel import init_process_group, launched_world, serve_worker, stop_workers

    rank, world = launched_world()
    check_launch(cfg, world)
    if world > 1:
        init_process_group(cfg.trainer.device)
    if rank > 0:  # a data-parallel rank: trains its share of each update that rank 0 sends
        from rl.data_parallel import build_worker_trainer

        serve_worker(build_worker_trainer)
        return
    train_preflight(cfg, database_url)
    from flows.train import train

    try:
        result = train(cfg, database_url=database_url)
    except Exception as exc:  # noqa: BLE001 - Prefect has logged the traceback; finished updates are saved and resume
        flow_failed("training", exc, "start the same command again to resume from the last finished update")
    finally:
        stop_workers()
    views.print_training(console(), result)


@report_app.callback()
@user_errors
def report(
    ctx: typer.Context,
    run: Annotated[Optional[str], typer.Option(help="The method's pipeline (or training) run: id or name")] = None,
    baseline: Annotated[
        Optional[list[str]],
        typer.Option(help="A run to compare with (pipeline or training run, id or name); repeat for several"),
    ] = None,
    pool_report: Annotated[
        Optional[list[str]],
        typer.Option(
            "--pool-report",
            help="A pool-report run (hs pool report ... --set name=NAME), id or name; repeat for the same pool "
            "under several policies (phenomena on its task sample, in the order given)",
        ),
    ] = None,
    out: Annotated[Path, typer.Option(help="Folder for report.md and the PNG figures")] = Path("reports/latest"),
    database_url: DatabaseUrl = None,
):
    """RQ1-RQ6 and the three phenomena as one markdown report with figures.

    hs report --run ID --baseline RUN [--pool-report NAME ...] --out DIR"""
    if ctx.invoked_subcommand is not None:
        return
    if run is None:
        raise typer.BadParameter("give --run (a pipeline or training run id or name), or a subcommand such as training")
    from analysis.report import build_report, write_report
    from cli.checks import check_output_folder, reading

    check_output_folder(out / "report.md", "the report", "pass --out with a writable folder")
    with reading(database_url) as session:
        built = build_report(session, run, list(baseline or []), list(pool_report or []))
    command = " ".join(
        [
            "hs report",
            f"--run {run}",
            *[f"--baseline {b}" for b in baseline or []],
            *[f"--pool-report {p}" for p in pool_report or []],
            f"--out {out}",
        ]
    )
    path = write_report(built, out, command)
    console().print(
        f"wrote {path} ({len(list(out.glob('*.png')))} figures) comparing " + ", ".join(m.label for m in built.methods),
        highlight=False,
        soft_wrap=True,
    )


@report_app.command("editor")
@user_errors
def report_editor(
    run_id: Annotated[str, typer.Argument(help="Editor comparison run id (hs editor compare prints it)")],
    database_url: DatabaseUrl = None,
):
    """The editor comparison of a run: static-check and validation shares, fixed/broken per patch,
    best-patch success per editor, with intervals."""
    from cli.checks import open_database
    from cli.editor import print_comparison
    from tasks.editor_compare import editor_table

    print_comparison(editor_table(run_id, open_database(database_url, write=False)))


@report_app.command("training")
@user_errors
def report_training(
    run_ids: Annotated[Optional[list[str]], typer.Argument(help="Training run ids; none: list them")] = None,
    database_url: DatabaseUrl = None,
):
    """Training runs side by side: valid groups, effective tokens, rescues, rollouts, H0 validation."""
    from analysis.training import summarise_training
    from cli.checks import reading
    from db import store

    with reading(database_url) as session:
        if not run_ids:
            views.print_runs(console(), store.training_runs(session))
            return
        rows = {run_id: summarise_training(*store.training_history(session, run_id)) for run_id in run_ids}
    views.print_training_summary(console(), rows)


@traj_app.command("list")
@user_errors
def traj_list(
    run: Annotated[Optional[str], typer.Option(help="Run id")] = None,
    task: Annotated[Optional[str], typer.Option(help="Benchmark task id, e.g. dbbench/dev/0003")] = None,
    success: Annotated[Optional[bool], typer.Option("--success/--failed", help="Filter by outcome")] = None,
    limit: Annotated[int, typer.Option(help="Rows")] = 30,
    database_url: DatabaseUrl = None,
):
    """List trajectories, newest first."""
    from cli.checks import reading
    from db import store

    with reading(database_url) as session:
        rows = store.list_trajectories(session, run_id=run, bench_task_id=task, success=success, limit=limit)
        views.print_trajectory_table(console(), rows)


@traj_app.command("show")
@user_errors
def traj_show(
    trajectory_id: str,
    tokens: Annotated[bool, typer.Option(help="Also print token ids with their loss mask")] = False,
    database_url: DatabaseUrl = None,
):
    """Show one trajectory turn by turn; masked (non-policy) spans are dimmed, policy text is green."""
    from cli.checks import reading
    from db import store

    with reading(database_url) as session:
        views.print_trajectory(console(), store.get_trajectory(session, trajectory_id), tokens)


@app.command("evolve")
@user_errors
def evolve_cmd(
    config: Annotated[Optional[Path], typer.Option(help="YAML config (configs/evolve_dbbench_smol.yaml)")] = None,
    rounds: Annotated[Optional[int], typer.Option(help="Evolution rounds")] = None,
    version: Annotated[Optional[str], typer.Option(help="Pool version name; default: the run id")] = None,
    benchmark: BenchmarkOption = None,
    database_url: DatabaseUrl = None,
    set_: Sets = None,
):
    """Evolve sibling harnesses from H0 (diagnose, edit, validate, select), then freeze the pool;
    starting the same command again skips every finished diagnosis and validation."""
    from cli.checks import check_training_split, open_database
    from configs.schema import EvolveConfig, load_config
    from harness_pool.spec import load_harness

    overrides = {"env.benchmark": benchmark and _benchmark(benchmark), "rounds": rounds, "pool.version": version}
    cfg = load_config(EvolveConfig, config, overrides, set_)
    load_harness(cfg.harness, cfg.env.benchmark)
    check_training_split(cfg.env.benchmark, cfg.env.data_dir)
    open_database(database_url, write=True)
    from flows.evolve import evolve

    try:
        result = evolve(cfg, database_url=database_url)
    except Exception as exc:  # noqa: BLE001 - Prefect has logged the traceback; finished runs persist and are skipped next time
        flow_failed("evolution", exc, "start the same command again to resume")
    views.print_evolution(console(), result)


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
    from harness_pool.pool_store import load_pool

    overrides = {"version": version, "warm_start": warm_start, "policy.model": model, "n_tasks": n_tasks, "k": k}
    cfg = load_config(PoolReportConfig, None, overrides, set_)
    load_pool(cfg.version, cfg.env.benchmark, Path(cfg.pool_root))  # an unknown version fails here, in one line
    check_training_split(cfg.env.benchmark, cfg.env.data_dir)
    open_database(database_url, write=True)
    from flows.pool_report import pool_report

    views.print_pool_report(console(), pool_report(cfg, database_url=database_url))


@profiles_app.command("show")
@user_errors
def profiles_show(
    harness: str = typer.Argument(..., help="Harness name or id prefix"),
    version: Annotated[Optional[int], typer.Option(help="Profile version (re-anchor step); default newest")] = None,
    run: Annotated[Optional[str], typer.Option(help="Training run id; default the newest with profiles")] = None,
    database_url: DatabaseUrl = None,
):
    """A sibling's prefer/avoid entries with their evidence, as induced at one re-anchor."""
    from cli.checks import reading
    from db import store

    with reading(database_url) as session:
        views.print_profile(console(), store.newest_profile(session, harness, run, version))


@harness_app.command("check")
@user_errors
def harness_check(
    path: Path = typer.Argument(..., help="Harness YAML, or a patch YAML (with `edits:`)"),
    parent: Annotated[str, typer.Option(help="Parent harness a patch applies to")] = "h0",
):
    """Validate a harness file (schema, hook sandbox, benchmark): exit 0 with a summary, or 2 and
    one line naming what is wrong. A patch file is applied to --parent and the child checked."""
    import yaml

    from cli.checks import read_utf8
    from harness_pool.patch import apply_patch, parse_patch
    from harness_pool.spec import HarnessError, load_harness

    if not path.exists():
        raise HarnessError(f"{path}: no such file; give the path of a harness or patch YAML")
    text = read_utf8(path, HarnessError)
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError:
        data = None  # load_harness below reports the syntax error in one line
    if isinstance(data, dict) and "edits" in data:
        spec = apply_patch(load_harness(parent), parse_patch(data))
    else:
        spec = load_harness(path)
    views.print_harness_summary(console(), spec)


from cli.db_copy import copy_cmd  # noqa: E402
from cli.ops import deploy_cmd, rerun_cmd, rollout_cmd  # noqa: E402
from cli.pipeline import quickstart_cmd, run_cmd  # noqa: E402
from cli.stages import stage_cmd  # noqa: E402

app.command("run")(run_cmd)
app.command("quickstart")(quickstart_cmd)
app.command("rerun")(rerun_cmd)
app.command("rollout")(rollout_cmd)
app.command("deploy")(deploy_cmd)
app.command("stage")(stage_cmd)
db_app.command("copy")(copy_cmd)


def main() -> None:  # pragma: no cover - console entry point
    app()


if __name__ == "__main__":  # pragma: no cover
    sys.exit(app())
