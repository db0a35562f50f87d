"""Loading DBBench tasks (AgentBench's DB task) into typed `BenchTask` records.

dev (validation) and standard (test) are the upstream files, pinned by sha256 so a silently
changed copy cannot shift every reported figure; train is generated locally by
`envs.dbbench.train_split` (no upstream training split exists offline), so it is not pinned.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
import urllib.error
import urllib.request
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from envs.base import DataError

BENCHMARK = "dbbench"
MUTATION_TYPES = ("INSERT", "UPDATE")
SELECT_TYPES = (
    "other",
    "counting",
    "comparison",
    "ranking",
    "aggregation-SUM",
    "aggregation-MIN",
    "aggregation-MAX",
    "aggregation-AVG",
)
TASK_TYPES = MUTATION_TYPES + SELECT_TYPES  # every DBBench task type, mutations first
# Difficulty tiers of the generated train split, easiest first (see train_split.py).
TIERS = ("easy", "medium", "hard")

# sha256 of the pinned upstream files (THUDM/AgentBench commit 578c5e9, data/dbbench/).
PINNED_SHA256 = {
    "dev": "eb941c58a7a5651357b19e46aa05070f6cd5a7d83ce70cefd24aa3581e1e1130",
    "standard": "cf8dec6fb8051f46e6171136824aaa8b8707c3affbb3185c0bad2b39bc6b71e2",
}
UPSTREAM_URLS = {
    split: f"https://raw.githubusercontent.com/THUDM/AgentBench/578c5e9/data/dbbench/{split}.jsonl"
    for split in PINNED_SHA256
}
DOWNLOAD_TIMEOUT_S = 30

_MD5_RE = re.compile(r"[0-9a-f]{32}")


@dataclass(frozen=True)
class BenchTask:
    """One DBBench instance, normalised; `record` keeps the raw JSON for anything not lifted."""

    id: str
    split: str
    index: int
    task_type: str
    description: str
    add_description: str
    label: list
    answer_md5: str | None
    table_name: str
    columns: list[str]
    rows: list[list] = field(repr=False)
    gold_sql: str | None
    benchmark: str = BENCHMARK
    tier: str | None = None
    record: dict = field(default_factory=dict, compare=False, repr=False)

    def __hash__(self) -> int:
        # Lists make the generated field hash fail; the id identifies a task anyway.
        return hash(self.id)

    @property
    def instruction(self) -> str:
        """The task text shown to the agent, as upstream: question, then table name and headers."""
        return f"{self.description}\n{self.add_description}"

    @property
    def is_mutation(self) -> bool:
        """INSERT/UPDATE tasks are judged by the final table state, not by the answer."""
        return self.task_type in MUTATION_TYPES


def parse_answer_md5(raw: str | None) -> str | None:
    """Extract the bare md5 from upstream's printed cursor result, e.g. "[('09aa...',)]"."""
    if not raw:
        return None
    match = _MD5_RE.search(raw)
    return match.group(0) if match else None


def task_from_record(record: dict, split: str, index: int) -> BenchTask:
    """Build a `BenchTask` from one JSONL record (upstream or generated, same format)."""
    task_type = record["type"][0]
    table = record["table"]
    label = list(record.get("label") or [])
    if task_type in MUTATION_TYPES:
        gold_sql = label[0] if label else None
    else:
        gold_sql = (record.get("sql") or {}).get("query")
    return BenchTask(
        id=f"{BENCHMARK}/{split}/{index:04d}",
        split=split,
        index=index,
        task_type=task_type,
        description=record["description"],
        add_description=record.get("add_description", ""),
        label=label,
        answer_md5=parse_answer_md5(record.get("answer_md5")),
        table_name=table["table_name"],
        columns=[column["name"] for column in table["table_info"]["columns"]],
        rows=[list(row) for row in table["table_info"]["rows"]],
        gold_sql=gold_sql,
        tier=record.get("tier"),
        record=record,
    )


def check_tiers(tiers: Iterable[str]) -> tuple[str, ...]:
    """Validate tier names; returns them de-duplicated in TIERS order (easiest first)."""
    if isinstance(tiers, str):
        return parse_tiers(tiers)
    names = tuple(tiers)
    unknown = [name for name in names if name not in TIERS]
    if not names:
        raise DataError(f"No DBBench tier given: use one or more of {', '.join(TIERS)}")
    if unknown:
        shown = ", ".join(repr(name) for name in unknown)
        raise DataError(f"Unknown DBBench tier(s) {shown}: use one or more of {', '.join(TIERS)}")
    return tuple(tier for tier in TIERS if tier in names)


def parse_tiers(text: str) -> tuple[str, ...]:
    """Parse a comma-separated tier list ("easy,medium") as given on the command line."""
    return check_tiers(part.strip().lower() for part in text.split(",") if part.strip())


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _download(split: str, target: Path) -> None:
    """Fetch a pinned split into `target`, atomically, so a half-written file never looks valid;
    folders are made only once the payload is fetched and checked (a failed fetch leaves nothing)."""
    with urllib.request.urlopen(UPSTREAM_URLS[split], timeout=DOWNLOAD_TIMEOUT_S) as response:
        payload = response.read()
    actual = hashlib.sha256(payload).hexdigest()
    if actual != PINNED_SHA256[split]:
        raise DataError(
            f"Downloaded DBBench split '{split}' has sha256 {actual}, expected "
            f"{PINNED_SHA256[split]}: the upstream file changed; place the pinned copy at {target}"
        )
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile(dir=target.parent, delete=False, suffix=".part") as tmp:
        tmp.write(payload)
    os.replace(tmp.name, target)


