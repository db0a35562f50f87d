"""Frozen, versioned harness pools: H0 plus its siblings, written once under a version name.

Training and evaluation runs should name the exact set of harnesses they used, and that set must
not drift when someone edits a YAML file later. A pool version is a folder
`<root>/<benchmark>/<version>/` holding one YAML file per harness and a `manifest.yaml` that
records each member's content id. A version is written atomically and never rewritten: freezing
the same members again is a no-op, freezing other members under the same version is refused, and
loading re-checks every file against the id in the manifest, so an edited file is caught.

Where the enclosing git repository uses DVC, `version_with_dvc` tracks the version folder with
DVC and tags the commit, so a pool can be fetched back by its tag.
"""

from __future__ import annotations

import difflib
import hashlib
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict, PrivateAttr, ValidationError

from envs.registry import DEFAULT_BENCHMARK
from harness_pool.spec import HarnessError, HarnessSpec, dump_harness, load_harness

# Pools live in the checkout you work in: $HS_POOL_ROOT, else ./harness_pool/pools when the working
# directory is a checkout (a clone used by `dvc repro`, say), else the installed package's folder.
_CWD_ROOT = Path("harness_pool") / "pools"
DEFAULT_ROOT = (
    Path(os.environ["HS_POOL_ROOT"]).resolve()
    if os.environ.get("HS_POOL_ROOT")
    else (_CWD_ROOT.resolve() if _CWD_ROOT.is_dir() else Path(__file__).parent / "pools")
)
MANIFEST = "manifest.yaml"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


