"""Frozen pool versions: round trip, immutability, tamper detection, diffs and DVC tagging."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from harness_pool.pool_store import (
    PoolManifest,
    diff_pools,
    freeze_pool,
    list_pools,
    load_pool,
    pool_id,
    version_with_dvc,
)
from harness_pool.spec import HarnessError, load_harness

SIBLINGS = ["schema_rows", "format_reminder", "inspect_first", "query_before_answer", "lenient_answer"]


@pytest.fixture(scope="module")
def seed():
    return load_harness("h0"), [load_harness(name) for name in SIBLINGS]


def test_freeze_then_load_gives_back_the_same_harnesses(seed, tmp_path):
    h0, siblings = seed
    manifest = freeze_pool(h0, siblings, "dbbench", "seed-v1", tmp_path, created_by="run-7")
    folder = tmp_path / "dbbench" / "seed-v1"
    assert sorted(p.name for p in folder.iterdir()) == sorted(
        [f"{n}.yaml" for n in ["h0", *SIBLINGS]] + ["manifest.yaml"]
    )
    assert manifest.pool_id == pool_id([h0.id, *(s.id for s in siblings)])
    assert manifest.base_id == h0.id and manifest.created_by == "run-7"
    assert [m.name for m in manifest.members] == ["h0", *SIBLINGS]
    assert manifest.members[1].parent_ids == [h0.id] and manifest.members[1].round == 0
    assert manifest.members[1].root_causes == siblings[0].provenance.root_causes

    loaded, base, loaded_siblings = load_pool("seed-v1", root=tmp_path)
    assert loaded == manifest
    assert base.id == h0.id
    assert [s.id for s in loaded_siblings] == [s.id for s in siblings]
    assert load_pool(str(folder))[0].pool_id == manifest.pool_id  # by folder path too
    assert [m.version for m in list_pools("dbbench", tmp_path)] == ["seed-v1"]
    assert not [p for p in folder.parent.iterdir() if p.name.startswith(".")]  # no temp folder left


def test_refreeze_same_members_is_a_no_op_and_other_members_are_refused(seed, tmp_path):
    h0, siblings = seed
    first = freeze_pool(h0, siblings, "dbbench", "v1", tmp_path, created_by="a")
    mtime = (tmp_path / "dbbench" / "v1" / "manifest.yaml").stat().st_mtime_ns
    again = freeze_pool(h0, list(reversed(siblings)), "dbbench", "v1", tmp_path, created_by="b")
    assert again.pool_id == first.pool_id and again.created_by == "a"
    assert (tmp_path / "dbbench" / "v1" / "manifest.yaml").stat().st_mtime_ns == mtime
    with pytest.raises(HarnessError, match="pool version v1 already exists with other members; choose a new version"):
        freeze_pool(h0, siblings[:-1], "dbbench", "v1", tmp_path)


def test_tampered_file_is_named(seed, tmp_path):
    h0, siblings = seed
    freeze_pool(h0, siblings, "dbbench", "v1", tmp_path)
    path = tmp_path / "dbbench" / "v1" / "inspect_first.yaml"
    data = yaml.safe_load(path.read_text())
    data["guidance"] = "Answer at once."
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(HarnessError, match=r"inspect_first\.yaml: content differs from the frozen harness"):
        load_pool("v1", root=tmp_path)


def test_missing_version_lists_existing_ones(seed, tmp_path):
    h0, siblings = seed
    freeze_pool(h0, siblings[:1], "dbbench", "v2", tmp_path)
    freeze_pool(h0, siblings[:2], "dbbench", "v10", tmp_path)
    assert [m.version for m in list_pools("dbbench", tmp_path)] == ["v2", "v10"]
    with pytest.raises(HarnessError, match="pool version 'v3' not found .*existing versions: v2, v10"):
        load_pool("v3", root=tmp_path)


def test_duplicate_names_and_bad_versions_are_refused(seed, tmp_path):
    h0, siblings = seed
    twin = siblings[0].model_copy(update={"guidance": "another"})
    with pytest.raises(HarnessError, match="harness name 'schema_rows' appears twice"):
        freeze_pool(h0, [siblings[0], twin], "dbbench", "v1", tmp_path)
    for bad in ["../up", ".hidden", "a b", "", "x" * 65]:
        with pytest.raises(HarnessError, match="pool version .* is not allowed"):
            freeze_pool(h0, siblings, "dbbench", bad, tmp_path)
    assert not (tmp_path / "dbbench").exists() or not list((tmp_path / "dbbench").iterdir())


def test_diff_shows_removed_added_changed_and_same(seed, tmp_path):
    h0, siblings = seed
    by_name = {s.name: s for s in siblings}
    edited = by_name["inspect_first"].model_copy(update={"guidance": "Run SELECT * FROM the table LIMIT 5 first."})
    newcomer = h0.model_copy(
        update={
            "name": "window3",
            "parent_ids": [h0.id],
            "context": h0.context.model_copy(update={"history_window": 3}),
        }
    )
    v2_siblings = [s for s in siblings if s.name not in ("lenient_answer", "inspect_first")] + [edited, newcomer]
    a = freeze_pool(h0, siblings, "dbbench", "v1", tmp_path)
    b = freeze_pool(h0, v2_siblings, "dbbench", "v2", tmp_path)

    diff = diff_pools(a, b)
    assert [m.name for m in diff["only_a"]] == ["lenient_answer"]
    assert [m.name for m in diff["only_b"]] == ["window3"]
    assert [c["name"] for c in diff["changed"]] == ["inspect_first"]
    assert sorted(m.name for m in diff["same"]) == ["format_reminder", "h0", "query_before_answer", "schema_rows"]
    text = diff["changed"][0]["diff"]
    assert text.startswith("--- v1/inspect_first.yaml\n+++ v2/inspect_first.yaml\n")
    assert "+guidance: Run SELECT * FROM the table LIMIT 5 first.\n" in text.splitlines(keepends=True)
    assert any(line.startswith("-guidance:") for line in text.splitlines())


def test_diff_needs_manifests_read_from_disk(seed, tmp_path):
    h0, siblings = seed
    a = freeze_pool(h0, siblings, "dbbench", "v1", tmp_path)
    b = freeze_pool(h0, [siblings[0].model_copy(update={"guidance": "x"})], "dbbench", "v2", tmp_path)
    in_memory = PoolManifest.model_validate(a.model_dump())
    with pytest.raises(HarnessError, match="not read from disk"):
        diff_pools(in_memory, b)


def _run(cwd: Path, *args: str) -> str:
    return subprocess.run(list(args), cwd=cwd, check=True, capture_output=True, text=True).stdout


@pytest.fixture
def git_repo(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("DVC_NO_ANALYTICS", "1")
    repo = tmp_path / "repo"
    repo.mkdir()
    _run(repo, "git", "init", "-q")
    _run(repo, "git", "config", "user.email", "pool@test")
    _run(repo, "git", "config", "user.name", "pool test")
    return repo


def test_version_with_dvc_commits_and_tags_the_pool(seed, git_repo):
    h0, siblings = seed
    _run(git_repo, sys.executable, "-m", "dvc", "init", "-q")
    _run(git_repo, "git", "commit", "-qm", "dvc init")
    (git_repo / "unrelated.txt").write_text("staged but not part of the pool commit\n")
    _run(git_repo, "git", "add", "unrelated.txt")

    manifest = freeze_pool(h0, siblings, "dbbench", "v1", git_repo / "pools")
    assert version_with_dvc(manifest.directory, "pool-dbbench-v1") == "pool-dbbench-v1"

    assert _run(git_repo, "git", "tag", "-l").split() == ["pool-dbbench-v1"]
    committed = _run(git_repo, "git", "ls-files").split()
    assert "pools/dbbench/v1.dvc" in committed and "pools/dbbench/.gitignore" in committed
    assert "pools/dbbench/v1/manifest.yaml" not in committed  # the data itself lives in DVC
    tagged = set(_run(git_repo, "git", "ls-tree", "-r", "--name-only", "pool-dbbench-v1").split())
    assert "unrelated.txt" not in tagged and "pools/dbbench/v1.dvc" in tagged
    assert _run(git_repo, "git", "log", "-1", "--format=%s", "pool-dbbench-v1").strip() == "pool pool-dbbench-v1"
    dvc_file = yaml.safe_load(_run(git_repo, "git", "show", "pool-dbbench-v1:pools/dbbench/v1.dvc"))
    out = dvc_file["outs"][0]
    assert out["path"] == "v1" and out["md5"].endswith(".dir") and out["nfiles"] == len(SIBLINGS) + 2

    from dvc.api import read

    text = read("pools/dbbench/v1/manifest.yaml", repo=str(git_repo), rev="pool-dbbench-v1")
    assert yaml.safe_load(text)["pool_id"] == manifest.pool_id

    assert version_with_dvc(manifest.directory, "pool-dbbench-v1") == "pool-dbbench-v1"  # again: no-op
    assert len(_run(git_repo, "git", "log", "--format=%H").split()) == 2


def test_version_with_dvc_turns_dvc_and_git_failures_into_one_line(seed, git_repo):
    h0, siblings = seed
    _run(git_repo, sys.executable, "-m", "dvc", "init", "-q")
    _run(git_repo, "git", "commit", "-qm", "dvc init")
    ignored = freeze_pool(h0, siblings, "dbbench", "v1", git_repo / "ignored")
    (git_repo / ".gitignore").write_text("ignored/\n")
    with pytest.raises(HarnessError, match=r"^dvc add v1 failed: .*git-ignored") as info:
        version_with_dvc(ignored.directory, "pool-ignored")
    assert "\n" not in str(info.value)

    manifest = freeze_pool(h0, siblings, "dbbench", "v1", git_repo / "pools")
    (git_repo / ".git" / "index.lock").write_text("")  # as if another git process were running
    with pytest.raises(HarnessError, match=r"^git add failed: fatal: Unable to create .*index\.lock") as info:
        version_with_dvc(manifest.directory, "pool-dbbench-v1")
    assert "\n" not in str(info.value)
    assert _run(git_repo, "git", "tag", "-l") == ""


def test_version_with_dvc_without_dvc_init_returns_none(seed, git_repo):
    h0, siblings = seed
    manifest = freeze_pool(h0, siblings, "dbbench", "v1", git_repo / "pools")
    assert version_with_dvc(manifest.directory, "pool-dbbench-v1") is None
    assert _run(git_repo, "git", "tag", "-l") == ""
    assert not (git_repo / "pools" / "dbbench" / "v1.dvc").exists()


def test_version_with_dvc_refuses_bad_tags_and_foreign_tags(seed, git_repo):
    h0, siblings = seed
    _run(git_repo, sys.executable, "-m", "dvc", "init", "-q")
    _run(git_repo, "git", "commit", "-qm", "dvc init")
    manifest = freeze_pool(h0, siblings, "dbbench", "v1", git_repo / "pools")
    with pytest.raises(HarnessError, match="'bad..tag' is not a valid git tag name"):
        version_with_dvc(manifest.directory, "bad..tag")
    assert not (git_repo / "pools" / "dbbench" / "v1.dvc").exists()  # refused before touching anything
    _run(git_repo, "git", "tag", "taken")
    with pytest.raises(HarnessError, match="git tag taken already exists and does not hold pools/dbbench/v1.dvc"):
        version_with_dvc(manifest.directory, "taken")
    shutil.rmtree(git_repo / ".git")  # .dvc/ without git: nothing to version into
    assert version_with_dvc(manifest.directory, "pool-dbbench-v1") is None


def test_resolve_pool_expands_a_frozen_version_and_keeps_names(tmp_path):
    from harness_pool.pool_store import resolve_pool

    h0 = load_harness("h0")
    freeze_pool(h0, [load_harness("schema_rows"), load_harness("lenient_answer")], "dbbench", "p9", tmp_path)
    specs = resolve_pool(["inspect_first", "pool:p9", "schema_rows"], "dbbench", tmp_path)
    assert [s.name for s in specs] == ["inspect_first", "schema_rows", "lenient_answer"]  # H0 left out, no repeats
    with pytest.raises(HarnessError, match="p8"):
        resolve_pool(["pool:p8"], "dbbench", tmp_path)
