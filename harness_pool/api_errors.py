"""One-line explanations of chat-API client errors (the `openai` and `anthropic` SDKs share
their exception names), for the policy backend and for the LLM editors, diagnosers and voters."""

from __future__ import annotations

from dataclasses import dataclass


def one_line(text: object, limit: int = 300) -> str:
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


def server_message(err) -> str:
    """The server's own error text from an APIStatusError (its JSON body when it has one)."""
    body = getattr(err, "body", None)
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and inner.get("message"):
            return one_line(inner["message"])
        if isinstance(body.get("message"), str):
            return one_line(body["message"])
    return one_line(getattr(err, "message", err))


@dataclass(frozen=True)
class Fixes:
    """What the caller's user changes for each kind of failure, in that caller's own terms."""

    timeout: str = "raise the timeout"
    unreachable: str = "start the server or fix the base URL"
    not_found: str = "check the model name and that the base URL points at the API root"


def explain(
    err: Exception,
    sdk,
    *,
    base_url: str,
    model: str,
    timeout: float,
    key_env: str,
    placeholder: bool,
    fixes: Fixes = Fixes(),
) -> str:
    """The message for an exception of `sdk` (the openai or anthropic module): what failed, where, how to fix it."""
    where = f"{base_url} for model {model}"
    if isinstance(err, sdk.APITimeoutError):
        return (
            f"timed out after {timeout:g}s waiting for {where}: check the server is up and not overloaded, "
            f"or {fixes.timeout}"
        )
    if isinstance(err, sdk.APIConnectionError):
        return f"cannot reach {where}: {fixes.unreachable}"
    if isinstance(err, (sdk.AuthenticationError, sdk.PermissionDeniedError)):
        state = "unset, so the placeholder key was sent" if placeholder else "set but rejected"
        return f"{err.status_code} from {where} (${key_env} is {state}): set a valid key in ${key_env}"
    if isinstance(err, sdk.NotFoundError):
        return f"404 from {where} ({server_message(err)}): {fixes.not_found}"
    if isinstance(err, sdk.APIStatusError):
        return f"HTTP {err.status_code} from {where}: {server_message(err)}"
    return f"request to {where} failed: {one_line(err)}"
