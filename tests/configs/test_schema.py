import pytest

from configs.schema import CONFIG_DIR, ConfigError, EvalConfig, load_config, parse_override


def test_yaml_defaults_and_overrides():
    cfg = load_config(
        EvalConfig, CONFIG_DIR / "eval_dbbench.yaml", {"k": 5, "sampling.temperature": 0.3, "limit": None}
    )
    assert cfg.k == 5 and cfg.sampling.temperature == 0.3 and cfg.split == "dev" and cfg.limit is None
    assert parse_override("env.backend=mysql") == ("env.backend", "mysql")
    assert parse_override("limit=4") == ("limit", 4)


@pytest.mark.parametrize(
    "override,field",
    [
        ({"sampling.temperature": -1}, "sampling.temperature"),
        ({"k": 0}, "'k'"),
        ({"env.backend": "oracle"}, "env.backend"),
        ({"sampling.nucleus": 0.5}, "sampling.nucleus"),
    ],
)
def test_bad_values_name_the_field_and_the_fix(override, field):
    with pytest.raises(ConfigError) as info:
        load_config(EvalConfig, CONFIG_DIR / "eval_dbbench.yaml", override)
    message = str(info.value)
    assert field in message and "\n" not in message and ("fix the value" in message or "remove it" in message)


def test_missing_and_malformed_files(tmp_path):
    with pytest.raises(ConfigError, match="not found"):
        load_config(EvalConfig, tmp_path / "nope.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("k: [1\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(EvalConfig, bad)
    with pytest.raises(ConfigError, match="field.path=value"):
        parse_override("temperature")


def test_openai_backend_needs_a_url():
    with pytest.raises(ConfigError, match="policy.base_url"):
        load_config(EvalConfig, None, {"policy.backend": "openai"})


def test_set_null_clears_a_field_while_named_flags_left_out_change_nothing():
    from configs.schema import TrainConfig, load_config

    cfg = load_config(
        TrainConfig,
        "configs/train_dbbench_smol.yaml",
        {"updates": None, "k": 4},
        ["warm_start=null", "trainer.lr=0.001"],
    )
    assert cfg.warm_start is None and cfg.updates == 20 and cfg.k == 4 and cfg.trainer.lr == 0.001


def test_identity_is_the_values_not_the_layout_nor_where_results_go():
    import json

    from configs.pipeline import PipelineConfig
    from configs.schema import TrainConfig

    a = TrainConfig()
    assert json.loads(a.identity()) == json.loads(a.identity())  # deterministic
    keys = list(json.loads(a.identity()))
    assert keys == sorted(keys) and "results_dir" not in keys and "wandb" not in keys and "state_dir" not in keys
    assert a.identity() == TrainConfig(results_dir="/elsewhere", wandb="disabled", state_dir="/x").identity()
    assert a.identity() != TrainConfig(sampling={"temperature": 0.5}).identity()  # inherited fields count
    assert a.identity() != TrainConfig(env={"backend": "mysql"}).identity()
    assert "updates" not in a.identity(exclude=frozenset({"updates"}))
    # Nested configs drop their own location fields too: a pipeline's id never depends on $HS_RESULTS_DIR.
    p = PipelineConfig(train={}, evaluate={"group_concurrency": 2})
    q = PipelineConfig(train={"results_dir": "/nfs/results"}, evaluate={"group_concurrency": 8}, wandb="online")
    assert p.identity() == q.identity()
    assert p.identity() != PipelineConfig(train={"updates": 3}).identity()


def test_pipeline_test_split_evaluations_mirror_their_dev_counterparts():
    from configs.pipeline import PipelineConfig
    from tasks.pipeline import evaluation_configs, training_config

    cfg = PipelineConfig(
        train={"pool": ["schema_rows"]},
        evaluate={"split": "dev", "every": 6, "seeds": 3, "before": True, "rank1": True, "test_seeds": 1},
    )
    train = training_config(cfg, None)
    evals = evaluation_configs(cfg, train, "train-run", "ckpt-u20")
    assert set(evals) == {"before", "after", "rank1", "test-before", "test-after", "test-rank1"}
    for label in ("before", "after", "rank1"):
        dev, test = evals[label], evals[f"test-{label}"]
        assert (test.split, test.seeds, test.every, test.limit) == ("standard", 1, 1, None)
        assert (dev.split, dev.seeds, dev.every) == ("dev", 3, 6)
        assert (test.checkpoint, test.routing, test.pool, test.profiles_run) == (
            dev.checkpoint,
            dev.routing,
            dev.pool,
            dev.profiles_run,
        )
    assert evals["test-rank1"].routing == "rank1" and evals["test-after"].checkpoint == "ckpt-u20"
    assert not {k for k in evaluation_configs(PipelineConfig(train={}), train, "r", "c") if k.startswith("test-")}


def test_trained_tasks_evaluations_run_h0_on_the_drawn_tasks_with_one_seed_before_and_after():
    from configs.pipeline import PipelineConfig
    from tasks.pipeline import evaluation_configs, training_config

    cfg = PipelineConfig(train={}, evaluate={"seeds": 3, "k": 3, "trained_tasks_k": 8})
    train = training_config(cfg, None)
    drawn = ["dbbench/train/0001", "dbbench/train/0007"]
    evals = evaluation_configs(cfg, train, "train-run", "ckpt-u20", drawn)
    before, after = evals["trained-tasks-before"], evals["trained-tasks-after"]
    for e in (before, after):
        assert (e.split, e.task_ids, e.k, e.seeds, e.harness, e.routing) == ("train", drawn, 8, 1, "h0", "h0")
    assert after.checkpoint == "ckpt-u20" and before.checkpoint == evals["before"].checkpoint
    assert "trained-tasks-after" not in evaluation_configs(cfg, train, "r", "c")  # the tasks are known after training
    no_before = PipelineConfig(train={}, evaluate={"before": False, "trained_tasks_k": 8})
    assert [k for k in evaluation_configs(no_before, train, "r", "c", drawn) if k.startswith("trained")] == [
        "trained-tasks-after"
    ]
    off = PipelineConfig(train={})
    assert not {k for k in evaluation_configs(off, train, "r", "c", drawn) if k.startswith("trained-tasks")}


def test_the_shipped_defaults_run_the_method_and_the_ablation_says_what_it_changes():
    from configs.schema import RouterConfig, TrainConfig
    from tasks.run_identity import train_run_id

    assert RouterConfig().kind == "adaptive"
    method = load_config(TrainConfig, "configs/train_dbbench_smol.yaml")
    ablation = load_config(TrainConfig, "configs/ablations/random_router.yaml")
    assert method.router.kind == "adaptive" and ablation.router.kind == "random"
    assert ablation.model_dump(exclude={"router"}) == method.model_dump(exclude={"router"})
    # the runs recorded when train_dbbench_smol.yaml itself set kind random keep their id under the ablation
    assert train_run_id(ablation) == "train-dbbench-smol-harness_s-62361a82a3fa"


def test_a_config_from_another_is_that_config_deeply_updated(tmp_path):
    from configs.schema import TrainConfig

    (tmp_path / "variant.yaml").write_text("from: configs/train_dbbench_smol.yaml\nk: 4\ntrainer: {lr: 2.0e-5}\n")
    cfg = load_config(TrainConfig, tmp_path / "variant.yaml")
    assert cfg.k == 4 and cfg.trainer.lr == 2e-5 and cfg.trainer.micro_batch == 2 and cfg.name == "train-dbbench-smol"
    (tmp_path / "broken.yaml").write_text("from: configs/no_such.yaml\n")
    with pytest.raises(ConfigError, match="no_such.yaml not found"):
        load_config(TrainConfig, tmp_path / "broken.yaml")


@pytest.mark.parametrize(
    "item,nearest",
    [
        ("sead=3", "seeds"),  # a top-level field
        ("policy.modle=x", "policy.model"),  # a nested section
        ("polcy.model=x", "policy"),  # a misspelt section
        ("router.kindd=fixed", "router.kind"),
    ],
)
def test_an_unknown_set_key_suggests_the_nearest_field(item, nearest):
    from configs.schema import TrainConfig

    model = TrainConfig if item.startswith("router") else EvalConfig
    with pytest.raises(ConfigError) as info:
        load_config(model, None, None, [item])
    message = str(info.value)
    assert f"did you mean '{nearest}'?" in message and "remove it" in message and "\n" not in message


def test_an_unknown_key_with_no_near_field_is_only_named():
    with pytest.raises(ConfigError) as info:
        load_config(EvalConfig, None, None, ["zzzz=1"])
    assert "did you mean" not in str(info.value) and "remove it (unknown field)" in str(info.value)
