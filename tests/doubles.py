"""Test doubles shared by several test modules (importable as `tests.doubles`)."""

from __future__ import annotations

from rl.policy import ChatSession, Generation


class ReplayPolicy:
    """Test double of the Policy contract: replays fixed reply texts, so the engine's control
    flow (hooks, answers, round limit) is checked against the real environment and verifier."""

    name = "replay"
    max_context_tokens = 10_000

    def __init__(self, replies: list[str]):
        self.replies = replies
        self.calls = 0

    def start(self, messages):
        return ChatSession(messages=list(messages), pending_text="start")

    def extend(self, session, messages):
        session.messages += messages
        session.pending_text += "".join(m["content"] for m in messages)

    def reset_context(self, session, messages):
        session.messages = list(messages)

    def generate(self, sessions, sampling):
        text = self.replies[min(self.calls, len(self.replies) - 1)]
        self.calls += 1
        for s in sessions:
            s.messages.append({"role": "assistant", "content": text})
        return [Generation(text=text) for _ in sessions]
