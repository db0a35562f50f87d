"""OpenAI-compatible chat-completions policy: a frozen policy behind an HTTP API (evaluation).

Works with any server that speaks the chat-completions protocol (vLLM's `vllm serve`, a hosted
API), through the official `openai` client. Unlike the transformers backend this one is
text-level: a session keeps chat messages, and `pending_text` is a plain `role: content`
rendering of the messages appended since the last generation, so the rollout engine can record
what context the policy saw. Token ids stay empty (the API returns token strings, not ids).

Log-probs: requested with `logprobs=True`; when the server returns them they fill
`Generation.logprobs`. Their definition is the server's, not the contract's (softmax of
logits / temperature): vLLM, for one, reports the raw model distribution unless started with a
processed log-probs mode. Use them for diagnostics of a frozen policy, not importance ratios.
A server that rejects the parameter (HTTP 400 naming `logprobs`) is asked once more without it
and never again by this backend.

Context limit: the server is the authority; a 400 saying the prompt exceeds the model's context
becomes a `Generation` with finish_reason 'context_overflow' (as the transformers backend
reports it) and the session is left unchanged. `max_context_tokens` is only advertised to the
rollout engine (history windows).

API key: read from the environment variable `api_key_env` (default OPENAI_API_KEY). When it is
unset the placeholder "EMPTY" is sent, which local servers without `--api-key` accept; a server
that needs a key then answers 401 and the PolicyError names the variable to set.

Errors that make the policy unusable (server unreachable, timeout, 401/403, 404 model or path)
raise PolicyError with one line naming the base URL, the model and the fix.
"""

from __future__ import annotations

import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import openai

from harness_pool.api_errors import Fixes, explain, server_message
from rl.policy import ChatSession, Generation, PolicyError, Sampling, start_session

PLACEHOLDER_KEY = "EMPTY"
_CONTEXT_MARKERS = ("context length", "context_length", "context window", "maximum context", "too many tokens")


def render_messages(messages: list[dict[str, str]]) -> str:
    """Plain-text rendering of chat messages: one `role: content` block per message."""
    return "".join(f"{m.get('role', '')}: {m.get('content') or ''}\n" for m in messages)


@dataclass
class _Reply:
    """One request's outcome, computed in a worker thread and applied in the caller's."""

    generation: Generation
    text: str | None  # None: nothing to append (context overflow)


class OpenAIChatPolicy:
    """Policy backed by an OpenAI-compatible chat-completions server."""

    def __init__(
        self,
        model: str,
        base_url: str,
        api_key_env: str = "OPENAI_API_KEY",
        max_context_tokens: int = 32768,
        timeout: float = 60.0,
        max_retries: int = 2,
        concurrency: int = 8,
    ):
        if concurrency < 1:
            raise PolicyError(f"policy.concurrency must be at least 1, got {concurrency}")
        self.name = model
        self.model = model
        self.base_url = base_url
        self.api_key_env = api_key_env
        self.key_is_placeholder = not os.environ.get(api_key_env)
        self.max_context_tokens = max_context_tokens
        self.timeout = timeout
        self.concurrency = concurrency
        self.client = openai.OpenAI(
            base_url=base_url,
            timeout=timeout,
            max_retries=max_retries,
            api_key=os.environ.get(api_key_env) or PLACEHOLDER_KEY,
        )
        self._ask_logprobs = True
        self._lock = threading.Lock()

    # -- sessions ------------------------------------------------------------------------
    def start(self, messages: list[dict[str, str]]) -> ChatSession:
        return start_session(self, messages)

    def reset_context(self, session: ChatSession, messages: list[dict[str, str]]) -> None:
        text = render_messages(messages)
        session.messages = [dict(m) for m in messages]
        session.token_ids, session.pending_ids = [], []
        session.rendered_text = text
        session.pending_text = text
        session.context_resets += 1

    def extend(self, session: ChatSession, messages: list[dict[str, str]]) -> None:
        text = render_messages(messages)
        session.messages = session.messages + [dict(m) for m in messages]
        session.rendered_text += text
        session.pending_text += text

    # -- sampling ------------------------------------------------------------------------
    def generate(self, sessions: list[ChatSession], sampling: Sampling) -> list[Generation]:
        """One request per session, `concurrency` at a time; sessions change only if all succeed."""
        if not sessions:
            return []
        pool = ThreadPoolExecutor(max_workers=min(self.concurrency, len(sessions)), thread_name_prefix="openai-policy")
        try:
            futures = [pool.submit(self._request, list(s.messages), sampling) for s in sessions]
            replies = [f.result() for f in futures]
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
        for session, reply in zip(sessions, replies):
            if reply.text is not None:
                session.messages = session.messages + [{"role": "assistant", "content": reply.text}]
                session.rendered_text += render_messages(session.messages[-1:])
        return [r.generation for r in replies]

    def _request(self, messages: list[dict[str, str]], sampling: Sampling) -> _Reply:
        params: dict = {
            "model": self.model,
            "messages": messages,
            "temperature": sampling.temperature,
            "top_p": sampling.top_p,
            "max_tokens": sampling.max_new_tokens,
        }
        if sampling.seed is not None:
            params["seed"] = sampling.seed
        start = time.perf_counter()
        while True:
            ask_logprobs = self._ask_logprobs
            try:
                response = self.client.chat.completions.create(**params, **({"logprobs": True} if ask_logprobs else {}))
                break
            except openai.BadRequestError as err:
                message = server_message(err)
                if ask_logprobs and "logprob" in message.lower():
                    with self._lock:
                        self._ask_logprobs = False
                    continue
                if any(marker in message.lower() for marker in _CONTEXT_MARKERS):
                    return _Reply(
                        Generation(text="", finish_reason="context_overflow", seconds=time.perf_counter() - start), None
                    )
                raise self._policy_error(err) from err
            except openai.OpenAIError as err:
                raise self._policy_error(err) from err
        generation = self._to_generation(response, time.perf_counter() - start)
        return _Reply(generation, generation.text)

    def _to_generation(self, response, seconds: float) -> Generation:
        if not response.choices:
            raise PolicyError(
                f"{self.base_url} returned no choices for model {self.model}: "
                "check that the server implements /chat/completions"
            )
        choice = response.choices[0]
        text = (choice.message.content if choice.message else None) or ""
        reason = choice.finish_reason or "stop"
        tokens = getattr(choice.logprobs, "content", None) or []
        usage = response.usage
        return Generation(
            text=text,
            logprobs=[float(t.logprob) for t in tokens],
            finish_reason={"stop": "stop", "length": "length"}.get(reason, reason),
            prompt_tokens=int(usage.prompt_tokens or 0) if usage else 0,
            seconds=seconds,
        )

    # -- errors --------------------------------------------------------------------------
    def _policy_error(self, err: openai.OpenAIError) -> PolicyError:
        fixes = Fixes(
            timeout="raise policy.timeout",
            unreachable="start the server or set policy.base_url",
            not_found=f"set policy.model to a model the server lists at {self.base_url.rstrip('/')}/models "
            "and check that policy.base_url ends with /v1",
        )
        return PolicyError(
            explain(
                err,
                openai,
                base_url=self.base_url,
                model=self.model,
                timeout=self.timeout,
                key_env=self.api_key_env,
                placeholder=self.key_is_placeholder,
                fixes=fixes,
            )
        )
