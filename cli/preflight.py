"""Checks a command runs before Prefect or a model starts: a broken harness or pool, missing
data, an unreachable database or model, a launch that cannot work. Each failure is one line
saying how to fix it (cli/errors.py turns it into exit status 2)."""

from __future__ import annotations


def eval_preflight(cfg, database_url: str | None, check_model: bool = True) -> None:
    """Fail fast, before Prefect starts or a model converts, on a broken harness, missing data, an
    unknown task id, an unreachable database, a resumed run whose harness file changed or
    (check_model) a missing policy model."""
    from cli.checks import check_sandbox, check_training_split, open_database
    from configs.schema import ConfigError
    from envs.registry import benchmark
    from harness_pool.pool_store import resolve_pool
    from harness_pool.spec import load_harness
    from rl.model_store import resolve_model
    from tasks.evaluation import run_id_for

    harnesses = [load_harness(cfg.harness, cfg.env.benchmark), *resolve_pool(cfg.pool, cfg.env.benchmark)]
    if cfg.split == "train":
        check_training_split(cfg.env.benchmark, cfg.env.data_dir)
    bench = benchmark(cfg.env.benchmark)
    if cfg.split not in bench.splits:
        raise ConfigError(f"split '{cfg.split}' is not a {bench.name} split: use one of {', '.join(bench.splits)}")
    bench.load(cfg.split, data_dir=cfg.env.data_dir, limit=1)
    check_sandbox(cfg.env.benchmark, harnesses)
    if cfg.task_ids:
        from tasks.resources import bench_task

        for task_id in cfg.task_ids:
            bench_task(cfg.env, task_id)  # an unknown id: one line naming the split
    check_resumed_harnesses(run_id_for(cfg), harnesses, open_database(database_url, write=True))
    if check_model and cfg.policy.backend == "transformers":
        resolve_model(cfg.policy.model)


def check_resumed_harnesses(run_id: str, harnesses, database_url: str) -> None:
    """A run resumed after a harness file changed would mix two harnesses' rollouts: refuse it."""
    from db.engine import session_scope
    from tasks.records import check_run_harnesses
    from tasks.resources import get_engine

    with session_scope(get_engine(database_url)) as session:
        check_run_harnesses(session, run_id, harnesses)


def check_launch(cfg, world: int) -> None:
    """A multi-process launch needs the DeepSpeed backend with full weights on every rank."""
    from configs.schema import ConfigError

    if world > 1 and cfg.trainer.backend != "deepspeed":
        raise ConfigError(
            f"launched with WORLD_SIZE={world} but trainer.backend is "
            f"'{cfg.trainer.backend}'; add --set trainer.backend=deepspeed"
        )
    if world > 1 and cfg.trainer.zero_stage > 2:
        raise ConfigError(
            "data-parallel training needs trainer.zero_stage 0, 1 or 2 (rank 0 samples "
            "rollouts from full weights); add --set trainer.zero_stage=2"
        )


def train_preflight(cfg, database_url: str | None) -> None:
    """Fail fast on a broken harness or pool, missing data, database or starting checkpoint, or a
    resumed run whose harness files changed."""
    from cli.checks import check_sandbox, check_training_split, open_database
    from harness_pool.pool_store import resolve_pool
    from harness_pool.spec import load_harness
    from rl.model_store import resolve_model
    from rl.training_modes import training_mode
    from tasks.run_identity import init_checkpoint, train_run_id, warm_start_config
    from tasks.train_checkpoints import check_recorded_updates

    names = {cfg.harness, *(cfg.mixture if training_mode(cfg.mode).needs_mixture else [])}
    harnesses = [load_harness(name, cfg.env.benchmark) for name in names] + resolve_pool(cfg.pool, cfg.env.benchmark)
    check_training_split(cfg.env.benchmark, cfg.env.data_dir)
    check_task_ids(cfg)
    check_sandbox(cfg.env.benchmark, harnesses)
    url, run_id = open_database(database_url, write=True), train_run_id(cfg)
    check_resumed_harnesses(run_id, harnesses, url)
    check_recorded_updates(cfg, run_id, url, restore=False)  # before Prefect or the model starts
    if warm_start_config(cfg) is None:  # a warm-start checkpoint is built on first use
        resolve_model(init_checkpoint(cfg))


def check_task_ids(cfg) -> None:
    """A train config's task_ids that are not tasks of its training split: one line, before anything
    runs (skipped while the split is still to be built)."""
    from configs.schema import ConfigError
    from envs.base import DataError
    from tasks.run_identity import TrainingError, task_sets

    if cfg.task_ids is None:
        return
    try:
        task_sets(cfg)
    except TrainingError as exc:
        raise ConfigError(str(exc)) from None
    except DataError:
        pass  # no training split yet: the pipeline builds it, then the flow says the same


def pipeline_preflight(cfg, database_url: str | None) -> None:
    """Fail in one line, before Prefect starts: run ids, database, pool version, harnesses, training and dev data."""
    from cli.checks import check_sandbox, check_training_split, open_database
    from envs.registry import benchmark
    from harness_pool.pool_store import load_pool, resolve_pool
    from harness_pool.spec import load_harness
    from tasks.evaluation import run_id_for
    from tasks.pipeline import evaluation_configs, pipeline_run_id, training_config
    from tasks.run_identity import train_run_id
    from tasks.train_checkpoints import rl_checkpoint_name

    # Run ids too long for the database: one line here (ids a phase derives from what it finds,
    # such as a baseline's per-harness evaluations, are checked when it makes them).
    pipeline_run_id(cfg)
    train_cfg = training_config(cfg, cfg.pool_version)
    train_id = train_run_id(train_cfg)
    for evaluation in evaluation_configs(
        cfg, train_cfg, train_id, rl_checkpoint_name(train_id, train_cfg.updates), trained_tasks=[]
    ).values():
        run_id_for(evaluation)
    open_database(database_url, write=True)
    env = cfg.train.env
    check_training_split(env.benchmark, env.data_dir, missing_ok=True)  # built by the pipeline when missing
    check_task_ids(train_cfg)
    if cfg.pool_version:
        load_pool(cfg.pool_version, cfg.train.env.benchmark)
    elif cfg.evolve is None:
        resolve_pool(cfg.train.pool, cfg.train.env.benchmark)
    harnesses = [load_harness(h, cfg.train.env.benchmark) for h in [cfg.train.harness, *cfg.evaluate.outside]]
    check_sandbox(cfg.train.env.benchmark, harnesses, editors_write_hooks=cfg.evolve is not None)
    benchmark(env.benchmark).load(cfg.evaluate.split, data_dir=env.data_dir, limit=1)
