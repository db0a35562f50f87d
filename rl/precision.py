"""Which number format runs where, and the rollout copy of a trained model.

bf16 matrix products are 6.5x fp32 on CPUs with AMX / AVX-512 bf16 (docs/method.md §7) and native
on recent GPUs, so 'auto' picks bf16 there and fp32 elsewhere. Training keeps fp32 master
weights and optimizer state (one AdamW step at lr 1e-5 moves only 2% of bf16 weights) and
runs its forward and backward under bf16 autocast; rollouts sample from a bf16 copy whose
weights are refreshed from the trainer after every update. The rollout log-probs are the
copy's, so the GRPO mismatch weight min(max(p_trainer / p_rollout, 0), 2) corrects for the
difference.
"""

from __future__ import annotations

import copy
from functools import lru_cache
from pathlib import Path

import torch

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


@lru_cache(maxsize=1)
def cpu_has_fast_bf16() -> bool:
    """AMX tiles or AVX-512 bf16 instructions (Linux /proc/cpuinfo flags)."""
    return any(f in cpuinfo().split() for f in ("amx_bf16", "avx512_bf16"))


@lru_cache(maxsize=1)
def cpu_has_amx() -> bool:
    """AMX tiles for bf16 (Linux /proc/cpuinfo flags): oneDNN's bf16 matmuls run on them."""
    return "amx_bf16" in cpuinfo().split()


def precision_record(device: str, **dtypes: str) -> dict:
    """What a model was trained or sampled in, for its provenance: each named dtype resolved
    ('auto' gives bf16 on one machine and fp32 on another under the same checkpoint name), the
    device and, on CPU, the processor and whether it has fast bf16."""
    record = {name: resolve_dtype(value, device) for name, value in dtypes.items()}
    record["device"] = device
    if device.split(":")[0] == "cpu":
        models = [line for line in cpuinfo().splitlines() if line.startswith("model name")]
        record["cpu"] = models[0].split(":", 1)[1].strip() if models else "unknown"
        record["fast_bf16"] = cpu_has_fast_bf16()
    return record


def cpuinfo() -> str:
    try:
        return Path("/proc/cpuinfo").read_text()
    except OSError:
        return ""


def resolve_dtype(name: str, device: str) -> str:
    """'auto' -> 'bfloat16' where bf16 is fast (CUDA with bf16 support, a CPU with AMX/AVX-512
    bf16), else 'float32'; any other name is returned as given."""
    if name != "auto":
        return name
    if device.startswith("cuda"):
        return "bfloat16" if torch.cuda.is_available() and torch.cuda.is_bf16_supported() else "float32"
    return "bfloat16" if cpu_has_fast_bf16() else "float32"


def autocast(device: str, dtype: str):
    """The update's compute context: bf16/fp16 autocast, or nothing for fp32."""
    if dtype == "float32":
        return torch.autocast(device_type=device.split(":")[0], enabled=False)
    return torch.autocast(device_type=device.split(":")[0], dtype=DTYPES[dtype])


def rollout_copy(model, dtype: str):
    """A frozen copy of a plain Hugging Face model in `dtype` for sampling."""
    twin = copy.deepcopy(model).to(DTYPES[dtype])
    twin.eval()
    for p in twin.parameters():
        p.requires_grad_(False)
    return twin


@torch.no_grad()
def sync_weights(source, target) -> None:
    """Copy every tensor of `source` (a plain model, e.g. the trainer's merged export) into
    `target`, casting to target's dtype: in place, or into fresh memory for the parameters that
    `set_aside_weights` emptied."""
    wanted = target.state_dict()
    given = source.state_dict()
    missing = [k for k in wanted if k not in given]
    if missing:
        raise KeyError(f"the trainer's model lacks {len(missing)} tensors of the rollout copy, e.g. {missing[0]}")
    for name, param in target.named_parameters():  # one name per tensor: tied weights are filled once
        if param.numel() == 0 and given[name].numel():
            param.data = given[name].detach().to(param.dtype, copy=True)
    for name, tensor in wanted.items():
        if tensor.numel():
            tensor.copy_(given[name])


@torch.no_grad()
def set_aside_weights(model) -> None:
    """Free the parameters' memory of a rollout copy while it is not sampling (an update holds
    gradients and the optimizer's state instead; SmolLM2-135M's bf16 copy is 0.25 GiB). The
    module stays; `sync_weights` gives it its weights back."""
    for param in model.parameters():
        param.data = torch.empty(0, dtype=param.dtype, device=param.device)
