"""Environment defaults of every `hs` process (and of the test suite), set before Prefect,
transformers or tokenizers are imported: a patient temporary Prefect API, no analytics, no
hub access, quiet transformers, no tokenizer thread pools. A value already set wins."""

from __future__ import annotations

import os

DEFAULTS = {
    "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "120",
    "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
    "TRANSFORMERS_VERBOSITY": "error",
    "HF_HUB_OFFLINE": "1",
    "TOKENIZERS_PARALLELISM": "false",
}


def apply_defaults(extra: dict[str, str] | None = None) -> None:
    for key, value in {**DEFAULTS, **(extra or {})}.items():
        os.environ.setdefault(key, value)
