"""Chat clients for the LLM editor and diagnoser: one text reply per request, token use counted.

Two backends through the official clients: `OpenAIChat` (any chat-completions server: a hosted
API, or `vllm serve` locally) and `AnthropicChat` (the Messages API). Both expose
`chat(messages)` for a multi-turn conversation (system / user / assistant messages, as in the
chat-completions format) and `complete(system, user)` for a single question.

`usage` sums the prompt and completion tokens the servers report over all calls, so a
researcher can see what an evolution run spent on its editor.

API key: read from the environment variable `api_key_env`. When it is unset and a custom
`base_url` is given (a local server), the placeholder "EMPTY" is sent; with the provider's own
URL a missing key is an LlmError naming the variable. Errors that make the client unusable
(unreachable server, timeout, 401/403, 404, other HTTP errors) become an LlmError with one line
naming the base URL, the model and the fix. This module only talks HTTP: no orchestration or
storage imports.
"""

from __future__ import annotations

import logging
import os
import threading

from harness_pool.api_errors import explain

log = logging.getLogger(__name__)

PLACEHOLDER_KEY = "EMPTY"
OPENAI_DEFAULT_URL = "https://api.openai.com/v1"
ANTHROPIC_DEFAULT_URL = "https://api.anthropic.com"


class LlmError(RuntimeError):
    """A chat request that cannot succeed as configured; the one-line message says how to fix it."""


def _api_key(api_key_env: str, custom_url: bool, what: str) -> tuple[str, bool]:
    """(key, is_placeholder): the placeholder only for a custom (local) server."""
    key = os.environ.get(api_key_env)
    if key:
        return key, False
    if custom_url:
        return PLACEHOLDER_KEY, True
    raise LlmError(
        f"${api_key_env} is not set: export your {what} API key in it, "
        "or set a base_url for a local server that needs no key"
    )


def _no_usage() -> dict[str, int]:
    return {"prompt_tokens": 0, "completion_tokens": 0, "requests": 0}


class ChatClient:
    """A chat model: `chat(messages) -> reply text`; `usage` sums the tokens of all calls."""

    model: str
    base_url: str
    timeout: float
    usage: dict[str, int]

    def __init__(self) -> None:
        self.usage = _no_usage()
        self._lock = threading.Lock()
        self._local = threading.local()  # this thread's tokens inside `measured`

    def measured(self, fn, *args):
        """(fn(*args), the tokens this thread's calls spent in it): exact per edit or diagnosis
        even when other threads share the client."""
        self._local.usage = _no_usage()
        try:
            return fn(*args), self._local.usage
        finally:
            del self._local.usage

    def chat(self, messages: list[dict[str, str]]) -> str:
        raise NotImplementedError

    def complete(self, system: str, user: str) -> str:
        return self.chat([{"role": "system", "content": system}, {"role": "user", "content": user}])

    def _count(self, prompt_tokens: int | None, completion_tokens: int | None) -> None:
        with self._lock:
            for usage in (self.usage, getattr(self._local, "usage", None)):
                if usage is not None:
                    usage["prompt_tokens"] += int(prompt_tokens or 0)
                    usage["completion_tokens"] += int(completion_tokens or 0)
                    usage["requests"] += 1

    def _error(self, err: Exception, key_env: str, placeholder: bool, sdk) -> LlmError:
        """One-line LlmError for an exception of the `openai` or `anthropic` package (`sdk`)."""
        return LlmError(
            explain(
                err,
                sdk,
                base_url=self.base_url,
                model=self.model,
                timeout=self.timeout,
                key_env=key_env,
                placeholder=placeholder,
            )
        )


