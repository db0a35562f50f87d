"""Environment defaults of every `hs` process (and of the test suite), set before Prefect,
transformers or tokenizers are imported: a patient temporary Prefect API, no analytics, no
hub access, quiet transformers, no tokenizer thread pools, and torch's OpenMP threads that sleep
instead of spinning while they wait (`OMP_WAIT_POLICY=PASSIVE`, read once when torch loads): on
these 2-core machines a spinning thread keeps its core from the thread it waits for whenever
another process (a sandbox, the database, a neighbour) holds the other core, and a decode step
then waits out scheduler time slices, 20x slower (benchmarks/omp_wait.py, docs/results.md; on
an idle machine it cost a third of decode speed until the decode kernels got helper threads of
their own, rl/decode_pool.cpp: now about 6%). A value already set wins (`OMP_WAIT_POLICY=ACTIVE`
makes them spin).

oneDNN's compiled matrix kernels are cached per shape (torch's bf16 matmuls on CPU go through
ideep and oneDNN, each with a cache of 1,024 entries by default). Training and decoding meet a
new shape with every sequence length and batch width, and each entry holds its generated code and
buffers (about 0.3-0.5 MB), so the caches grew to 0.48 GiB of the quickstart's main process before
its first update, kept for the rest of the run (a jemalloc heap profile, docs/results.md). 256
entries each keep what a decode step reuses (a handful of weight shapes at each batch width) and
bound the rest."""

from __future__ import annotations

import os

RUN_DEFAULTS = {  # also given to every deployed flow run (`hs deploy`)
    "OMP_WAIT_POLICY": "PASSIVE",
    "ONEDNN_PRIMITIVE_CACHE_CAPACITY": "256",
    "LRU_CACHE_CAPACITY": "256",  # ideep's cache of oneDNN kernels, in front of oneDNN's own
}
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
