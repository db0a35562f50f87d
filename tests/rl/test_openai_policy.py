"""OpenAIChatPolicy against a local chat-completions server.

The server below is a test fixture standing in for an external API that tests cannot reach
(vLLM's server, a hosted API). It speaks the real OpenAI chat-completions protocol over real
HTTP on 127.0.0.1: POST /v1/chat/completions with the documented request fields, answered with
the documented response shape (id, object "chat.completion", created, model, choices with
message, finish_reason and logprobs.content[token, logprob, bytes, top_logprobs], usage) and
OpenAI-shaped error bodies ({"error": {message, type, param, code}}). Its reply is a
deterministic function of the request, and it records every request it receives.

Path prefixes select a server behaviour: /v1 plain, /nologprobs/v1 answers 400 to `logprobs`,
/auth/v1 needs the bearer key "sekret", /slow/v1 waits before answering.
"""

from __future__ import annotations

import json
import re
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from rl.openai_policy import OpenAIChatPolicy, render_messages
from rl.policy import Generation, Policy, PolicyError, Sampling

pytestmark = pytest.mark.timeout(30)

MODEL = "test-model"
CONTEXT_WORDS = 200
ANSWER = 'Action: Answer\nFinal Answer: ["x"]'
SYSTEM = {"role": "system", "content": "You answer questions about a table."}


def reply_text(messages: list[dict]) -> str:
    last_user = next((m["content"] for m in reversed(messages) if m["role"] == "user"), "")
    if "answer" in last_user.lower():
        return ANSWER
    return f"seen {len(messages)} messages; last user: {last_user}"


def split_tokens(text: str) -> list[str]:
    """Word-level 'tokens' whose concatenation is the text."""
    return re.findall(r"\s*\S+", text)


def token_logprob(i: int) -> float:
    return -0.125 * (i + 1)


class FakeChatServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self):
        super().__init__(("127.0.0.1", 0), ChatHandler)
        self.requests: list[dict] = []
        self.lock = threading.Lock()
        self.in_flight = 0
        self.max_in_flight = 0
        self.slow_seconds = 0.3

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class ChatHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: FakeChatServer

    def log_message(self, *args) -> None:
        pass

    def _send(self, status: int, payload: dict) -> None:
        data = json.dumps(payload).encode()
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (timeout test)

    def _error(self, status: int, message: str, kind: str, param: str | None = None, code: str | None = None) -> None:
        self._send(status, {"error": {"message": message, "type": kind, "param": param, "code": code}})

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
        with self.server.lock:
            self.server.requests.append(
                {"path": self.path, "authorization": self.headers.get("Authorization"), "body": body}
            )
            self.server.in_flight += 1
            self.server.max_in_flight = max(self.server.max_in_flight, self.server.in_flight)
        try:
            self._answer(body)
        finally:
            with self.server.lock:
                self.server.in_flight -= 1

    def _answer(self, body: dict) -> None:
        prefix, _, endpoint = self.path.partition("/v1/")
        if endpoint != "chat/completions" or prefix not in ("", "/nologprobs", "/auth", "/slow"):
            return self._error(404, "Not Found", "not_found_error")
        if prefix == "/auth" and self.headers.get("Authorization") != "Bearer sekret":
            return self._error(401, "Incorrect API key provided.", "invalid_request_error", code="invalid_api_key")
        if body.get("model") != MODEL:
            return self._error(
                404,
                f"The model `{body.get('model')}` does not exist or you do not have access to it.",
                "invalid_request_error",
                code="model_not_found",
            )
        if prefix == "/nologprobs" and body.get("logprobs"):
            return self._error(
                400, "logprobs is not supported by this server", "invalid_request_error", param="logprobs"
            )
        if prefix == "/slow":
            time.sleep(self.server.slow_seconds)
        messages = body["messages"]
        prompt_tokens = sum(len(split_tokens(m["content"])) for m in messages)
        if prompt_tokens > CONTEXT_WORDS:
            return self._error(
                400,
                f"This model's maximum context length is {CONTEXT_WORDS} tokens. However, your "
                f"messages resulted in {prompt_tokens} tokens. Please reduce the length of the "
                "messages.",
                "invalid_request_error",
                param="messages",
                code="context_length_exceeded",
            )
        tokens = split_tokens(reply_text(messages))
        finish = "stop"
        if len(tokens) > body.get("max_tokens", 10**9):
            tokens, finish = tokens[: body["max_tokens"]], "length"
        logprobs = None
        if body.get("logprobs"):
            logprobs = {
                "content": [
                    {"token": t, "logprob": token_logprob(i), "bytes": list(t.encode()), "top_logprobs": []}
                    for i, t in enumerate(tokens)
                ],
                "refusal": None,
            }
        self._send(
            200,
            {
                "id": f"chatcmpl-{len(self.server.requests)}",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": MODEL,
                "system_fingerprint": None,
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": "".join(tokens), "refusal": None},
                        "finish_reason": finish,
                        "logprobs": logprobs,
                    }
                ],
                "usage": {
                    "prompt_tokens": prompt_tokens,
                    "completion_tokens": len(tokens),
                    "total_tokens": prompt_tokens + len(tokens),
                },
            },
        )


