"""`hs editor`: the trainable harness editor (issue 21). Thin commands over flows/editor.py."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console
from rich.table import Table

from cli.errors import flow_failed, user_errors
from cli.options import DatabaseUrl, Sets

editor_app = typer.Typer(help="The trainable harness editor: evidence bundles.", no_args_is_help=True)


def console() -> Console:
    """A console per command (the terminal's width read when it runs), without highlighting or wrapping."""
    return Console(highlight=False, soft_wrap=True)


@editor_app.command("bundles")
@user_errors
def bundles_cmd(
    config: Annotated[
        Optional[Path], typer.Option(help="YAML config (configs/editor_bundles_dbbench_smol.yaml)")
    ] = None,
    database_url: DatabaseUrl = None,
    set_: Sets = None,
):
    """Run the frozen target under the parent harness and store its failures as evidence bundles;
    starting the same command again skips every finished harness run."""
    from cli.checks import check_training_split, open_database
    from configs.schema import EditorBundlesConfig, load_config
    from harness_pool.spec import load_harness
    from tasks.editor import bundles_run_id

    cfg = load_config(EditorBundlesConfig, config, None, set_)
    load_harness(cfg.harness, cfg.env.benchmark)
    bundles_run_id(cfg)  # a run id too long for the database: one line, before Prefect starts
    check_training_split(cfg.env.benchmark, cfg.env.data_dir)
    open_database(database_url, write=True)
    from flows.editor import editor_bundles

    try:
        summary = editor_bundles(cfg, database_url=database_url)
    except Exception as exc:  # noqa: BLE001 - Prefect logged the traceback; finished harness runs are cached
        flow_failed("bundle building", exc, "start the same command again to resume")
    print_bundles(summary, database_url)


def print_bundles(summary: dict, database_url: str | None) -> None:
    from tasks.editor import load_bundles

    table = Table(title=f"evidence bundles of {summary['run_id']}")
    for col in ("split", "bundle", "family", "causes", "failing tasks", "controls"):
        table.add_column(col, overflow="fold")
    for split in ("train", "heldout"):
        for b in load_bundles(summary["run_id"], split, database_url):
            table.add_row(
                split, b.id[:12], b.family, ", ".join(b.causes), ", ".join(b.failing_tasks), str(len(b.controls))
            )
    terminal = console()
    terminal.print(table)
    for split in ("train", "heldout"):
        s = summary[split]
        terminal.print(f"{split}: {s['tasks']} tasks, {s['failed_tasks']} never solved, {len(s['bundles'])} bundles")
    terminal.print("query them: SELECT id, split, family, causes FROM editor_bundles WHERE run_id = '...'")


@editor_app.command("sft")
@user_errors
def sft_cmd(
    config: Annotated[Optional[Path], typer.Option(help="YAML config (configs/editor_sft_dbbench_smol.yaml)")] = None,
    database_url: DatabaseUrl = None,
    set_: Sets = None,
):
    """The engineer's cold start: offline-operator patches for the training bundles, re-run by
    the frozen target; the validated ones fine-tune the engineer. Resumes like every flow."""
    from cli.checks import open_database
    from configs.schema import ConfigError, EditorSftConfig, load_config
    from tasks.editor_sft import bundles_config, editor_sft_run_id

    if config is None:
        raise ConfigError(
            "hs editor sft needs --config (e.g. configs/editor_sft_dbbench_smol.yaml): it names the bundles"
        )
    cfg = load_config(EditorSftConfig, config, None, set_)
    bundles_config(cfg)  # a missing or invalid bundle config is a one-line error before anything runs
    editor_sft_run_id(cfg)  # so is a run id too long for the database
    open_database(database_url, write=True)
    from flows.editor import editor_sft

    try:
        result = editor_sft(cfg, database_url=database_url)
    except Exception as exc:  # noqa: BLE001 - Prefect logged the traceback; finished re-runs are cached
        flow_failed("engineer cold start", exc, "start the same command again to resume")
    before, after = result["heldout_loss_before"], result["heldout_loss_after"]
    terminal = console()
    terminal.print(
        f"{result['bundles']} training bundles, {result['candidates']} offline patches, {result['validated']} "
        f"validated -> engineer checkpoint {result['checkpoint']}"
        + (f" (held-out loss {before:.3f} -> {after:.3f})" if before is not None else "")
    )
    terminal.print(f"the patches and their outcomes: SELECT * FROM editor_patches WHERE run_id = '{result['run_id']}'")


@editor_app.command("train")
@user_errors
def train_cmd(
    config: Annotated[Optional[Path], typer.Option(help="YAML config (configs/editor_train_dbbench_smol.yaml)")] = None,
    database_url: DatabaseUrl = None,
    set_: Sets = None,
):
    """GRPO for the engineer, rewarded by what its patches do to the frozen target; starting the
    same command again resumes after the last finished update."""
    from cli.checks import open_database
    from configs.schema import ConfigError, EditorTrainConfig, load_config
    from tasks.editor_sft import bundles_config
    from tasks.editor_train import editor_train_run_id, sft_config

    if config is None:
        raise ConfigError("hs editor train needs --config (e.g. configs/editor_train_dbbench_smol.yaml)")
    cfg = load_config(EditorTrainConfig, config, None, set_)
    bundles_config(sft_config(cfg))  # missing or invalid cold-start / bundle configs: one line, nothing run
    editor_train_run_id(cfg)  # a run id too long for the database: one line too
    open_database(database_url, write=True)
    from flows.editor import editor_train

    try:
        result = editor_train(cfg, database_url=database_url)
    except Exception as exc:  # noqa: BLE001 - Prefect logged the traceback; finished updates are saved
        flow_failed("engineer training", exc, "start the same command again to resume after the last update")
    table = Table(title=f"engineer GRPO {result['run_id']}")
    for col in ("update", "reward", "valid", "rejected", "fixed", "broken", "loss"):
        table.add_column(col)
    for n, h in enumerate(result["history"]):
        table.add_row(
            str(n),
            f"{h['editor/reward_mean']:.3f}",
            f"{100 * h['editor/valid_share']:.0f}%",
            f"{100 * h['editor/rejected_share']:.0f}%",
            f"{h['editor/fixed_mean']:.2f}",
            f"{h['editor/broken_mean']:.2f}",
            f"{h['train/loss']:.4f}",
        )
    terminal = console()
    terminal.print(table)
    terminal.print(
        f"engineer checkpoint {result['checkpoint']}; its patches: "
        f"SELECT * FROM editor_patches WHERE run_id = '{result['run_id']}'"
    )


@editor_app.command("compare")
@user_errors
def compare_cmd(
    config: Annotated[Optional[Path], typer.Option(help="YAML config (configs/editor_train_dbbench_smol.yaml)")] = None,
    database_url: DatabaseUrl = None,
    set_: Sets = None,
):
    """On held-out bundles: offline operators vs the SFT-only engineer vs the GRPO engineer (builds
    the bundles, cold start and GRPO run first when missing; every step resumes)."""
    from cli.checks import open_database
    from configs.schema import ConfigError, EditorTrainConfig, load_config
    from tasks.editor_compare import compare_run_id
    from tasks.editor_sft import bundles_config
    from tasks.editor_train import sft_config

    if config is None:
        raise ConfigError("hs editor compare needs --config (e.g. configs/editor_train_dbbench_smol.yaml)")
    cfg = load_config(EditorTrainConfig, config, None, set_)
    bundles_config(sft_config(cfg))
    compare_run_id(cfg)  # a run id too long for the database: one line, before Prefect starts
    open_database(database_url, write=True)
    from flows.editor import editor_compare

    try:
        table = editor_compare(cfg, database_url=database_url)
    except Exception as exc:  # noqa: BLE001 - Prefect logged the traceback; finished steps are cached
        flow_failed("editor comparison", exc, "start the same command again to resume")
    print_comparison(table)


def print_comparison(table: dict) -> None:
    out = Table(title=f"editors on {table['bundles']} held-out bundles ({table['run_id']})")
    for col in ("editor", "patches", "static check [95%]", "validated [95%]", "fixed", "broken", "best-patch success"):
        out.add_column(col)
    for e in table["editors"]:
        s, v = e["static_pass"], e["validated"]
        out.add_row(
            e["editor"],
            str(e["patches"]),
            f"{100 * s[0]:.0f}% [{100 * s[1]:.0f}, {100 * s[2]:.0f}]",
            f"{100 * v[0]:.0f}% [{100 * v[1]:.0f}, {100 * v[2]:.0f}]",
            f"{e['fixed_mean']:.2f}",
            f"{e['broken_mean']:.2f}",
            f"{100 * e['best_success']:.1f}%",
        )
    terminal = console()
    terminal.print(out)
    terminal.print(f"the parent harness alone: {100 * table['parent_success']:.1f}% of the bundles' tasks")
    for name, (estimate, low, high, words) in table["best_success_differences"].items():
        terminal.print(
            f"best-patch success, {name}: {100 * estimate:+.1f} points [{100 * low:+.1f}, {100 * high:+.1f}], {words}"
        )
