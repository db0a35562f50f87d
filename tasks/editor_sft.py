"""Prefect tasks of the engineer's cold start (issue 21): offline-operator patches for each
training bundle, their re-runs by the frozen target, the validated ones as demonstrations, and
the fine-tune of the engineer on them (the SFT machinery of tasks/sft.py, assistant tokens only).

Every candidate patch is a row of editor_patches (status valid / invalid / rejected, fixed and
broken task ids, reward), tied to its bundle; its re-run trajectories are rollout groups of the
cold-start run with role 'editor-validate'.
"""

from __future__ import annotations

from prefect import task
from prefect.cache_policies import INPUTS, TASK_SOURCE

from configs.schema import EditorBundlesConfig, EditorSftConfig, SftConfig, load_config_at
from db.engine import session_scope
from db.ids import run_id, stable_id
from db.models import EditorPatch
from harness_pool.bundles import Bundle
from harness_pool.diagnosis import Cluster
from harness_pool.engineer import demonstration
from harness_pool.operators import offline_patch, operators_for
from harness_pool.patch import HarnessPatch, apply_patch
from harness_pool.spec import HarnessError, HarnessSpec
from rl.sft import SftExample
from tasks.editor import bundles_run_id
from tasks.records import start_run
from tasks.resources import get_engine

ROLE = "editor-validate"


def bundles_config(cfg: EditorSftConfig) -> EditorBundlesConfig:
    return load_config_at(EditorBundlesConfig, cfg.bundles)


def engineer_checkpoint_name(cfg: EditorSftConfig) -> str:
    """Same config and same bundles, same checkpoint: built on first use, reused afterwards."""
    return run_id("engineer-sft", cfg, bundles_run_id(bundles_config(cfg)), digits=10)


def editor_sft_run_id(cfg: EditorSftConfig) -> str:
    return f"sft-{engineer_checkpoint_name(cfg)}"


@task(name="register-engineer-sft")
def register_editor_sft_run(cfg: EditorSftConfig, database_url: str | None, prefect_flow_run_id: str | None) -> str:
    run_id = editor_sft_run_id(cfg)
    config = {**cfg.model_dump(mode="json"), "bundles_run_id": bundles_run_id(bundles_config(cfg))}
    with session_scope(get_engine(database_url)) as session:
        start_run(session, run_id, "editor_sft", cfg.name, config, prefect_flow_run_id)
    return run_id


def offline_candidates(bundle: Bundle, variants: int) -> list[dict]:
    """Variants 0..variants-1 of the offline operators for the bundle's causes, as candidate
    children (identical children once); a bundle whose causes have no operator gets none."""
    operators = operators_for(bundle.benchmark)
    target = [Cluster(c) for c in bundle.causes if c in operators]
    parent = HarnessSpec.model_validate(bundle.parent)
    out, seen = [], set()
    for v in range(variants if target else 0):
        name = f"{bundle.family}-{bundle.id[:8]}-v{v}"
        patch = offline_patch(target, v, name, bundle.benchmark)
        try:
            child = apply_patch(parent, patch)
        except HarnessError as exc:
            out.append(
                {"source": f"offline-v{v}", "patch": patch.model_dump(mode="json"), "spec": None, "reason": str(exc)}
            )
            continue
        if child.id in seen:
            continue
        seen.add(child.id)
        out.append(
            {
                "source": f"offline-v{v}",
                "patch": patch.model_dump(mode="json"),
                "spec": child.model_dump(mode="json"),
                "reason": None,
            }
        )
    return out