class PoolMember(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    id: str
    file: str
    parent_ids: list[str] = []
    round: int | None = None
    root_causes: list[str] = []
    edit: str | None = None


class PoolManifest(BaseModel):
    """What a pool version holds; `directory` is where it was read from or written to."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    benchmark: str
    version: str
    pool_id: str
    base_id: str
    created_by: str | None = None
    members: list[PoolMember]
    _dir: Path | None = PrivateAttr(default=None)

    @property
    def directory(self) -> Path:
        if self._dir is None:
            raise HarnessError(f"pool {self.version} was not read from disk; load it with load_pool")
        return self._dir

    def member(self, name: str) -> PoolMember | None:
        return next((m for m in self.members if m.name == name), None)


def pool_id(member_ids: list[str]) -> str:
    """Content id of a pool: independent of member order, changed by any member edit."""
    return hashlib.sha256(",".join(sorted(member_ids)).encode()).hexdigest()


def _check_name(kind: str, value: str) -> None:
    if not _NAME.match(value):
        raise HarnessError(
            f"{kind} '{value}' is not allowed: use 1-64 letters, digits, '.', '_' or '-', "
            "starting with a letter or digit"
        )


def _member(spec: HarnessSpec) -> PoolMember:
    p = spec.provenance
    return PoolMember(
        name=spec.name,
        id=spec.id,
        file=f"{spec.name}.yaml",
        parent_ids=list(spec.parent_ids),
        round=p.round,
        root_causes=list(p.root_causes),
        edit=p.edit,
    )


def _check_members(specs: list[HarnessSpec], benchmark: str) -> None:
    seen: set[str] = set()
    for spec in specs:
        _check_name("harness name", spec.name)
        if spec.name == Path(MANIFEST).stem:
            raise HarnessError(f"harness name '{spec.name}' is reserved for the pool manifest; rename the harness")
        if spec.name in seen:
            raise HarnessError(f"harness name '{spec.name}' appears twice in the pool; names must be unique")
        if spec.benchmark != benchmark:
            raise HarnessError(f"harness '{spec.name}' is for {spec.benchmark}, not {benchmark}")
        seen.add(spec.name)


def _write_manifest(manifest: PoolManifest, folder: Path) -> None:
    text = yaml.safe_dump(manifest.model_dump(mode="json"), sort_keys=False, allow_unicode=True, width=100)
    (folder / MANIFEST).write_text(text)


def _read_manifest(folder: Path) -> PoolManifest:
    path = folder / MANIFEST
    try:
        manifest = PoolManifest.model_validate(yaml.safe_load(path.read_text()))
    except FileNotFoundError:
        raise HarnessError(f"{folder}: no {MANIFEST}; not a pool version folder") from None
    except (yaml.YAMLError, ValidationError) as exc:
        raise HarnessError(f"{path}: not a valid pool manifest ({str(exc).splitlines()[0]})") from None
    manifest._dir = folder.resolve()
    return manifest


def freeze_pool(
    base: HarnessSpec,
    siblings: list[HarnessSpec],
    benchmark: str,
    version: str,
    root: Path,
    created_by: str | None = None,
) -> PoolManifest:
    """Write base and siblings as pool `version`; returns the existing manifest if that version
    already holds exactly these harnesses."""
    _check_name("benchmark", benchmark)
    _check_name("pool version", version)
    specs = [base, *siblings]
    _check_members(specs, benchmark)
    members = [_member(s) for s in specs]
    manifest = PoolManifest(
        benchmark=benchmark,
        version=version,
        pool_id=pool_id([m.id for m in members]),
        base_id=base.id,
        created_by=created_by,
        members=members,
    )
    final = Path(root) / benchmark / version
    if final.exists():
        return _existing(final, manifest)
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{version}.tmp-", dir=final.parent))
    try:
        tmp.chmod(0o755)  # mkdtemp makes it private; a pool is meant to be read by others
        for spec in specs:
            dump_harness(spec, tmp / f"{spec.name}.yaml")
        _write_manifest(manifest, tmp)
        os.rename(tmp, final)
    except OSError:
        if final.exists():  # another writer won the race: same rules as for an old version
            return _existing(final, manifest)
        raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    manifest._dir = final.resolve()
    return manifest


def _existing(folder: Path, wanted: PoolManifest) -> PoolManifest:
    found = _read_manifest(folder)
    if found.pool_id != wanted.pool_id:
        raise HarnessError(f"pool version {wanted.version} already exists with other members; choose a new version")
    return found


def _pool_dir(version_or_path: str, benchmark: str, root: Path) -> Path:
    path = Path(version_or_path)
    if (path / MANIFEST).exists() or os.sep in version_or_path:
        return path
    folder = Path(root) / benchmark / version_or_path
    if _NAME.match(version_or_path) and (folder / MANIFEST).exists():
        return folder
    versions = [m.version for m in list_pools(benchmark, root)]
    have = f"existing versions: {', '.join(versions)}" if versions else "no versions exist yet (hs pool freeze)"
    raise HarnessError(f"pool version '{version_or_path}' not found under {Path(root) / benchmark}; {have}")


def load_pool(
    version_or_path: str, benchmark: str = DEFAULT_BENCHMARK, root: Path = DEFAULT_ROOT
) -> tuple[PoolManifest, HarnessSpec, list[HarnessSpec]]:
    """Read a pool version (by name under root, or by folder path) and check every file's id.

    Returns (manifest, base, siblings) with siblings in manifest order."""
    folder = _pool_dir(version_or_path, benchmark, root)
    manifest = _read_manifest(folder)
    if pool_id([m.id for m in manifest.members]) != manifest.pool_id:
        raise HarnessError(f"{folder / MANIFEST}: pool_id does not match its members; the manifest was edited")
    base, siblings = None, []
    for m in manifest.members:
        spec = load_harness(folder / m.file, benchmark=manifest.benchmark)
        if spec.id != m.id:
            raise HarnessError(
                f"{folder / m.file}: content differs from the frozen harness (id {spec.id[:12]}, "
                f"manifest says {m.id[:12]}); restore the file or freeze a new version"
            )
        if m.id == manifest.base_id:
            base = spec
        else:
            siblings.append(spec)
    if base is None:
        raise HarnessError(f"{folder / MANIFEST}: base_id is not one of the members")
    return manifest, base, siblings


def _natural(version: str) -> list:
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", version)]


def list_pools(benchmark: str = DEFAULT_BENCHMARK, root: Path = DEFAULT_ROOT) -> list[PoolManifest]:
    """Manifests of all versions of a benchmark's pool, in natural version order (v2 before v10)."""
    folder = Path(root) / benchmark
    if not folder.is_dir():
        return []
    dirs = [d for d in folder.iterdir() if d.is_dir() and not d.name.startswith(".") and (d / MANIFEST).exists()]
    return [_read_manifest(d) for d in sorted(dirs, key=lambda d: _natural(d.name))]


def diff_pools(a: PoolManifest, b: PoolManifest) -> dict:
    """Members only in a, only in b (by id), changed (same name, other id, with a unified diff of
    the two YAML files), and the same in both."""
    a_ids, b_ids = {m.id for m in a.members}, {m.id for m in b.members}
    changed = []
    for old in a.members:
        new = b.member(old.name)
        if new is not None and new.id != old.id:
            changed.append({"name": old.name, "a": old, "b": new, "diff": _file_diff(a, old, b, new)})
    changed_names = {c["name"] for c in changed}
    return {
        "only_a": [m for m in a.members if m.id not in b_ids and m.name not in changed_names],
        "only_b": [m for m in b.members if m.id not in a_ids and m.name not in changed_names],
        "changed": changed,
        "same": [m for m in a.members if m.id in b_ids],
    }


def _file_diff(a: PoolManifest, old: PoolMember, b: PoolManifest, new: PoolMember) -> str:
    before = (a.directory / old.file).read_text().splitlines(keepends=True)
    after = (b.directory / new.file).read_text().splitlines(keepends=True)
    return "".join(
        difflib.unified_diff(before, after, fromfile=f"{a.version}/{old.file}", tofile=f"{b.version}/{new.file}")
    )


def _git(cwd: Path, *args: str) -> str:
    try:
        done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True)
    except subprocess.CalledProcessError as exc:
        lines = [line for line in (exc.stderr or exc.stdout or "").splitlines() if line.strip()]
        reason = next((line for line in lines if line.startswith(("fatal:", "error:"))), lines[-1] if lines else "")
        raise HarnessError(f"git {args[0]} failed: {reason or f'exit status {exc.returncode}'}") from None
    return done.stdout.strip()