@pytest.fixture(scope="module")
def chat_server():
    server = FakeChatServer()
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


@pytest.fixture
def server(chat_server):
    with chat_server.lock:
        chat_server.requests.clear()
        chat_server.max_in_flight = 0
    return chat_server


def make_policy(server: FakeChatServer, prefix: str = "", **kwargs) -> OpenAIChatPolicy:
    kwargs.setdefault("max_retries", 0)
    kwargs.setdefault("timeout", 5.0)
    return OpenAIChatPolicy(MODEL, f"{server.url}{prefix}/v1", **kwargs)


def assert_one_line(err: pytest.ExceptionInfo) -> str:
    message = str(err.value)
    assert "\n" not in message and message.strip() == message and message
    return message


def test_single_turn_sends_messages_and_sampling(server):
    policy = make_policy(server)
    assert isinstance(policy, Policy) and policy.name == MODEL and policy.max_context_tokens == 32768
    prompt = [SYSTEM, {"role": "user", "content": "How many rows?"}]
    session = policy.start(prompt)
    assert session.take_pending() == ([], "system: You answer questions about a table.\nuser: How many rows?\n")

    [gen] = policy.generate([session], Sampling(temperature=0.7, top_p=0.9, max_new_tokens=64, seed=11))

    [request] = server.requests
    assert request["path"] == "/v1/chat/completions"
    body = request["body"]
    assert body["model"] == MODEL and body["messages"] == prompt
    assert (body["temperature"], body["top_p"], body["max_tokens"], body["seed"]) == (0.7, 0.9, 64, 11)
    assert body["logprobs"] is True
    expected = "seen 2 messages; last user: How many rows?"
    assert isinstance(gen, Generation) and gen.text == expected and gen.finish_reason == "stop"
    assert gen.token_ids == []
    assert gen.logprobs == pytest.approx([token_logprob(i) for i in range(len(split_tokens(expected)))])
    assert gen.prompt_tokens == 9 and gen.seconds > 0
    assert session.messages == prompt + [{"role": "assistant", "content": expected}]
    assert session.token_ids == [] and session.take_pending() == ([], "")


def test_multi_turn_sends_reply_and_new_message(server):
    policy = make_policy(server)
    session = policy.start([SYSTEM, {"role": "user", "content": "Count the rows."}])
    session.take_pending()
    [first] = policy.generate([session], Sampling(temperature=0.0, max_new_tokens=32))
    observation = {"role": "user", "content": "[(3,)] Now answer."}
    policy.extend(session, [observation])
    assert session.take_pending() == ([], "user: [(3,)] Now answer.\n")

    [second] = policy.generate([session], Sampling(temperature=0.0, max_new_tokens=32))

    first_body, second_body = (r["body"] for r in server.requests)
    assert "seed" not in first_body
    assert second_body["messages"] == [
        SYSTEM,
        {"role": "user", "content": "Count the rows."},
        {"role": "assistant", "content": first.text},
        observation,
    ]
    assert second.text == ANSWER and second.finish_reason == "stop"
    assert len(second.logprobs) == len(split_tokens(ANSWER))
    assert session.messages[-1] == {"role": "assistant", "content": ANSWER}
    assert session.rendered_text == render_messages(session.messages)


def test_reset_context_replaces_messages_and_pending(server):
    policy = make_policy(server)
    session = policy.start([SYSTEM, {"role": "user", "content": "old"}])
    policy.reset_context(session, [SYSTEM, {"role": "user", "content": "new window"}])
    assert session.context_resets == 1
    assert session.take_pending() == ([], render_messages([SYSTEM, {"role": "user", "content": "new window"}]))
    policy.generate([session], Sampling(max_new_tokens=16))
    assert server.requests[0]["body"]["messages"][-1] == {"role": "user", "content": "new window"}


