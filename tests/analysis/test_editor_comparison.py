"""The editor comparison's figures on hand-built patch rows."""

import pytest

from analysis.editor import PatchRow, compare_best, editor_of, success_under, summarise


def test_sources_map_to_editors():
    assert editor_of("offline-v2") == "offline"
    assert editor_of("engineer-sft:engineer-sft-ab12") == "sft"
    assert editor_of("engineer-grpo:engineer-grpo-cd34") == "grpo"
    assert editor_of("llm:gpt") == "llm"


def test_summary_shares_means_and_best_patch_success():
    sizes = {"b1": (2, 2), "b2": (4, 0)}
    rows = [
        PatchRow("offline", "b1", "valid", 1, 0),
        PatchRow("offline", "b1", "invalid", 0, 1),
        PatchRow("offline", "b2", "rejected", 0, 0),
        PatchRow("grpo", "b1", "valid", 2, 0),
        PatchRow("grpo", "b2", "invalid", 1, 0),
    ]
    offline, grpo = summarise(rows, sizes)
    assert offline.editor == "offline" and offline.patches == 3 and offline.bundles == 2
    assert offline.static_pass.estimate == pytest.approx(2 / 3) and offline.validated.estimate == pytest.approx(1 / 3)
    assert offline.fixed_mean == pytest.approx(1 / 3) and offline.broken_mean == pytest.approx(1 / 3)
    # b1: best of (1 + 2 - 0) / 4 and (0 + 2 - 1) / 4 = 0.75; b2: rejected -> the parent's 0 / 4
    assert offline.best_success == pytest.approx((0.75 + 0.0) / 2)
    assert grpo.best_success == pytest.approx((1.0 + 0.25) / 2)
    assert success_under(PatchRow("x", "b1", "rejected", 0, 0), 2, 2) == 0.5
    assert compare_best(rows, sizes, "grpo", "offline")[1] == "within noise"  # two bundles decide nothing
    assert compare_best(rows, sizes, "grpo", "sft") is None
