"""The benchmarks the platform runs, each behind the same `Environment` contract.

A benchmark is one package with a `Benchmark` object (the built-in ones: `envs/<name>/benchmark.py`)
plus its registration: a line in `BUILTIN` here, or, for a benchmark outside this repository, an
entry point in the `harness_s.benchmarks` group of its own package's metadata:

    [project.entry-points."harness_s.benchmarks"]
    toy = "toy_bench.benchmark:BENCHMARK"

The object says how to load a split's tasks, build one rollout's environment, fill a harness's
template placeholders, parse a reply under each of its protocols, diagnose a failed rollout and
edit a harness offline (its rules module), describe itself to an editor or router, replay its gold
solutions and prepare its training split. Flows, tasks, the editor and the rollout engine only ask
this registry, so adding a benchmark touches no other module. A `Benchmark` module imports only
what is cheap; its environment is imported when a rollout first needs it.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from importlib import import_module
from importlib.metadata import entry_points

from envs.base import Benchmark, DataError

ENTRY_POINT_GROUP = "harness_s.benchmarks"
DEFAULT_BENCHMARK = "dbbench"  # what a config or command that names no benchmark runs
BUILTIN = {
    "dbbench": "envs.dbbench.benchmark:BENCHMARK",
    "textworld": "envs.textworld.benchmark:BENCHMARK",
    "bfcl": "envs.bfcl.benchmark:BENCHMARK",
    "repair": "envs.repair.benchmark:BENCHMARK",
}


@cache
def _specs() -> dict[str, str]:
    """name -> "module:attribute" of every registered benchmark; built-in names win (read once per
    process: entry points change only when packages are installed)."""
    found = {ep.name: ep.value for ep in entry_points(group=ENTRY_POINT_GROUP)}
    return {**found, **BUILTIN}


def names() -> tuple[str, ...]:
    return tuple(_specs())


@cache
def _load(name: str, spec: str) -> Benchmark:
    module, _, attribute = spec.partition(":")
    try:
        found = getattr(import_module(module), attribute)
    except ImportError as exc:
        raise DataError(f"benchmark '{name}' could not be imported ({exc}): run `make setup`") from exc
    except AttributeError:
        raise DataError(f"benchmark '{name}': {module} has no {attribute}; fix its registration") from None
    if not isinstance(found, Benchmark) or found.name != name:
        raise DataError(f"benchmark '{name}': {spec} is not a Benchmark named '{name}'; fix its registration")
    return found


def benchmark(name: str) -> Benchmark:
    specs = _specs()
    if name not in specs:
        raise DataError(f"unknown benchmark '{name}': the platform has {', '.join(specs)}")
    return _load(name, specs[name])


def check_name(name: str) -> str:
    """A benchmark name for a pydantic validator: the name, or ValueError listing the known ones."""
    if name not in _specs():
        raise ValueError(f"unknown benchmark '{name}': use one of {', '.join(names())}")
    return name


def behaviours(name: str) -> tuple[str, ...]:
    """Every behaviour tag the benchmark's detectors can give, in report order."""
    return benchmark(name).behaviours


def rules(name: str):
    """The benchmark's rules module (diagnosis causes and families, offline operators, root_cause)."""
    return import_module(benchmark(name).rules)


def _protocol_owner(protocol: str) -> str | None:
    owners = [n for n in names() if protocol.startswith(f"{n}_")]
    return max(owners, key=len) if owners else None


def protocol_names() -> tuple[str, ...]:
    """Every tool-view protocol of every registered benchmark."""
    return tuple(p for n in names() for p in import_module(benchmark(n).protocols).PROTOCOLS)


def parser(protocol: str) -> Callable:
    """The parser of a tool-view protocol: (reply text, accept_scalar_answer) -> ParsedAction."""
    owner = _protocol_owner(protocol)
    try:
        parsers = import_module(benchmark(owner).protocols).PROTOCOLS if owner else {}
    except DataError as exc:  # a harness validator expects ValueError
        raise ValueError(str(exc)) from None
    if protocol not in parsers:
        raise ValueError(f"unknown tool-view protocol '{protocol}': use one of {', '.join(protocol_names())}")
    return parsers[protocol]
