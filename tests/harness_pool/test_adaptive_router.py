"""Rank-weight voting, the voters, the adaptive router's failure handling, and Rank-1 inference.

The LLM voter talks to a stdlib HTTP server on 127.0.0.1 that speaks the OpenAI chat-completions
protocol (POST /v1/chat/completions, a chat.completion body with usage), through the official
client, and records each request so the test sees what the voter sent.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from envs.dbbench.data import BenchTask
from harness_pool.adaptive_router import (
    RANK_WEIGHTS,
    AdaptiveRouter,
    EmbeddingVoter,
    LlmVoter,
    RulesVoter,
    StatisticsVoter,
    combine,
    rank1,
    rule_causes,
)
from harness_pool.llm import OpenAIChat
from harness_pool.profiles import BehaviourProfile, Evidence, ProfileEntry, TaskCondition
from harness_pool.router import RandomRouter
from harness_pool.seed_pool import SEED_POOL
from harness_pool.spec import load_harness

H0 = load_harness("h0")
POOL = [load_harness(n) for n in SEED_POOL]
BY_NAME = {h.name: h for h in POOL}
A, B, C = BY_NAME["schema_rows"], BY_NAME["inspect_first"], BY_NAME["format_reminder"]


def task(task_type: str, description: str, idx: int = 0) -> BenchTask:
    return BenchTask(
        id=f"dbbench/dev/{idx:04d}",
        split="dev",
        index=idx,
        task_type=task_type,
        description=description,
        add_description="The name of this table is Products.",
        label=[],
        answer_md5=None,
        table_name="Products",
        columns=["name", "price"],
        rows=[],
        gold_sql=None,
    )


UPDATE_TASK = task("UPDATE", "Update the price of the product named Widget to 20.", 1)
COUNT_TASK = task("counting", "How many products cost more than 10?", 2)


def entry(types: list[str], behaviour: str, delta: float) -> ProfileEntry:
    return ProfileEntry(
        when=TaskCondition(task_types=types),
        behaviour=behaviour,
        evidence=Evidence(bench_task_ids=["dbbench/dev/0009"], delta=delta, n=1),
    )


def profile(h, success: float, prefer=(), avoid=(), h0_success: float = 0.5) -> BehaviourProfile:
    return BehaviourProfile(
        harness_id=h.id,
        harness_name=h.name,
        success_rate=success,
        h0_success_rate=h0_success,
        prefer=list(prefer),
        avoid=list(avoid),
        inducer="offline",
    )


def profiles() -> dict[str, BehaviourProfile]:
    """A is good at UPDATE (and bad at counting), B at counting, C has no entries but the best rate."""
    return {
        A.id: profile(
            A, 0.4, [entry(["UPDATE"], "changes rows in the table", 1.0)], [entry(["counting"], "miscounts", -1.0)]
        ),
        B.id: profile(B, 0.3, [entry(["counting"], "counts how many rows match", 0.5)]),
        C.id: profile(C, 0.6),
    }


# ------------------------------------------------------------------------------------- combine


def test_rank_weights_sum_over_voters_and_ties_go_by_validation_success():
    votes = {"A": ["x", "y", "z"], "B": ["y", "x", "w"]}  # x 1.75, y 1.75, z 0.5, w 0.5
    success = {"x": 0.5, "y": 0.6, "z": 0.1, "w": 0.2, "v": 0.9}
    assert combine(votes, success) == ["y", "x", "w", "z", "v"]  # v, in no vote, last despite its rate
    assert combine(votes, {**success, "x": 0.7}) == ["x", "y", "w", "z", "v"]
    assert combine(votes, success, k=2) == ["y", "x"]
    assert RANK_WEIGHTS == (1.0, 0.75, 0.5, 0.25)


def test_ranks_beyond_four_weigh_nothing_and_equal_ties_go_by_id():
    success = {"a": 0.0, "b": 0.0, "c": 0.0, "d": 0.0, "e": 0.1, "f": 0.9}
    # e is 5th: weight 0, so f (also 0) wins on success; with any weight e would come first
    assert combine({"v": ["a", "b", "c", "d", "e"]}, success) == ["a", "b", "c", "d", "f", "e"]
    # a repeated id counts at its first rank only: y 1 + 0.75 ties x 0.75 + 1, and x wins by id
    assert combine({"v": ["y", "x", "y"], "w": ["x", "y"]}, {"x": 0.0, "y": 0.0}) == ["x", "y"]
    assert combine({}, {"q": 0.5, "p": 0.5}) == ["p", "q"]


# -------------------------------------------------------------------------------------- voters


def test_statistics_voter_follows_matching_evidence_then_success():
    voter, cands = StatisticsVoter(), [A, B, C]
    assert voter.rank(UPDATE_TASK, cands, profiles()) == [A.id, C.id, B.id]  # A +1; C, B at 0 by rate
    assert voter.rank(COUNT_TASK, cands, profiles()) == [B.id, C.id, A.id]  # B +0.5; C 0; A -1
    # a candidate without a profile ranks below the measured ones at equal evidence
    assert voter.rank(COUNT_TASK, [A, B, C, BY_NAME["lenient_answer"]], profiles())[-2:] == [
        BY_NAME["lenient_answer"].id,
        A.id,
    ]


def test_embedding_voter_matches_the_task_to_the_closer_profile_with_real_minilm():
    profs = {
        A.id: profile(
            A, 0.5, [entry(["UPDATE"], "changes rows: writes the UPDATE statement after reading the columns", 0.5)]
        ),
        B.id: profile(B, 0.5, [entry(["counting"], "counts how many rows match a condition", 0.5)]),
    }
    voter = EmbeddingVoter()
    assert voter.rank(UPDATE_TASK, [B, A], profs) == [A.id, B.id]
    assert voter.rank(COUNT_TASK, [A, B], profs) == [B.id, A.id]
    # an avoid entry close to the task pushes a harness down
    profs[B.id] = profs[B.id].model_copy(update={"avoid": [entry(["counting"], "miscounts how many rows", -0.5)]})
    assert voter.rank(COUNT_TASK, [A, B], profs) == [A.id, B.id]


def test_rules_voter_uses_success_when_given_else_root_cause_rules():
    assert {"no_mutation", "wrong_mutation"} <= rule_causes(UPDATE_TASK)
    assert "answered_without_query" in rule_causes(COUNT_TASK) and "no_mutation" not in rule_causes(COUNT_TASK)
    cands = [BY_NAME["format_reminder"], BY_NAME["query_before_answer"], BY_NAME["schema_rows"]]
    # no stats: schema_rows targets unknown_column (mutation rule), query_before_answer answered_without_query
    assert RulesVoter().rank(UPDATE_TASK, cands, {})[0] == BY_NAME["schema_rows"].id
    assert RulesVoter().rank(COUNT_TASK, cands, {})[0] == BY_NAME["query_before_answer"].id
    stats = {BY_NAME["format_reminder"].id: 0.9, BY_NAME["schema_rows"].id: 0.2}
    assert RulesVoter(stats).rank(COUNT_TASK, cands, profiles()) == [
        BY_NAME["format_reminder"].id,
        BY_NAME["schema_rows"].id,
        BY_NAME["query_before_answer"].id,
    ]


# ------------------------------------------------------------------------- local OpenAI server


class _ChatHandler(BaseHTTPRequestHandler):
    def do_POST(self):  # noqa: N802 - http.server's naming
        request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.server.requests.append({"path": self.path, "body": request})
        if self.path != "/v1/chat/completions":
            return self._send(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})
        text = self.server.replies.pop(0)
        return self._send(
            200,
            {
                "id": "chatcmpl-1",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": request["model"],
                "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 321, "completion_tokens": 12, "total_tokens": 333},
            },
        )

    def _send(self, status: int, payload: dict) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


@pytest.fixture
def chat_server():
    """start(*replies) -> (server, OpenAIChat pointed at it)."""
    servers = []

    def start(*replies: str):
        server = ThreadingHTTPServer(("127.0.0.1", 0), _ChatHandler)
        server.replies, server.requests = list(replies), []
        threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        servers.append(server)
        url = f"http://127.0.0.1:{server.server_address[1]}/v1"
        return server, OpenAIChat("voter-model", url, api_key_env="HS_TEST_NO_SUCH_KEY", max_retries=0)

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


def test_llm_voter_sends_task_and_profiles_and_maps_names_to_ids(chat_server):
    server, chat = chat_server('```json\n["inspect_first", "no_such_harness", "schema_rows", "inspect_first"]\n```')
    voter = LlmVoter(chat, "llm:voter-model")
    ranked = voter.rank(UPDATE_TASK, [A, B, C], profiles())
    assert ranked == [B.id, A.id, C.id]  # named ones first, unknown ignored, C appended
    (request,) = server.requests
    assert request["path"] == "/v1/chat/completions" and request["body"]["model"] == "voter-model"
    prompt = "\n".join(m["content"] for m in request["body"]["messages"])
    assert "Update the price of the product named Widget to 20." in prompt and "UPDATE" in prompt
    assert "- schema_rows: validation success 0.40 (base harness: 0.50)" in prompt
    assert "prefer on UPDATE tasks: changes rows in the table (success delta +1.00 over 1 tasks)" in prompt
    assert "avoid on counting tasks: miscounts (success delta -1.00 over 1 tasks)" in prompt
    assert "- format_reminder: validation success 0.60" in prompt
    assert chat.usage == {"prompt_tokens": 321, "completion_tokens": 12, "requests": 1}


def test_llm_voter_refuses_a_reply_without_a_list(chat_server):
    _, chat = chat_server("The best one is schema_rows.", '{"best": "schema_rows"}')
    voter = LlmVoter(chat, "llm")
    with pytest.raises(ValueError, match="no JSON"):
        voter.rank(UPDATE_TASK, [A, B], profiles())
    with pytest.raises(ValueError, match="not a list"):
        voter.rank(UPDATE_TASK, [A, B], profiles())


# -------------------------------------------------------------------------------------- router


class FixedVoter:
    def __init__(self, name: str, ids: list[str]):
        self.name, self.ids = name, ids

    def rank(self, task, candidates, profiles):
        return list(self.ids)


class RaisingVoter:
    name = "raises"

    def rank(self, task, candidates, profiles):
        raise RuntimeError("model server exploded")


class SleepingVoter:
    name = "sleeps"

    def rank(self, task, candidates, profiles):
        time.sleep(3)
        return [C.id]


@pytest.mark.serial
def test_failing_and_slow_voters_are_skipped_logged_and_recorded(caplog):
    router = AdaptiveRouter(
        [RaisingVoter(), SleepingVoter(), StatisticsVoter(), FixedVoter("fixed", [B.id, "not-in-pool", A.id])],
        profiles(),
        success={},
        timeout_s=0.5,
    )
    started = time.monotonic()
    with caplog.at_level(logging.WARNING, logger="harness_pool.adaptive_router"):
        ranking = router.rank(UPDATE_TASK, [A, B, C])
    assert time.monotonic() - started < 2.5  # did not wait for the sleeper
    assert ranking.votes == {"raises": [], "sleeps": [], "statistics": [A.id, C.id, B.id], "fixed": [B.id, A.id]}
    # A: 1 + 0.75 = 1.75; B: 0.25 + 1 = 1.25; C: 0.75
    assert ranking.harness_ids == [A.id, B.id, C.id]
    assert ranking.errors == {"raises": "RuntimeError: model server exploded", "sleeps": "timed out after 0.5s"}
    messages = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any("voter raises skipped" in m and "exploded" in m for m in messages)
    assert any("voter sleeps skipped" in m and "timed out" in m for m in messages)


def test_profiles_handed_to_rank_replace_the_stored_ones():
    router = AdaptiveRouter([StatisticsVoter()], profiles(), success={})
    assert router.rank(UPDATE_TASK, [A, B, C]).top(1) == [A.id]
    reanchored = {**profiles(), A.id: profile(A, 0.4), B.id: profile(B, 0.3, [entry(["UPDATE"], "x", 0.2)])}
    ranking = router.rank(UPDATE_TASK, [A, B, C], profiles=reanchored)
    assert ranking.harness_ids == [B.id, C.id, A.id] and ranking.errors == {}
    with pytest.raises(ValueError, match="distinct names"):
        AdaptiveRouter([StatisticsVoter(), StatisticsVoter()], {}, {})


def test_with_every_voter_failing_validation_success_still_orders_the_pool():
    router = AdaptiveRouter([RaisingVoter()], profiles(), success={})
    ranking = router.rank(UPDATE_TASK, [A, B, C])
    assert ranking.harness_ids == [C.id, A.id, B.id] and list(ranking.errors) == ["raises"]


def test_router_with_an_llm_voter_over_http(chat_server):
    _, chat = chat_server('["format_reminder", "inspect_first"]')
    router = AdaptiveRouter([StatisticsVoter(), LlmVoter(chat, "llm")], profiles(), success={})
    ranking = router.rank(UPDATE_TASK, [A, B, C])
    # A: 1 + 0.5; C: 0.75 + 1; B: 0.5 + 0.75 -> C 1.75, A 1.5, B 1.25
    assert ranking.harness_ids == [C.id, A.id, B.id] and ranking.votes["llm"] == [C.id, B.id, A.id]


# --------------------------------------------------------------------------------------- rank1


def test_rank1_lets_h0_win_where_no_sibling_evidence_beats_it():
    profs = {
        A.id: profile(A, 0.5, [entry(["UPDATE"], "changes rows", 1.0)], h0_success=0.8),
        B.id: profile(B, 0.4, h0_success=0.8),
    }
    router = AdaptiveRouter([StatisticsVoter()], profs, success={})
    assert rank1(COUNT_TASK, H0, [A, B], router) == H0.id  # nobody has counting evidence; H0's 0.8 wins
    assert rank1(UPDATE_TASK, H0, [A, B], router) == A.id
    low_h0 = AdaptiveRouter([StatisticsVoter()], profs, success={H0.id: 0.45})  # the router's own H0 figure
    assert rank1(COUNT_TASK, H0, [A, B], low_h0) == A.id
    assert router.profiles == profs  # the H0 profile is not stored
    assert rank1(COUNT_TASK, H0, [A, B], RandomRouter(seed=0)) in {H0.id, A.id, B.id}
