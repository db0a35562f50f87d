"""TextWorld tasks: games generated from seeds, one game per task, splits by disjoint seed ranges.

A task is one game made by TextWorld's generator (pinned `textworld==1.7.0`, Inform 7 inside)
from a seed and a tier (quest length, world size, goal style). The seed of task i of a split is
`SPLITS[split].first_seed + i`; a game whose generated walkthrough does not win when played
(the generator can name two objects so that the game's parser asks "Which do you mean...?") is
replaced by the game of seed + RESEED_STRIDE (then + 2 x RESEED_STRIDE, ...). The seed ranges of
train, dev (validation) and test never overlap, redrawn seeds included, so no test game is a
training game. A split's games are built once into
`$HS_GENERATED_DIR/textworld/<GAME_SET>/<split>/` (`hs data build-textworld`, or on first use)
with a `tasks.jsonl` index: per task the goal text, the generator's walkthrough and the sha256
of the game definition (TextWorld's game JSON; the compiled story file embeds a compile date,
so its bytes differ from day to day while the game stays the same).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

from envs.base import DataError

log = logging.getLogger(__name__)

BENCHMARK = "textworld"
GAME_SET = "v2"  # bump when TIERS, SPLITS, the seed rule or the generator version change
RESEED_STRIDE = 10_000_000  # a redrawn seed stays inside its split's own range, shifted
MAX_RESEEDS = 5


@dataclass(frozen=True)
class Tier:
    name: str
    quest_length: int  # actions of the winning quest
    nb_rooms: int
    nb_objects: int
    brief_goal: bool  # the goal names only the last action (ALFWorld-like) instead of every step


TIERS = (
    Tier("q1", quest_length=1, nb_rooms=3, nb_objects=6, brief_goal=False),
    Tier("q2", quest_length=2, nb_rooms=4, nb_objects=8, brief_goal=False),
    Tier("q3", quest_length=3, nb_rooms=5, nb_objects=10, brief_goal=False),
    Tier("q3b", quest_length=3, nb_rooms=5, nb_objects=10, brief_goal=True),
)


@dataclass(frozen=True)
class SplitSpec:
    first_seed: int
    size: int


SPLITS = {
    "train": SplitSpec(first_seed=100_000, size=200),
    "dev": SplitSpec(first_seed=200_000, size=60),  # validation
    "test": SplitSpec(first_seed=300_000, size=300),
}


@dataclass(frozen=True)
class GameTask:
    """One TextWorld game: the benchmark task the environment resets from."""

    id: str  # textworld/<split>/<index:04d>
    split: str
    index: int
    seed: int
    tier: str
    goal: str
    walkthrough: tuple[str, ...]
    game_file: str
    game_sha256: str
    max_score: int

    benchmark = BENCHMARK

    @property
    def instruction(self) -> str:
        return self.goal

    @property
    def description(self) -> str:
        return self.goal

    @property
    def task_type(self) -> str:  # per-type metrics group games by tier
        return self.tier

    @property
    def record(self) -> dict:
        """What the database keeps of the task (bench_tasks.record)."""
        return {"seed": self.seed, "walkthrough": list(self.walkthrough), "game_sha256": self.game_sha256}

    def fields(self) -> dict[str, str]:
        """Template placeholders a harness may use."""
        return {"instruction": self.goal, "goal": self.goal, "tier": self.tier}


def tier_of(index: int) -> Tier:
    return TIERS[index % len(TIERS)]


def split_dir(split: str, generated_dir: Path | str | None = None) -> Path:
    root = Path(generated_dir or os.environ.get("HS_GENERATED_DIR") or ".hs/data")
    return root / BENCHMARK / GAME_SET / split


def _check_split(split: str) -> SplitSpec:
    if split not in SPLITS:
        raise DataError(f"Unknown TextWorld split '{split}': use one of {', '.join(SPLITS)}")
    return SPLITS[split]


def generate_game(seed: int, tier: Tier, folder: Path, stem: str) -> tuple[Path, dict]:
    """Make and compile one game; returns the story file and its index fields (goal, walkthrough)."""
    import textworld
    from textworld.generator import compile_game, make_game

    options = textworld.GameOptions()
    options.seeds = seed
    options.nb_rooms = tier.nb_rooms
    options.nb_objects = tier.nb_objects
    options.quest_length = tier.quest_length
    options.grammar.only_last_action = tier.brief_goal
    options.path = str(folder / f"{stem}.z8")
    options.force_recompile = True
    game = make_game(options)
    story = Path(compile_game(game, options))
    definition = story.with_suffix(".json")
    return story, {
        "goal": game.objective,
        "walkthrough": list(game.walkthrough or []),
        "game_sha256": hashlib.sha256(definition.read_bytes()).hexdigest(),
        "max_score": int(game.max_score),
    }


def build_split(
    split: str, limit: int | None = None, generated_dir: Path | str | None = None, progress: bool = True
) -> Path:
    """Generate the split's first `limit` games (all by default) that are not built yet; resumable:
    the index is rewritten after every game, so an interrupted build continues where it stopped."""
    spec = _check_split(split)
    folder = split_dir(split, generated_dir)
    folder.mkdir(parents=True, exist_ok=True)
    index_path = folder / "tasks.jsonl"
    records = _read_index(index_path) if index_path.is_file() else []
    wanted = min(limit or spec.size, spec.size)
    for index in range(len(records), wanted):
        tier = tier_of(index)
        stem = f"{index:04d}"
        for attempt in range(MAX_RESEEDS + 1):
            seed = spec.first_seed + index + attempt * RESEED_STRIDE
            story, fields = generate_game(seed, tier, folder, stem)
            if _walkthrough_wins(story, fields["walkthrough"]):
                break
            log.info("textworld %s: seed %d's walkthrough does not win; redrawn", split, seed)
        else:
            raise DataError(f"textworld {split} game {index}: no playable game in {MAX_RESEEDS + 1} seeds")
        records.append({"index": index, "seed": seed, "tier": tier.name, "game": f"{stem}.z8", **fields})
        _write_index(index_path, records)
        if progress:
            log.info("textworld %s: game %d/%d built (seed %d, tier %s)", split, index + 1, wanted, seed, tier.name)
    return index_path


def _walkthrough_wins(story: Path, walkthrough: list[str]) -> bool:
    import warnings

    import textworld

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        game = textworld.start(str(story), request_infos=textworld.EnvInfos(won=True))
    try:
        state = game.reset()
        for command in walkthrough:
            state, _, done = game.step(command)
            if done:
                break
        return bool(state.won)
    finally:
        game.close()


def _read_index(path: Path) -> list[dict]:
    records = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines()):
        if not line.strip():
            continue
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError as exc:
            raise DataError(f"{path} line {n + 1} is not valid JSON ({exc}): delete the folder and rebuild") from exc
    return records


def _write_index(path: Path, records: list[dict]) -> None:
    with tempfile.NamedTemporaryFile("w", dir=path.parent, delete=False, suffix=".part", encoding="utf-8") as tmp:
        tmp.write("".join(json.dumps(r, sort_keys=True) + "\n" for r in records))
    os.replace(tmp.name, path)


def load_split(
    split: str,
    limit: int | None = None,
    generated_dir: Path | str | None = None,
    tiers: tuple[str, ...] | None = None,
    build: bool = True,
) -> list[GameTask]:
    """The split's tasks in index order, building the games still missing (unless build=False)."""
    spec = _check_split(split)
    if tiers is not None:
        unknown = sorted(set(tiers) - {t.name for t in TIERS})
        if unknown:
            raise DataError(
                f"unknown TextWorld tier(s) {', '.join(unknown)}: tiers are {', '.join(t.name for t in TIERS)}"
            )
    folder = split_dir(split, generated_dir)
    index_path = folder / "tasks.jsonl"
    # enough games that `limit` of them are of the wanted tiers (tiers cycle through the indices)
    need = spec.size if limit is None else min(spec.size, limit * (len(TIERS) if tiers else 1))
    have = len(_read_index(index_path)) if index_path.is_file() else 0
    if have < need:
        if not build:
            raise DataError(
                f"TextWorld split '{split}' has {have} of {need} games at {folder}: "
                f"run `hs data build-textworld --split {split}`"
            )
        build_split(split, need, generated_dir)
    tasks = []
    for record in _read_index(index_path)[:need]:
        if tiers is not None and record["tier"] not in tiers:
            continue
        tasks.append(
            GameTask(
                id=f"{BENCHMARK}/{split}/{record['index']:04d}",
                split=split,
                index=record["index"],
                seed=record["seed"],
                tier=record["tier"],
                goal=record["goal"],
                walkthrough=tuple(record["walkthrough"]),
                game_file=str(folder / record["game"]),
                game_sha256=record["game_sha256"],
                max_score=record["max_score"],
            )
        )
    return tasks[:limit] if limit else tasks
