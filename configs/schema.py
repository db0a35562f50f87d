"""Experiment configuration: frozen pydantic models, one source of truth per setting.

Configs live as YAML in configs/; CLI flags override single fields ("--set a.b=value" for any
field, named flags for the common ones). Every error names the field and says how to fix it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, ClassVar, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator
from pydantic_core import to_jsonable_python

from envs.registry import DEFAULT_BENCHMARK
from rl.modes import Mode
from rl.training_modes import modes_help, training_mode

CONFIG_DIR = Path(__file__).parent


def default_results_dir() -> str:
    """Persisted task results: $HS_RESULTS_DIR (storage all workers share, e.g. an NFS mount), else local."""
    import os

    return os.environ.get("HS_RESULTS_DIR", ".hs/prefect-results")


class ConfigError(ValueError):
    """A config that cannot be used; the message is one line naming the field and the fix."""


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    # Fields that say where results go or how a run is watched, not what it computes: left out of
    # the identity that run ids and checkpoint names hash (changing them resumes the same run).
    NOT_IDENTITY: ClassVar[frozenset[str]] = frozenset()
    # Fields added after runs were recorded: left out of the identity while they hold their default,
    # so the runs made before they existed keep their ids (and resume).
    LATER_FIELDS: ClassVar[frozenset[str]] = frozenset()

    def identity(self, exclude: frozenset[str] = frozenset()) -> str:
        """The config's values as sorted-key JSON, without NOT_IDENTITY fields (at every level) and
        ``exclude`` (top level): field order, defaults' position and descriptions never change it."""
        return json.dumps(self._identity_fields(exclude), sort_keys=True, separators=(",", ":"))

    def _identity_fields(self, exclude: frozenset[str] = frozenset()) -> dict[str, Any]:
        fields = {}
        for name in type(self).model_fields:
            if name in self.NOT_IDENTITY or name in exclude:
                continue
            value = getattr(self, name)
            if name in self.LATER_FIELDS and value == type(self).model_fields[name].get_default(
                call_default_factory=True
            ):
                continue
            fields[name] = value._identity_fields() if isinstance(value, _Frozen) else to_jsonable_python(value)
        return fields


class PolicyConfig(_Frozen):
    backend: Literal["transformers", "openai"] = Field(
        default="transformers", description="Policy backend: local transformers model or an OpenAI-compatible API."
    )
    model: str = Field(
        default="smollm2-135m",
        description="transformers: a built-in name ('smollm2-135m') or a local HF model directory; "
        "openai: the served model name.",
    )
    device: str = Field(
        default="cpu", description="Torch device for the transformers backend ('cpu', 'cuda', 'cuda:1')."
    )
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = Field(
        default="auto",
        description="Weights dtype; auto: bfloat16 on a CPU with AMX/AVX-512 bf16 or a bf16 GPU, else float32.",
    )
    engine: Literal["lean", "hf"] = Field(
        default="lean",
        description="transformers sampling loop: lean (rl/decode.py, keys/values kept across turns; "
        "Llama/Mistral/Qwen2/Qwen3) or hf (model.generate, any causal LM).",
    )
    base_url: str | None = Field(default=None, description="OpenAI-compatible base URL, e.g. http://127.0.0.1:8000/v1.")
    api_key_env: str = Field(default="OPENAI_API_KEY", description="Environment variable holding the API key.")

    @model_validator(mode="after")
    def _openai_needs_url(self) -> PolicyConfig:
        if self.backend == "openai" and not self.base_url:
            raise ValueError("backend 'openai' needs policy.base_url (e.g. http://127.0.0.1:8000/v1)")
        return self


class SamplingConfig(_Frozen):
    temperature: float = Field(default=0.8, ge=0.0, le=5.0, description="Sampling temperature; 0 = greedy.")
    top_p: float = Field(default=0.95, gt=0.0, le=1.0, description="Nucleus sampling mass.")
    max_new_tokens: int = Field(default=160, ge=1, le=8192, description="Token budget of one policy reply.")


class RunnerConfig(_Frozen):
    kind: Literal["threads", "ray"] = Field(
        default="threads",
        description="threads: rollout groups run in this process (their generate calls batched); "
        "ray: each group is a Ray task on a Ray cluster (prefect-ray), each Ray worker loading the policy once.",
    )
    address: str | None = Field(
        default=None, description="ray: the cluster address (ray://head:10001 or 'auto'); None starts a local Ray."
    )
    num_cpus: int | None = Field(default=None, ge=1, description="ray, local only: CPUs the local Ray may use.")


# Difficulty tiers of training tasks (DBBench easy/medium/hard, TextWorld q1..q3b, BFCL categories);
# each benchmark's loader rejects a tier it does not have, with the list of its own.
TierName = str


