"""`hs env check-gold` and `hs data build-*`: benchmark environments and their generated data."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Optional

import typer

from cli.common import console, known_benchmark
from cli.errors import user_errors

env_app = typer.Typer(help="Benchmark environments.", no_args_is_help=True)
data_app = typer.Typer(help="Benchmark data.", no_args_is_help=True)


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

    bench = registered(known_benchmark(benchmark))
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

    known_benchmark(benchmark)
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
