"""Tool views: how a policy's reply text becomes an environment action.

`dbbench_text_v1` is DBBench's text protocol: a turn either runs SQL ("Action: Operation" then a
```sql block) or answers ("Action: Answer" then "Final Answer: [...]"). Our parsing rules:
- the first "Action:" line decides the kind (case-insensitive); none -> invalid;
- an operation runs the first fenced block after it (several blocks: the first; an empty or
  missing block is invalid);
- an answer must be a list literal (JSON or Python syntax); a scalar is invalid unless the
  harness sets accept_scalar_answer, which wraps it as a one-element list.
"""

from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass

from envs.base import Action, AnswerAction, SqlAction

_ACTION = re.compile(r"action\s*:\s*(operation|answer)", re.IGNORECASE)
_SQL_BLOCK = re.compile(r"```[ \t]*(?:sql|mysql|sqlite)?[ \t]*\n?(.*?)```", re.IGNORECASE | re.DOTALL)
_FINAL = re.compile(r"final\s+answer\s*:\s*(.*)", re.IGNORECASE | re.DOTALL)


@dataclass(frozen=True)
class ParsedAction:
    kind: str  # "sql", "answer" or "invalid"
    action: Action | None = None
    error: str | None = None  # why the reply is invalid (a short code)


def parse_dbbench_text(text: str, accept_scalar_answer: bool = False) -> ParsedAction:
    match = _ACTION.search(text or "")
    if match is None:
        return ParsedAction("invalid", error="no_action")
    rest = text[match.end():]
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
    value, ok = _literal(raw)
    if not ok and raw.startswith("["):
        end = raw.rfind("]")
        value, ok = _literal(raw[: end + 1]) if end > 0 else (None, False)
    if not ok:
        first_line = raw.splitlines()[0].strip() if raw else ""
        if accept_scalar and first_line:
            return ParsedAction("answer", AnswerAction([first_line]))
        return ParsedAction("invalid", error="unparseable_answer")
    if isinstance(value, (list, tuple)):
        return ParsedAction("answer", AnswerAction(list(value)))
    if accept_scalar:
        return ParsedAction("answer", AnswerAction([value]))
    return ParsedAction("invalid", error="answer_not_list")


def _literal(raw: str) -> tuple[object, bool]:
    for loader in (json.loads, ast.literal_eval):
        try:
            return loader(raw), True
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            continue
    return None, False


def parse_action(protocol: str, text: str, accept_scalar_answer: bool = False) -> ParsedAction:
    if protocol == "dbbench_text_v1":
        return parse_dbbench_text(text, accept_scalar_answer)
    raise ValueError(f"unknown tool-view protocol '{protocol}'")
