"""The TextWorld interpreter worker: one game, one process, inside the platform's sandbox.

Started by envs/textworld/env.py as `python -I -B <this file>` (sandbox/jail.py: the user nobody,
no network, a private PID namespace, the read-only interpreter and its site-packages, this file
and the game's .z8/.json, a small private tmpfs as cwd, no new processes or threads, address-space
and CPU limits). It imports only the standard library, textworld and jericho: the project tree is
not on its path.

Protocol: one JSON object per line on stdin, one reply per line on the original stdout (fd 1 is
pointed at stderr, so nothing the interpreter prints can break a reply).
    first line written: {"ready": true}
    {"op": "reset", "game_file": path} -> {"state": {...}}
    {"op": "step", "command": text}    -> {"state": {...}}
    anything that fails                -> {"error": "..."}
A state is feedback, description, admissible_commands, won, lost, score, moves and done.
"""

import json
import os
import sys
import warnings

MAX_TEXT_CHARS = 64_000  # one reply stays far below the parent's reply limit


def _text(value) -> str:
    return str(value or "")[:MAX_TEXT_CHARS]


def _state(state, done: bool) -> dict:
    def number(value):
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    return {
        "feedback": _text(state.feedback),
        "description": _text(state.description),
        "admissible_commands": [_text(c)[:500] for c in list(state.admissible_commands or [])[:1000]],
        "won": bool(state.won),
        "lost": bool(state.lost),
        "score": number(state.score),
        "moves": number(state.moves),
        "done": bool(done),
    }


def main() -> int:
    replies = os.fdopen(os.dup(1), "w", encoding="ascii", errors="backslashreplace")
    os.dup2(2, 1)  # what the interpreter or a library prints goes to stderr, not into the protocol
    sys.stdout = sys.stderr
    warnings.simplefilter("ignore")  # Jericho's "not fully supported" note: TextWorld tracks the quest itself

    def reply(message: dict) -> None:
        replies.write(json.dumps(message) + "\n")
        replies.flush()

    try:
        import textworld
    except Exception as exc:  # noqa: BLE001 - the parent gets the reason, not a traceback
        reply({"ready": False, "error": f"cannot import textworld: {type(exc).__name__}: {exc}"[:500]})
        return 1
    infos = textworld.EnvInfos(admissible_commands=True, description=True, won=True, lost=True, score=True, moves=True)
    reply({"ready": True})
    game = None
    for line in sys.stdin.buffer:
        try:
            request = json.loads(line)
            op = request.get("op")
            if op == "reset":
                if game is not None:
                    game.close()
                game = textworld.start(str(request["game_file"]), request_infos=infos)
                reply({"state": _state(game.reset(), False)})
            elif op == "step":
                if game is None:
                    raise RuntimeError("no game: reset first")
                state, _, done = game.step(str(request["command"]))
                reply({"state": _state(state, done)})
            else:
                raise ValueError(f"unknown op {op!r}")
        except Exception as exc:  # noqa: BLE001
            reply({"error": f"{type(exc).__name__}: {exc}"[:500]})
    return 0


if __name__ == "__main__":
    sys.exit(main())