class EnvConfig(_Frozen):
    benchmark: str = Field(
        default=DEFAULT_BENCHMARK,
        description="Benchmark name: a built-in one (dbbench, textworld, bfcl, repair) "
        "or one registered through the harness_s.benchmarks entry point (envs/registry.py).",
    )

    @field_validator("benchmark")
    @classmethod
    def _known_benchmark(cls, name: str) -> str:
        from envs.registry import check_name

        return check_name(name)

    backend: Literal["sqlite", "mysql"] = Field(
        default="sqlite",
        description="SQL engine for each rollout's private database: embedded SQLite or MySQL/MariaDB.",
    )
    mysql_url: str | None = Field(
        default=None,
        description="MySQL/MariaDB server URL (mysql://user:pass@host:port); default $HS_MYSQL_URL or local root.",
    )
    max_rounds: int = Field(default=15, ge=1, le=100, description="Policy turns per episode before it is cut off.")
    data_dir: str | None = Field(
        default=None,
        description="Folder holding dbbench/{dev,standard}.jsonl; default $HS_DATA_DIR. TextWorld games are "
        "generated into $HS_GENERATED_DIR/textworld instead.",
    )


WandbMode = Literal["offline", "online", "disabled"]


class RunConfig(_Frozen):
    """What every run config has: where Prefect persists task results, and the environment."""

    NOT_IDENTITY = frozenset({"results_dir"})
    results_dir: str = Field(
        default_factory=lambda: default_results_dir(),
        description="Where Prefect persists task "
        "results; default $HS_RESULTS_DIR or .hs/prefect-results. Must be storage every worker shares.",
    )
    env: EnvConfig = Field(default_factory=EnvConfig, description="Environment settings (benchmark, SQL engine).")

    @model_validator(mode="after")
    def _tiers_of_the_benchmark(self) -> RunConfig:
        """A config's `tiers` (where it has them) must be tiers of its benchmark."""
        from envs.registry import benchmark

        tiers = getattr(self, "tiers", None) or []
        known = benchmark(self.env.benchmark).tiers
        unknown = [t for t in tiers if t not in known]
        if unknown:
            raise ValueError(f"unknown {self.env.benchmark} tier(s) {', '.join(unknown)}: use {', '.join(known)}")
        return self


class SampledRunConfig(RunConfig):
    """A run whose policy samples rollouts."""

    sampling: SamplingConfig = Field(default_factory=SamplingConfig, description="Rollout sampling settings.")


class TrackedRunConfig(SampledRunConfig):
    """A sampling run that also logs to W&B."""

    NOT_IDENTITY = RunConfig.NOT_IDENTITY | {"wandb"}
    wandb: WandbMode = Field(
        default="offline", description="W&B logging mode ($WANDB_MODE overrides); offline writes under .hs/wandb."
    )


class EvalConfig(TrackedRunConfig):
    NOT_IDENTITY = TrackedRunConfig.NOT_IDENTITY | {"group_concurrency", "runner"}
    name: str = Field(default="eval", description="Run name prefix; the run id is derived from the whole config.")
    split: Literal["dev", "standard", "test", "train"] = Field(
        default="dev", description="dev = validation; the test split is standard (DBBench) or test (TextWorld)."
    )
    harness: str = Field(default="h0", description="Built-in harness name or path to a harness YAML.")
    k: int = Field(default=3, ge=1, le=64, description="Rollouts per task and seed (Pass@k / Avg@k).")
    seeds: int = Field(default=3, ge=1, le=20, description="Independent runs; mean and std are over seeds.")
    limit: int | None = Field(default=None, ge=1, description="Evaluate only the first N tasks of the split.")
    every: int = Field(
        default=1,
        ge=1,
        description="Take every Nth task of the split (before limit): a deterministic subsample that keeps the "
        "type mix of files sorted by type, such as standard.",
    )
    tiers: list[TierName] | None = Field(
        default=None, description="With split 'train': only tasks of these difficulty tiers; None = all."
    )
    task_ids: list[str] | None = Field(
        default=None, description="Only these benchmark tasks of the split (e.g. dbbench/dev/0007); None = all."
    )
    checkpoint: str = Field(default="base", description="Label of the policy weights, recorded with every trajectory.")
    group_concurrency: int = Field(
        default=1,
        ge=1,
        le=64,
        description="Rollout groups run at once by the Prefect task runner; "
        "in one process at most 64 // k (tasks/evaluation.py groups_in_flight).",
    )
    runner: RunnerConfig = Field(default_factory=RunnerConfig, description="Where rollout groups run (threads or Ray).")
    policy: PolicyConfig = Field(default_factory=PolicyConfig, description="Which policy to evaluate.")
    routing: Literal["h0", "rank1"] = Field(
        default="h0",
        description="h0: every task under `harness`; rank1: every task under the single harness the "
        "router ranks first (H0 competing), at the same rollout count.",
    )
    pool: list[str] = Field(
        default_factory=list, description="rank1: the sibling harnesses (names, YAML paths or 'pool:VERSION')."
    )
    profiles_run: str | None = Field(
        default=None, description="rank1: the training run whose behaviour profiles the router reads."
    )
    profiles_version: int | None = Field(
        default=None,
        ge=0,
        description="rank1: read the profiles of this re-anchor step (0 = before training); None = the newest.",
    )
    router_voters: list[Literal["statistics", "embedding"]] = Field(
        default_factory=lambda: ["statistics", "embedding"], description="rank1: the router's model-free voters."
    )

    @model_validator(mode="after")
    def _rank1_needs(self) -> EvalConfig:
        if self.routing == "rank1" and not (self.pool and self.profiles_run):
            raise ValueError(
                "routing rank1 needs pool (sibling names) and profiles_run (a training run id with "
                "profiles, see `hs report training`)"
            )
        return self


