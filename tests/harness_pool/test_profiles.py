"""Behaviour profiles induced from hand-built paired validation sets, offline and by a scripted model."""

from __future__ import annotations

import random

import pytest
from pydantic import ValidationError

from harness_pool.llm import ChatClient, LlmError
from harness_pool.profiles import (
    BehaviourProfile,
    Evidence,
    PairedRecord,
    ProfileEntry,
    TaskCondition,
    induce_llm,
    induce_offline,
    parse_json_reply,
)
from harness_pool.spec import load_harness

H0 = load_harness("h0")
SIB = load_harness("schema_rows")  # edit: "show the table's columns and first rows in the task message"
INSPECT = ["inspected_first"]

TEXTS = {
    "u1": "Update the price of Widget to 20 in the Products table.",
    "i1": "Insert a new row for the product Gadget.",
    "a1": "Which team ranks third by points?",
    "u2": "Change the status of order 7 to shipped.",
    "c1": "How many employees work in Sales?",
    "o1": "Which city hosted the 1998 final?",
}
TYPES = {"u1": "UPDATE", "u2": "UPDATE", "c1": "counting", "o1": "other", "i1": "INSERT", "a1": "ranking"}


def rec(
    task: str, harness: str, successes: list[bool], tags: list[list[str]] | None = None, tier: str | None = None
) -> PairedRecord:
    return PairedRecord(
        bench_task_id=task,
        task_type=TYPES[task],
        tier=tier,
        text=TEXTS[task],
        harness_id=harness,
        successes=successes,
        behaviour_tags=tags if tags is not None else [[] for _ in successes],
    )


def paired_set() -> list[PairedRecord]:
    """The sibling solves both UPDATE tasks H0 fails (inspecting first in half its rollouts), fails
    the counting task H0 solves, and both solve the 'other' task."""
    return [
        rec("u1", H0.id, [False, False]),
        rec("u1", SIB.id, [True, True], [INSPECT, []]),
        rec("u2", H0.id, [False, False]),
        rec("u2", SIB.id, [True, True], [[], INSPECT]),
        rec("c1", H0.id, [True, True]),
        rec("c1", SIB.id, [False, False]),
        rec("o1", H0.id, [True, True]),
        rec("o1", SIB.id, [True, True]),
    ]


class ScriptedChat(ChatClient):
    """A chat client answering from a list (an LlmError instance is raised), recording prompts."""

    def __init__(self, *replies):
        super().__init__()
        self.model, self.base_url, self.timeout = "scripted-model", "scripted://", 1.0
        self.replies, self.prompts = list(replies), []

    def chat(self, messages):
        self.prompts.append("\n".join(m["content"] for m in messages))
        reply = self.replies.pop(0)
        if isinstance(reply, Exception):
            raise reply
        return reply


def test_condition_matching_and_text():
    task = rec("u1", SIB.id, [True], tier="medium")
    assert TaskCondition().matches(task) and TaskCondition().text() == "any task"
    assert TaskCondition(task_types=["UPDATE", "INSERT"], keywords=["PRICE"]).matches(task)
    assert not TaskCondition(task_types=["UPDATE"], keywords=["average"]).matches(task)
    assert not TaskCondition(tiers=["hard"]).matches(task)
    assert not TaskCondition(tiers=["hard"]).matches(rec("u1", SIB.id, [True]))  # no tier: a tier part fails
    cond = TaskCondition(task_types=["UPDATE"], tiers=["medium"], keywords=["average", "mean"])
    assert cond.text() == "UPDATE tasks; medium tier; mentioning 'average' or 'mean'"
    with pytest.raises(ValidationError):
        TaskCondition(task_type=["UPDATE"])  # extra keys are refused


def test_offline_profile_matches_what_the_paired_set_shows():
    profile = induce_offline(SIB, paired_set(), H0.id)
    assert profile.inducer == "offline" and profile.harness_id == SIB.id and profile.harness_name == "schema_rows"
    assert profile.success_rate == pytest.approx(0.75) and profile.h0_success_rate == pytest.approx(0.5)
    assert [(e.when, e.evidence) for e in profile.prefer] == [
        (TaskCondition(task_types=["UPDATE"]), Evidence(bench_task_ids=["u1", "u2"], delta=1.0, n=2))
    ]
    assert [(e.when, e.evidence) for e in profile.avoid] == [
        (TaskCondition(task_types=["counting"]), Evidence(bench_task_ids=["c1"], delta=-1.0, n=1))
    ]
    prefer = profile.prefer[0].behaviour
    assert prefer.startswith("show the table's columns and first rows in the task message")
    assert "inspects the table first more often (+50 pts)" in prefer
    assert "inspects" not in profile.avoid[0].behaviour  # no tag differs on the counting task


