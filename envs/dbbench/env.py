"""The DBBench environment: one task, one private database, up to `max_rounds` agent turns.

The environment speaks typed actions (`SqlAction`, `AnswerAction`); turning model text into
actions and truncating observations belong to the harness, so every sibling harness shares
this class and its verifier unchanged.
"""

from __future__ import annotations

from envs.base import Action, AnswerAction, SqlAction, StepResult, Verdict
from envs.dbbench.backends import SqlBackend, SqlExecutionError, SqlResult, format_rows
from envs.dbbench.data import BenchTask
from envs.dbbench.verifier import mutation_ok, verify_answer

DEFAULT_MAX_ROUNDS = 15


def make_backend(kind: str = "sqlite", mysql_url: str | None = None) -> SqlBackend:
    """Backend by name, so configs can say `backend: sqlite|mysql`."""
    if kind == "sqlite":
        from envs.dbbench.sqlite_backend import SqliteBackend

        return SqliteBackend()
    if kind == "mysql":
        from envs.dbbench.mysql_backend import MysqlBackend

        return MysqlBackend(mysql_url)
    raise ValueError(f"unknown SQL backend {kind!r}: use 'sqlite' or 'mysql'")


class DbBenchEnv:
    """Environment protocol implementation for one DBBench task and one rollout.

    Rounds: every action (SQL or answer) uses one round, as every agent turn does upstream;
    the step that uses the last round ends the episode even if it was SQL.
    """

    def __init__(
        self,
        task: BenchTask,
        backend: str = "sqlite",
        max_rounds: int = DEFAULT_MAX_ROUNDS,
        mysql_url: str | None = None,
    ) -> None:
        if max_rounds < 1:
            raise ValueError(f"max_rounds must be >= 1, got {max_rounds}")
        self.task = task
        self.backend_kind = backend
        self.max_rounds = max_rounds
        self.mysql_url = mysql_url
        self.rounds_used = 0
        self.done = False
        self.answer: list | None = None
        self.db: SqlBackend | None = None

    def reset(self) -> str:
        """Build a fresh database holding the task's table and return the instruction text.

        Calling reset() again discards the previous database, so an env can be reused.
        """
        self.close()
        self.db = make_backend(self.backend_kind, self.mysql_url)
        try:
            self.db.create_table(self.task.table_name, self.task.columns, self.task.rows)
        except Exception:
            self.close()  # never leak a half-built database on the server
            raise
        self.rounds_used = 0
        self.done = False
        self.answer = None
        return self.task.instruction

    def step(self, action: Action) -> StepResult:
        """Run SQL (result text, or "Error: ..." with error="sql_error") or record the answer.

        The result text is complete unless the backend's result caps cut it; then its last
        line says so (backends.MAX_RESULT_ROWS / MAX_RESULT_CHARS).
        """
        if self.db is None:
            raise RuntimeError("call reset() before step()")
        if self.done:
            raise RuntimeError(f"episode of {self.task.id} is over; call verify() or reset()")
        self.rounds_used += 1
        if isinstance(action, AnswerAction):
            self.answer = list(action.values)
            self.done = True
            return StepResult(observation="", done=True)
        if not isinstance(action, SqlAction):
            raise TypeError(f"unsupported action {action!r}")
        result = self._run_sql(action.sql)
        self.done = self.rounds_used >= self.max_rounds
        if result.error is not None:
            return StepResult(observation=f"Error: {result.error}", done=self.done, error="sql_error")
        return StepResult(observation=format_rows(result.rows or [], result.truncated), done=self.done)

    def _run_sql(self, sql: str) -> SqlResult:
        """The backend's result; anything the backend raises becomes an error result.

        The SQL is the policy's: whatever it makes the driver do (run out of memory, lose the
        connection) is an observation for the agent, never an exception out of step().
        """
        try:
            return self.db.execute(sql)  # type: ignore[union-attr]
        except MemoryError:
            return SqlResult(error="out of memory while running the statement")
        except Exception as exc:  # noqa: BLE001 - see docstring
            return SqlResult(error=str(exc) or type(exc).__name__)

    def verify(self) -> Verdict:
        """Judge the episode.

        SELECT family: the final answer against the label; no answer means failure.
        INSERT/UPDATE: the hash of the table's final state against answer_md5, whether or not
        the agent answered (upstream judges the state the agent left, and a correct write that
        ran out of rounds before the answer turn is still a correct write).
        """
        if self.db is None:
            raise RuntimeError("no database: call reset() first, and verify() before close()")
        answered = self.answer is not None
        details: dict = {"answered": answered, "answer": self.answer, "rounds_used": self.rounds_used}
        if self.task.is_mutation:
            details["expected"] = self.task.answer_md5
            try:
                table_hash = self.db.table_hash(self.task.table_name, self.task.columns)
            except SqlExecutionError as exc:
                table_hash = None
                details["hash_error"] = str(exc)
            details["table_hash"] = table_hash
            success = mutation_ok(table_hash, self.task.answer_md5)
        else:
            details["expected"] = self.task.label
            success = answered and verify_answer(self.task.task_type, self.answer or [], self.task.label)
        return Verdict(reward=1.0 if success else 0.0, success=success, details=details)

    def close(self) -> None:
        """Drop the rollout's database; safe to call more than once."""
        if self.db is not None:
            self.db.close()
            self.db = None

    def __enter__(self) -> DbBenchEnv:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