def _set_path(data: dict, dotted: str, value: Any) -> None:
    keys = dotted.split(".")
    node = data
    for key in keys[:-1]:
        node = node.setdefault(key, {})
        if not isinstance(node, dict):
            raise ConfigError(f"cannot set '{dotted}': '{key}' is not a section")
    node[keys[-1]] = value


def parse_override(text: str) -> tuple[str, Any]:
    if "=" not in text:
        raise ConfigError(f"override '{text}' must look like field.path=value (e.g. sampling.temperature=0.7)")
    key, raw = text.split("=", 1)
    return key.strip(), yaml.safe_load(raw) if raw.strip() else None


def load_config(
    model: type[BaseModel],
    path: str | Path | None = None,
    overrides: dict[str, Any] | None = None,
    sets: list[str] | None = None,
) -> BaseModel:
    """Load `model` from a YAML file (or defaults), apply dotted overrides (None = not given)
    and then `--set a.b=value` items (where `null` does set None), validate."""
    data: dict[str, Any] = {}
    where = "defaults"
    if path is not None:
        where = str(path)
        p = Path(path)
        if not p.exists():
            raise ConfigError(f"config file {p} not found: pass an existing YAML (see configs/)")
        try:
            loaded = yaml.safe_load(p.read_text()) or {}
        except yaml.YAMLError as exc:
            raise ConfigError(f"{p}: not valid YAML ({str(exc).splitlines()[0]}); fix the syntax") from None
        if not isinstance(loaded, dict):
            raise ConfigError(f"{p}: expected a mapping of config fields at the top level")
        data = expand_from(loaded, str(p))
    for key, value in (overrides or {}).items():
        if value is not None:
            _set_path(data, key, value)
    for key, value in (parse_override(item) for item in sets or []):
        _set_path(data, key, value)
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(describe_error(exc, where, model)) from None


FROM_KEY = "from"


def expand_from(section: Any, key: str) -> Any:
    """`{from: path, ...inline}` -> the file's mapping (its own `from` expanded) updated deeply by the
    inline fields: a variant of a config (an ablation) says only what it changes."""
    if not isinstance(section, dict) or FROM_KEY not in section:
        return section
    inline = {k: v for k, v in section.items() if k != FROM_KEY}
    path = Path(section[FROM_KEY])
    if not path.exists() and (CONFIG_DIR.parent / path).exists():
        path = CONFIG_DIR.parent / path
    if not path.exists():
        raise ConfigError(f"{key}.from: config file {section[FROM_KEY]} not found; give a path under configs/")
    base = yaml.safe_load(path.read_text()) or {}
    if not isinstance(base, dict):
        raise ConfigError(f"{key}.from: {path} does not hold a mapping of config fields")
    return deep_merge(expand_from(base, str(path)), inline)


def deep_merge(base: dict, extra: dict) -> dict:
    out = dict(base)
    for k, v in extra.items():
        out[k] = deep_merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def load_config_at(model: type[BaseModel], path: str | Path) -> BaseModel:
    """A config another config names by path, relative to the working directory or the repository."""
    p = Path(path)
    if not p.exists() and (CONFIG_DIR.parent / p).exists():
        p = CONFIG_DIR.parent / p
    return load_config(model, p)


def describe_error(exc: ValidationError, where: str, model: type[BaseModel] | None = None) -> str:
    """One line naming the first invalid field and the fix; for an unknown field of ``model``, the
    nearest known one ("did you mean ...?")."""
    err = exc.errors()[0]
    field = ".".join(str(p) for p in err["loc"]) or "(top level)"
    got = err.get("input")
    got_text = "" if isinstance(got, dict) else f" (got {got!r})"
    hint = "fix the value in the YAML or the flag"
    if err["type"] == "extra_forbidden":
        hint = "remove it (unknown field)"
        nearest = _nearest_field(model, err["loc"]) if model is not None else None
        if nearest:
            hint = f"unknown field: did you mean '{nearest}'? (or remove it)"
    return f"config error in {where}: field '{field}': {err['msg']}{got_text}; {hint}"


def _nearest_field(model: type[BaseModel], loc: tuple) -> str | None:
    """The dotted path of the known field closest to the unknown one at ``loc``, or None."""
    import difflib

    node: Any = model
    for part in loc[:-1]:  # down to the section holding the unknown key
        node = _section_model(node, part)
        if node is None:
            return None
    names = list(node.model_fields)
    close = difflib.get_close_matches(str(loc[-1]), names, n=1, cutoff=0.6)
    return ".".join([*(str(p) for p in loc[:-1]), close[0]]) if close else None


def _section_model(node: Any, part: Any) -> type[BaseModel] | None:
    """The config class of field ``part`` of ``node`` (through Optional / unions), or None."""
    from typing import get_args

    if not (isinstance(node, type) and issubclass(node, BaseModel)) or part not in node.model_fields:
        return None
    pending = [node.model_fields[part].annotation]
    while pending:
        candidate = pending.pop()
        if isinstance(candidate, type) and issubclass(candidate, BaseModel):
            return candidate
        pending.extend(get_args(candidate))
    return None


