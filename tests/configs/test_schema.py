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
