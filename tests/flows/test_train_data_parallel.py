"""`hs train` launched on two ranks with torchrun (DeepSpeed ZeRO-2, gloo on CPU) and the real
SmolLM2: rank 0 runs the Prefect flow, rank 1 trains its share of every update."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from sqlalchemy import select

from configs.schema import TrainConfig
from db.engine import make_engine, session_scope
from db.models import Run, TrainStep

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_two_rank_launch_trains_on_both_ranks_and_resumes(tmp_path, train_dir, prefect_api_url):
    pytest.importorskip("deepspeed")
    cfg = TrainConfig.model_validate(
        dict(
            name="dp",
            mode="grpo",
            init="smollm2-135m",
            pool=["schema_rows"],
            k=4,
            batch_tasks=1,
            updates=1,
            reanchor_every=10,
            checkpoint_every=10,
            tiers=["easy"],
            validation={"split": "train", "n_tasks": 1, "k": 1},
            sampling={"temperature": 1.0, "top_p": 1.0, "max_new_tokens": 12},
            env={"max_rounds": 2},
            trainer={"backend": "deepspeed", "zero_stage": 2, "lr": 1e-4, "micro_batch": 1},
            wandb="disabled",
            state_dir=str(tmp_path / "runs"),
            results_dir=str(tmp_path / "results"),
        )
    )
    path = tmp_path / "train.yaml"
    path.write_text(yaml.safe_dump(cfg.model_dump(mode="json")))
    url = f"sqlite:///{tmp_path / 'hs.db'}"
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "OMP_NUM_THREADS": "1",
        "HS_CHECKPOINT_DIR": str(tmp_path / "ckpt"),
        "HS_GENERATED_DIR": str(train_dir),
        "PREFECT_HOME": str(tmp_path / "prefect"),
        "PREFECT_API_URL": prefect_api_url,  # the ranks' flows report to the test API (no temporary server)
    }

    def launch(updates: int) -> subprocess.CompletedProcess:
        cmd = [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--nproc_per_node",
            "2",
            "--standalone",  # a free port on localhost: two test workers may launch at once
            "-m",
            "cli.main",
            "train",
            "--config",
            str(path),
            "--database-url",
            url,
            "--updates",
            str(updates),
        ]
        return subprocess.run(cmd, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=900)

    done = launch(1)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    run_id = json.loads(next((tmp_path / "runs").glob("*/progress.json")).read_text())["run_id"]
    state = tmp_path / "runs" / run_id / "trainer-u1" / "state"
    assert len(list(state.glob("*optim_states.pt"))) == 2  # both ranks hold a ZeRO-2 optimizer partition

    done = launch(2)  # extend the finished run: both ranks reload the saved state, then train update 2
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    progress = json.loads((tmp_path / "runs" / run_id / "progress.json").read_text())
    assert progress["updates"] == 2
    assert len(list((tmp_path / "runs" / run_id / "trainer-u2" / "state").glob("*optim_states.pt"))) == 2
    with session_scope(make_engine(url)) as s:
        assert s.get(Run, run_id).status == "completed"
        steps = s.scalars(select(TrainStep).where(TrainStep.run_id == run_id).order_by(TrainStep.step)).all()
        assert [row.step for row in steps] == [0, 1]