class SftConfig(RunConfig):
    NOT_IDENTITY = RunConfig.NOT_IDENTITY | {"gradient_checkpointing"}  # the same weights either way
    name: str = Field(
        default="sft", description="Run name prefix; the checkpoint name is derived from the whole config."
    )
    base_model: str = Field(
        default="smollm2-135m", description="Model to warm-start: built-in name, checkpoint name or HF dir."
    )
    harness: str = Field(default="h0", description="Harness whose protocol and prompts the demonstrations use.")
    tiers: list[TierName] | None = Field(
        default=None, description="Training-split tiers to take demonstrations from; None = all."
    )
    n_tasks: int | None = Field(
        default=None, ge=2, description="Use the first N training tasks (after tier filter); None = all."
    )
    heldout_fraction: float = Field(
        default=0.1, ge=0.0, lt=1.0, description="Share of demonstrations kept out for held-out loss."
    )
    inspect_prob: float = Field(
        default=0.5, ge=0.0, le=1.0, description="Share of demonstrations that first inspect the table."
    )
    steps: int = Field(default=60, ge=1, description="Optimizer updates (the step budget).")
    batch_size: int = Field(default=8, ge=1, description="Demonstrations per update.")
    lr: float = Field(default=1e-4, gt=0.0, le=1.0, description="Peak AdamW learning rate (cosine decay to 0).")
    lora: bool = Field(
        default=False, description="Train LoRA adapters (merged into the saved weights) instead of all weights."
    )
    lora_rank: int = Field(default=16, ge=1, description="LoRA rank when lora is true.")
    gradient_checkpointing: bool = Field(
        default=True,
        description="Recompute activations during backward: the DBBench warm start's training peaks at "
        "4.0 GiB instead of 6.4, about 6% slower (docs/results.md); the trained weights are the same, "
        "so it is not part of the checkpoint name.",
    )
    seed: int = Field(default=0, description="Seed for demonstration variants and batch order.")
    device: str = Field(default="cpu", description="Torch device for training.")
    dtype: Literal["auto", "float32", "bfloat16"] = Field(
        default="auto",
        description="Compute of forward and backward (autocast; weights and optimizer stay float32); "
        "auto: bfloat16 where it is fast (see policy.dtype).",
    )


class TrainerConfig(_Frozen):
    # how the update's gradient is split into micro-batches, not what it is (the same up to rounding,
    # as with evaluate.group_concurrency): changing it resumes the same run
    NOT_IDENTITY = frozenset({"micro_tokens"})
    backend: Literal["torch", "deepspeed"] = Field(
        default="torch", description="torch: one process on CPU or one GPU; deepspeed: ZeRO over the launched GPUs."
    )
    device: str = Field(default="cpu", description="Torch device of the torch backend ('cpu', 'cuda').")
    lr: float = Field(default=1e-5, gt=0.0, le=1.0, description="AdamW learning rate (constant).")
    weight_decay: float = Field(default=0.0, ge=0.0, description="AdamW weight decay.")
    grad_clip: float = Field(default=1.0, gt=0.0, description="Global gradient-norm clip.")
    micro_batch: int = Field(
        default=2, ge=1, description="Sequences per forward/backward; gradients accumulate over the update's batch."
    )
    micro_tokens: int | None = Field(
        default=None,
        ge=64,
        description="Micro-batches by padded tokens (rows x the longest) instead of micro_batch sequences: "
        "bounds what a forward keeps for backward whatever the lengths, and packs short sequences "
        "together; a sequence longer than this trains alone with its activations recomputed. None: micro_batch.",
    )
    logprob_chunk: int = Field(default=128, ge=8, description="Positions projected to the vocabulary at once.")
    gradient_checkpointing: bool = Field(default=False, description="Recompute activations in backward (less memory).")
    lora: bool = Field(default=False, description="Train LoRA adapters (peft) instead of all weights.")
    lora_rank: int = Field(default=16, ge=1, description="LoRA rank when lora is true.")
    zero_stage: Literal[0, 1, 2, 3] = Field(default=2, description="DeepSpeed ZeRO stage (deepspeed backend only).")
    dtype: Literal["auto", "float32", "bfloat16"] = Field(
        default="auto",
        description="Compute of the update's forward and backward (autocast; weights and optimizer "
        "stay float32); auto: bfloat16 where it is fast (see policy.dtype).",
    )
    rollout_dtype: Literal["auto", "float32", "bfloat16"] = Field(
        default="auto",
        description="Weights of the copy rollouts sample from, refreshed after every update; "
        "float32 samples from the trained model itself.",
    )
    engine: Literal["lean", "hf"] = Field(default="lean", description="Rollout sampling loop (see policy.engine).")


class LlmVoterConfig(_Frozen):
    kind: Literal["openai", "anthropic"] = Field(default="openai", description="Chat API of this voter.")
    model: str = Field(description="Model name.")
    base_url: str | None = Field(default=None, description="API base URL (openai: required for local servers).")
    api_key_env: str | None = Field(default=None, description="Environment variable with the API key.")


