"""The TextWorld environment: one game, one private sandboxed interpreter, up to `max_rounds` commands.

Each episode (each `reset()`) starts its own interpreter process, `envs/textworld/worker.py`
(TextWorld over Jericho's Z-machine C library), inside the platform's sandbox (sandbox/): the
user nobody, no network, a private PID namespace, the interpreter and its site-packages, the
worker file and the game's .z8/.json read-only, an 8 MiB private tmpfs as its working folder,
no new processes or threads, 512 MiB of address space and 60 CPU seconds for the whole episode.
K rollouts of a group never see each other's moves or files (a `save` could not reach another
one's `restore` even if it got through). The env talks to it one JSON line per request; a step
gets 5 s of wall clock. An interpreter that dies, hangs or answers nonsense ends the episode with
an error observation (error="env_error"), and the verdict is a failure with the reason in its
details; the rollout process itself never runs the interpreter.

Commands are reduced to what the game's parser reads before anything is sent: printable text
only (NUL, other control characters and lone surrogates are refused), whitespace collapsed, at
most 200 characters and 198 UTF-8 bytes (cut at a character boundary), and the parser's out-of-
world commands (save, restore, script, quit, restart, ...; TextWorld's own tw-* and print_state)
refused in any clause. A refused command uses its round but never reaches the game.

The environment speaks `CommandAction`; turning text into commands belongs to the harness.
Success is the game's own check: the quest is won.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
import tempfile
from pathlib import Path
from unicodedata import category

from envs.base import Action, CommandAction, StepResult, Verdict
from envs.textworld.data import GameTask
from sandbox import JsonWorker, Layout, Limits, WorkerGone, confinement, sandbox_mode

DEFAULT_MAX_ROUNDS = 15
MAX_OBSERVATION_CHARS = 4_000  # safety cap on what one command can print (a harness truncates further)
MAX_COMMAND_CHARS = 200
MAX_COMMAND_BYTES = 198  # Jericho's input buffer (INPUT_BUFFER_SIZE); longer input is cut mid-character there
_PROMPT_TAIL = re.compile(r"\n\s*>[^\n]*$", re.DOTALL)  # the interpreter's prompt and status line

WORKER = Path(__file__).resolve().with_name("worker.py")
STARTUP_WALL_SECONDS = 60.0  # importing textworld in the worker: about 0.7 s on an idle machine
RESET_WALL_SECONDS = 30.0  # loading the game: about 0.2 s
STEP_WALL_SECONDS = 5.0  # one command: a few ms
MAX_REPLY_BYTES = 1 << 20
LIMITS = Limits(memory_bytes=512 << 20, cpu_seconds=60, file_bytes=2 << 20, open_files=64, processes=0)
SCRATCH_BYTES = 8 << 20  # the worker's private tmpfs: Jericho's copy of libfrotz.so (0.5 MB), save files
THREAD_ENV = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}

# Out-of-world commands of the Inform 7 parser (standard rules and the Z-machine's file verbs) and of
# TextWorld's generated games, refused as the first word of any clause. The game's dictionary keeps
# 9 Z-characters of a word ("transcriptxyz" is "transcript"), so words are compared in that form.
META_COMMANDS = frozenset(
    "save restore load script transcript unscript noscript quit q die restart undo verify version"
    " verbose long brief normal superbrief short notify print_state enable disable restrict".split()
)
META_PREFIXES = ("tw-", "#")  # TextWorld's framework commands (tw-extra-infos, tw-trace-actions, ...)
_A2 = set("0123456789.,!?_#'\"/\\-:()")  # Z-machine alphabet A2: two Z-characters each
_TOKENS = re.compile(r'[.,"]|[^\s.,"]+')  # the parser's word separators: '.', ',' and '"'


def dictionary_form(word: str) -> str:
    """`word` as the game's dictionary compares it: lower case, its first 9 Z-characters."""
    kept, cost = [], 0
    for ch in word.lower():
        cost += 1 if "a" <= ch <= "z" else 2 if ch in _A2 else 4
        if cost > 9:
            break
        kept.append(ch)
    return "".join(kept)


_META_FORMS = frozenset(dictionary_form(w) for w in META_COMMANDS)


