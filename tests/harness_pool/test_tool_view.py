import pytest

from envs.base import AnswerAction, SqlAction
from harness_pool.tool_view import parse_dbbench_text


def test_operation_with_sql_block():
    parsed = parse_dbbench_text("I will look.\nAction: Operation\n```sql\nSELECT * FROM `t` LIMIT 3;\n```")
    assert parsed.kind == "sql" and parsed.action == SqlAction("SELECT * FROM `t` LIMIT 3;")


def test_several_sql_blocks_runs_only_the_first():
    text = "Action: Operation\n```sql\nSELECT 1;\n```\nthen\n```sql\nSELECT 2;\n```"
    assert parse_dbbench_text(text).action == SqlAction("SELECT 1;")


@pytest.mark.parametrize("text,error", [
    ("Just prose, no action.", "no_action"),
    ("", "no_action"),
    ("Action: Operation\nSELECT 1;", "no_sql_block"),
    ("Action: Operation\n```sql\n   \n```", "empty_sql"),
    ("Action: Answer\nthe answer is 5", "no_final_answer"),
    ("Action: Answer\nFinal Answer: 5", "answer_not_list"),
    ("Action: Answer\nFinal Answer: Paris", "unparseable_answer"),
    ("Action: Answer\nFinal Answer: [1, 2", "unparseable_answer"),
])
def test_malformed_replies_are_invalid_with_a_reason(text, error):
    parsed = parse_dbbench_text(text)
    assert parsed.kind == "invalid" and parsed.error == error and parsed.action is None


def test_answers_parse_json_and_python_lists_and_ignore_trailing_text():
    assert parse_dbbench_text('Action: Answer\nFinal Answer: ["a", "b"]').action == AnswerAction(["a", "b"])
    assert parse_dbbench_text("action: answer\nfinal answer: ['x', 3.5]").action == AnswerAction(["x", 3.5])
    assert parse_dbbench_text('Action: Answer\nFinal Answer: [] \nDone, thanks!').action == AnswerAction([])


def test_first_action_line_wins():
    text = "Action: Answer\nFinal Answer: [1]\nAction: Operation\n```sql\nSELECT 1\n```"
    assert parse_dbbench_text(text).kind == "answer"


def test_scalar_answers_are_accepted_only_when_the_harness_allows():
    assert parse_dbbench_text("Action: Answer\nFinal Answer: 5", accept_scalar_answer=True).action == AnswerAction([5])
    assert parse_dbbench_text("Action: Answer\nFinal Answer: Paris", accept_scalar_answer=True).action == AnswerAction(["Paris"])
