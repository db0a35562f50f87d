"""BFCL multi-turn tasks (the AppWorld kind: stateful app APIs, several user requests per task).

The data ships inside the `bfcl-eval` wheel (pinned `bfcl-eval==2026.3.23`, Apache-2.0, installed
`--no-deps`): four categories of 200 tasks each over eight stateful Python API classes (a file
system, a trading bot, travel booking, vehicle control, messaging, tickets, social posting, math):
- base: every request can be served with the functions listed;
- long_context: the same tasks with large, noisy API states;
- miss_param: one request lacks a value the agent must ask for (its ground truth is no call);
- miss_func: one function is withheld until a later turn (before it, the right move is no call).
Each task lists per user turn the ground-truth call sequence. BFCL has no train/test split, and
the categories are variants of the same 200 base tasks, so we split by the base task's number:
n % 10 in {0, 1} -> test, == 2 -> dev (validation), else train; the same base task is never in
two splits, whatever its category.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources

from envs.base import DataError
from envs.bfcl.docs import function_list

BENCHMARK = "bfcl"
PACKAGE_VERSION = "2026.3.23"
CATEGORIES = ("base", "long_context", "miss_param", "miss_func")
SPLITS = ("train", "dev", "test")

# The API class -> its module under bfcl_eval/eval_checker/multi_turn_eval/func_source_code and the
# file of its function documents under bfcl_eval/data/multi_turn_func_doc (the package's layout).
API_MODULES = {
    "GorillaFileSystem": "gorilla_file_system",
    "MathAPI": "math_api",
    "MessageAPI": "message_api",
    "TwitterAPI": "posting_api",
    "TicketAPI": "ticket_api",
    "TradingBot": "trading_bot",
    "TravelAPI": "travel_booking",
    "VehicleControlAPI": "vehicle_control",
}
STATELESS = frozenset({"MathAPI"})  # built without a scenario

# sha256 of the files the tasks come from, as shipped in bfcl-eval 2026.3.23 (checked on load)
_ANSWERS = "possible_answer/"
DATA_SHA256 = {
    "BFCL_v4_multi_turn_base.json": "1a21a995d06fd6f20ba55de7bced30ef953ec35e998f502ec2ecf4d66ef1c43a",
    "BFCL_v4_multi_turn_long_context.json": "78c3268c5cc8e97c0f4ec6c811b3b9a2bba14323b1830b7a874b06d822749324",
    "BFCL_v4_multi_turn_miss_param.json": "f0c66dda3795f5f53e3e1c0cc8ba0246b6761c8f58bdba8317203bf451ab8838",
    "BFCL_v4_multi_turn_miss_func.json": "87d28ce10e37d864b72de85d5732eef2a867b241d6c1c99b4ae682c9e3ea921c",
    _ANSWERS + "BFCL_v4_multi_turn_base.json": "1fee67823b317571649177dd89d63969feaae4e810cc7448ee55ba797fb7c8fc",
    _ANSWERS
    + "BFCL_v4_multi_turn_long_context.json": "e82aa0e839c39d23c64a05834f7ae024d7c9738ec21738ecee78dc876e3d0d18",
    _ANSWERS + "BFCL_v4_multi_turn_miss_param.json": "59c442901779e2c31c33abcd566d032e03736e5ad8069de2fe05489873046ecf",
    _ANSWERS + "BFCL_v4_multi_turn_miss_func.json": "69e679b806d1c871b05393a4b95583bb973248e5b8d96c2d7f4ca05e29fc32e6",
}


@dataclass(frozen=True)
class BfclTask:
    id: str  # bfcl/<split>/<index:04d>
    split: str
    index: int
    bfcl_id: str  # e.g. multi_turn_base_12
    category: str
    turns: tuple[str, ...]  # the user's request per turn ("" when a turn only adds a function)
    ground_truth: tuple[tuple[str, ...], ...]  # call strings per turn
    initial_config: dict = field(hash=False, compare=False)
    involved_classes: tuple[str, ...] = ()
    functions: tuple[dict, ...] = field(default=(), hash=False, compare=False)  # documents offered at the start
    withheld: dict = field(default_factory=dict, hash=False, compare=False)  # turn -> [function docs added then]

    benchmark = BENCHMARK

    @property
    def tier(self) -> str:
        return self.category

    @property
    def task_type(self) -> str:
        return self.category

    @property
    def instruction(self) -> str:
        return self.turns[0]

    @property
    def description(self) -> str:
        return self.turns[0]

    @property
    def record(self) -> dict:
        return {
            "bfcl_id": self.bfcl_id,
            "turns": list(self.turns),
            "ground_truth": [list(t) for t in self.ground_truth],
        }

    def fields(self) -> dict[str, str]:
        """Template placeholders: {instruction} (the first request), {function_list} (the documents
        as signatures, envs/bfcl/docs.py) and {functions} (the documents, JSON, one per line)."""
        return {
            "instruction": self.turns[0],
            "function_list": function_list(self.functions),
            "functions": "\n".join(json.dumps(f, ensure_ascii=False) for f in self.functions),
        }


def split_of(base_number: int) -> str:
    rest = base_number % 10
    return "test" if rest in (0, 1) else "dev" if rest == 2 else "train"


def _data(name: str) -> str:
    try:
        return resources.files("bfcl_eval").joinpath("data", name).read_text(encoding="utf-8")
    except ModuleNotFoundError as exc:
        raise DataError("bfcl-eval is not installed: run `make setup`") from exc


def _jsonl(name: str) -> list[dict]:
    text = _data(name)
    expected = DATA_SHA256.get(name)
    if expected is not None and hashlib.sha256(text.encode("utf-8")).hexdigest() != expected:
        raise DataError(f"bfcl-eval's {name} is not the pinned file: install bfcl-eval=={PACKAGE_VERSION} (make setup)")
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def data_checksums() -> dict[str, str]:
    """sha256 of every data file the tasks are read from (question and answer files per category)."""
    names = [f"BFCL_v4_multi_turn_{c}.json" for c in CATEGORIES]
    names += [f"possible_answer/BFCL_v4_multi_turn_{c}.json" for c in CATEGORIES]
    return {n: hashlib.sha256(_data(n).encode("utf-8")).hexdigest() for n in names}


@lru_cache(maxsize=1)
def _function_docs() -> dict[str, list[dict]]:
    return {cls: _jsonl(f"multi_turn_func_doc/{module}.json") for cls, module in API_MODULES.items()}


def _user_text(messages: list[dict]) -> str:
    return "\n".join(m["content"] for m in messages if m.get("role") == "user")


def _task(record: dict, answer: dict, split: str, index: int, category: str) -> BfclTask:
    docs = _function_docs()
    excluded = set(record.get("excluded_function") or [])
    missed = {int(turn): set(names) for turn, names in (record.get("missed_function") or {}).items()}
    held = {name for names in missed.values() for name in names}
    offered = [d for cls in record["involved_classes"] for d in docs[cls] if d["name"] not in excluded]
    return BfclTask(
        id=f"{BENCHMARK}/{split}/{index:04d}",
        split=split,
        index=index,
        bfcl_id=record["id"],
        category=category,
        turns=tuple(_user_text(turn) for turn in record["question"]),
        ground_truth=tuple(tuple(calls) for calls in answer["ground_truth"]),
        initial_config=record["initial_config"],
        involved_classes=tuple(record["involved_classes"]),
        functions=tuple(d for d in offered if d["name"] not in held),
        withheld={turn: [d for d in offered if d["name"] in names] for turn, names in missed.items()},
    )


@lru_cache(maxsize=4)
def _split_tasks(split: str) -> tuple[BfclTask, ...]:
    out = []
    for category in CATEGORIES:
        records = _jsonl(f"BFCL_v4_multi_turn_{category}.json")
        answers = {a["id"]: a for a in _jsonl(f"possible_answer/BFCL_v4_multi_turn_{category}.json")}
        for record in records:
            if split_of(int(record["id"].rsplit("_", 1)[1])) == split:
                out.append((category, record, answers[record["id"]]))
    if split == "train":  # categories interleaved, so the first N tasks of any tiers span those tiers
        out.sort(key=lambda item: (int(item[1]["id"].rsplit("_", 1)[1]), CATEGORIES.index(item[0])))
    return tuple(_task(record, answer, split, i, category) for i, (category, record, answer) in enumerate(out))


def load_split(split: str, limit: int | None = None, tiers: tuple[str, ...] | None = None) -> list[BfclTask]:
    """The split's tasks (`tiers`: only these categories): dev and test category by category in
    BFCL's order; train by base task, its categories one after another, so that a training config's
    first N tasks cover every tier it names."""
    if split not in SPLITS:
        raise DataError(f"Unknown BFCL split '{split}': use one of {', '.join(SPLITS)}")
    if tiers is not None and set(tiers) - set(CATEGORIES):
        bad = ", ".join(sorted(set(tiers) - set(CATEGORIES)))
        raise DataError(f"unknown BFCL categor(ies) {bad}: use {', '.join(CATEGORIES)}")
    tasks = [t for t in _split_tasks(split) if tiers is None or t.category in tiers]
    return tasks[:limit] if limit else tasks