def clean_command(raw: str) -> tuple[str, str | None]:
    """(the command to send, None) or ("", why it is refused).

    Printable text only; whitespace collapsed; at most MAX_COMMAND_CHARS characters and
    MAX_COMMAND_BYTES UTF-8 bytes, cut at a character boundary; no out-of-world command."""
    bad = next((ch for ch in raw if not ch.isprintable() and ch not in "\t\n\r" and category(ch) != "Zs"), None)
    if bad is not None:
        return "", f"the command contains a character the game cannot read (U+{ord(bad):04X}); use printable text"
    command = " ".join(raw.split())[:MAX_COMMAND_CHARS]
    encoded = command.encode("utf-8")
    if len(encoded) > MAX_COMMAND_BYTES:
        command = encoded[:MAX_COMMAND_BYTES].decode("utf-8", "ignore").rstrip()
    clause_start = True
    for token in _TOKENS.findall(command):
        form = dictionary_form(token)
        if token in '.,"' or form == "then":
            clause_start = True
            continue
        if clause_start and (form in _META_FORMS or token.lower().startswith(META_PREFIXES)):
            return "", f"'{token}' is a command about the game program, not an action in the game; it is not available"
        clause_start = False
    return command, None


def clean_feedback(text: str) -> str:
    """The game's answer without the trailing prompt/status line, capped."""
    text = _PROMPT_TAIL.sub("", text or "").strip()
    if len(text) > MAX_OBSERVATION_CHARS:
        text = text[:MAX_OBSERVATION_CHARS] + f"\n[output cut at {MAX_OBSERVATION_CHARS} characters]"
    return text


def read_state(reply: dict) -> dict:
    """The game state in a worker's reply, every field type-checked; WorkerGone if there is none."""
    if "error" in reply:
        raise WorkerGone(f"the interpreter failed: {str(reply['error'])[:300]}")
    state = reply.get("state")
    if not isinstance(state, dict):
        raise WorkerGone("the worker's reply holds no game state")

    def text(key: str) -> str:
        value = state.get(key)
        return value if isinstance(value, str) else ""

    def number(key: str) -> int | None:
        value = state.get(key)
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    admissible = state.get("admissible_commands")
    return {
        "feedback": text("feedback"),
        "description": text("description"),
        "admissible_commands": [c for c in admissible if isinstance(c, str)] if isinstance(admissible, list) else [],
        "won": state.get("won") is True,
        "lost": state.get("lost") is True,
        "score": number("score"),
        "moves": number("moves"),
        "done": state.get("done") is True,
    }


