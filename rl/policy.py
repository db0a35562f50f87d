"""The Policy contract: chat sessions in, generated text with token ids and log-probs out.

A rollout keeps one `ChatSession` per episode. The backend owns how a session becomes tokens:
the transformers backend keeps the exact token sequence (prompt, sampled tokens, then the
template's tokens for every later message), so the tokens a trainer sees are the tokens the
policy sampled, never a re-tokenisation of decoded text. Text-only API backends keep messages
and return empty token lists when the API gives none.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable


@dataclass(frozen=True)
class Sampling:
    """Sampling settings for one generate call."""

    temperature: float = 1.0
    top_p: float = 1.0
    max_new_tokens: int = 192
    seed: int | None = None


@dataclass
class Generation:
    """One sampled reply.

    token_ids/logprobs: the sampled tokens (the end-of-turn token included when sampled) and
    their log-probabilities under the sampling distribution (softmax of logits / temperature,
    before top-p); empty for backends that cannot report them.
    finish_reason: 'stop' (end-of-turn sampled) or 'length' (max_new_tokens reached).
    """

    text: str
    token_ids: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    finish_reason: str = "stop"
    prompt_tokens: int = 0
    seconds: float = 0.0


@dataclass
class ChatSession:
    """One episode's conversation as the policy sees it.

    messages: chat messages so far (role, content).
    token_ids: the full token sequence so far (token-level backends only).
    rendered_text: the text that token_ids decode to (token-level backends use it to find what
    a new message adds to the chat template's rendering).
    pending_ids/pending_text: what was appended since the last generation (mask 0 context),
    taken by the rollout engine with `take_pending()` when it records a turn.
    cache: backend-owned state for a prefix of token_ids (the lean engine's keys/values), so a
    new turn computes only what was appended; dropped when the context is replaced.
    """

    messages: list[dict[str, str]]
    token_ids: list[int] = field(default_factory=list)
    pending_ids: list[int] = field(default_factory=list)
    pending_text: str = ""
    rendered_text: str = ""
    context_resets: int = 0
    cache: object | None = field(default=None, repr=False, compare=False)

    def release(self) -> None:
        """The episode is over: free what the backend kept for it."""
        self.cache = None

    def take_pending(self) -> tuple[list[int], str]:
        ids, text = self.pending_ids, self.pending_text
        self.pending_ids, self.pending_text = [], ""
        return ids, text


def start_session(policy, messages: list[dict[str, str]]) -> ChatSession:
    """A new session of `policy` whose pending context is the rendered prompt of `messages`
    (built by the policy's reset_context; a start does not count as a context reset)."""
    session = ChatSession(messages=[])
    policy.reset_context(session, messages)
    session.context_resets = 0
    return session


class PolicyError(RuntimeError):
    """A policy that cannot be loaded or reached; the message says how to fix it."""


@runtime_checkable
class Policy(Protocol):
    name: str
    max_context_tokens: int

    def start(self, messages: list[dict[str, str]]) -> ChatSession:
        """A new session whose pending context is the rendered prompt of `messages`."""

    def extend(self, session: ChatSession, messages: list[dict[str, str]]) -> None:
        """Append non-policy messages (observations, hints) after the last assistant reply."""

    def reset_context(self, session: ChatSession, messages: list[dict[str, str]]) -> None:
        """Replace the whole context (history windows); pending becomes the full new prompt."""

    def generate(self, sessions: list[ChatSession], sampling: Sampling) -> list[Generation]:
        """Sample one assistant reply per session, in one batched call, and append it to each."""

    # Optional: a backend with `continuous_batching = True` also has
    # generate_continuous(sessions, sampling, on_reply), which calls on_reply(i, generation) the
    # moment session i's reply is complete; on_reply returns True when it appended another turn
    # to the session, which then joins the running batch (rl/transformers_policy.py).
