"""Data-parallel DeepSpeed updates: two real processes (torchrun, gloo) against one process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

SCRIPT = Path(__file__).with_name("dp_ranks.py")
REPO = Path(__file__).resolve().parents[2]


def run_two_ranks(out: Path, stage: int) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nproc_per_node",
        "2",
        "--standalone",  # a free port on localhost: two test workers may launch at once
        str(SCRIPT),
        str(out),
        str(stage),
    ]
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)


@pytest.mark.slow
@pytest.mark.parametrize("stage", [0, 2])
def test_two_ranks_step_like_one_process_on_the_whole_batch(tmp_path, stage):
    pytest.importorskip("deepspeed")
    done = run_two_ranks(tmp_path, stage)
    assert done.returncode == 0, done.stderr[-3000:]
    rank0, rank1 = torch.load(tmp_path / "rank0.pt"), torch.load(tmp_path / "rank1.pt")
    reference = torch.load(tmp_path / "reference.pt")
    for name, ref in reference.items():
        assert torch.allclose(rank0[name], ref, atol=1e-5), name  # same step as the full batch in one process
        assert torch.equal(rank0[name], rank1[name]), name  # the ranks stay in sync
    stats = json.loads((tmp_path / "stats.json").read_text())
    assert stats["first"]["trained_sequences"] == 3  # summed over ranks; rank 1's padding chunk counts nothing
    assert stats["first"]["policy_tokens"] == 4 + 6 + 8
    assert stats["idle"]["trained_sequences"] == 0 and stats["idle"]["grad_norm"] == 0.0
    worker = json.loads((tmp_path / "worker.json").read_text())
    assert stats["updates"] == 2 and worker["updates"] == 2
    assert stats["left"] and worker["left"]  # both ranks tore the group down before exiting
    # ... and its gloo threads ended there, not during interpreter exit, where one still releasing
    # a tensor can abort the process (DeepSpeed's default arguments used to keep the group alive)
    assert stats["gloo_threads"]["left"] < stats["gloo_threads"]["in_group"]
    saved = tmp_path / "state" / "state"
    assert (saved / "mp_rank_00_model_states.pt").exists()
    shards = sorted(p.name for p in saved.glob("*optim_states.pt"))
    assert len(shards) == (2 if stage else 0)  # ZeRO 1+ saves one optimizer partition per rank
