"""The whole method's config (Algorithm 1 end to end): evolve or reuse a pool, train, evaluate.

A sub-config (evolve, train) is written inline or as `{from: configs/x.yaml, field: value}`:
the file is read and the inline fields override it, so an experiment reuses the phase configs
and changes only what differs. `--set train.updates=3` works the same on either form.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from configs.schema import EvolveConfig, TrainConfig, WandbMode, _Frozen, expand_from


class PipelineEvalConfig(_Frozen):
    NOT_IDENTITY = frozenset({"group_concurrency"})
    LATER_FIELDS = frozenset({"trained_tasks_k"})
    split: Literal["dev", "standard", "test"] = Field(
        default="dev", description="dev = validation; standard (DBBench) or test (TextWorld) = test."
    )
    k: int = Field(default=3, ge=1, le=64, description="Rollouts per task and seed (Pass@k / Avg@k).")
    seeds: int = Field(default=3, ge=1, le=20, description="Independent evaluation runs (paper: 3).")
    limit: int | None = Field(default=None, ge=1, description="Only the first N tasks (after `every`); None = all.")
    every: int = Field(default=1, ge=1, description="Every Nth task of the split: a deterministic subsample.")
    before: bool = Field(default=True, description="Also evaluate the starting checkpoint under H0 (the 'before' row).")
    rank1: bool = Field(default=True, description="Also evaluate the trained policy with Rank-1 routing over the pool.")
    rank1_before: bool = Field(
        default=False,
        description="Also evaluate the starting checkpoint with Rank-1 routing over the profiles of the "
        "first re-anchor (RQ5: which harness is Rank-1 before vs after training).",
    )
    outside: list[str] = Field(
        default_factory=list,
        description="Harnesses outside the pool (names or YAML paths) to evaluate the trained policy under (RQ6).",
    )
    test_seeds: int = Field(
        default=0,
        ge=0,
        le=20,
        description="Also evaluate on the whole test split (standard) with this many seeds, as 'test-before', "
        "'test-after' and 'test-rank1' (each where its dev counterpart is on); 0 = no test evaluation.",
    )
    trained_tasks_k: int = Field(
        default=0,
        ge=0,
        le=64,
        description="Also evaluate under H0, with this many rollouts and one seed, every training task the run "
        "drew (the tasks of its first H0 groups): the starting weights as 'trained-tasks-before', the trained as "
        "'trained-tasks-after' (the report's transfer on rescued tasks); 0 = off.",
    )
    group_concurrency: int = Field(default=8, ge=1, le=64, description="Rollout groups in flight per evaluation.")


class RftConfig(_Frozen):
    """Rejection-sampling fine-tuning, for the baselines that fine-tune the policy on its own
    successful rollouts (WHALE, HarnessForge; flows/baselines/)."""

    rounds: int = Field(default=2, ge=1, le=20, description="WHALE: rounds of harness search then fine-tuning.")
    tasks_per_round: int = Field(
        default=8, ge=1, description="Training tasks a round collects rollouts on (seeded batches, as training's)."
    )
    k: int = Field(default=4, ge=1, le=64, description="Rollouts per task and harness when collecting.")
    harnesses: int = Field(
        default=2, ge=1, description="WHALE: the current harnesses = the round's N best; HarnessForge: N branches."
    )
    steps: int = Field(default=10, ge=1, description="Fine-tuning steps per fine-tune.")
    batch_size: int = Field(default=4, ge=1, description="Successful rollouts per fine-tuning step.")
    lr: float = Field(default=2e-5, gt=0.0, le=1.0, description="Peak AdamW learning rate (cosine decay to 0).")
    gradient_checkpointing: bool = Field(default=True, description="Recompute activations (less memory).")


class CouplingConfig(_Frozen):
    """HarnessX's coupling of harness evolution with training (flows/baselines/harnessx.py)."""

    rounds: int = Field(
        default=2, ge=1, le=20, description="Rounds of (one evolution round, then train.updates / rounds updates)."
    )


class BudgetConfig(_Frozen):
    """Caps on the rollouts a method may spend, counted as the report's resource table counts
    them (analysis/resources.py), the paper's equal-budget point. A run whose plan can exceed a cap
    is refused before it starts (configs/budget.py); training with rescue, whose spend depends on
    how many groups die, stops before an update that could cross the training cap."""

    search_rollouts: int | None = Field(
        default=None,
        ge=1,
        description="A baseline's own harness search (selections, evolution rounds), without the shared frozen "
        "pool's evolution; None = no cap.",
    )
    training_rollouts: int | None = Field(
        default=None,
        ge=1,
        description="Rollouts the policy learns from (first groups and rescues, or collections to fine-tune on); "
        "None = no cap.",
    )


