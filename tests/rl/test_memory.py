"""rl/memory.py: tensors freed within a phase give their pages back to the operating system."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

PATTERN = r"""
import psutil, torch
from rl.memory import bound_heap, release_memory
assert bound_heap()
big = torch.ones(24 << 20, dtype=torch.uint8)
del big  # a large free: glibc's mmap threshold rises to 24 MiB, so 8 MiB tensors come from the heap
blocks = [torch.ones(8 << 20, dtype=torch.uint8) for _ in range(80)]  # 640 MiB of 8 MiB tensors
kept = blocks[1::2]  # every other one freed: holes in the heap that stay resident
del blocks
before = psutil.Process().memory_info().rss
assert release_memory(collect=False)
print(before, psutil.Process().memory_info().rss)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's allocator")
def test_release_memory_returns_tensors_freed_mid_phase():
    out = subprocess.run([sys.executable, "-c", PATTERN], capture_output=True, text=True, check=True)
    before, after = map(int, out.stdout.split())
    assert before - after > 200 << 20, (before >> 20, after >> 20)  # the 320 MiB of holes leave the resident set


def test_a_rollout_copy_set_aside_during_an_update_gets_back_exactly_the_trained_weights():
    """tasks/train_handle.py frees the bf16 rollout copy's parameters for the update; the refresh
    fills them from the trainer's weights, tied embeddings included, as an in-place copy would."""
    import torch

    from rl.precision import rollout_copy, set_aside_weights, sync_weights
    from tests.doubles import tiny_llama

    trained = tiny_llama()
    trained.config.tie_word_embeddings = True
    trained.tie_weights()
    kept, parked = rollout_copy(trained, "bfloat16"), rollout_copy(trained, "bfloat16")
    with torch.no_grad():
        for p in trained.parameters():
            p.add_(0.5)  # an update moved every weight
    set_aside_weights(parked)
    assert sum(p.numel() for p in parked.parameters()) == 0
    sync_weights(trained, kept)
    sync_weights(trained, parked)
    for (name, a), b in zip(kept.state_dict().items(), parked.state_dict().values()):
        assert a.dtype == b.dtype == torch.bfloat16 and torch.equal(a, b), name
    assert parked.lm_head.weight is parked.model.embed_tokens.weight  # still one tensor
    ids = torch.tensor([[5, 9, 12]])
    assert torch.equal(kept(ids).logits, parked(ids).logits)


GROWTH = r"""
import resource, torch
from rl.decode import DecodeEngine, _Batch
from tests.doubles import tiny_llama

engine = DecodeEngine(tiny_llama(), eos_ids=[0], pad_id=0)
batch = _Batch(engine, 8)
batch.kv = [torch.ones(2, 4, 2, 5000, 64) for _ in range(20)]  # 20 layers x 20 MiB (fp32 ones: resident)
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
batch._ensure_width(5001)  # 1.5x: 600 MiB in all
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
assert batch.kv[7].shape == (2, 4, 2, 7500, 64) and bool((batch.kv[7][..., :5000, :] == 1).all())
assert not bool(batch.kv[7][..., 5000:, :].any())
print((after - before) >> 10)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="ru_maxrss in KiB")
def test_the_key_value_buffer_grows_one_layer_at_a_time():
    """rl/decode.py's buffer growing from 400 to 600 MiB keeps what it held and raises the peak by
    the growth and one layer (about 230 MiB), not by a second whole buffer (600 MiB)."""
    out = subprocess.run([sys.executable, "-c", GROWTH], capture_output=True, text=True, check=True)
    assert int(out.stdout) < 400, out.stdout  # MiB above the peak before growing


@pytest.mark.skipif(not Path("/proc/self/smaps").exists(), reason="reads the process's mappings (Linux)")
def test_populating_a_mapped_tensor_makes_its_pages_private_and_changes_no_value_nor_the_file(tmp_path):
    """populate_for_writing on a tensor mapped from a saved file (the trainer's moments set aside)
    gives the process its own copy of every whole page inside it; the values stay, and a write
    afterwards leaves the file as saved (the mapping is private)."""
    import torch

    from rl.memory import populate_for_writing
    from tests.rl.test_trainer import mapping_of

    path = tmp_path / "state.pt"
    values = torch.arange(1 << 20, dtype=torch.float32)  # 4 MiB
    torch.save({"moment": values}, path)
    mapped = torch.load(path, weights_only=True, mmap=True)["moment"]
    assert mapping_of(mapped) == (str(path), 0)
    if not populate_for_writing([mapped]):
        pytest.skip("the kernel lacks MADV_POPULATE_WRITE (Linux 5.14 and later)")
    assert mapping_of(mapped)[1] >= 4096 - 8  # kB: all but the two edge pages
    assert torch.equal(mapped, values)
    mapped.add_(1)
    assert torch.equal(torch.load(path, weights_only=True)["moment"], values)