def test_offline_profile_orders_by_strength_then_name_whatever_the_input_order():
    records = [r.model_copy(update={"tier": "easy"}) for r in paired_set()] + [
        rec("u1", H0.id, [False, False], tier="easy"),
        rec("u1", SIB.id, [True, False], tier="easy"),
        rec("i1", H0.id, [False, False], tier="easy"),
        rec("i1", SIB.id, [True, False], tier="easy"),
        rec("a1", H0.id, [False, False], tier="hard"),
        rec("a1", SIB.id, [True, False], tier="hard"),
    ]
    profile = induce_offline(SIB, records, H0.id)
    shuffled = records[:]
    random.Random(3).shuffle(shuffled)
    assert induce_offline(SIB, shuffled, H0.id) == profile
    # u1 merges 4 rollouts per harness: sibling 3/4, H0 0/4 -> UPDATE delta (0.75 + 1) / 2 = 0.875;
    # INSERT and ranking tie at 0.5 and go by name; easy tier: (-1 + 0.5 + 0 + 0.75 + 1) / 5 = 0.25
    assert [(e.when.text(), e.evidence.delta) for e in profile.prefer] == [
        ("UPDATE tasks", 0.875),
        ("INSERT tasks", 0.5),
        ("hard tier", 0.5),
        ("ranking tasks", 0.5),
        ("easy tier", 0.25),
    ]
    assert profile.prefer[-1].evidence.bench_task_ids == ["c1", "i1", "o1", "u1", "u2"]
    assert [e.when.text() for e in profile.avoid] == ["counting tasks"]
    strict = induce_offline(SIB, records, H0.id, min_tasks=2)
    assert [e.when.text() for e in strict.prefer] == ["UPDATE tasks", "easy tier"] and strict.avoid == []


def test_behaviour_mentions_only_tag_differences_of_at_least_ten_points():
    def behaviour(sib_tags: list[list[str]], h0_tags: list[list[str]]) -> str:
        records = [rec("u1", H0.id, [False] * 20, h0_tags), rec("u1", SIB.id, [True] * 20, sib_tags)]
        return induce_offline(SIB, records, H0.id).prefer[0].behaviour

    none = [[] for _ in range(20)]
    edit = "show the table's columns and first rows in the task message"
    assert behaviour([INSPECT] + none[1:], none) == edit  # 5 pts: noise
    assert behaviour([INSPECT] * 2 + none[2:], none) == edit + "; inspects the table first more often (+10 pts)"
    loops = [["repeated_query", "inspected_first"]] * 10 + none[10:]
    assert behaviour(none, loops) == (
        edit + "; inspects the table first less often (-50 pts); repeats an identical query less often (-50 pts)"
    )


def test_records_without_a_partner_are_not_paired():
    records = paired_set() + [rec("o1", SIB.id, [False, False]).model_copy(update={"bench_task_id": "lonely"})]
    assert induce_offline(SIB, records, H0.id) == induce_offline(SIB, paired_set(), H0.id)


LLM_REPLY = """Here you go:
```json
{"prefer": [{"when": {"task_types": ["UPDATE"], "keywords": ["price"]}, "behaviour": "reads the columns first"},
            {"when": {"keywords": ["nothing matches this"]}, "behaviour": "dropped"}],
 "avoid": [{"when": {"task_types": ["counting"]}, "behaviour": "gets distracted by sample rows"}]}
```"""


def test_llm_inducer_keeps_the_model_entries_with_evidence_recomputed_from_the_data():
    chat = ScriptedChat(LLM_REPLY)
    profile = induce_llm(chat, SIB, paired_set(), H0.id)
    assert profile.inducer == "llm:scripted-model"
    assert profile.prefer == [
        ProfileEntry(
            when=TaskCondition(task_types=["UPDATE"], keywords=["price"]),
            behaviour="reads the columns first",
            evidence=Evidence(bench_task_ids=["u1"], delta=1.0, n=1),
        )
    ]
    assert profile.avoid[0].evidence == Evidence(bench_task_ids=["c1"], delta=-1.0, n=1)
    prompt = chat.prompts[0]
    assert "show the table's columns and first rows" in prompt and "unknown_column" in prompt
    assert "u1 | UPDATE | - | 0/2 | 2/2 | Update the price of Widget" in prompt
    assert "c1 | counting | - | 2/2 | 0/2 |" in prompt


@pytest.mark.parametrize(
    "reply",
    [
        "I think the sibling is better at updates.",
        '{"prefer": [{"when": {"types": ["UPDATE"]}, "behaviour": "x"}]}',
        '{"prefer": "UPDATE"}',
        LlmError("cannot reach http://x for model m: start the server"),
    ],
)
def test_llm_inducer_falls_back_to_offline_on_an_unusable_reply(reply):
    profile = induce_llm(ScriptedChat(reply), SIB, paired_set(), H0.id)
    offline = induce_offline(SIB, paired_set(), H0.id)
    assert profile.inducer.startswith("offline (llm failed: ") and profile.inducer.endswith(")")
    assert profile.model_copy(update={"inducer": "offline"}) == offline
    if isinstance(reply, LlmError):
        assert "cannot reach" in profile.inducer


def test_parse_json_reply_finds_fenced_bare_and_embedded_json():
    assert parse_json_reply('```json\n["a", "b"]\n```') == ["a", "b"]
    assert parse_json_reply('{"x": 1}') == {"x": 1}
    assert parse_json_reply('Ranking: ["a", "b"] as asked.') == ["a", "b"]
    with pytest.raises(ValueError, match="no JSON"):
        parse_json_reply("no json here")


def test_profile_models_are_frozen():
    profile = induce_offline(SIB, paired_set(), H0.id)
    assert isinstance(profile, BehaviourProfile)
    with pytest.raises(ValidationError):
        profile.success_rate = 1.0
