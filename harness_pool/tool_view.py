"""Tool views: how a policy's reply text becomes an environment action.

A harness's tool_view.protocol names the parser: each benchmark keeps its protocols, named
<benchmark>_<view>_v<n>, and their parsing rules in envs/<name>/protocol.py, and the registry finds
them (envs.registry.parser); envs/replies.py holds what the parsers share.

Every view, before anything recurses over a reply: a reply over MAX_REPLY_CHARS -> invalid
"reply_too_long"; a lone surrogate in the reply -> "bad_text"; a final answer or call argument over
the literal bounds of envs/literals.py (nested deeper than 20, an integer over 1,000 digits, more
than 10,000 values or 100,000 characters) -> "bad_literal". These set `detail`, one line saying what
was wrong, which the rollout shows the policy after the harness's invalid_message.
"""

from __future__ import annotations

from envs.literals import LiteralLimit, has_surrogate
from envs.registry import parser
from envs.replies import MAX_REPLY_CHARS, ParsedAction, invalid


def parse_action(protocol: str, text: str, accept_scalar_answer: bool = False) -> ParsedAction:
    """The action a reply asks for, or an invalid one; never raises for any text (ValueError for an
    unknown protocol)."""
    parse = parser(protocol)
    text = text or ""
    if len(text) > MAX_REPLY_CHARS:
        return invalid("reply_too_long", f"the reply is longer than {MAX_REPLY_CHARS:,} characters")
    if has_surrogate(text):
        return invalid("bad_text", "the reply holds a lone surrogate (text that is not valid Unicode)")
    try:
        return parse(text, accept_scalar_answer)
    except LiteralLimit as exc:
        return invalid("bad_literal", str(exc))