class TextWorldEnv:
    """Environment protocol implementation for one TextWorld game and one rollout.

    Rounds: every command uses one round, a refused one too; the episode ends when the game is
    won or lost, when the last round is used, or when the interpreter fails. A command the game
    does not offer right now (not among its admissible commands) still runs, since the game's
    own answer is informative, but the step is marked error="inadmissible" so detectors can
    count it; a refused command is marked error="invalid_command".
    """

    def __init__(self, task: GameTask, max_rounds: int = DEFAULT_MAX_ROUNDS) -> None:
        if max_rounds < 1:
            raise ValueError(f"max_rounds must be >= 1, got {max_rounds}")
        self.task = task
        self.max_rounds = max_rounds
        self.rounds_used = 0
        self.done = False
        self.worker: JsonWorker | None = None
        self.state: dict | None = None
        self.commands: list[str] = []  # what was actually sent to the game
        self.crash: str | None = None  # why the interpreter stopped, if it did
        self.sandbox: str | None = None  # "bwrap", or "none" under HS_SANDBOX=none
        self._scratch: str | None = None  # the unconfined fallback's private working folder
        # The first interpreter starts now: the rollout engine makes a batch's environments before it
        # resets them, so their interpreters import TextWorld (about 0.7 s) side by side.
        self._next: tuple[str, JsonWorker, str | None] | None = self._start()

    def _start(self) -> tuple[str, JsonWorker, str | None]:
        """A new interpreter process (not yet waited for): the story file's path, the worker, and
        the unconfined fallback's scratch folder. It sees itself and the game (.z8, and the .json
        TextWorld reads beside it to track the quest) read-only, and a private tmpfs as cwd."""
        story = os.path.realpath(self.task.game_file)
        files = (str(WORKER), story, os.path.splitext(story)[0] + ".json")
        cwd, scratch = "/tmp", None
        if sandbox_mode() == "none":  # no tmpfs there: a folder of its own for what it writes
            cwd = scratch = tempfile.mkdtemp(prefix="hs-textworld-")
        layout = Layout(read_only=files, tmpfs=(("/tmp", SCRATCH_BYTES),), cwd=cwd, env=dict(THREAD_ENV))
        self.sandbox = confinement(layout, LIMITS)["sandbox"]
        worker = JsonWorker([sys.executable, "-I", "-B", str(WORKER)], layout, LIMITS, MAX_REPLY_BYTES)
        return story, worker, scratch

    def reset(self) -> str:
        """Start a fresh interpreter on the game and return the goal and the first room."""
        self._stop()
        self.rounds_used, self.done, self.commands, self.crash, self.state = 0, False, [], None, None
        story, self.worker, self._scratch = self._next or self._start()
        self._next = None
        try:
            hello = self.worker.read(STARTUP_WALL_SECONDS)
            if not hello.get("ready"):
                raise WorkerGone(str(hello.get("error", hello))[:300])
            self.state = read_state(self.worker.ask({"op": "reset", "game_file": story}, RESET_WALL_SECONDS))
        except WorkerGone as exc:
            self.close()
            raise RuntimeError(f"the TextWorld interpreter for {self.task.id} did not start: {exc}") from None
        return f"{self.task.goal}\n\n{clean_feedback(self.state['description'])}"

    def admissible_commands(self) -> list[str]:
        """Commands the game offers in the current state (for harnesses that show them)."""
        return list(self.state["admissible_commands"]) if self.state is not None else []

    def step(self, action: Action) -> StepResult:
        if self.state is None:
            raise RuntimeError("call reset() before step()")
        if self.done:
            raise RuntimeError(f"episode of {self.task.id} is over; call verify() or reset()")
        if not isinstance(action, CommandAction):
            raise TypeError(f"TextWorld takes CommandAction, got {action!r}")
        self.rounds_used += 1
        command, refused = clean_command(action.command)
        if refused is not None:
            self.done = self.rounds_used >= self.max_rounds
            return StepResult(observation=f"Error: {refused}.", done=self.done, error="invalid_command")
        admissible = command.lower() in {c.lower() for c in self.admissible_commands()}
        self.commands.append(command)
        try:
            if self.worker is None:
                raise WorkerGone("the worker is not running")
            self.state = read_state(self.worker.ask({"op": "step", "command": command}, STEP_WALL_SECONDS))
        except WorkerGone as exc:
            self.crash = str(exc)
            self.done = True
            self.close()
            return StepResult(observation=f"Error: the game stopped ({exc}); the episode is over.", done=True,
                              error="env_error")  # fmt: skip
        outcome = "won" if self.state["won"] else "lost" if self.state["lost"] else None
        self.done = self.state["done"] or outcome is not None or self.rounds_used >= self.max_rounds
        return StepResult(
            observation=clean_feedback(self.state["feedback"]),
            done=self.done,
            error=None if admissible else "inadmissible",
            outcome=outcome,
        )

    def verify(self) -> Verdict:
        """Won is success (reward 1); anything else, lost, out of rounds or a failed interpreter, is 0."""
        if self.state is None:
            raise RuntimeError("no game: call reset() first")
        won = self.state["won"] and self.crash is None
        details = {
            "won": won,
            "lost": self.state["lost"],
            "score": self.state["score"],
            "max_score": self.task.max_score,
            "moves": self.state["moves"],
            "rounds_used": self.rounds_used,
            "commands": list(self.commands),
            "confinement": self.sandbox,
        }
        if self.crash is not None:
            details["error"] = f"the interpreter stopped: {self.crash}"
        return Verdict(reward=1.0 if won else 0.0, success=won, details=details)

    def _stop(self) -> None:
        worker, self.worker = self.worker, None
        if worker is not None:
            worker.stop()
        scratch, self._scratch = self._scratch, None
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)

    def close(self) -> None:
        """Stop the interpreter (and one started ahead); safe to call more than once. The last
        state stays for verify()."""
        self._stop()
        spare, self._next = self._next, None
        if spare is not None:
            spare[1].stop()
            if spare[2] is not None:
                shutil.rmtree(spare[2], ignore_errors=True)

    def __enter__(self) -> TextWorldEnv:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
