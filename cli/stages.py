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
def stage_cmd(name: str = typer.Argument(..., help=f"One of: {', '.join(STAGES)}"),
              params: Annotated[Path, typer.Option(help="Pipeline config (a PipelineConfig YAML)")] = Path("params.yaml"),
              database_url: DatabaseUrl = None):
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

    print(ensure_training_split.fn(cfg.train.env))


def _pool(cfg, database_url) -> None:
    from flows.evolve import evolve

    evolve_cfg = cfg.evolve.model_copy(update={"pool": cfg.evolve.pool.model_copy(update={"dvc": False})})
    result = evolve(evolve_cfg, database_url=database_url)  # DVC itself versions the output folder
    print(f"pool {result['version']}: {result['size']} harnesses at {result['path']}")


def _train(cfg, database_url) -> None:
    from flows.train import train
    from tasks.pipeline import training_config

    result = train(training_config(cfg, cfg.pool_name()), database_url=database_url)
    (OUT / "train.json").write_text(json.dumps({"run_id": result["run_id"], "checkpoint": result["checkpoint"]},
                                               indent=2) + "\n")


def _evaluate(cfg, database_url) -> None:
    from flows.evaluate import evaluate
    from tasks.pipeline import evaluation_configs, record_results, training_config

    trained = json.loads((OUT / "train.json").read_text())
    train_cfg = training_config(cfg, cfg.pool_name())
    evaluations = {label: {**evaluate(e, database_url=database_url), "harness": e.harness}
                   for label, e in evaluation_configs(cfg, train_cfg, trained["run_id"], trained["checkpoint"]).items()}
    results = record_results.fn(cfg, cfg.pool_name(), trained["run_id"], trained["checkpoint"], evaluations,
                                database_url, None)
    (OUT / "results.json").write_text(json.dumps(results, indent=2, sort_keys=True) + "\n")


def _report(cfg, database_url) -> None:
    """The results table, and the RQ report of this pipeline run (report.md + figures) beside it."""
    from analysis.report import build_report, write_report
    from db.engine import session_scope
    from tasks.pipeline import pipeline_run_id
    from tasks.resources import get_engine

    results = json.loads((OUT / "results.json").read_text())
    target = REPORT_DIR / "results.md"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(results_markdown(cfg.name, results))
    with session_scope(get_engine(database_url)) as session:
        write_report(build_report(session, pipeline_run_id(cfg), []), REPORT_DIR, "dvc repro")
    print(target.read_text())


def results_markdown(name: str, results: dict) -> str:
    k, t = results["k"], results["training"]
    lines = [f"# {name}: results", "",
             f"Pool `{results['pool_version']}`, training run `{results['train_run_id']}`, policy "
             f"`{results['checkpoint']}`, {results['seeds']} seed(s).", "",
             f"| evaluation | harness | tasks | Pass@{k} (%) | Avg@{k} (%) |", "|---|---|---|---|---|"]
    for label, e in results["evaluations"].items():
        lines.append(f"| {label} | {e['harness']} | {e['n_tasks']} | {e['pass']['mean']:.2f} ± {e['pass']['std']:.2f} "
                     f"| {e['avg']['mean']:.2f} ± {e['avg']['std']:.2f} |")
    rescue = "-" if t["rescue_success"] is None else f"{t['rescue_success']:.2f}"
    lines += ["", f"Training: {t['updates']} updates, valid-group ratio {t['valid_group_ratio']:.3f}, effective-token "
              f"ratio {t['effective_token_ratio']:.3f}, rescues {t['rescues_triggered']:.0f} (success {rescue}), "
              f"rollouts {t['rollouts_spent']:.0f}.", ""]
    return "\n".join(lines)
