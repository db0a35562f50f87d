"""DBBench's reply parsers: how a policy's reply becomes a SQL query or a final answer.

`dbbench_text_v1` is DBBench's text protocol: a turn either runs SQL ("Action: Operation" then a
```sql block) or answers ("Action: Answer" then "Final Answer: [...]"). Our parsing rules:
- the first "Action:" line decides the kind (case-insensitive); none -> invalid;
- an operation runs the first fenced block after it (several blocks: the first; an empty or
  missing block is invalid);
- an answer must be a list literal (JSON or Python syntax); a scalar is invalid unless the
  harness sets accept_scalar_answer, which wraps it as a one-element list.

`dbbench_json_v1` is a function-calling view of the same two actions: the reply holds one JSON
object {"name": ..., "arguments": {...}}, bare or inside a ```json block, calling
execute_sql(sql) or submit_answer(answer). Our parsing rules:
- JSON is decoded from every "{" in reading order (so surrounding prose and fences do not
  matter); the first object that has a "name" key is the call and decides, later ones are
  ignored; an object nested in a wrapper (e.g. {"function": {"name": ...}}) counts, since its
  brace is scanned too; no such object -> invalid "no_function_call";
- a name other than the two functions -> invalid "unknown_function";
- "arguments" must be an object, or a string holding one (as some chat APIs encode it);
  anything else -> invalid "bad_arguments";
- execute_sql needs a non-empty string "sql" (else invalid "empty_sql");
- submit_answer needs an "answer" key (else invalid "missing_answer"); a JSON list is the
  answer; any other value is invalid "answer_not_list" unless accept_scalar_answer, which
  wraps it as a one-element list, as in the text view.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable

from envs.base import AnswerAction, SqlAction
from envs.literals import MAX_CHARS, check_literal
from envs.replies import DECODER, ParsedAction, arguments, first_call, invalid

_ACTION = re.compile(r"action\s*:\s*(operation|answer)", re.IGNORECASE)
_SQL_BLOCK = re.compile(r"```[ \t]*(?:sql|mysql|sqlite)?[ \t]*\n?(.*?)```", re.IGNORECASE | re.DOTALL)
_FINAL = re.compile(r"final\s+answer\s*:\s*(.*)", re.IGNORECASE | re.DOTALL)


def parse_dbbench_text(text: str, accept_scalar_answer: bool = False) -> ParsedAction:
    match = _ACTION.search(text or "")
    if match is None:
        return ParsedAction("invalid", error="no_action")
    rest = text[match.end() :]
    if match.group(1).lower() == "operation":
        block = _SQL_BLOCK.search(rest)
        if block is None:
            return ParsedAction("invalid", error="no_sql_block")
        sql = block.group(1).strip()
        if not sql:
            return ParsedAction("invalid", error="empty_sql")
        return ParsedAction("sql", SqlAction(sql))
    final = _FINAL.search(rest)
    if final is None:
        return ParsedAction("invalid", error="no_final_answer")
    return _parse_answer(final.group(1).strip(), accept_scalar_answer)


def _parse_answer(raw: str, accept_scalar: bool) -> ParsedAction:
    if len(raw) > MAX_CHARS:
        return invalid("bad_literal", f"the final answer is longer than {MAX_CHARS:,} characters")
    value, ok = _literal(raw)
    if not ok and raw.startswith("["):
        end = raw.rfind("]")
        value, ok = _literal(raw[: end + 1]) if end > 0 else (None, False)
    if not ok:
        first_line = raw.splitlines()[0].strip() if raw else ""
        if accept_scalar and first_line:
            return ParsedAction("answer", AnswerAction([first_line]))
        return ParsedAction("invalid", error="unparseable_answer")
    check_literal(value, "the final answer")
    if isinstance(value, (list, tuple)):
        return ParsedAction("answer", AnswerAction(list(value)))
    if accept_scalar:
        return ParsedAction("answer", AnswerAction([value]))
    return ParsedAction("invalid", error="answer_not_list")


def _literal(raw: str) -> tuple[object, bool]:
    """The value of a JSON or Python literal; LiteralLimit for a JSON integer over the digit bound
    (Python's own parser refuses one over 4,300 digits as a syntax error)."""
    for loader in (DECODER.decode, ast.literal_eval):
        try:
            return loader(raw), True
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            continue
    return None, False


def parse_dbbench_json(text: str, accept_scalar_answer: bool = False) -> ParsedAction:
    call = first_call(text or "")
    if call is None:
        return ParsedAction("invalid", error="no_function_call")
    name, args = call.get("name"), arguments(call)
    if name not in ("execute_sql", "submit_answer"):
        return ParsedAction("invalid", error="unknown_function")
    if args is None:
        return ParsedAction("invalid", error="bad_arguments")
    if name == "execute_sql":
        sql = args.get("sql")
        if not isinstance(sql, str) or not sql.strip():
            return ParsedAction("invalid", error="empty_sql")
        return ParsedAction("sql", SqlAction(sql.strip()))
    if "answer" not in args:
        return ParsedAction("invalid", error="missing_answer")
    value = args["answer"]
    if isinstance(value, list):
        return ParsedAction("answer", AnswerAction(value))
    if accept_scalar_answer:
        return ParsedAction("answer", AnswerAction([value]))
    return ParsedAction("invalid", error="answer_not_list")


# protocol -> parser(text, accept_scalar_answer); a benchmark's protocols are named <benchmark>_<view>_v<n>
PROTOCOLS: dict[str, Callable[[str, bool], ParsedAction]] = {
    "dbbench_text_v1": parse_dbbench_text,
    "dbbench_json_v1": parse_dbbench_json,
}
