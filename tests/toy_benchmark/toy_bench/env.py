"""Tasks and the environment: say the task's word back (`say <word>`) within the round limit."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from envs.base import CommandAction, DataError, StepResult, Verdict

WORDS = ("apple", "river", "stone", "cloud", "maple", "ember", "tiger", "lemon", "ocean", "piano", "amber", "cedar")
SPLITS = {"train": 24, "dev": 8, "test": 8}
TIERS = ("plain", "reversed")  # reversed: the task shows the word backwards


@dataclass(frozen=True)
class ToyTask:  # envs.base.Task, plus its word
    id: str
    split: str
    index: int
    word: str
    tier: str
    benchmark: str = "toy"
    task_type: str = "say"

    @property
    def description(self) -> str:
        return f"say '{self.word}' ({self.tier})"

    @property
    def record(self) -> dict:
        return {"word": self.word}

    @property
    def shown(self) -> str:
        return self.word[::-1] if self.tier == "reversed" else self.word

    def fields(self) -> dict[str, str]:
        how = "written backwards; say it forwards" if self.tier == "reversed" else "as written"
        return {"instruction": f"The secret word is '{self.shown}' ({how}). Say it.", "tier": self.tier}


def load_split(split: str, limit: int | None = None, tiers: tuple[str, ...] | None = None) -> list[ToyTask]:
    if split not in SPLITS:
        raise DataError(f"toy split '{split}' does not exist: use one of {', '.join(SPLITS)}")
    tasks = []
    for i in range(SPLITS[split]):
        digest = int(hashlib.sha256(f"{split}-{i}".encode()).hexdigest(), 16)
        tasks.append(ToyTask(f"toy/{split}/{i}", split, i, WORDS[digest % len(WORDS)], TIERS[i % 2]))
    tasks = [t for t in tasks if not tiers or t.tier in tiers]
    return tasks[:limit] if limit else tasks


class ToyEnv:
    def __init__(self, task: ToyTask, max_rounds: int = 3):
        self.task, self.max_rounds, self.rounds_used, self.said = task, max_rounds, 0, None

    def reset(self) -> str:
        return self.task.fields()["instruction"]

    def step(self, action) -> StepResult:
        self.rounds_used += 1
        if not isinstance(action, CommandAction):
            return StepResult("Only 'say <word>' works here.", done=False, error="not_a_command")
        verb, _, word = action.command.strip().partition(" ")
        if verb.lower() != "say" or not word.strip():
            return StepResult(f"Unknown command '{verb}'. Use: say <word>", done=self.rounds_used >= self.max_rounds,
                              error="unknown_command")  # fmt: skip
        self.said = word.strip().strip("'\"").lower()
        won = self.said == self.task.word
        return StepResult(f"You said '{self.said}'.", done=True, outcome="won" if won else "lost")

    def verify(self) -> Verdict:
        success = self.said == self.task.word
        return Verdict(float(success), success, {"said": self.said, "word": self.task.word})

    def close(self) -> None:
        pass
