"""`hs stage NAME`: one phase of the pipeline, as a DVC stage (dvc.yaml) reading params.yaml.

params.yaml is a PipelineConfig (configs/pipeline.py), so DVC and `hs run` read the same,
validated config. Each stage writes the files dvc.yaml lists as its outputs; DVC hashes them,
so `dvc repro` re-runs only the stages whose params, code or inputs changed, and a git commit of
dvc.lock pins the exact data, pool and results of a run.

  data     -> the generated training split (.hs/data/dbbench/train.jsonl)
  pool     -> evolve and freeze the pool into harness_pool/pools/<benchmark>/<evolve.pool.version>/
  train    -> GRPO + harness rescue on that pool; .hs/dvc/train.json (run id, checkpoint)
  evaluate -> H0 before/after, Rank-1, outside harnesses; .hs/dvc/results.json
  report   -> reports/dvc/ (results.md: the results table; report.md + PNGs: `hs report` of this run)
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from cli.errors import user_errors
from cli.options import DatabaseUrl

STAGES = ("data", "pool", "train", "evaluate", "report")
OUT = Path(".hs/dvc")
REPORT_DIR = Path("reports/dvc")


@user_errors
def stage_cmd(
    name: str = typer.Argument(..., help=f"One of: {', '.join(STAGES)}"),
    params: Annotated[Path, typer.Option(help="Pipeline config (a PipelineConfig YAML)")] = Path("params.yaml"),
    database_url: DatabaseUrl = None,
):
    """Run one pipeline phase as a DVC stage (`dvc repro` calls these; see dvc.yaml)."""
    from configs.pipeline import PipelineConfig
    from configs.schema import ConfigError, load_config

    if name not in STAGES:
        raise ConfigError(f"unknown stage '{name}': use one of {', '.join(STAGES)}")
    cfg = load_config(PipelineConfig, params)
    if name != "data" and cfg.evolve is None:
        raise ConfigError(f"{params}: the DVC pipeline evolves its own pool; set `evolve:` (with pool.version)")
    if name != "data":
        from cli.checks import open_database

        open_database(database_url, write=True)
    OUT.mkdir(parents=True, exist_ok=True)
    {"data": _data, "pool": _pool, "train": _train, "evaluate": _evaluate, "report": _report}[name](cfg, database_url)


def _data(cfg, database_url) -> None:
    from tasks.pipeline import ensure_training_split

    print(ensure_training_split(cfg.train.env))


def _pool(cfg, database_url) -> None:
    from flows.pipeline import evolve_pool

    result = evolve_pool(cfg, database_url, track_with_dvc=False)  # DVC itself versions the output folder
    print(f"pool {result['version']}: {result['size']} harnesses at {result['path']}")


def _train(cfg, database_url) -> None:
    from flows.pipeline import train_policy

    result = train_policy(cfg, cfg.pool_name(), database_url)
    (OUT / "train.json").write_text(
        json.dumps({"run_id": result["run_id"], "checkpoint": result["checkpoint"]}, indent=2) + "\n"
    )


def _evaluate(cfg, database_url) -> None:
    from flows.pipeline import evaluate_policy
    from tasks.pipeline import record_results

    trained = json.loads((OUT / "train.json").read_text())
    evaluations = evaluate_policy(cfg, cfg.pool_name(), trained, database_url)
    results = record_results(
        cfg, cfg.pool_name(), trained["run_id"], trained["checkpoint"], evaluations, database_url, None
    )
    (OUT / "results.json").write_text(json.dumps(results, indent=2, sort_keys=True) + "\n")


def _report(cfg, database_url) -> None:
    """The results table, and the RQ report of this pipeline run (report.md + figures) beside it."""
    from analysis import pipeline_results
    from analysis.report import build_report, write_report
    from cli.checks import reading
    from tasks.pipeline import pipeline_run_id

    results = json.loads((OUT / "results.json").read_text())
    target = REPORT_DIR / "results.md"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(pipeline_results.markdown(cfg.name, results))
    with reading(database_url) as session:
        write_report(build_report(session, pipeline_run_id(cfg), []), REPORT_DIR, "dvc repro")
    print(target.read_text())
