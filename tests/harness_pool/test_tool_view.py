import pytest

from envs.base import AnswerAction, SqlAction
from envs.dbbench.protocol import parse_dbbench_json, parse_dbbench_text
from envs.registry import protocol_names
from harness_pool.tool_view import parse_action


def test_operation_with_sql_block():
    parsed = parse_dbbench_text("I will look.\nAction: Operation\n```sql\nSELECT * FROM `t` LIMIT 3;\n```")
    assert parsed.kind == "sql" and parsed.action == SqlAction("SELECT * FROM `t` LIMIT 3;")


def test_several_sql_blocks_runs_only_the_first():
    text = "Action: Operation\n```sql\nSELECT 1;\n```\nthen\n```sql\nSELECT 2;\n```"
    assert parse_dbbench_text(text).action == SqlAction("SELECT 1;")


@pytest.mark.parametrize(
    "text,error",
    [
        ("Just prose, no action.", "no_action"),
        ("", "no_action"),
        ("Action: Operation\nSELECT 1;", "no_sql_block"),
        ("Action: Operation\n```sql\n   \n```", "empty_sql"),
        ("Action: Answer\nthe answer is 5", "no_final_answer"),
        ("Action: Answer\nFinal Answer: 5", "answer_not_list"),
        ("Action: Answer\nFinal Answer: Paris", "unparseable_answer"),
        ("Action: Answer\nFinal Answer: [1, 2", "unparseable_answer"),
    ],
)
def test_malformed_replies_are_invalid_with_a_reason(text, error):
    parsed = parse_dbbench_text(text)
    assert parsed.kind == "invalid" and parsed.error == error and parsed.action is None


def test_answers_parse_json_and_python_lists_and_ignore_trailing_text():
    assert parse_dbbench_text('Action: Answer\nFinal Answer: ["a", "b"]').action == AnswerAction(["a", "b"])
    assert parse_dbbench_text("action: answer\nfinal answer: ['x', 3.5]").action == AnswerAction(["x", 3.5])
    assert parse_dbbench_text("Action: Answer\nFinal Answer: [] \nDone, thanks!").action == AnswerAction([])


def test_first_action_line_wins():
    text = "Action: Answer\nFinal Answer: [1]\nAction: Operation\n```sql\nSELECT 1\n```"
    assert parse_dbbench_text(text).kind == "answer"


def test_scalar_answers_are_accepted_only_when_the_harness_allows():
    assert parse_dbbench_text("Action: Answer\nFinal Answer: 5", accept_scalar_answer=True).action == AnswerAction([5])
    assert parse_dbbench_text("Action: Answer\nFinal Answer: Paris", accept_scalar_answer=True).action == AnswerAction(
        ["Paris"]
    )


# dbbench_json_v1: one JSON function call per reply.


def test_json_bare_call_runs_sql():
    parsed = parse_dbbench_json('{"name": "execute_sql", "arguments": {"sql": "  SELECT * FROM `t` LIMIT 3; "}}')
    assert parsed.kind == "sql" and parsed.action == SqlAction("SELECT * FROM `t` LIMIT 3;")


def test_json_call_in_a_fenced_block_after_prose():
    text = (
        "Let me look at the rows first; note {this} is not JSON.\n```json\n"
        '{"name": "execute_sql", "arguments": {"sql": "SELECT `a {b}` FROM `t`"}}\n```\nDone.'
    )
    assert parse_dbbench_json(text).action == SqlAction("SELECT `a {b}` FROM `t`")


def test_json_answer_list_and_first_call_wins():
    text = (
        '{"name": "submit_answer", "arguments": {"answer": ["x", 3, [1, 2]]}}\n'
        '{"name": "execute_sql", "arguments": {"sql": "SELECT 1"}}'
    )
    parsed = parse_dbbench_json(text)
    assert parsed.kind == "answer" and parsed.action == AnswerAction(["x", 3, [1, 2]])
    assert parse_dbbench_json('{"name": "submit_answer", "arguments": {"answer": []}}').action == AnswerAction([])


def test_json_wrapped_call_and_string_encoded_arguments():
    text = '{"type": "function", "function": {"name": "execute_sql", "arguments": "{\\"sql\\": \\"SELECT 2\\"}"}}'
    assert parse_dbbench_json(text).action == SqlAction("SELECT 2")


def test_json_scalar_answers_are_accepted_only_when_the_harness_allows():
    text = '{"name": "submit_answer", "arguments": {"answer": 5}}'
    assert parse_dbbench_json(text).error == "answer_not_list"
    assert parse_dbbench_json(text, accept_scalar_answer=True).action == AnswerAction([5])
    assert parse_action("dbbench_json_v1", text, True).action == AnswerAction([5])


@pytest.mark.parametrize(
    "text,error",
    [
        ("Action: Operation\n```sql\nSELECT 1\n```", "no_function_call"),
        ("", "no_function_call"),
        ('```json\n{"name": "execute_sql", "arguments": {"sql": "SELECT 1"}\n```', "no_function_call"),
        ("{'name': 'execute_sql', 'arguments': {'sql': 'SELECT 1'}}", "no_function_call"),
        ('{"name": "run_query", "arguments": {"sql": "SELECT 1"}}', "unknown_function"),
        ('{"name": "execute_sql", "arguments": {"sql": "   "}}', "empty_sql"),
        ('{"name": "execute_sql", "arguments": {"query": "SELECT 1"}}', "empty_sql"),
        ('{"name": "execute_sql", "arguments": ["SELECT 1"]}', "bad_arguments"),
        ('{"name": "execute_sql", "arguments": "not json"}', "bad_arguments"),
        ('{"name": "submit_answer", "arguments": {}}', "missing_answer"),
        ('{"name": "submit_answer", "arguments": {"answer": "Paris"}}', "answer_not_list"),
    ],
)
def test_json_malformed_calls_are_invalid_with_a_reason(text, error):
    parsed = parse_dbbench_json(text)
    assert parsed.kind == "invalid" and parsed.error == error and parsed.action is None


def test_protocols_do_not_accept_each_others_format():
    call = '{"name": "execute_sql", "arguments": {"sql": "SELECT 1"}}'
    assert parse_action("dbbench_text_v1", call).error == "no_action"
    assert parse_action("dbbench_json_v1", call).action == SqlAction("SELECT 1")
    with pytest.raises(ValueError, match="unknown tool-view protocol"):
        parse_action("dbbench_xml_v1", call)


@pytest.mark.serial
@pytest.mark.parametrize("protocol", sorted(protocol_names()))
def test_any_reply_parses_within_a_bound_and_never_raises(protocol):
    import time

    hostile = [
        "{" * 199_000,  # each failed decode costs the reply's length: only MAX_JSON_STARTS are tried
        '{"a":[' * 33_000,
        "Action: Operation\n" + "```" * 66_000,
        "x" * 1_000_000,
        "Action: Answer\nFinal Answer: [" + "1," * 49_000 + "]",
        "Action: call\n[" + "ls(), " * 30_000 + "]",
        "\ud800",
    ]
    for text in hostile:
        started = time.monotonic()
        parsed = parse_action(protocol, text)
        assert time.monotonic() - started < 1.0, (protocol, text[:30])
        assert parsed.kind == "invalid" or parsed.action is not None