PROFILE_ROUTERS = ("adaptive", "rules", "fixed_profiles")  # routers that read the re-anchors' pool measurements


class RouterConfig(_Frozen):
    kind: Literal["random", "fixed", "adaptive", "rules", "fixed_profiles"] = Field(
        default="adaptive",
        description="random: seeded random top-K of the pool; fixed: the 'names' list in order; adaptive: voters "
        "over behaviour profiles re-induced at every re-anchor; rules: no profiles, validation success and "
        "keyword rules only; fixed_profiles: adaptive with the first re-anchor's profiles, never updated.",
    )
    names: list[str] = Field(default_factory=list, description="Harness names for the fixed router.")
    voters: list[Literal["statistics", "embedding"]] = Field(
        default_factory=lambda: ["statistics", "embedding"],
        description="Model-free voters of the adaptive routers (MiniLM embeddings for 'embedding').",
    )
    llm_voters: list[LlmVoterConfig] = Field(default_factory=list, description="LLM voters (the paper's voters).")
    inducer: Literal["offline", "llm"] = Field(
        default="offline", description="Who writes behaviour profiles: templated from outcomes, or the first LLM voter."
    )
    timeout_s: float = Field(default=30.0, gt=0, description="A voter slower than this is skipped (and logged).")


class ValidationConfig(_Frozen):
    split: Literal["train", "dev"] = Field(
        default="train",
        description="Where re-anchor validation tasks come from; 'train' takes the LAST n_tasks of the (tier-filtered) "
        "training split and removes them from the training tasks, so the two never overlap.",
    )
    n_tasks: int = Field(default=8, ge=1, description="Validation tasks shared by every harness (paired validation).")
    k: int = Field(default=1, ge=1, le=16, description="Rollouts per harness and validation task.")
    harnesses: Literal["pool", "h0"] = Field(
        default="pool",
        description="Which harnesses a re-anchor measures: 'pool' = H0 and every pool harness (the profiles the "
        "adaptive router and Rank-1 read); 'h0' = H0 only, for methods that read no profile (its validation "
        "success is still recorded).",
    )
    LATER_FIELDS = frozenset({"harnesses"})


class ReplayConfig(_Frozen):
    capacity: int = Field(default=32, ge=0, description="Groups the buffer holds: the most recent with a signal.")
    per_update: int = Field(default=2, ge=0, description="Buffer groups each update trains on again.")
    from_runs: list[str] = Field(
        default_factory=list,
        description="Earlier training runs whose groups the buffer starts with (HarnessX's segments share one).",
    )


class TrainConfig(TrackedRunConfig):
    NOT_IDENTITY = TrackedRunConfig.NOT_IDENTITY | {"state_dir"}
    LATER_FIELDS = frozenset({"bandit_exploration", "replay", "rollout_budget", "task_ids"})
    name: str = Field(default="train", description="Run name prefix; the run id is derived from the whole config.")
    mode: str = Field(
        default=Mode.HARNESS_S.value,
        description="How an update's groups are formed, a mode of rl/training_modes.py: " + modes_help() + ".",
    )
    init: str = Field(
        default="smollm2-135m",
        description="Starting weights: built-in model, checkpoint name or HF dir. Ignored when warm_start is set.",
    )
    warm_start: str | None = Field(
        default=None,
        description="Path of an SFT config (configs/sft_*.yaml): its checkpoint is the starting point, built on first "
        "use and reused afterwards.",
    )
    harness: str = Field(default="h0", description="The base harness H0.")
    pool: list[str] = Field(
        default_factory=lambda: [
            "schema_rows",
            "format_reminder",
            "inspect_first",
            "query_before_answer",
            "lenient_answer",
        ],
        description="Auxiliary (sibling) harnesses the router may choose from, frozen for the run: names, YAML "
        "paths, or 'pool:VERSION' for every sibling of a frozen pool (hs pool list).",
    )
    mixture: list[str] = Field(
        default_factory=lambda: ["h0", "schema_rows", "format_reminder", "inspect_first"],
        description="Harnesses of the fixed_mixture mode, used round robin within every group.",
    )
    router: RouterConfig = Field(default_factory=RouterConfig, description="How dead groups pick their siblings.")
    bandit_exploration: float = Field(
        default=1.414, ge=0.0, le=10.0, description="harness_bandit: UCB1's exploration constant c (rewards in [0, 1])."
    )
    replay: ReplayConfig = Field(
        default_factory=ReplayConfig, description="harnessx: the shared replay buffer of earlier groups."
    )
    tiers: list[TierName] | None = Field(default=None, description="Training-split tiers to train on; None = all.")
    n_tasks: int | None = Field(
        default=None, ge=1, description="Use the first N training tasks (after tiers); None = all."
    )
    task_ids: list[str] | None = Field(
        default=None,
        min_length=1,
        description="Train only on these tasks of the training split (after tiers; validation tasks are left "
        "out), e.g. the tasks where the warm start's H0 groups are dead (configs/hard/); None = all.",
    )
    updates: int = Field(default=20, ge=1, description="GRPO updates (steps).")
    batch_tasks: int = Field(default=4, ge=1, description="Benchmark tasks per update.")
    k: int = Field(default=8, ge=2, le=64, description="Rollouts per group (K).")
    rollout_budget: int | None = Field(
        default=None,
        ge=1,
        description="Training rollouts (first groups and rescues) the run may spend: an update starts only if its "
        "most expensive outcome keeps the total within it, else training ends there; None = no cap.",
    )
    reanchor_every: int = Field(
        default=10, ge=1, description="Re-anchor (paired validation) every N updates and at the end."
    )
    checkpoint_every: int = Field(
        default=10, ge=1, description="Register a named checkpoint every N updates and at the end."
    )
    validation: ValidationConfig = Field(default_factory=ValidationConfig, description="Re-anchor validation.")
    seed: int = Field(default=0, description="Seed for the data order, sampling and the router.")
    trainer: TrainerConfig = Field(default_factory=TrainerConfig, description="Trainer backend settings.")
    state_dir: str = Field(default=".hs/runs", description="Per-run resume state (weights, optimizer, step).")

    @field_validator("mode")
    @classmethod
    def _known_mode(cls, name: str) -> str:
        training_mode(name)  # a registered mode, else the one-line error naming the known ones
        return str(name)

    @model_validator(mode="after")
    def _mode_needs(self) -> TrainConfig:
        mode = training_mode(self.mode)
        mode.check(self)
        if self.validation.harnesses == "h0" and mode.needs_router and self.router.kind in PROFILE_ROUTERS:
            raise ValueError(
                f"router.kind {self.router.kind} reads the re-anchors' measurements of every pool harness: "
                "set validation.harnesses: pool (or router.kind random)"
            )
        if self.router.kind == "fixed" and not self.router.names:
            raise ValueError("router.kind fixed needs router.names (harness names from the pool)")
        self.check_rollout_cap(self.rollout_budget, "rollout_budget", "batch_tasks or k")
        return self

    def check_rollout_cap(self, cap: int | None, setting: str, knobs: str) -> None:
        """A cap on training rollouts (the config `setting`) must pay for one update whatever
        happens in it, or training would stop before its first update."""
        if cap is not None and cap < self.max_update_rollouts():
            raise ValueError(
                f"{setting} {cap:,} is below one update's most expensive outcome "
                f"({self.max_update_rollouts():,} rollouts): raise it or lower {knobs}"
            )

    def max_update_rollouts(self) -> int:
        """The most one update can spend: K per task, times the mode's budget factor (2 where every
        group can die and be rescued: harness_s, h0_rescue)."""
        return self.batch_tasks * self.k * training_mode(self.mode).budget_factor


