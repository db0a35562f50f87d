"""DbBenchEnv behaviour: rounds, errors, isolation, verdicts."""

import pytest

from envs.base import AnswerAction, Environment, SqlAction
from envs.dbbench.env import DbBenchEnv


@pytest.fixture
def insert_task(dev_tasks):
    return dev_tasks[20]  # INSERT into `School Location Table`


@pytest.fixture
def select_task(dev_tasks):
    return dev_tasks[0]  # "other", label ["March 19, 1998"]


def test_protocol_and_instruction(select_task):
    with DbBenchEnv(select_task) as env:
        assert isinstance(env, Environment)
        assert env.reset() == select_task.instruction
        result = env.step(SqlAction(f"SELECT COUNT(*) FROM `{select_task.table_name}`"))
        assert result.observation == f"[({len(select_task.rows)},)]" and not result.done and result.error is None


def test_round_limit_ends_episode(select_task):
    with DbBenchEnv(select_task, max_rounds=3) as env:
        env.reset()
        results = [env.step(SqlAction("SELECT 1")) for _ in range(3)]
        assert [r.done for r in results] == [False, False, True]
        assert env.rounds_used == 3
        with pytest.raises(RuntimeError):
            env.step(SqlAction("SELECT 1"))
        verdict = env.verify()
        assert not verdict.success and verdict.details["answered"] is False and verdict.reward == 0.0


def test_sql_error_observation(select_task):
    with DbBenchEnv(select_task) as env:
        env.reset()
        result = env.step(SqlAction("SELECT * FROM no_such_table"))
        assert result.error == "sql_error" and result.observation.startswith("Error: ")
        assert "no_such_table" in result.observation and not result.done


def test_select_answer_verdict(select_task):
    with DbBenchEnv(select_task) as env:
        env.reset()
        assert env.step(AnswerAction(["March 19, 1998"])).done
        verdict = env.verify()
        assert verdict.success and verdict.reward == 1.0
        assert verdict.details == {
            "answered": True,
            "answer": ["March 19, 1998"],
            "rounds_used": 1,
            "expected": ["March 19, 1998"],
        }


def test_mutation_judged_by_table_state(insert_task):
    with DbBenchEnv(insert_task) as env:
        env.reset()
        assert not env.verify().success  # untouched table
        env.step(SqlAction(insert_task.gold_sql))
        verdict = env.verify()  # no answer given: the state still counts
        assert verdict.success and verdict.details["answered"] is False
        assert verdict.details["table_hash"] == insert_task.answer_md5 == verdict.details["expected"]


def test_dropped_table_fails_cleanly(insert_task):
    with DbBenchEnv(insert_task) as env:
        env.reset()
        env.step(SqlAction(f"DROP TABLE `{insert_task.table_name}`"))
        verdict = env.verify()
        assert not verdict.success and "hash_error" in verdict.details


@pytest.mark.parametrize("backend", ["sqlite", pytest.param("mysql", marks=pytest.mark.mysql)])
def test_isolation_between_rollouts(insert_task, backend, request):
    url = request.getfixturevalue("mysql_url") if backend == "mysql" else None
    count_sql = f"SELECT COUNT(*) FROM `{insert_task.table_name}`"
    with DbBenchEnv(insert_task, backend, mysql_url=url) as a, DbBenchEnv(insert_task, backend, mysql_url=url) as b:
        a.reset()
        b.reset()
        a.step(SqlAction(insert_task.gold_sql))
        n = len(insert_task.rows)
        assert a.step(SqlAction(count_sql)).observation == f"[({n + 1},)]"
        assert b.step(SqlAction(count_sql)).observation == f"[({n},)]"
        assert a.verify().success and not b.verify().success


def test_reset_gives_a_fresh_database(insert_task):
    with DbBenchEnv(insert_task) as env:
        env.reset()
        env.step(SqlAction(insert_task.gold_sql))
        env.reset()
        assert env.rounds_used == 0 and not env.verify().success
