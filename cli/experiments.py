"""`hs eval`, `hs sft`, `hs train`, `hs evolve`: the method's steps one at a time, each a thin
shell over its flow (flows/evaluate.py, sft.py, train.py, evolve.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from cli import views
from cli.common import console, known_benchmark
from cli.errors import flow_failed, run_flow, user_errors
from cli.options import BenchmarkOption, DatabaseUrl, Sets
from cli.preflight import check_launch, eval_preflight, train_preflight
from rl.training_modes import modes_help


def warm_start_for(path: str, model: str | None):
    """The SFT config --warm-start names; it sets the model, so --model/--checkpoint conflict with it."""
    from configs.schema import ConfigError
    from tasks.run_identity import sft_config_at

    if model:
        raise ConfigError("--warm-start already names the model: drop --model/--checkpoint or drop --warm-start")
    return sft_config_at(path)


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
        "env.benchmark": known_benchmark(benchmark) if benchmark else sft_cfg and sft_cfg.env.benchmark,
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
        result = run_flow(evaluate, cfg, database_url=database_url)  # a failure names its flow run for hs rerun
    except Exception as exc:  # noqa: BLE001 - Prefect has logged the traceback; rows already written are kept
        flow_failed("evaluation", exc)
    views.print_metrics(console(), cfg, result)


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
    from tasks.sft import sft_run_id

    overrides = {
        "env.benchmark": benchmark and known_benchmark(benchmark),
        "steps": steps,
        "lora": lora,
        "n_tasks": n_tasks,
        "tiers": [t.strip() for t in tiers.split(",")] if tiers else None,
    }
    cfg = load_config(SftConfig, config, overrides, set_)
    sft_run_id(cfg)  # a run id too long for the database: one line, before Prefect starts
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
        "env.benchmark": benchmark and known_benchmark(benchmark),
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
    from tasks.evolution import evolve_run_id

    overrides = {"env.benchmark": benchmark and known_benchmark(benchmark), "rounds": rounds, "pool.version": version}
    cfg = load_config(EvolveConfig, config, overrides, set_)
    load_harness(cfg.harness, cfg.env.benchmark)
    evolve_run_id(cfg)  # a run id too long for the database: one line, before Prefect starts
    check_training_split(cfg.env.benchmark, cfg.env.data_dir)
    open_database(database_url, write=True)
    from flows.evolve import evolve

    try:
        result = evolve(cfg, database_url=database_url)
    except Exception as exc:  # noqa: BLE001 - Prefect has logged the traceback; finished runs persist and are skipped next time
        flow_failed("evolution", exc, "start the same command again to resume")
    views.print_evolution(console(), result)
