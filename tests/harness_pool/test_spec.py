from pathlib import Path

import pytest
import yaml

from harness_pool.spec import HarnessError, HarnessSpec, Skill, dump_harness, harness_id, load_harness


def test_h0_loads_and_id_is_stable_across_formatting(tmp_path: Path):
    h0 = load_harness("h0")
    assert h0.name == "h0" and h0.benchmark == "dbbench"
    data = yaml.safe_load((Path(__file__).parents[2] / "harness_pool/harnesses/dbbench/h0.yaml").read_text())
    # Same content, different key order and YAML style -> same id.
    reordered = dict(reversed(list(data.items())))
    path = tmp_path / "h0_copy.yaml"
    path.write_text(yaml.safe_dump(reordered, default_flow_style=True, sort_keys=True))
    assert load_harness(path).id == h0.id
    # Round trip through our own writer keeps the id.
    assert load_harness(dump_harness(h0, tmp_path / "again.yaml")).id == h0.id
    assert len(h0.id) == 64 and h0.id == harness_id(h0)


def test_any_edit_changes_the_id():
    h0 = load_harness("h0")
    edited = h0.model_copy(update={"skills": [Skill(name="inspect", text="Look at the table first.")]})
    assert HarnessSpec.model_validate(edited.model_dump()).id != h0.id
    assert "Look at the table first." in edited.system_message()


def test_broken_harness_files_give_one_line_errors(tmp_path: Path):
    bad_yaml = tmp_path / "bad.yaml"
    bad_yaml.write_text("name: [unclosed\n")
    with pytest.raises(HarnessError, match="not valid YAML"):
        load_harness(bad_yaml)
    unknown = tmp_path / "unknown.yaml"
    data = load_harness("h0").model_dump(mode="json")
    data["context"]["max_observation_chars"] = 3
    unknown.write_text(yaml.safe_dump(data))
    with pytest.raises(HarnessError, match="context.max_observation_chars") as info:
        load_harness(unknown)
    assert "\n" not in str(info.value)
    with pytest.raises(HarnessError, match="not found"):
        load_harness("no-such-harness")


@pytest.mark.parametrize(
    "where, text",
    [
        ("prompts.system", 'Reply with {"name": "execute_sql"}'),  # a JSON example with single braces
        ("hooks.0.message", "Use the table {0} now"),  # a positional field
        ("prompts.task_template", "{description"),  # an unclosed brace
    ],
)
def test_a_template_that_would_crash_str_format_is_rejected_when_loaded(tmp_path: Path, where, text):
    data = load_harness("h0").model_dump(mode="json")
    if where == "hooks.0.message":
        data["hooks"] = [{"at": "on_init", "effect": "inject", "message": text}]
    else:
        data["prompts"][where.split(".")[1]] = text
    path = tmp_path / "braces.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(HarnessError, match=r"not a valid template .*write literal braces as \{\{ and \}\}") as info:
        load_harness(path)
    assert where.split(".")[0] in str(info.value) and "\n" not in str(info.value)
    data_ok = load_harness("h0").model_dump(mode="json")
    data_ok["prompts"]["system"] += '\nReply with {{"name": "execute_sql"}} and see {table_name}.'
    path.write_text(yaml.safe_dump(data_ok))
    from harness_pool.runtime import fill

    shown = fill(load_harness(path).system_message(), {"table_name": "t"})  # doubled braces load and render single
    assert 'Reply with {"name": "execute_sql"} and see t.' in shown


@pytest.mark.parametrize(
    "text, reason",
    [
        ("{description:>1000000000}", "format width above 100000"),  # 1 GB per episode, and in the check itself
        ("{description:.200000}", "format width above 100000"),
        ("{description:>" + "9" * 5_000 + "}", "format width above 100000"),  # past int()'s 4,300 digits
        ("{description.__class__}", "attribute or index"),
        ("{description[0]}", "attribute or index"),
        ("{description:>{table_name}}", "nested format spec"),
    ],
)
@pytest.mark.serial
def test_a_template_field_over_the_hook_bounds_is_rejected_when_checked(tmp_path: Path, text, reason):
    import time
    import tracemalloc

    from typer.testing import CliRunner

    from cli.main import app

    runner = CliRunner()
    assert runner.invoke(app, ["harness", "check", "harness_pool/harnesses/dbbench/h0.yaml"]).exit_code == 0  # imports
    data = load_harness("h0").model_dump(mode="json")
    data["prompts"]["task_template"] = text
    path = tmp_path / "wide.yaml"
    path.write_text(yaml.safe_dump(data))
    tracemalloc.start()
    started = time.monotonic()
    with pytest.raises(HarnessError, match=reason) as info:
        load_harness(path)
    result = runner.invoke(app, ["harness", "check", str(path)])  # `hs harness check`
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert time.monotonic() - started < 10.0 and peak < 50 * 2**20  # a width honoured would take minutes and GBs
    assert "prompts.task_template" in str(info.value) and "\n" not in str(info.value)
    assert result.exit_code == 2 and reason in " ".join(result.output.split())
    data["prompts"]["task_template"] = "{description:>40}|{table_name!r:^10.5}"  # small widths still load
    path.write_text(yaml.safe_dump(data))
    load_harness(path)


def test_a_hook_rule_regex_must_be_one_re2_runs_in_linear_time(tmp_path: Path):
    data = load_harness("h0").model_dump(mode="json")
    for pattern, reason in [
        (r"(\w+)\s\1", "not accepted by RE2"),  # a backreference
        ("(?<=Error)x", "not accepted by RE2"),  # lookbehind
        ("(a{1000}){1000}", "not accepted by RE2"),
        ("x" * 1_001, "longer than 1,000 characters"),
    ]:
        data["hooks"] = [
            {"at": "after_step", "effect": "inject", "message": "m", "when": {"observation_matches": pattern}}
        ]
        path = tmp_path / "regex.yaml"
        path.write_text(yaml.safe_dump(data))
        with pytest.raises(HarnessError, match=reason) as info:
            load_harness(path)
        assert "hooks.0.when.observation_matches" in str(info.value) and "\n" not in str(info.value)