def test_batch_is_concurrent_and_keeps_order(server):
    policy = make_policy(server, "/slow", concurrency=4)
    sessions = [policy.start([{"role": "user", "content": f"question {i}"}]) for i in range(4)]
    gens = policy.generate(sessions, Sampling(max_new_tokens=32))
    assert [g.text for g in gens] == [f"seen 1 messages; last user: question {i}" for i in range(4)]
    assert [s.messages[-1]["content"] for s in sessions] == [g.text for g in gens]
    assert server.max_in_flight > 1
    assert all(g.seconds >= server.slow_seconds for g in gens)


def test_tiny_max_tokens_finishes_with_length(server):
    policy = make_policy(server)
    session = policy.start([{"role": "user", "content": "describe the table"}])
    [gen] = policy.generate([session], Sampling(max_new_tokens=2))
    assert server.requests[0]["body"]["max_tokens"] == 2
    assert gen.finish_reason == "length" and gen.text == "seen 1"
    assert gen.logprobs == pytest.approx([token_logprob(0), token_logprob(1)])


def test_server_rejecting_logprobs_is_retried_without_them(server):
    policy = make_policy(server, "/nologprobs")
    session = policy.start([{"role": "user", "content": "hi"}])
    [gen] = policy.generate([session], Sampling(max_new_tokens=16))
    assert gen.text == "seen 1 messages; last user: hi" and gen.logprobs == []
    policy.extend(session, [{"role": "user", "content": "again"}])
    policy.generate([session], Sampling(max_new_tokens=16))
    asked = [r["body"].get("logprobs") for r in server.requests]
    assert asked == [True, None, None]  # rejected once, then never asked again


def test_context_overflow_is_a_generation_not_an_error(server):
    policy = make_policy(server)
    prompt = [{"role": "user", "content": "word " * (CONTEXT_WORDS + 1)}]
    session = policy.start(prompt)
    [gen] = policy.generate([session], Sampling(max_new_tokens=16))
    assert gen.finish_reason == "context_overflow" and gen.text == ""
    assert session.messages == prompt


def test_unreachable_server_raises_one_line_policy_error():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    base_url = f"http://127.0.0.1:{port}/v1"
    policy = OpenAIChatPolicy("some-model", base_url, max_retries=0, timeout=2.0)
    session = policy.start([{"role": "user", "content": "hi"}])
    with pytest.raises(PolicyError) as err:
        policy.generate([session], Sampling(max_new_tokens=8))
    message = assert_one_line(err)
    assert base_url in message and "some-model" in message and "policy.base_url" in message
    assert session.messages == [{"role": "user", "content": "hi"}]


def test_timeout_raises_one_line_policy_error(server):
    policy = make_policy(server, "/slow", timeout=0.1)
    with pytest.raises(PolicyError) as err:
        policy.generate([policy.start([{"role": "user", "content": "hi"}])], Sampling(max_new_tokens=8))
    message = assert_one_line(err)
    assert "timed out" in message and "policy.timeout" in message and MODEL in message


def test_401_names_the_key_variable(server, monkeypatch):
    monkeypatch.delenv("HS_TEST_API_KEY", raising=False)
    policy = make_policy(server, "/auth", api_key_env="HS_TEST_API_KEY")
    with pytest.raises(PolicyError) as err:
        policy.generate([policy.start([{"role": "user", "content": "hi"}])], Sampling(max_new_tokens=8))
    message = assert_one_line(err)
    assert "401" in message and "$HS_TEST_API_KEY" in message and f"{server.url}/auth/v1" in message
    assert server.requests[-1]["authorization"] == "Bearer EMPTY"

    monkeypatch.setenv("HS_TEST_API_KEY", "sekret")
    policy = make_policy(server, "/auth", api_key_env="HS_TEST_API_KEY")
    [gen] = policy.generate([policy.start([{"role": "user", "content": "hi"}])], Sampling(max_new_tokens=8))
    assert gen.finish_reason in ("stop", "length")
    assert server.requests[-1]["authorization"] == "Bearer sekret"


def test_unknown_model_raises_one_line_policy_error(server):
    policy = OpenAIChatPolicy("no-such-model", f"{server.url}/v1", max_retries=0)
    with pytest.raises(PolicyError) as err:
        policy.generate([policy.start([{"role": "user", "content": "hi"}])], Sampling(max_new_tokens=8))
    message = assert_one_line(err)
    assert "404" in message and "no-such-model" in message and "/models" in message