BASELINE_DOCS = {  # pipelines of another shape (flows/baselines/); the training-mode baselines are train.mode
    "frozen_evolution": "keep the starting policy, deploy the pool's best harness on validation (H_best)",
    "whale": "rounds of harness selection with the current policy, then fine-tuning on its successes under the "
    "best harnesses",
    "harness_forge": "one policy fine-tuned per harness branch, the best (harness, policy) pair deployed",
    "harnessx": "rounds of one evolution round with the current policy, then harnessx training segments over "
    "the grown pool, with one replay buffer across the segments",
}


class PipelineConfig(_Frozen):
    NOT_IDENTITY = frozenset({"wandb"})
    LATER_FIELDS = frozenset({"baseline", "rft", "coupling", "budget"})
    name: str = Field(default="harness-s", description="Pipeline name; every phase's run name starts with it.")
    baseline: Literal["frozen_evolution", "whale", "harness_forge", "harnessx"] | None = Field(
        default=None,
        description="Run a baseline of another shape instead of training (flows/baselines/): "
        + "; ".join(f"{k} = {v}" for k, v in BASELINE_DOCS.items())
        + ". None = Harness-S or the baseline named by train.mode.",
    )
    rft: RftConfig = Field(
        default_factory=RftConfig, description="Fine-tuning on own successes (whale, harness_forge)."
    )
    coupling: CouplingConfig = Field(
        default_factory=CouplingConfig, description="harnessx: evolution rounds interleaved with training."
    )
    budget: BudgetConfig = Field(
        default_factory=BudgetConfig, description="Rollout caps (the equal-budget point); none by default."
    )
    evolve: EvolveConfig | None = Field(
        default=None,
        description="Evolve a new pool first (its pool.version is then trained on); None = reuse pool_version.",
    )
    pool_version: str | None = Field(
        default=None, description="Reuse this frozen pool version (hs pool list) instead of evolving one."
    )
    train: TrainConfig = Field(description="The training phase; its pool is replaced by the pool of this pipeline.")
    evaluate: PipelineEvalConfig = Field(default_factory=PipelineEvalConfig, description="The evaluation phase.")
    wandb: WandbMode = Field(
        default="offline", description="W&B mode of the pipeline's own run (phases use their own settings)."
    )

    @model_validator(mode="before")
    @classmethod
    def _expand_from(cls, data: Any) -> Any:
        if isinstance(data, dict):
            data = {**data, **{key: expand_from(data[key], key) for key in ("evolve", "train") if key in data}}
        return data

    @model_validator(mode="after")
    def _one_pool_source(self) -> PipelineConfig:
        if self.evolve is not None and self.pool_version is not None:
            raise ValueError("set either evolve (a new pool) or pool_version (reuse a frozen pool), not both")
        if self.baseline == "harnessx" and (self.evolve is None or self.train.mode != "harnessx"):
            raise ValueError("baseline harnessx evolves between training segments: set evolve and train.mode harnessx")
        if self.baseline == "harnessx" and self.train.updates < self.coupling.rounds:
            raise ValueError("baseline harnessx: train.updates must be at least coupling.rounds (updates per round)")
        if self.baseline and self.evolve is None and not self.pool_version and not self.train.pool:
            raise ValueError(f"baseline {self.baseline} searches a pool: set evolve, pool_version or train.pool")
        routed = self.evaluate.rank1 or self.evaluate.rank1_before  # read by the training pipelines' evaluation
        if routed and self.baseline in (None, "harnessx") and self.train.validation.harnesses == "h0":
            raise ValueError(
                "evaluate.rank1 routes by the profiles the re-anchors measure on every pool harness: "
                "set train.validation.harnesses: pool, or evaluate.rank1: false and rank1_before: false"
            )
        self.train.check_rollout_cap(
            self.budget.training_rollouts, "budget.training_rollouts", "train.batch_tasks or train.k"
        )
        if self.evolve is not None and not self.evolve.pool.version:
            raise ValueError("evolve.pool.version must name the pool the pipeline trains on (e.g. v2)")
        return self

    def pool_name(self) -> str | None:
        return self.evolve.pool.version if self.evolve is not None else self.pool_version
