import pytest

from harness_pool.runtime import HarnessRuntime
from harness_pool.spec import Condition, ContextPolicy, HookRule, load_harness

FIELDS = {
    "instruction": "Insert a row into table T.",
    "description": "Insert a row.",
    "add_description": "Table T.",
    "table_name": "T",
    "headers": "a, b",
}


def _runtime(**update) -> HarnessRuntime:
    return HarnessRuntime(load_harness("h0").model_copy(update=update), FIELDS)


def test_opening_messages_fill_the_task_template_and_on_init_hints():
    rt = _runtime(hooks=[HookRule(at="on_init", effect="inject", message="Columns: {headers}")])
    messages, events = rt.opening_messages()
    assert messages[0]["role"] == "system" and "Action: Operation" in messages[0]["content"]
    assert messages[1]["content"] == "Insert a row.\nTable T.\n\nColumns: a, b"
    assert events == [{"at": "on_init", "effect": "inject", "message": "Columns: a, b"}]


def test_block_answer_before_any_query_fires_once_then_allows():
    rule = HookRule(
        at="before_action",
        when=Condition(action_kind="answer", queries_at_most=0),
        effect="block",
        message="Query the table before answering.",
    )
    rt = _runtime(hooks=[rule])
    assert rt.check_action("answer")[0] == "Query the table before answering."
    assert rt.check_action("sql")[0] is None
    rt.record_step("sql", "[('1',)]", error=False)
    assert rt.check_action("answer")[0] is None  # one query ran: the condition no longer holds


def test_after_step_recovery_hint_on_errors_only_and_once():
    rule = HookRule(
        at="after_step",
        when=Condition(last_step_error=True, observation_matches="no such column"),
        effect="inject",
        message="Check the column names with backticks.",
        once=True,
    )
    rt = _runtime(hooks=[rule])
    rt.record_step("sql", "Error: no such column: x", error=True)
    text, events = rt.next_user_message("Error: no such column: x")
    assert text.endswith("Check the column names with backticks.") and len(events) == 1
    rt.record_step("sql", "Error: no such column: y", error=True)
    assert rt.next_user_message("Error: no such column: y") == ("Error: no such column: y", [])


def test_truncation_and_history_window():
    rt = _runtime(context=ContextPolicy(max_observation_chars=20, history_window=1))
    assert rt.truncate("x" * 25) == "x" * 20 + " ...[truncated]"
    assert rt.truncate("short") == "short"
    msgs = [{"role": "system", "content": "s"}, {"role": "user", "content": "u0"}]
    assert rt.windowed(msgs + [{"role": "assistant", "content": "a1"}, {"role": "user", "content": "o1"}]) is None
    long = msgs + [{"role": r, "content": f"{r}{i}"} for i in (1, 2) for r in ("assistant", "user")]
    assert [m["content"] for m in rt.windowed(long)] == ["s", "u0", "assistant2", "user2"]


def test_code_hooks_inject_block_and_rewrite_and_a_failing_hook_has_no_effect():
    from harness_pool.spec import CodeHook

    quote = CodeHook(
        at="before_action",
        name="quote_table",
        source=(
            "def hook(ctx, nb):\n    sql = ctx['action_sql'] or ''\n"
            "    bare = 'FROM ' + ctx['table_name'] + ' '\n"
            "    if bare in sql:\n"
            "        return {'rewrite': sql.replace(bare, 'FROM `' + ctx['table_name'] + '` ')}\n"
            "    if ctx['action_kind'] == 'answer' and len(nb.get('errors', [])) > 1:\n"
            "        return {'block': 'Two queries failed; fix the SQL before answering.'}\n"
            "    return None"
        ),
    )
    note = CodeHook(
        at="after_step",
        name="note_errors",
        source=(
            "def hook(ctx, nb):\n    if ctx['last_error']:\n"
            "        nb['errors'] = nb.get('errors', []) + [ctx['round']]\n"
            "        return {'inject': 'Errors so far: ' + str(len(nb['errors']))}\n    return None"
        ),
    )
    broken = CodeHook(at="after_step", name="broken", source="def hook(ctx, nb):\n    return {'inject': 1 / 0}")
    rt = _runtime(code_hooks=[quote, note, broken])
    rt.opening_messages()
    blocked, rewrite, events = rt.check_action("sql", "SELECT * FROM T WHERE a = 1")
    assert blocked is None and rewrite == "SELECT * FROM `T` WHERE a = 1"
    assert events == [{"at": "before_action", "effect": "rewrite", "hook": "quote_table", "message": rewrite}]
    for _ in range(2):
        rt.record_step("sql", "Error: bad", error=True, sql="SELEC 1")
        message, events = rt.next_user_message("Error: bad")
    assert message.endswith("Errors so far: 2")
    assert [e["effect"] for e in events] == ["inject", "hook_error"]
    assert events[1]["hook"] == "broken" and "ZeroDivisionError" in events[1]["error"]
    blocked, rewrite, _ = rt.check_action("answer")
    assert blocked == "Two queries failed; fix the SQL before answering." and rewrite is None


def test_query_log_memory_lists_recent_queries_after_each_observation():
    from harness_pool.spec import MemoryPolicy

    rt = _runtime(memory=MemoryPolicy(query_log=2))
    rt.opening_messages()
    for i, err in enumerate([False, True, False]):
        rt.record_step("sql", "ok", error=err, sql=f"SELECT {i}")
    message, _ = rt.next_user_message("ok")
    assert message == "ok\n\nQueries you have run so far (oldest first):\n- SELECT 1 (failed)\n- SELECT 2 (ran)"
    assert _runtime().spec.id == load_harness("h0").id  # memory off is H0 itself: defaults leave the id alone


@pytest.mark.serial
def test_hook_rule_regexes_match_case_insensitively_in_linear_time():
    import time

    rule = HookRule(at="after_step", when=Condition(observation_matches="(x+x+)+y"), effect="inject", message="never")
    hint = HookRule(
        at="after_step",
        when=Condition(observation_matches="^NO SUCH table|unknown column"),
        effect="inject",
        message="m",
    )
    rt = _runtime(hooks=[rule, hint])
    rt.record_step("sql", "x" * 10_000, error=True)  # exponential for a backtracking engine
    started = time.monotonic()
    assert [r.message for r, _ in rt.fire("after_step")] == []
    assert time.monotonic() - started < 1.0
    rt.record_step("sql", "no such table: t\ud800", error=True)  # a lone surrogate cannot stop RE2's UTF-8
    assert [r.message for r, _ in rt.fire("after_step")] == ["m"]
    rt.record_step("sql", "Error: no such table: t", error=True)  # ^ anchors at the start of the text
    assert [r.message for r, _ in rt.fire("after_step")] == []
    instruction = HookRule(at="on_init", when=Condition(instruction_matches="INSERT"), effect="inject", message="i")
    assert [r.message for r, _ in _runtime(hooks=[instruction]).fire("on_init")] == ["i"]
