"""`hs traj list/show` on a database holding one real (replayed) trajectory."""

from __future__ import annotations

from typer.testing import CliRunner

from cli.main import app
from db import store
from db.engine import make_engine, session_scope, upgrade
from db.models import BenchTask, Harness, Run
from envs.dbbench.data import load_split
from envs.dbbench.env import DbBenchEnv
from harness_pool.spec import load_harness
from rl.policy import ChatSession, Generation, Sampling
from rl.rollout import RolloutSpec, run_rollouts
from tasks.records import GroupRecord, build_group


class TwoTurns:
    """Test double of the Policy contract with token ids: replays a query then an answer."""

    name, max_context_tokens = "two-turns", 1000

    def __init__(self):
        self.replies = ["Action: Operation\n```sql\nSELECT 1\n```", 'Action: Answer\nFinal Answer: ["1"]']

    def start(self, messages):
        return ChatSession(messages=list(messages), pending_ids=[7, 8, 9], pending_text="PROMPT-TEXT ")

    def extend(self, session, messages):
        session.pending_ids, session.pending_text = [5, 6], "OBSERVATION-TEXT "

    def reset_context(self, session, messages):
        pass

    def generate(self, sessions, sampling):
        text = self.replies.pop(0)
        return [Generation(text=text, token_ids=[101, 102], logprobs=[-0.1, -0.2]) for _ in sessions]


def test_traj_list_and_show_render_turns_and_mask(tmp_path, data_dir):
    url = f"sqlite:///{tmp_path / 'hs.db'}"
    upgrade(url)
    task, h0 = load_split("dev")[0], load_harness("h0")
    [result] = run_rollouts(TwoTurns(), [RolloutSpec(task, h0, 0)], DbBenchEnv, Sampling())
    with session_scope(make_engine(url)) as s:
        s.add(Run(id="run-x", kind="eval", name="x", config={}, status="completed"))
        s.add(Harness(id=h0.id, name="h0", benchmark="dbbench", parent_ids=[], spec={}))
        s.add(
            BenchTask(
                id=task.id,
                benchmark="dbbench",
                split="dev",
                index=0,
                task_type=task.task_type,
                description=task.description,
                record={},
            )
        )
        s.flush()
        store.replace_group(
            s,
            build_group(GroupRecord("run-x", 0, task.id, h0.id, 0, "eval", "base", [result])),
        )
    runner = CliRunner()
    listed = runner.invoke(app, ["traj", "list", "--database-url", url], env={"COLUMNS": "200"})
    assert listed.exit_code == 0 and task.id in listed.output and "wrong_answer" in listed.output
    traj_id = next(line.split("│")[1].strip() for line in listed.output.splitlines() if task.id in line)
    shown = runner.invoke(app, ["traj", "show", traj_id, "--tokens", "--database-url", url], env={"COLUMNS": "200"})
    assert shown.exit_code == 0, shown.output
    out = shown.output
    assert "turn 0 · action sql · 3 masked + 2 policy tokens" in out
    assert "turn 1 · action answer · 2 masked + 2 policy tokens" in out
    assert "PROMPT-TEXT" in out and "OBSERVATION-TEXT" in out and "Final Answer" in out
    assert "7 8 9 101* 102*" in out  # token ids with the loss mask marked