class EditorConfig(_Frozen):
    kind: Literal["offline", "openai", "anthropic", "trained"] = Field(
        default="offline",
        description="offline: parameterised edit operators keyed to root causes (no API); openai: any "
        "OpenAI-compatible chat API; anthropic: the Anthropic Messages API; trained: an engineer checkpoint "
        "(hs editor sft / hs editor train) run locally.",
    )
    model: str | None = Field(default=None, description="Model name for the openai/anthropic editor.")
    checkpoint: str | None = Field(default=None, description="Engineer checkpoint name for the trained editor.")
    base_url: str | None = Field(default=None, description="API base URL (openai: required for local servers).")
    api_key_env: str | None = Field(
        default=None, description="Environment variable with the API key; default OPENAI_API_KEY / ANTHROPIC_API_KEY."
    )
    temperature: float = Field(default=0.6, ge=0.0, le=2.0, description="Editor sampling temperature (paper: 0.6).")
    max_tokens: int = Field(default=1500, ge=64, description="Token budget of one editor reply.")
    llm_diagnosis: bool = Field(
        default=False, description="Also ask the LLM for each failure's root cause (rules otherwise)."
    )
    max_diagnosis_calls: int = Field(
        default=40,
        ge=0,
        description="Cap on LLM diagnosis calls per harness run (one harness's rollouts in one round).",
    )

    @model_validator(mode="after")
    def _api_needs_model(self) -> EditorConfig:
        if self.kind in ("openai", "anthropic") and not self.model:
            raise ValueError(f"editor.kind {self.kind} needs editor.model (the API's model name)")
        if self.kind == "trained" and not self.checkpoint:
            raise ValueError("editor.kind trained needs editor.checkpoint (an engineer checkpoint: hs editor train)")
        return self

    @property
    def uses_api(self) -> bool:
        return self.kind in ("openai", "anthropic")


class DiagnoseConfig(_Frozen):
    n_tasks: int = Field(default=24, ge=2, description="Training tasks every parent runs on (a seeded sample).")
    k: int = Field(default=2, ge=1, le=16, description="Rollouts per parent and task.")
    min_support: int = Field(default=2, ge=1, description="Keep root causes backed by at least this many tasks.")


class CandidateValidationConfig(_Frozen):
    max_tasks: int = Field(default=30, ge=2, le=30, description="At most this many validation tasks per candidate.")
    n_controls: int = Field(default=8, ge=0, description="Tasks the parent solved, to catch breakage.")
    k: int = Field(default=2, ge=1, le=16, description="Rollouts per candidate and validation task.")
    min_fixed: int = Field(default=1, ge=1, description="Valid only if it solves at least this many targeted failures.")
    max_broken: int = Field(
        default=1,
        ge=0,
        description="Valid only if at most this many controls are no longer solved (1 tolerates one sampling "
        "flip at CPU scale; the paper's rule is 0).",
    )


