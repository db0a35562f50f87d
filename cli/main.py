"""`hs`: the command line of harness-s (typer). Each command is a thin shell over flows/domain;
this module only wires the command modules into one app:

  experiments.py  hs eval | sft | train | evolve     pipeline.py  hs run | quickstart
  ops.py          hs rerun | rollout | deploy        stages.py    hs stage
  db.py           hs db (copy: db_copy.py)           data.py      hs env, hs data
  reports.py      hs report, hs traj, hs profiles    harness.py   hs harness
  pool.py         hs pool                            editor.py    hs editor

Known user errors (bad config, missing data, unreachable database or model) print one line
saying how to fix them and exit with status 2 (cli/errors.py); nothing already recorded is touched.
"""

from __future__ import annotations

from cli.environment import apply_defaults

apply_defaults()  # before Prefect or transformers is imported

import sys  # noqa: E402

import typer  # noqa: E402

from cli import prefect_guard  # noqa: E402
from cli.data import data_app, env_app  # noqa: E402
from cli.db import db_app  # noqa: E402
from cli.editor import editor_app  # noqa: E402
from cli.experiments import eval_cmd, evolve_cmd, sft_cmd, train_cmd  # noqa: E402
from cli.harness import harness_app  # noqa: E402
from cli.ops import deploy_cmd, rerun_cmd, rollout_cmd  # noqa: E402
from cli.pipeline import quickstart_cmd, run_cmd  # noqa: E402
from cli.pool import pool_app  # noqa: E402
from cli.reports import profiles_app, report_app, traj_app  # noqa: E402
from cli.stages import stage_cmd  # noqa: E402
from cli.ui import ui_cmd  # noqa: E402

prefect_guard.install()  # a temporary Prefect API started by this process dies with it, even on kill -9

app = typer.Typer(
    help="harness-s: learning from sibling harnesses.", no_args_is_help=True, pretty_exceptions_enable=False
)

# `hs --help` lists the commands in this order, then the groups in theirs.
app.command("eval")(eval_cmd)
app.command("sft")(sft_cmd)
app.command("train")(train_cmd)
app.command("evolve")(evolve_cmd)
app.command("run")(run_cmd)
app.command("quickstart")(quickstart_cmd)
app.command("rerun")(rerun_cmd)
app.command("rollout")(rollout_cmd)
app.command("deploy")(deploy_cmd)
app.command("stage")(stage_cmd)
app.command("ui")(ui_cmd)

app.add_typer(db_app, name="db")
app.add_typer(env_app, name="env")
app.add_typer(data_app, name="data")
app.add_typer(traj_app, name="traj")
app.add_typer(report_app, name="report")
app.add_typer(harness_app, name="harness")
app.add_typer(pool_app, name="pool")
app.add_typer(editor_app, name="editor")
app.add_typer(profiles_app, name="profiles")


def main() -> None:  # pragma: no cover - console entry point
    app()


if __name__ == "__main__":  # pragma: no cover
    sys.exit(app())