def _git_root(path: Path) -> Path | None:
    done = subprocess.run(["git", "rev-parse", "--show-toplevel"], cwd=path, capture_output=True, text=True)
    return Path(done.stdout.strip()) if done.returncode == 0 else None


def version_with_dvc(pool_dir: Path, tag: str, repo_root: Path | None = None) -> str | None:
    """Track a pool version folder with DVC, commit its `.dvc` file and tag that commit.

    Returns the tag, or None when the git repository has no `.dvc/` (DVC not initialised)."""
    pool_dir = Path(pool_dir).resolve()
    if not (pool_dir / MANIFEST).exists():
        raise HarnessError(f"{pool_dir}: not a pool version folder (no {MANIFEST})")
    root = Path(repo_root).resolve() if repo_root else _git_root(pool_dir)
    if root is None or not (root / ".dvc").is_dir():
        return None
    if not pool_dir.is_relative_to(root):
        raise HarnessError(f"{pool_dir} is outside the repository {root}; put the pool root inside it")
    if subprocess.run(["git", "check-ref-format", f"refs/tags/{tag}"], cwd=root).returncode != 0:
        raise HarnessError(f"'{tag}' is not a valid git tag name")
    dvc_file = pool_dir.parent / f"{pool_dir.name}.dvc"
    rel_dvc = dvc_file.relative_to(root).as_posix()
    if _git(root, "tag", "--list", tag):
        if _git(root, "ls-tree", "--name-only", tag, "--", rel_dvc):
            return tag  # this version was versioned before
        raise HarnessError(f"git tag {tag} already exists and does not hold {rel_dvc}; choose another tag")
    _dvc_add(root, pool_dir)
    paths = [rel_dvc, (pool_dir.parent / ".gitignore").relative_to(root).as_posix()]
    _git(root, "add", "--", *paths)
    if _git(root, "status", "--porcelain", "--", *paths):
        _git(root, "commit", "--quiet", "-m", f"pool {tag}", "--only", "--", *paths)
    _git(root, "tag", tag)
    return tag


def _dvc_add(root: Path, pool_dir: Path) -> None:
    os.environ.setdefault("DVC_NO_ANALYTICS", "1")
    from dvc.repo import Repo

    try:
        with Repo(str(root)) as repo:
            repo.scm_context.quiet = True  # we stage and commit the files ourselves
            repo.add(str(pool_dir))
    except Exception as exc:  # noqa: BLE001 - DVC raises many exception types; all mean "not versioned"
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise HarnessError(f"dvc add {pool_dir.name} failed: {first}") from None


def resolve_pool(
    entries: list[str], benchmark: str = DEFAULT_BENCHMARK, root: Path = DEFAULT_ROOT
) -> list[HarnessSpec]:
    """Harnesses named by a config's pool list: built-in names, YAML paths, or `pool:VERSION` for
    every sibling of a frozen pool version (H0 excluded), in the listed order, duplicates once."""
    return [spec for spec, _ in pool_sources(entries, benchmark, root)]


def pool_sources(
    entries: list[str], benchmark: str = DEFAULT_BENCHMARK, root: Path = DEFAULT_ROOT
) -> list[tuple[HarnessSpec, str]]:
    """resolve_pool's harnesses, each with what loads it again: its built-in name or YAML path."""
    out: dict[str, tuple[HarnessSpec, str]] = {}
    for entry in entries:
        if entry.startswith("pool:"):
            version = entry[len("pool:") :]
            manifest, _, siblings = load_pool(version, benchmark, root)
            folder = _pool_dir(version, benchmark, root)
            files = {m.id: str(folder / m.file) for m in manifest.members}
            out.update({s.id: (s, files[s.id]) for s in siblings})
        else:
            spec = load_harness(entry, benchmark)
            out[spec.id] = (spec, entry)
    return list(out.values())
