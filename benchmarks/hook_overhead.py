"""What running code hooks out of process costs: per call, per episode, per worker start.

Side by side in one run: the same compiled hook called in this process (the old in-process
path, kept here only as the peer) and through the confined worker (harness_pool/hook_client.py).
An episode here is what a 6-turn DBBench rollout calls: one hook at on_init and
before_model_call, then before_action, after_step and before_model_call on every turn (20
calls), plus opening the episode (a fresh compile in the worker).

    .venv/bin/python benchmarks/hook_overhead.py [--calls 2000] [--episodes 200]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from envs.dbbench.rules import _BLOCK_REPEAT  # noqa: E402
from harness_pool.hook_client import HookSession, HookWorker  # noqa: E402
from harness_pool.sandbox import call_hook, compile_hook  # noqa: E402

CTX = {
    "point": "before_action",
    "round": 3,
    "queries": 2,
    "last_error": False,
    "last_observation": "[(1, 'a')]" * 40,
    "sql_history": ["SELECT * FROM `t`", "SELECT count(*) FROM `t`"],
    "action_kind": "sql",
    "action_sql": "SELECT name FROM `t` WHERE id = 3",
    "instruction": "How many rows?",
    "table_name": "t",
    "headers": "id, name",
    "sample_rows": "[(1, 'a')]",
    "description": "",
    "add_description": "",
}
CALLS_PER_EPISODE = 20


def _median_us(fn, n: int) -> float:
    times = []
    for _ in range(n):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return statistics.median(times) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--episodes", type=int, default=200)
    args = parser.parse_args()

    fn = compile_hook(_BLOCK_REPEAT)
    in_process = _median_us(lambda: call_hook(fn, CTX, {}), args.calls)

    started = time.perf_counter()
    worker = HookWorker()
    first = HookSession([("block_repeat", _BLOCK_REPEAT)], worker)
    first.call("block_repeat", CTX)
    start_ms = (time.perf_counter() - started) * 1e3
    out_of_process = _median_us(lambda: first.call("block_repeat", CTX), args.calls)

    def episode() -> None:
        session = HookSession([("block_repeat", _BLOCK_REPEAT)], worker)
        for _ in range(CALLS_PER_EPISODE):
            session.call("block_repeat", CTX)
        session.close()

    def episode_in_process() -> None:
        hook = compile_hook(_BLOCK_REPEAT)
        for _ in range(CALLS_PER_EPISODE):
            call_hook(hook, CTX, {})

    per_episode = _median_us(episode, args.episodes) / 1e3
    per_episode_in = _median_us(episode_in_process, args.episodes) / 1e3
    worker.close()
    print("| measure | in process | confined worker | ratio |\n|---|---|---|---|")
    print(
        f"| one hook call (median of {args.calls}) | {in_process:.0f} µs | {out_of_process:.0f} µs | "
        f"{out_of_process / in_process:.1f}x |"
    )
    print(
        f"| one episode: fresh compile + {CALLS_PER_EPISODE} calls (median of {args.episodes}) | "
        f"{per_episode_in:.2f} ms | {per_episode:.2f} ms | {per_episode / per_episode_in:.1f}x |"
    )
    print(f"| worker start (once per process) + first call | - | {start_ms:.0f} ms | |")


if __name__ == "__main__":
    main()
