"""The TextWorld environment: one game, one private interpreter, up to `max_rounds` commands.

Each rollout starts its own game instance (TextWorld through Jericho's Z-machine interpreter,
in process, about 10 MB and 5 ms a command), so K rollouts of a group never see each other's
moves. The environment speaks `CommandAction`; turning text into commands belongs to the
harness. Success is the game's own check: the quest is won.
"""

from __future__ import annotations

import re
import warnings

from envs.base import Action, CommandAction, StepResult, Verdict
from envs.textworld.data import GameTask

DEFAULT_MAX_ROUNDS = 15
MAX_OBSERVATION_CHARS = 4_000  # safety cap on what one command can print (a harness truncates further)
MAX_COMMAND_CHARS = 200
_PROMPT_TAIL = re.compile(r"\n\s*>[^\n]*$", re.DOTALL)  # the interpreter's prompt and status line


def _request_infos():
    from textworld import EnvInfos

    return EnvInfos(admissible_commands=True, description=True, won=True, lost=True, score=True, moves=True)


def clean_feedback(text: str) -> str:
    """The game's answer without the trailing prompt/status line, capped."""
    text = _PROMPT_TAIL.sub("", text or "").strip()
    if len(text) > MAX_OBSERVATION_CHARS:
        text = text[:MAX_OBSERVATION_CHARS] + f"\n[output cut at {MAX_OBSERVATION_CHARS} characters]"
    return text


class TextWorldEnv:
    """Environment protocol implementation for one TextWorld game and one rollout.

    Rounds: every command uses one round; the episode ends when the game is won or lost, or
    when the last round is used. A command the game does not offer right now (not among its
    admissible commands) still runs, since the game's own answer is informative, but the step
    is marked error="inadmissible" so detectors can count it.
    """

    def __init__(self, task: GameTask, max_rounds: int = DEFAULT_MAX_ROUNDS) -> None:
        if max_rounds < 1:
            raise ValueError(f"max_rounds must be >= 1, got {max_rounds}")
        self.task = task
        self.max_rounds = max_rounds
        self.rounds_used = 0
        self.done = False
        self.game = None
        self.state = None
        self.commands: list[str] = []

    def reset(self) -> str:
        """Start a fresh instance of the game and return the goal and the first room."""
        import textworld

        self.close()
        with warnings.catch_warnings():  # Jericho's "not fully supported" note: TextWorld tracks the quest itself
            warnings.simplefilter("ignore")
            self.game = textworld.start(self.task.game_file, request_infos=_request_infos())
        self.state = self.game.reset()
        self.rounds_used = 0
        self.done = False
        self.commands = []
        return f"{self.task.goal}\n\n{clean_feedback(self.state.description)}"

    def admissible_commands(self) -> list[str]:
        """Commands the game offers in the current state (for harnesses that show them)."""
        return list(self.state.admissible_commands or []) if self.state is not None else []

    def step(self, action: Action) -> StepResult:
        if self.game is None:
            raise RuntimeError("call reset() before step()")
        if self.done:
            raise RuntimeError(f"episode of {self.task.id} is over; call verify() or reset()")
        if not isinstance(action, CommandAction):
            raise TypeError(f"TextWorld takes CommandAction, got {action!r}")
        self.rounds_used += 1
        command = " ".join(action.command.split())[:MAX_COMMAND_CHARS]
        admissible = command.lower() in {c.lower() for c in self.admissible_commands()}
        self.commands.append(command)
        self.state, _, game_over = self.game.step(command)
        outcome = "won" if self.state.won else "lost" if self.state.lost else None
        self.done = bool(game_over) or outcome is not None or self.rounds_used >= self.max_rounds
        return StepResult(
            observation=clean_feedback(self.state.feedback),
            done=self.done,
            error=None if admissible else "inadmissible",
            outcome=outcome,
        )

    def verify(self) -> Verdict:
        """Won is success (reward 1); anything else, lost or out of rounds, is failure (0)."""
        if self.state is None:
            raise RuntimeError("no game: call reset() first, and verify() before close()")
        won = bool(self.state.won)
        details = {
            "won": won,
            "lost": bool(self.state.lost),
            "score": self.state.score,
            "max_score": self.task.max_score,
            "moves": self.state.moves,
            "rounds_used": self.rounds_used,
            "commands": list(self.commands),
        }
        return Verdict(reward=1.0 if won else 0.0, success=won, details=details)

    def close(self) -> None:
        """Stop the game instance; safe to call more than once."""
        if self.game is not None:
            self.game.close()
            self.game = None

    def __enter__(self) -> TextWorldEnv:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
