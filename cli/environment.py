"""Environment defaults of every `hs` process (and of the test suite), set before Prefect,
transformers or tokenizers are imported: a patient temporary Prefect API, no analytics, no
hub access, quiet transformers, no tokenizer thread pools, and torch's OpenMP threads that sleep
instead of spinning while they wait (`OMP_WAIT_POLICY=PASSIVE`, read once when torch loads): on
these 2-core machines a spinning thread keeps its core from the thread it waits for whenever
another process (a sandbox, the database, a neighbour) holds the other core, and a decode step
then waits out scheduler time slices, 20x slower (benchmarks/omp_wait.py, docs/results.md; on
an idle machine it costs a third of decode speed). A value already set wins (`OMP_WAIT_POLICY=ACTIVE`
makes them spin)."""

from __future__ import annotations

import os

RUN_DEFAULTS = {"OMP_WAIT_POLICY": "PASSIVE"}  # also given to every deployed flow run (`hs deploy`)
DEFAULTS = {
    **RUN_DEFAULTS,
    "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "120",
    "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
    "TRANSFORMERS_VERBOSITY": "error",
    "HF_HUB_OFFLINE": "1",
    "TOKENIZERS_PARALLELISM": "false",
}


def apply_defaults(extra: dict[str, str] | None = None) -> None:
    for key, value in {**DEFAULTS, **(extra or {})}.items():
        os.environ.setdefault(key, value)