class PoolOutConfig(_Frozen):
    version: str | None = Field(default=None, description="Pool version name; default: the evolution run id.")
    root: str = Field(default="harness_pool/pools", description="Folder holding <benchmark>/<version>/ pools.")
    dvc: bool = Field(default=True, description="dvc add + git tag the version when the repo has DVC initialised.")


class EvolveConfig(TrackedRunConfig):
    NOT_IDENTITY = TrackedRunConfig.NOT_IDENTITY | {"concurrency", "pool"}  # pool: where the result is written
    name: str = Field(default="evolve", description="Run name prefix; the run id is derived from the whole config.")
    harness: str = Field(default="h0", description="The base harness H0.")
    warm_start: str | None = Field(
        default=None, description="SFT config whose checkpoint is the (frozen) policy; built on first use."
    )
    policy: PolicyConfig = Field(
        default_factory=PolicyConfig, description="The frozen policy (model ignored when warm_start is set)."
    )
    rounds: int = Field(default=3, ge=1, le=10, description="Evolution rounds (paper: 3).")
    parents_per_round: int = Field(default=4, ge=1, description="B: parents selected for the next round (paper: 4).")
    children_per_parent: int = Field(default=3, ge=1, le=12, description="Candidates the editor proposes per parent.")
    tiers: list[TierName] | None = Field(default=None, description="Training tiers to use.")
    diagnose: DiagnoseConfig = Field(default_factory=DiagnoseConfig, description="Diagnosis runs and clustering.")
    validation: CandidateValidationConfig = Field(
        default_factory=CandidateValidationConfig, description="Candidate validation."
    )
    editor: EditorConfig = Field(default_factory=EditorConfig, description="Who proposes the edits.")
    pool: PoolOutConfig = Field(default_factory=PoolOutConfig, description="Where the frozen pool goes.")
    concurrency: int = Field(default=4, ge=1, le=64, description="Harness runs in flight at once (batched together).")
    seed: int = Field(default=0, description="Seed for task sampling and rollouts.")


class PoolReportConfig(SampledRunConfig):
    NOT_IDENTITY = SampledRunConfig.NOT_IDENTITY | {"concurrency", "report_dir"}
    name: str = Field(
        default="pool-report", description="Run name prefix; the run id is derived from the whole config."
    )
    version: str = Field(description="Pool version (folder under pool_root/<benchmark>/).")
    pool_root: str = Field(default="harness_pool/pools", description="Folder holding <benchmark>/<version>/ pools.")
    warm_start: str | None = Field(default=None, description="SFT config whose checkpoint is the policy.")
    policy: PolicyConfig = Field(default_factory=PolicyConfig, description="The frozen policy.")
    n_tasks: int = Field(
        default=30,
        ge=1,
        description="Training tasks every harness runs on (a seeded sample that "
        "leaves out the evolution's diagnosis tasks when the pool came from `hs evolve`).",
    )
    k: int = Field(default=1, ge=1, le=8, description="Rollouts per sibling and task; H0 gets k x (pool size - 1).")
    tiers: list[TierName] | None = Field(default=None, description="Training tiers to use.")
    exclude_task_ids: list[str] = Field(default_factory=list, description="Tasks never to report on.")
    concurrency: int = Field(default=4, ge=1, le=64, description="Harness runs in flight at once.")
    seed: int = Field(default=1, description="Seed for task sampling and rollouts.")
    editor: EditorConfig = Field(default_factory=EditorConfig, description="Unused here (rule diagnosis only).")
    report_dir: str = Field(default=".hs/reports", description="Where the report JSON is written.")


class EditorBundlesConfig(TrackedRunConfig):
    """Evidence bundles for the trainable harness editor (issue 21): the frozen target runs the
    parent harness k times on sampled training tasks (bundles to learn from) and validation
    tasks (held-out bundles, never trained on); failures become bundles (harness_pool/bundles.py)."""

    NOT_IDENTITY = TrackedRunConfig.NOT_IDENTITY | {"concurrency"}
    name: str = Field(default="editor-bundles", description="Run name prefix; the run id derives from the config.")
    harness: str = Field(default="h0", description="The parent harness every bundle patches.")
    warm_start: str | None = Field(default=None, description="SFT config whose checkpoint is the frozen target.")
    policy: PolicyConfig = Field(default_factory=PolicyConfig, description="The frozen target agent's policy.")
    tiers: list[TierName] | None = Field(default=None, description="Training tiers to sample from.")
    n_train_tasks: int = Field(default=24, ge=2, description="Training tasks the target runs on (a seeded sample).")
    n_heldout_tasks: int = Field(default=16, ge=0, description="Validation tasks for held-out bundles.")
    k: int = Field(default=2, ge=1, le=16, description="Rollouts of the target per task.")
    min_failures: int = Field(default=2, ge=1, le=8, description="Fewest failing tasks in a bundle.")
    max_failures: int = Field(default=4, ge=1, le=8, description="Most failing tasks in a bundle.")
    token_budget: int = Field(default=1200, ge=64, description="Tokens of trajectory text in one bundle, in all.")
    n_controls: int = Field(default=4, ge=0, description="Tasks the parent solves, kept to catch breakage.")
    editor: EditorConfig = Field(default_factory=EditorConfig, description="Unused here (rule diagnosis only).")
    concurrency: int = Field(default=2, ge=1, le=64, description="Harness runs in flight at once.")
    seed: int = Field(default=0, description="Seed for task sampling, rollouts and bundle choices.")

    @model_validator(mode="after")
    def _failures_range(self):
        if self.min_failures > self.max_failures:
            raise ValueError(f"min_failures ({self.min_failures}) is above max_failures ({self.max_failures})")
        return self


