"""A benchmark from outside the repository (tests/toy_benchmark: a package plus its entry point in the
harness_s.benchmarks group) goes through gold replay, evaluation, offline evolution and training with
no change anywhere else, with the real policy and real flows."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from sqlalchemy import func, select
from typer.testing import CliRunner

from cli.main import app
from db.engine import make_engine, session_scope
from db.models import BenchTask, EvolutionCandidate, RolloutGroup, Trajectory

TOY = Path(__file__).resolve().parents[1] / "toy_benchmark"
POLICY = {"backend": "transformers", "model": "smollm2-135m", "device": "cpu", "dtype": "float32"}
SAMPLING = {"temperature": 1.0, "top_p": 1.0, "max_new_tokens": 8}


@pytest.fixture
def toy_registered(monkeypatch):
    """The toy distribution on the path, as `pip install` would put it there."""
    from envs import registry

    monkeypatch.syspath_prepend(str(TOY))
    registry._specs.cache_clear()
    yield
    registry._specs.cache_clear()


def _run(args: list[str]) -> str:
    import time

    t0 = time.time()
    result = CliRunner().invoke(app, args)
    print("TIME", args[0], time.time() - t0)
    assert result.exit_code == 0, result.output[-3000:]
    return result.output


def _config(tmp_path: Path, name: str, body: dict) -> str:
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(body))
    return str(path)


def test_the_registry_finds_an_installed_benchmark_by_its_entry_point(toy_registered):
    from envs.registry import benchmark, names, parser

    assert "toy" in names() and benchmark("toy").harness_dir == TOY / "toy_bench" / "harnesses"
    assert parser("toy_text_v1")("ok\nAction: say apple").action.command == "say apple"
    out = _run(["env", "check-gold", "toy", "--split", "dev"])
    assert "agreement: 100.0%" in out and "control (say 'nothing'): 0/8 passed" in out


def test_an_unregistered_benchmark_is_one_line_listing_the_known_ones():
    result = CliRunner().invoke(app, ["env", "check-gold", "toy"])
    assert result.exit_code == 2 and "unknown benchmark 'toy'" in result.output and "dbbench" in result.output


@pytest.mark.slow
def test_eval_evolve_and_train_run_an_outside_benchmark(tmp_path, toy_registered, prefect_api):
    url = f"sqlite:///{tmp_path / 'hs.db'}"
    env = {"benchmark": "toy", "max_rounds": 2}
    evaluation = {"name": "toy-eval", "split": "dev", "harness": "h0", "k": 1, "seeds": 1, "limit": 2,
                  "checkpoint": "base", "policy": POLICY, "sampling": SAMPLING, "env": env,
                  "results_dir": str(tmp_path / "results")}  # fmt: skip
    _run(["eval", "--config", _config(tmp_path, "eval", evaluation), "--database-url", url])

    evolution = {"name": "toy-evolve", "harness": "h0", "rounds": 1, "parents_per_round": 1, "children_per_parent": 1,
                 "diagnose": {"n_tasks": 2, "k": 1, "min_support": 1},
                 "validation": {"max_tasks": 2, "n_controls": 1, "k": 1, "min_fixed": 1, "max_broken": 1},
                 "editor": {"kind": "offline"}, "policy": POLICY, "sampling": SAMPLING, "env": env,
                 "pool": {"root": str(tmp_path / "pools"), "dvc": False},
                 "results_dir": str(tmp_path / "results")}  # fmt: skip
    _run(["evolve", "--config", _config(tmp_path, "evolve", evolution), "--database-url", url])

    training = {"name": "toy-train", "mode": "harness_s", "harness": "h0", "pool": ["say_reminder"], "mixture": ["h0"],
                "router": {"kind": "random"}, "init": "smollm2-135m", "n_tasks": 4, "updates": 1, "batch_tasks": 1,
                "k": 2, "reanchor_every": 100, "checkpoint_every": 100,
                "validation": {"split": "dev", "n_tasks": 1, "k": 1},
                "sampling": SAMPLING, "trainer": {"backend": "torch", "device": "cpu", "micro_batch": 2}, "env": env,
                "wandb": "disabled", "state_dir": str(tmp_path / "runs"),
                "results_dir": str(tmp_path / "results")}  # fmt: skip
    _run(["train", "--config", _config(tmp_path, "train", training), "--database-url", url])

    with session_scope(make_engine(url)) as s:
        tasks = s.scalars(select(BenchTask)).all()
        roles = dict(s.execute(select(RolloutGroup.role, func.count()).group_by(RolloutGroup.role)).all())
        n_trajectories = s.scalar(select(func.count()).select_from(Trajectory))
        candidates = s.scalars(select(EvolutionCandidate)).all()
    assert tasks and all(t.benchmark == "toy" for t in tasks)
    assert roles.get("diagnose") == 2 and roles.get("h0", 0) >= 1  # evolution diagnosed; training sampled H0 groups
    assert n_trajectories >= 2 + 2 + 2  # evaluation, diagnosis, one update's first groups
    assert all(set(c.root_causes) <= {"format_error", "wrong_command", "wrong_word"} for c in candidates)