@task(
    name="llm-candidates",
    cache_policy=(INPUTS - "cfg" - "bundles") + TASK_SOURCE,
    persist_result=True,
    task_run_name="llm-{split}",
)
def llm_candidates(cfg: EditorSftConfig, bundles: list[Bundle], bundle_ids: list[str], split: str) -> list[dict]:
    """One patch per bundle from the configured LLM editor (one repair round, as in evolution),
    as candidates like `offline_candidates`' (source 'llm:MODEL'); persisted, so a resumed run
    does not call the API again."""
    from harness_pool.editor_llm import LlmEditor
    from harness_pool.llm import make_chat

    e = cfg.llm
    editor = LlmEditor(make_chat(e.kind, e.model, e.base_url, e.api_key_env, e.temperature, e.max_tokens))
    out = []
    for b in bundles:
        support: dict[str, list[str]] = {}
        for f in b.failures:
            support.setdefault(f.cause, []).append(f.bench_task_id)
        clusters = [Cluster(c, support.get(c, []), []) for c in b.causes]
        name = f"{b.family}-{b.id[:8]}-llm"
        parent = HarnessSpec.model_validate(b.parent)
        patch, child, info = editor.propose(parent, clusters, [f.text for f in b.failures], 0, name)
        out.append(
            {
                "bundle_id": b.id,
                "source": f"llm:{e.model}",
                "patch": patch.model_dump(mode="json") if patch else None,
                "spec": child.model_dump(mode="json") if child else None,
                "reason": None if child else (info["errors"] or ["no patch"])[-1],
            }
        )
    return out


def outcome(bundle: Bundle, run: dict | None, min_fixed: int, max_broken: int) -> dict:
    """fixed / broken / status / reward of a candidate from its re-run ({task: {successes}});
    no run (a rejected patch) gets the lowest reward, -1."""
    if run is None:
        return {"fixed": [], "broken": [], "status": "rejected", "reward": -1.0}
    solved = {t for t, r in run["tasks"].items() if any(r["successes"])}
    fixed = sorted(set(bundle.failing_tasks) & solved)
    broken = sorted(set(bundle.controls) - solved)
    valid = len(fixed) >= min_fixed and len(broken) <= max_broken
    n = len(set(bundle.failing_tasks) | set(bundle.controls))
    return {
        "fixed": fixed,
        "broken": broken,
        "status": "valid" if valid else "invalid",
        "reward": (len(fixed) - len(broken)) / n,
    }


def patch_id(run_id: str, bundle_id: str, step: int, sample_index: int, source: str) -> str:
    return stable_id("editor-patch", run_id, bundle_id, step, sample_index, source)


@task(name="record-editor-patches")
def record_patches(run_id: str, rows: list[dict], database_url: str | None) -> None:
    """Upsert candidate rows ({bundle_id, step, sample_index, source, harness_id, status, ...})."""
    with session_scope(get_engine(database_url)) as session:
        for r in rows:
            session.merge(
                EditorPatch(
                    id=patch_id(run_id, r["bundle_id"], r["step"], r["sample_index"], r["source"]), run_id=run_id, **r
                )
            )


def engineer_example(tokenizer, bundle: Bundle, patch: HarnessPatch) -> SftExample:
    """One demonstration as the engineer policy sees it: the chat-template prompt (loss 0) and
    the patch reply ending in the end-of-turn token (loss 1), as the rollout engine renders it."""
    messages = demonstration(bundle, patch)
    prompt = tokenizer.apply_chat_template(messages[:-1], tokenize=False, add_generation_prompt=True)
    prompt_ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
    reply_ids = tokenizer(messages[-1]["content"], add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
    return SftExample(bundle.id, prompt_ids + reply_ids, [0] * len(prompt_ids) + [1] * len(reply_ids))


def sft_settings(cfg: EditorSftConfig) -> SftConfig:
    """The fine-tune settings in the SFT machinery's terms."""
    keep = ("base_model", "heldout_fraction", "steps", "batch_size", "lr", "lora", "lora_rank")
    return SftConfig(
        name=cfg.name,
        gradient_checkpointing=cfg.gradient_checkpointing,
        seed=cfg.seed,
        device=cfg.device,
        dtype=cfg.dtype,
        **{k: getattr(cfg, k) for k in keep},
    )


@task(name="train-engineer")
def train_engineer(cfg: EditorSftConfig, demos_path: str, run_id: str) -> dict:
    """Fine-tune the engineer on the demonstrations; skipped when its checkpoint exists."""
    from rl.checkpoints import is_complete, read_meta
    from rl.memory import release_memory
    from tasks.sft import _fine_tune

    name = engineer_checkpoint_name(cfg)
    if is_complete(name):
        meta = read_meta(name)
    else:
        try:
            meta = _fine_tune(sft_settings(cfg), demos_path, run_id, name)
        finally:
            release_memory()
    return {**meta, "run_id": run_id, "kind": "engineer_sft", "config": cfg.model_dump(mode="json")}
