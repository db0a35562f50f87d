"""LLM editor and diagnoser against local stand-ins for the external chat APIs.

The real editor talks to a hosted or vLLM chat server that these tests cannot reach, so a
stdlib `http.server` on 127.0.0.1 stands in for it. It speaks the real protocols through the
official clients: OpenAI chat completions (POST /v1/chat/completions) and the Anthropic
Messages API (POST /v1/messages), with their response bodies and usage fields. It answers from
a scripted list of reply texts and records every request body, so the tests check both what
the clients send and what the editor makes of the replies.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from harness_pool.diagnosis import Cluster
from harness_pool.editor_llm import LlmDiagnoser, LlmEditor
from harness_pool.llm import AnthropicChat, LlmError, OpenAIChat, make_chat
from harness_pool.spec import load_harness

PATCH = {
    "name": "whatever-the-model-says",
    "description": "refuse answers before any query and remind the agent after two failed queries",
    "root_causes": ["answered_without_query", "round_limit"],
    "edits": [
        {
            "op": "add_guard_rule",
            "when": {"action_kind": "answer", "queries_at_most": 0},
            "message": "Run a query on `{table_name}` before answering.",
        },
        {"op": "append_prompt", "field": "system", "text": "Count like this:\n```sql\nSELECT COUNT(*) FROM `t`;\n```"},
        {
            "op": "add_code_hook",
            "hook": {
                "at": "after_step",
                "name": "failures",
                "source": "def hook(ctx, nb):\n"
                "    if ctx['last_error']:\n"
                "        nb['n'] = nb.get('n', 0) + 1\n"
                "    if nb.get('n', 0) == 2:\n"
                "        return {'inject': 'Two queries failed: check the column names.'}\n"
                "    return None",
            },
        },
    ],
}
BAD_PATCH = {
    **PATCH,
    "edits": [
        {
            "op": "add_code_hook",
            "hook": {"at": "after_step", "name": "peek", "source": "import os\ndef hook(ctx, nb):\n    return None"},
        }
    ],
}
CLUSTERS = [
    Cluster("answered_without_query", ["t1", "t2", "t3"], ["a", "b", "c"]),
    Cluster("round_limit", ["t4", "t5"], ["d", "e"]),
]
FAILURES = [
    'user: How many rows?\nassistant: Action: Answer\nFinal Answer: ["3"]',
    "x" * 5000,
    "third",
    "fourth",
    "fifth, one too many",
]


def fenced(data: dict) -> str:
    return "Here is the patch.\n```json\n" + json.dumps(data) + "\n```\n"


class _Handler(BaseHTTPRequestHandler):
    def do_POST(self):  # noqa: N802 - http.server's naming
        server = self.server
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        server.requests.append({"path": self.path, "body": body})
        if self.path != server.path:
            return self._send(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})
        text = server.replies.pop(0)
        return self._send(200, server.render(body, text, len(server.requests)))

    def _send(self, status: int, payload: dict) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):  # keep test output quiet
        pass


def openai_body(request: dict, text: str, n: int) -> dict:
    return {
        "id": f"chatcmpl-{n}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": request["model"],
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 100 * n, "completion_tokens": 10 * n, "total_tokens": 110 * n},
    }


def anthropic_body(request: dict, text: str, n: int) -> dict:
    return {
        "id": f"msg_{n}",
        "type": "message",
        "role": "assistant",
        "model": request["model"],
        "content": [{"type": "text", "text": text}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 7, "output_tokens": 3},
    }


def _serve(path: str, render, replies: list[str]):
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    server.path, server.render, server.replies, server.requests = path, render, list(replies), []
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    return server


@pytest.fixture
def openai_server():
    servers = []

    def start(*replies: str):
        servers.append(_serve("/v1/chat/completions", openai_body, list(replies)))
        server = servers[-1]
        url = f"http://127.0.0.1:{server.server_address[1]}/v1"
        return server, OpenAIChat("editor-model", url, api_key_env="HS_TEST_NO_SUCH_KEY", max_retries=0)

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


def test_the_editor_sends_causes_spec_and_schema_and_applies_the_patch(openai_server):
    server, chat = openai_server(fenced(PATCH))
    parent = load_harness("h0")
    patch, child, info = LlmEditor(chat).propose(parent, CLUSTERS, FAILURES, round=3, name="r3-c1")
    body = server.requests[0]["body"]
    assert body["temperature"] == 0.6 and body["model"] == "editor-model"
    prompt = "\n".join(m["content"] for m in body["messages"])
    assert "answered_without_query (3 tasks): answered without running any query" in prompt
    assert "round_limit (2 tasks)" in prompt
    assert "You work with one table in a SQL database" in prompt and "on_invalid: end" in prompt  # parent YAML
    assert '"add_guard_rule"' in prompt and '"discriminator"' in prompt  # the patch schema
    assert "x" * 1500 in prompt and "x" * 1501 not in prompt  # excerpts are cut ...
    assert "fourth" in prompt and "one too many" not in prompt  # ... and at most four are shown
    assert info == {"attempts": 1, "errors": [], "raw": [fenced(PATCH)]}
    assert patch.name == child.name == "r3-c1"
    assert child.parent_ids == [parent.id] and child.provenance.round == 3
    assert child.provenance.root_causes == ["answered_without_query", "round_limit"]
    assert child.hooks[0].effect == "block" and child.code_hooks[0].name == "failures"
    assert child.prompts.system.endswith("```sql\nSELECT COUNT(*) FROM `t`;\n```")  # a fence inside the JSON


def test_an_invalid_reply_gets_exactly_one_repair_request_with_the_error(openai_server):
    server, chat = openai_server(fenced(BAD_PATCH), json.dumps(PATCH))  # second reply: bare JSON, no fence
    patch, child, info = LlmEditor(chat).propose(load_harness("h0"), CLUSTERS, FAILURES, round=1, name="r1-c2")
    assert info["attempts"] == 2 and len(server.requests) == 2
    assert len(info["errors"]) == 1 and "'Import' is not allowed in hook code" in info["errors"][0]
    repair = server.requests[1]["body"]["messages"]
    assert [m["role"] for m in repair] == ["system", "user", "assistant", "user"]
    assert repair[2]["content"] == fenced(BAD_PATCH)
    assert "'Import' is not allowed in hook code" in repair[3]["content"]
    assert child is not None and child.name == "r1-c2" and patch.edits[0].op == "add_guard_rule"


def test_two_invalid_replies_give_no_child(openai_server):
    no_op = {**PATCH, "edits": [{"op": "set_memory", "query_log": 0}]}  # valid JSON, changes nothing
    server, chat = openai_server("I would add a guard rule.", fenced(no_op))
    patch, child, info = LlmEditor(chat).propose(load_harness("h0"), CLUSTERS, [], round=1, name="r1-c3")
    assert (patch, child) == (None, None) and info["attempts"] == 2 and len(server.requests) == 2
    assert "no JSON object" in info["errors"][0] and "changes nothing" in info["errors"][1]
    assert info["raw"] == ["I would add a guard rule.", fenced(no_op)]


def test_token_usage_is_summed_over_calls(openai_server):
    server, chat = openai_server("one", "two", "three")
    assert [chat.complete("sys", "q") for _ in range(3)] == ["one", "two", "three"]
    assert chat.usage == {"prompt_tokens": 600, "completion_tokens": 60, "requests": 3}


def test_the_diagnoser_accepts_known_and_new_labels_and_falls_back_on_garbage(openai_server):
    server, chat = openai_server(
        "unknown_column", "`misread_the_question`\n", "The agent probably misunderstood the request!", "Bad-Label"
    )
    diagnoser = LlmDiagnoser(chat)
    trajectory = "user: Which city?\nassistant: Action: Operation ..."
    assert diagnoser.cause(trajectory, "sql_syntax") == "unknown_column"
    assert diagnoser.cause(trajectory, "sql_syntax") == "misread_the_question"
    assert diagnoser.cause(trajectory, "sql_syntax") == "sql_syntax"
    assert diagnoser.cause(trajectory, "wrong_value") == "wrong_value"
    user = server.requests[0]["body"]["messages"][1]["content"]
    assert "unquoted_name: a table or column name" in user and "guessed: sql_syntax" in user and trajectory in user


def test_an_unreachable_server_is_an_error_naming_the_base_url():
    with socket.socket() as sock:  # a port that was free a moment ago and now has no listener
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    url = f"http://127.0.0.1:{port}/v1"
    chat = OpenAIChat("m", url, api_key_env="HS_TEST_NO_SUCH_KEY", timeout=5, max_retries=0)
    with pytest.raises(LlmError, match=f"cannot reach {url}"):
        chat.complete("sys", "hello")


def test_a_missing_key_for_the_providers_own_url_names_the_variable(monkeypatch):
    monkeypatch.delenv("HS_TEST_NO_SUCH_KEY", raising=False)
    with pytest.raises(LlmError, match=r"\$HS_TEST_NO_SUCH_KEY is not set"):
        make_chat("openai", "m", None, "HS_TEST_NO_SUCH_KEY", 0.6, 100)
    with pytest.raises(LlmError, match="unknown chat kind"):
        make_chat("gemini", "m", "http://127.0.0.1:1/v1", None, 0.6, 100)


def test_anthropic_chat_sends_the_system_prompt_and_returns_the_text(caplog):
    """The Messages API version the SDK speaks rejects temperature (HTTP 400): it must not be sent."""
    server = _serve("/v1/messages", anthropic_body, ["a patch, perhaps", "second"])
    try:
        chat = AnthropicChat(
            "claude-test",
            f"http://127.0.0.1:{server.server_address[1]}",
            api_key_env="HS_TEST_NO_SUCH_KEY",
            temperature=0.6,
            max_tokens=300,
            max_retries=0,
        )
        assert "temperature 0.6 is not sent" in caplog.text
        assert chat.complete("You edit harnesses.", "Fix h0.") == "a patch, perhaps"
        assert (
            chat.chat(
                [
                    {"role": "system", "content": "S"},
                    {"role": "user", "content": "u1"},
                    {"role": "assistant", "content": "a1"},
                    {"role": "user", "content": "u2"},
                ]
            )
            == "second"
        )
    finally:
        server.shutdown()
        server.server_close()
    first, second = (r["body"] for r in server.requests)
    assert server.requests[0]["path"] == "/v1/messages"
    assert first["system"] == "You edit harnesses." and "temperature" not in first
    assert first["model"] == "claude-test" and first["max_tokens"] == 300
    assert first["messages"] == [{"role": "user", "content": "Fix h0."}]
    assert second["system"] == "S" and [m["role"] for m in second["messages"]] == ["user", "assistant", "user"]
    assert chat.usage == {"prompt_tokens": 14, "completion_tokens": 6, "requests": 2}


def test_the_evolution_task_uses_the_configured_llm_editor_and_records_rejections(openai_server, tmp_path):
    from sqlalchemy import select

    from configs.schema import EvolveConfig
    from db import store
    from db.engine import make_engine, session_scope
    from db.models import EvolutionCandidate
    from tasks.evolution_candidates import propose_children, record_rejected
    from tasks.resources import get_engine

    server, _ = openai_server(fenced(PATCH), fenced(BAD_PATCH), fenced(BAD_PATCH))
    url = f"sqlite:///{tmp_path / 'hs.db'}"
    cfg = EvolveConfig.model_validate(
        {
            "children_per_parent": 2,
            "diagnose": {"min_support": 2},
            "editor": {
                "kind": "openai",
                "model": "editor-model",
                "api_key_env": "HS_TEST_NO_SUCH_KEY",
                "base_url": f"http://127.0.0.1:{server.server_address[1]}/v1",
            },
        }
    )
    with session_scope(get_engine(url)) as s:  # migrated on first use
        store.upsert_run(s, id="evo-run", kind="evolve", name="evo", status="running", config={})
    diagnosis = {
        "tasks": {
            "t1": {"successes": [False], "causes": ["answered_without_query"], "trajectory_ids": ["a"]},
            "t2": {"successes": [False], "causes": ["answered_without_query"], "trajectory_ids": ["b"]},
            "t3": {"successes": [False], "causes": ["round_limit"], "trajectory_ids": ["c"]},
            "t4": {"successes": [False], "causes": ["round_limit"], "trajectory_ids": ["d"]},
            "t5": {"successes": [True], "causes": [None], "trajectory_ids": ["e"]},
        }
    }
    h0 = load_harness("h0")
    out = propose_children.fn(cfg, "evo-run", 1, h0.model_dump(mode="json"), diagnosis, [h0.id], url)
    good, bad = out
    assert good["spec"]["parent_ids"] == [h0.id] and good["spec"]["name"] == good["name"]
    assert good["root_causes"] == ["answered_without_query", "round_limit"]
    assert good["targeted"] == ["t1", "t2", "t3", "t4"] and good["controls"] == ["t5"]
    assert good["editor"]["usage_total"]["prompt_tokens"] > 0 and good["editor"]["attempts"] == 1
    assert bad["spec"] is None and "Import" in bad["error"] and len(server.requests) == 3
    used = {k: good["editor"]["usage"][k] + bad["editor"]["usage"][k] for k in good["editor"]["usage"]}
    assert (good["editor"]["usage"]["requests"], bad["editor"]["usage"]["requests"]) == (1, 2)  # each edit's own
    assert used == bad["editor"]["usage_total"]
    record_rejected(cfg, "evo-run", 1, out, url)  # what the flow does with every result, fresh or cached
    with session_scope(make_engine(url)) as s:
        rows = s.scalars(select(EvolutionCandidate)).all()
        assert [(r.name, r.status, r.editor) for r in rows] == [(bad["name"], "rejected", "openai")]
        bad_tokens = bad["editor"]["usage"]["prompt_tokens"] + bad["editor"]["usage"]["completion_tokens"]
        assert store.editor_tokens(s, ["evo-run"]) == bad_tokens > 0  # the resource table's editor tokens


def diagnosing_editor(server) -> dict:
    """An OpenAI-protocol editor on the test server that also diagnoses, at most one call."""
    return {
        "kind": "openai",
        "model": "editor-model",
        "api_key_env": "HS_TEST_NO_SUCH_KEY",
        "base_url": f"http://127.0.0.1:{server.server_address[1]}/v1",
        "llm_diagnosis": True,
        "max_diagnosis_calls": 1,
    }


def test_llm_diagnoses_are_recorded_on_their_trajectories_and_counted_as_editor_tokens(openai_server, tmp_path):
    """Evolution's LLM diagnosis (`run_harness` with editor.llm_diagnosis): each diagnosed failure
    keeps the LLM's cause, the rule's guess and that call's token use in its trajectory's details,
    and the resource table's editor tokens add them to the proposals' (none of which exist here)."""
    from configs.schema import EnvConfig, EvolveConfig
    from db import store
    from db.engine import session_scope
    from db.models import Trajectory
    from envs.base import Verdict
    from rl.rollout import RolloutResult, TurnRecord
    from tasks.llm_editing import llm_causes
    from tasks.records import GroupRecord, build_group, record_bench_tasks, record_harnesses, trajectory_id
    from tasks.resources import bench_tasks, get_engine

    server, _ = openai_server("unknown_column", "misread_the_question")
    cfg = EvolveConfig.model_validate({"editor": diagnosing_editor(server)})
    task, h0 = bench_tasks(EnvConfig(), "dev", limit=1)[0], load_harness("h0")
    turn = TurnRecord(0, "Q?", [1], "Action: Answer\nFinal Answer: []", [2, 3], [-0.1, -0.2], "stop")
    results = [
        RolloutResult(task.id, h0.id, i, [turn], Verdict(0.0, False), "answered", "wrong_answer", [], [], 1.0, 0.5, 0.1)
        for i in range(3)
    ]
    causes, notes = llm_causes(cfg, results, ["wrong_value", None, "sql_syntax"])
    assert causes == ["unknown_column", None, "sql_syntax"]  # one call allowed: the third keeps the rule's
    assert len(server.requests) == 1 and [bool(n) for n in notes] == [True, False, False]
    assert notes[0]["diagnosis"] == {
        "cause": "unknown_column",
        "rule_cause": "wrong_value",
        "usage": {"prompt_tokens": 100, "completion_tokens": 10, "requests": 1},  # the test server's counts
    }
    url = f"sqlite:///{tmp_path / 'hs.db'}"
    with session_scope(get_engine(url)) as s:  # migrated on first use
        store.upsert_run(s, id="evo-run", kind="evolve", name="evo", status="running", config={})
        record_harnesses(s, [h0])
        record_bench_tasks(s, [task])
        ids = ("evo-run", 1, task.id)
        group = dict(run_id="evo-run", step=1, bench_task_id=task.id, harness_id=h0.id, seed=0, checkpoint="m")
        for role in ("diagnose", "validate"):
            record = GroupRecord(**group, role=role, results=results, extra_details=notes)
            store.replace_group(s, build_group(record))
    with session_scope(get_engine(url)) as s:
        first = s.get(Trajectory, trajectory_id(*ids, results[0], 0, "diagnose"))
        assert first.details["diagnosis"]["cause"] == "unknown_column"
        assert s.get(Trajectory, trajectory_id(*ids, results[1], 0, "diagnose")).details == {}
        assert store.editor_tokens(s, ["evo-run"]) == 110  # the diagnose group's call only, not the copy under validate
        assert store.editor_tokens(s, ["another-run"]) == 0


def test_measured_usage_is_each_threads_own_when_threads_share_a_client(openai_server):
    server, chat = openai_server(*[f"reply {i}" for i in range(8)])
    out = []

    def ask() -> None:
        out.append(chat.measured(lambda: [chat.complete("s", "q") for _ in range(2)])[1])

    threads = [threading.Thread(target=ask) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert [u["requests"] for u in out] == [2, 2, 2, 2]
    assert sum(u["prompt_tokens"] for u in out) == chat.usage["prompt_tokens"] == 100 * sum(range(1, 9))


def test_the_diagnosis_cap_holds_for_a_whole_harness_run_not_per_task(openai_server, tmp_path, monkeypatch):
    """`run_harness` over 2 tasks x k = 2 failed rollouts with max_diagnosis_calls = 1 asks the LLM
    once in all (the cap was applied per task group, so it made one call per task). The policy's
    rollouts are replaced by canned failures: this checks the wiring, not the model."""
    from configs.schema import EvolveConfig
    from db import store
    from db.engine import session_scope
    from db.models import Trajectory
    from envs.base import Verdict
    from rl.rollout import RolloutResult, TurnRecord
    from tasks import evolution
    from tasks.records import record_bench_tasks
    from tasks.resources import bench_tasks, get_engine

    server, _ = openai_server("unknown_column", "unknown_column")
    # the policy is never loaded: the rollouts are canned
    cfg = EvolveConfig.model_validate({"policy": {"model": "no-such-model"}, "editor": diagnosing_editor(server)})
    the_tasks, h0 = bench_tasks(cfg.env, "dev", limit=2), load_harness("h0")
    turn = TurnRecord(0, "Q?", [1], "Action: Answer\nFinal Answer: []", [2, 3], [-0.1, -0.2], "stop")

    def canned(policy, specs, *args, **kwargs):
        return [
            RolloutResult(
                s.bench_task.id,
                h0.id,
                s.sample_index,
                [turn],
                Verdict(0.0, False),
                "answered",
                "wrong_answer",
                [],
                [],
                1.0,
                0.5,
                0.1,
            )  # fmt: skip
            for s in specs
        ]

    monkeypatch.setattr(evolution, "run_rollouts", canned)
    monkeypatch.setattr(evolution, "get_policy", lambda cfg: None)
    url = f"sqlite:///{tmp_path / 'hs.db'}"
    with session_scope(get_engine(url)) as s:
        store.upsert_run(s, id="evo-run", kind="evolve", name="evo", status="running", config={})
        record_bench_tasks(s, the_tasks)
    out = evolution.run_harness.fn(
        cfg, "evo-run", h0.model_dump(mode="json"), [t.id for t in the_tasks], "diagnose", 1, 2, url
    )
    assert len(server.requests) == 1
    causes = [c for t in the_tasks for c in out["tasks"][t.id]["causes"]]
    assert causes.count("unknown_column") == 1 and None not in causes  # the rest keep the rule's cause
    with session_scope(get_engine(url)) as s:
        diagnosed = [t.details.get("diagnosis") for t in s.query(Trajectory).all()]
        assert len(diagnosed) == 4 and sum(d is not None for d in diagnosed) == 1
