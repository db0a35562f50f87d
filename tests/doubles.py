"""Test doubles and small models shared by several test modules (importable as `tests.doubles`)."""

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


class ScriptedPolicy(ReplayPolicy):
    """Per-episode replies: the i-th session started replays scripts[i] (its last reply repeats), so
    episodes of one batch can behave differently. With `continuous=True` it is also a
    continuous-batching backend (generate_continuous), like the lean engine."""

    def __init__(self, scripts: list[list[str]], continuous: bool = False):
        super().__init__([])
        self.scripts = [list(s) for s in scripts]
        self.sessions: list = []
        self.turns: list[int] = []
        self.continuous_batching = continuous

    def start(self, messages):
        session = super().start(messages)
        self.sessions.append(session)
        self.turns.append(0)
        return session

    def _reply(self, session) -> Generation:
        i = next(n for n, s in enumerate(self.sessions) if s is session)
        script = self.scripts[i]
        text = script[min(self.turns[i], len(script) - 1)]
        self.turns[i] += 1
        session.messages.append({"role": "assistant", "content": text})
        return Generation(text=text)

    def generate(self, sessions, sampling):
        self.calls += 1
        return [self._reply(s) for s in sessions]

    def generate_continuous(self, sessions, sampling, on_reply):
        live = list(range(len(sessions)))
        while live:
            live = [i for i in live if on_reply(i, self._reply(sessions[i]))]


def tiny_llama():
    """A random 2-layer Llama with grouped key/value heads: fast, and its flat logits leave no near-ties."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=64,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
    )
    return LlamaForCausalLM(config).eval()