class EditorSftConfig(RunConfig):
    """The engineer's cold start (issue 21): offline-operator patches for every training bundle
    are re-run by the frozen target; those that validate become demonstrations (bundle -> patch),
    and the engineer model is fine-tuned on them (assistant tokens only)."""

    NOT_IDENTITY = RunConfig.NOT_IDENTITY | {"concurrency", "gradient_checkpointing"}
    name: str = Field(default="engineer-sft", description="Run name prefix; the checkpoint name derives from it.")
    bundles: str = Field(description="Bundle config (EditorBundlesConfig YAML); its bundles are built on first use.")
    base_model: str = Field(default="smollm2-135m", description="The engineer model to fine-tune.")
    variants: int = Field(default=3, ge=1, le=8, description="Offline operator variants tried per bundle.")
    llm: EditorConfig | None = Field(
        default=None, description="An LLM editor whose patches also become demonstrations (and join the comparison)."
    )
    k: int = Field(default=2, ge=1, le=16, description="Target rollouts per task when a patch is re-run.")
    min_fixed: int = Field(default=1, ge=1, description="A demonstration fixes at least this many targeted failures.")
    max_broken: int = Field(default=0, ge=0, description="... and breaks at most this many controls.")
    heldout_fraction: float = Field(default=0.2, ge=0.0, lt=1.0, description="Demonstrations kept for held-out loss.")
    steps: int = Field(default=30, ge=1, description="Optimizer updates.")
    batch_size: int = Field(default=4, ge=1, description="Demonstrations per update.")
    lr: float = Field(default=1e-4, gt=0.0, le=1.0, description="Peak AdamW learning rate (cosine decay to 0).")
    lora: bool = Field(default=False, description="Train LoRA adapters (merged into the saved weights).")
    lora_rank: int = Field(default=16, ge=1, description="LoRA rank when lora is true.")
    gradient_checkpointing: bool = Field(default=True, description="Recompute activations (long prompts).")
    device: str = Field(default="cpu", description="Torch device for training.")
    dtype: Literal["auto", "float32", "bfloat16"] = Field(default="auto", description="Compute of forward/backward.")
    concurrency: int = Field(default=2, ge=1, le=64, description="Patch re-runs in flight at once.")
    seed: int = Field(default=0, description="Seed for the held-out split and batch order.")


class EditorTrainConfig(RunConfig):
    """GRPO for the engineer (issue 21): per update, a batch of training bundles; G patches per
    bundle sampled from the engineer; each re-run by the frozen target on the bundle's failing
    tasks and controls; reward = (fixed - broken) / tasks re-run (rejected_reward for a patch
    that gives no child); the clipped update of rl/grpo.py on the engineer's tokens only."""

    NOT_IDENTITY = RunConfig.NOT_IDENTITY | {"concurrency"}
    name: str = Field(default="engineer-grpo", description="Run name prefix; the run id derives from the config.")
    sft: str = Field(description="Cold-start config (EditorSftConfig YAML): its checkpoint starts the engineer.")
    updates: int = Field(default=4, ge=1, description="GRPO updates.")
    bundles_per_update: int = Field(default=2, ge=1, description="Training bundles per update (a seeded sample).")
    group_size: int = Field(default=4, ge=2, le=16, description="G: patches sampled per bundle.")
    k: int = Field(default=1, ge=1, le=16, description="Target rollouts per task when a patch is re-run.")
    rejected_reward: float = Field(default=-1.0, le=0.0, description="Reward of a patch that gives no child harness.")
    temperature: float = Field(default=1.0, gt=0.0, le=2.0, description="Engineer sampling temperature.")
    max_new_tokens: int = Field(default=384, ge=32, description="Token budget of one engineer reply.")
    lr: float = Field(default=1e-5, gt=0.0, le=1.0, description="AdamW learning rate.")
    micro_batch: int = Field(default=1, ge=1, description="Sequences per forward/backward.")
    gradient_checkpointing: bool = Field(default=True, description="Recompute activations (long prompts).")
    device: str = Field(default="cpu", description="Torch device of the engineer.")
    dtype: Literal["auto", "float32", "bfloat16"] = Field(default="auto", description="Compute of forward/backward.")
    concurrency: int = Field(default=2, ge=1, le=64, description="Patch re-runs in flight at once.")
    seed: int = Field(default=0, description="Seed for bundle batches and engineer sampling.")