class OpenAIChat(ChatClient):
    """A chat-completions server through `openai.OpenAI` (base_url ends with /v1)."""

    def __init__(
        self,
        model: str,
        base_url: str | None,
        api_key_env: str = "OPENAI_API_KEY",
        temperature: float = 0.6,
        max_tokens: int = 1500,
        timeout: float = 60,
        max_retries: int = 2,
    ):
        super().__init__()
        self.model, self.base_url = model, base_url or OPENAI_DEFAULT_URL
        self.temperature, self.max_tokens, self.timeout = temperature, max_tokens, timeout
        self.api_key_env = api_key_env
        key, self.key_is_placeholder = _api_key(api_key_env, base_url is not None, "OpenAI")
        import openai  # here, not at module level: the SDK takes a second to import and most runs never call it

        self.client = openai.OpenAI(base_url=self.base_url, api_key=key, timeout=timeout, max_retries=max_retries)

    def chat(self, messages: list[dict[str, str]]) -> str:
        import openai

        try:
            response = self.client.chat.completions.create(
                model=self.model, messages=messages, temperature=self.temperature, max_tokens=self.max_tokens
            )
        except openai.OpenAIError as err:
            raise self._error(err, self.api_key_env, self.key_is_placeholder, openai) from err
        if response.usage is not None:
            self._count(response.usage.prompt_tokens, response.usage.completion_tokens)
        if not response.choices:
            raise LlmError(
                f"{self.base_url} returned no choices for model {self.model}: "
                "check that the server implements /chat/completions"
            )
        message = response.choices[0].message
        return (message.content if message else None) or ""


class AnthropicChat(ChatClient):
    """The Anthropic Messages API through `anthropic.Anthropic` (base_url without /v1).

    No sampling parameters are sent: the installed SDK (2.x) speaks API version 2026-10-21,
    which rejects temperature/top_p/top_k with HTTP 400 and has dropped them from
    `messages.create`. `temperature` is kept for the shared interface; a value other than None
    logs a warning that it is not applied, so runs do not silently claim a temperature.
    """

    def __init__(
        self,
        model: str,
        base_url: str | None = None,
        api_key_env: str = "ANTHROPIC_API_KEY",
        temperature: float | None = None,
        max_tokens: int = 1500,
        timeout: float = 60,
        max_retries: int = 2,
    ):
        super().__init__()
        self.model, self.base_url = model, base_url or ANTHROPIC_DEFAULT_URL
        self.temperature, self.max_tokens, self.timeout = temperature, max_tokens, timeout
        if temperature is not None:
            log.warning(
                "temperature %g is not sent to %s: the Anthropic Messages API rejects sampling "
                "parameters; the model's own sampling applies",
                temperature,
                self.base_url,
            )
        self.api_key_env = api_key_env
        key, self.key_is_placeholder = _api_key(api_key_env, base_url is not None, "Anthropic")
        import anthropic  # here, not at module level, as for openai above

        self.client = anthropic.Anthropic(base_url=self.base_url, api_key=key, timeout=timeout, max_retries=max_retries)

    def chat(self, messages: list[dict[str, str]]) -> str:
        """System messages go to the `system` parameter; the rest keep their order."""
        import anthropic

        system = "\n\n".join(m["content"] for m in messages if m["role"] == "system")
        turns = [{"role": m["role"], "content": m["content"]} for m in messages if m["role"] != "system"]
        extra = {"system": system} if system else {}
        try:
            response = self.client.messages.create(
                model=self.model, messages=turns, max_tokens=self.max_tokens, **extra
            )
        except anthropic.AnthropicError as err:
            raise self._error(err, self.api_key_env, self.key_is_placeholder, anthropic) from err
        if response.usage is not None:
            self._count(response.usage.input_tokens, response.usage.output_tokens)
        return "".join(block.text for block in response.content if block.type == "text")


def make_chat(
    kind: str, model: str, base_url: str | None, api_key_env: str | None, temperature: float, max_tokens: int
) -> ChatClient:
    """A chat client of `kind` 'openai' or 'anthropic' (api_key_env None: the provider's usual variable)."""
    classes = {"openai": OpenAIChat, "anthropic": AnthropicChat}
    if kind not in classes:
        raise LlmError(f"unknown chat kind '{kind}': use one of {sorted(classes)}")
    cls = classes[kind]
    env = api_key_env or {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY"}[kind]
    return cls(model, base_url, api_key_env=env, temperature=temperature, max_tokens=max_tokens)