def resolve_data_dir(data_dir: Path | str | None) -> Path:
    """Argument, else $HS_DATA_DIR, else ./data (relative to the working directory)."""
    return Path(data_dir or os.environ.get("HS_DATA_DIR") or "./data")


def resolve_generated_dir(generated_dir: Path | str | None) -> Path:
    """Argument, else $HS_GENERATED_DIR, else ./.hs/data (where `hs data build-train` writes)."""
    return Path(generated_dir or os.environ.get("HS_GENERATED_DIR") or ".hs/data")


def _pinned_path(split: str, data_dir: Path | str | None, download: bool) -> Path:
    """Locate (or fetch) a pinned split and check its checksum."""
    path = resolve_data_dir(data_dir) / BENCHMARK / f"{split}.jsonl"
    if not path.is_file():
        missing = (
            f"DBBench split '{split}' not found at {path}: set HS_DATA_DIR to a folder holding "
            f"dbbench/{split}.jsonl (e.g. ../shared/data) or allow network access to download it"
        )
        if not download:
            raise DataError(missing)
        try:
            _download(split, path)
        except (urllib.error.URLError, OSError, TimeoutError) as exc:
            raise DataError(f"{missing} (download failed: {exc})") from exc
    actual = _sha256(path)
    if actual != PINNED_SHA256[split]:
        raise DataError(
            f"DBBench split '{split}' at {path} has sha256 {actual}, expected "
            f"{PINNED_SHA256[split]}: replace it with the pinned upstream file (see the data README)"
        )
    return path


def split_path(
    split: str,
    data_dir: Path | str | None = None,
    generated_dir: Path | str | None = None,
    download: bool = True,
) -> Path:
    """Path of a split's JSONL file, validated (pinned splits) or merely located (train)."""
    if split in PINNED_SHA256:
        return _pinned_path(split, data_dir, download)
    if split == "train":
        path = resolve_generated_dir(generated_dir) / BENCHMARK / "train.jsonl"
        if not path.is_file():
            raise DataError(
                f"DBBench split 'train' not found at {path}: run `hs data build-train dbbench` "
                "(or set HS_GENERATED_DIR to the folder holding dbbench/train.jsonl)"
            )
        return path
    raise DataError(f"Unknown DBBench split '{split}': use one of dev, standard, train")


def load_split(
    split: str,
    data_dir: Path | str | None = None,
    limit: int | None = None,
    generated_dir: Path | str | None = None,
    download: bool = True,
    tiers: tuple[str, ...] | None = None,
) -> list[BenchTask]:
    """Load a split as `BenchTask`s, in file order (ids are stable: they encode the line index).

    `download=False` turns the network fallback off (tests, air-gapped workers). `tiers` keeps
    only generated train tasks of those difficulty tiers (None: all); dev and standard have no
    tiers and are returned whole. `limit` counts the tasks kept.
    """
    wanted = check_tiers(tiers) if tiers is not None else None
    path = split_path(split, data_dir, generated_dir, download)
    if split != "train":
        wanted = None
    tasks: list[BenchTask] = []
    skipped = 0
    with path.open(encoding="utf-8") as handle:
        for index, line in enumerate(handle):
            if limit is not None and len(tasks) >= limit:
                break
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as exc:
                raise DataError(f"{path} line {index + 1} is not valid JSON ({exc}): rebuild the file") from exc
            if wanted is not None and record.get("tier") not in wanted:
                skipped += 1
                continue
            tasks.append(task_from_record(record, split, index))
    if wanted is not None and not tasks and skipped:
        raise DataError(
            f"{path} has no task of tier(s) {', '.join(wanted)}: rebuild it with "
            f"`hs data build-train dbbench --tiers {','.join(wanted)}`"
        )
    return tasks


REBUILD = "rebuild it with `hs data build-train dbbench` (it rewrites the whole file)"


def check_generated_train_split(data_dir: str | None, missing_ok: bool = False) -> None:
    """Every line of the generated training split (HS_GENERATED_DIR or .hs/data) is a task record:
    a damaged line is reported with its number; a missing file raises unless ``missing_ok``."""
    try:
        path = split_path("train", data_dir=data_dir)
    except DataError:
        if missing_ok:
            return
        raise
    with path.open("rb") as handle:
        for number, raw in enumerate(handle, start=1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise DataError(
                    f"{path} line {number} is not UTF-8 text (byte 0x{raw[exc.start]:02x}): {REBUILD}"
                ) from None
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as exc:
                raise DataError(
                    f"{path} line {number} is not valid JSON ({exc.msg.removesuffix(' at')} at column {exc.colno}): "
                    f"{REBUILD}"
                ) from None
            try:
                if not isinstance(record, dict):
                    raise TypeError(f"a JSON {type(record).__name__}, not an object")
                task_from_record(record, "train", number - 1)
            except KeyError as exc:
                raise DataError(f"{path} line {number} is not a DBBench task (no field {exc}): {REBUILD}") from None
            except (TypeError, ValueError, IndexError, AttributeError) as exc:
                raise DataError(f"{path} line {number} is not a DBBench task ({exc}): {REBUILD}") from None
