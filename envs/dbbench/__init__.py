"""DBBench (AgentBench's database task): data, SQL backends, verifier, environment, gold replay."""

from envs.dbbench.data import BenchTask, load_split
from envs.dbbench.env import DbBenchEnv

__all__ = ["BenchTask", "DbBenchEnv", "load_split"]
