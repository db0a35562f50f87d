from envs.dbbench.data import load_split
from harness_pool.runtime import HarnessRuntime, task_fields
from harness_pool.seed_pool import SEED_POOL, seed_siblings
from harness_pool.spec import load_harness


def test_seed_pool_files_match_their_generator_and_point_at_h0():
    h0 = load_harness("h0")
    generated = {s.name: s for s in seed_siblings(h0)}
    assert sorted(generated) == sorted(SEED_POOL)
    ids = {h0.id}
    for name in SEED_POOL:
        on_disk = load_harness(name)
        assert on_disk.id == generated[name].id, f"{name}.yaml is stale: run python -m harness_pool.seed_pool"
        assert on_disk.parent_ids == [h0.id] and on_disk.provenance.edit
        ids.add(on_disk.id)
    assert len(ids) == len(SEED_POOL) + 1


def test_schema_rows_sibling_shows_columns_and_first_rows(data_dir):
    task = load_split("dev")[0]
    messages, events = HarnessRuntime(load_harness("schema_rows"), task_fields(task)).opening_messages()
    first_row_value = str(task.rows[0][0])
    assert first_row_value in messages[1]["content"] and task.columns[-1] in messages[1]["content"]
    assert events[0]["at"] == "on_init"
    h0_messages, _ = HarnessRuntime(load_harness("h0"), task_fields(task)).opening_messages()
    assert first_row_value not in h0_messages[1]["content"]


def test_every_benchmark_seed_pool_on_disk_matches_its_generator():
    from harness_pool.seed_pool import _SEEDS

    for benchmark, siblings in _SEEDS.items():
        h0 = load_harness("h0", benchmark)
        for spec in siblings(h0):
            on_disk = load_harness(spec.name, benchmark)
            assert on_disk.id == spec.id, f"{benchmark}/{spec.name}.yaml is stale: run python -m harness_pool.seed_pool"
            assert on_disk.parent_ids == [h0.id] and on_disk.benchmark == benchmark
