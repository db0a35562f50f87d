"""The trajectory explorer (ui/) over a real database: every page, a dead group beside its rescue, the
token view, model-written text kept as text, 404 pages, and a database it cannot write to."""

from __future__ import annotations

import re

import pytest
from sqlalchemy import text
from starlette.testclient import TestClient

from db.engine import make_engine, session_scope, upgrade
from db.models import BenchTask, Harness, RolloutGroup, RouterDecision, Run, TrainStep, Trajectory, Turn
from ui.app import create_app
from ui.database import read_only_engine

HOSTILE = "<script>window.__hs_pwned = 1</script><img src=x onerror=window.__hs_pwned=2>"
RUN = "t-harness_s-0123456789ab"


def _trajectory(group: RolloutGroup, i: int, success: bool, harness: str, reply: str) -> Trajectory:
    traj = Trajectory(
        id=f"{group.id}-{i}",
        group_id=group.id,
        run_id=RUN,
        bench_task_id=group.bench_task_id,
        harness_id=harness,
        sample_index=i,
        checkpoint="c",
        reward=float(success),
        success=success,
        failure_kind=None if success else "wrong_value",
        finish_reason="answered",
        n_turns=1,
        details={"mismatch": 0.98},
    )
    traj.turns = [
        Turn(
            id=f"{traj.id}-t0", index=0, context_text=f"task {HOSTILE}", context_ids=[1, 2],
            completion_text=reply, completion_ids=[5, 6, 7], completion_logprobs=[-0.1, -2.0, -0.5],
            loss_mask=[0, 0, 1, 1, 0], action_kind="answer", action={"values": [HOSTILE]},
            observation=f"observation {HOSTILE}", hook_events=[{"inject": HOSTILE}],
        )
    ]  # fmt: skip
    return traj


@pytest.fixture
def explorer_db(db_url) -> str:
    upgrade(db_url)
    with session_scope(make_engine(db_url)) as s:
        config = {"mode": "harness_s", "env": {"benchmark": "dbbench"}, "policy": {"model": "no-such-model"}}
        s.add(Run(id=RUN, kind="train", name="t", status="completed", config=config))
        s.add_all(
            [
                Harness(id="h0id", name="h0", benchmark="dbbench", spec={"name": "h0", "skills": []}),
                Harness(
                    id="sibid",
                    name=HOSTILE,
                    benchmark="dbbench",
                    parent_ids=["h0id"],
                    spec={"name": HOSTILE, "skills": [{"name": "s", "text": HOSTILE}]},
                ),
            ]
        )
        task = {"benchmark": "dbbench", "split": "train", "index": 1, "task_type": "t", "tier": "easy"}
        s.add(BenchTask(id="dbbench/train/0001", description=f"How many? {HOSTILE}", **task))
        s.flush()
        dead = RolloutGroup(id="g-dead", run_id=RUN, step=1, bench_task_id="dbbench/train/0001", harness_id="h0id",
                            k=2, role="h0", checkpoint="c", n_success=0)  # fmt: skip
        rescue = RolloutGroup(id="g-rescue", run_id=RUN, step=1, bench_task_id="dbbench/train/0001", harness_id=None,
                              k=2, role="rescue", checkpoint="c", n_success=1)  # fmt: skip
        s.add_all([dead, rescue])
        s.flush()
        s.add_all([_trajectory(dead, i, False, "h0id", f"reply {HOSTILE}") for i in range(2)])
        s.add_all([_trajectory(rescue, i, i == 0, "sibid", "Action: Answer") for i in range(2)])
        metrics = {"train/valid_group_ratio": 0.5, "rollout/rescues_triggered": 1.0, "train/loss": 0.1}
        s.add(TrainStep(id="ts1", run_id=RUN, step=1, mode="harness_s", metrics=metrics))
        s.add(TrainStep(id="ts2", run_id=RUN, step=2, mode="harness_s", metrics={"train/valid_group_ratio": 1.0}))
        s.add(RouterDecision(id="d1", run_id=RUN, step=1, bench_task_id="dbbench/train/0001", purpose="rescue",
                             router="adaptive", ranking=["sibid", "h0id"], chosen=["sibid", "sibid"],
                             votes={"voters": {"statistics": ["sibid"]}, "errors": {"llm": "timeout"}}))  # fmt: skip
    return db_url


def test_every_page_from_the_runs_list_down_to_a_token_view(explorer_db):
    client = TestClient(create_app(explorer_db))
    runs = client.get("/?kind=train&method=harness_s")
    assert runs.status_code == 200 and f'href="/runs/{RUN}"' in runs.text
    assert RUN not in client.get("/?method=grpo").text
    run = client.get(f"/runs/{RUN}")
    assert run.status_code == 200 and "valid-group ratio" in run.text and "<svg" in run.text
    update = client.get(f"/runs/{RUN}/updates/1")
    assert update.status_code == 200 and ">dead<" in update.text and "adaptive" in update.text
    assert "llm skipped: timeout" in update.text
    compare = re.search(r'href="(/compare\?a=g-dead&amp;b=g-rescue)"', update.text)
    assert compare, "the update links a dead group to its rescue"
    side_by_side = client.get(compare.group(1).replace("&amp;", "&"))
    assert side_by_side.status_code == 200 and "h0 group" in side_by_side.text and "rescue group" in side_by_side.text
    trajectory = client.get("/trajectories/g-dead-0")
    assert (
        trajectory.status_code == 200 and "wrong_value" in trajectory.text and "mismatch weight 0.98" in trajectory.text
    )
    tokens = re.findall(r'<span class="token (trained|masked)"', trajectory.text)
    assert tokens == ["trained", "trained", "masked"]  # the loss mask past the 2 context ids: 1 1 0
    pair = client.get("/compare?a=g-dead-0&b=g-rescue-0")
    assert pair.status_code == 200 and pair.text.count('class="turn"') == 2


def test_model_written_text_renders_as_text_everywhere(explorer_db):
    client = TestClient(create_app(explorer_db))
    pages = ["/", f"/runs/{RUN}", f"/runs/{RUN}/updates/1", "/groups/g-rescue", "/trajectories/g-dead-0",
             "/compare?a=g-dead&b=g-rescue", "/compare?a=g-dead-0&b=g-rescue-1", "/search?text=onerror",
             "/harnesses", "/harnesses/sibid"]  # fmt: skip
    for path in pages:
        page = client.get(path)
        assert page.status_code == 200, path
        assert "<script>" not in page.text and "<img" not in page.text, path
    shown = client.get("/trajectories/g-dead-0").text
    assert shown.count("&lt;script&gt;window.__hs_pwned = 1&lt;/script&gt;") >= 4  # reply, prompt, observation, hooks


def test_search_finds_trajectories_by_text_failure_kind_harness_and_reward(explorer_db):
    client = TestClient(create_app(explorer_db))

    def found(query: str) -> set[str]:
        page = client.get(f"/search?{query}")
        assert page.status_code == 200
        return set(re.findall(r'href="/trajectories/([^"]+)"', page.text))

    assert found("text=reply%20%3Cscript") == {"g-dead-0", "g-dead-1"}  # in the replies of the dead group only
    assert found("text=onerror%3Dwindow") == {"g-dead-0", "g-dead-1", "g-rescue-0", "g-rescue-1"}  # observations
    assert found("failure_kind=wrong_value&harness=h0") == {"g-dead-0", "g-dead-1"}
    assert found("min_reward=1") == {"g-rescue-0"} and found("task=train/0001&max_reward=0") == {
        "g-dead-0",
        "g-dead-1",
        "g-rescue-1",
    }
    assert found("text=%25") == set()  # a LIKE wildcard is searched for literally


def test_a_sibling_page_shows_its_patch_against_its_parent(explorer_db):
    page = TestClient(create_app(explorer_db)).get("/harnesses/sibid")
    assert page.status_code == 200 and "--- h0.yaml" in page.text and "+skills:" in page.text.replace("-skills: []", "")


@pytest.mark.parametrize(
    "path", ["/runs/nope", "/runs/nope/updates/1", f"/runs/{RUN}/updates/99", "/groups/nope", "/trajectories/nope",
             "/compare?a=x&b=y", "/no/such/page", f"/runs/{RUN}?page=-1", f"/runs/{RUN}?page=99999999999999",
             "/search?min_reward=abc", "/harnesses/nope"],
)  # fmt: skip
def test_bad_urls_and_ids_are_a_404_page_not_a_traceback(explorer_db, path):
    page = TestClient(create_app(explorer_db), raise_server_exceptions=False).get(path)
    assert page.status_code == 404 and "Not found" in page.text and "Traceback" not in page.text


def test_the_explorer_cannot_write_to_the_database(explorer_db):
    engine = read_only_engine(explorer_db)
    with pytest.raises(Exception, match="(?i)read.only|readonly"), engine.begin() as connection:
        connection.execute(text("DELETE FROM runs"))
    with session_scope(make_engine(explorer_db)) as s:
        assert s.get(Run, RUN) is not None


def test_in_a_real_browser_from_the_runs_list_to_a_token_view_with_hostile_text_inert(served, browser):
    from selenium.webdriver.common.by import By

    browser.get(served + "/")
    browser.find_element(By.LINK_TEXT, RUN).click()
    assert "valid-group ratio" in browser.page_source and browser.find_elements(By.CSS_SELECTOR, "svg polyline")
    browser.find_element(By.LINK_TEXT, "1").click()  # the update
    assert browser.find_element(By.CSS_SELECTOR, "strong.dead").text == "dead"
    browser.find_element(By.CSS_SELECTOR, "a.compare").click()  # the dead group beside its rescue
    assert len(browser.find_elements(By.CSS_SELECTOR, ".side")) == 2
    browser.find_element(By.LINK_TEXT, "0").click()  # the dead group's first trajectory
    assert browser.current_url.endswith("/trajectories/g-dead-0")
    browser.find_element(By.CSS_SELECTOR, "details.tokens-box summary").click()
    tokens = browser.find_elements(By.CSS_SELECTOR, "span.token")
    assert [t.get_attribute("class") for t in tokens] == ["token trained", "token trained", "token masked"]
    # the model-written <script> and <img onerror> are text on the page, never elements or dialogs
    assert not browser.find_elements(By.TAG_NAME, "script") and not browser.find_elements(By.TAG_NAME, "img")
    assert HOSTILE in browser.find_element(By.CSS_SELECTOR, "pre.reply").text
    assert browser.execute_script("return window.__hs_pwned === undefined")
    browser.get(served + "/runs/no-such-run")
    assert "Not found" in browser.page_source and "no run no-such-run" in browser.page_source


def _evaluation(db_url: str, run_id: str, harness: str, success: bool) -> None:
    """An evaluation run with one group of one rollout on the fixture's task."""
    with session_scope(make_engine(db_url)) as s:
        s.add(Run(id=run_id, kind="eval", name=run_id, status="completed", config={"mode": "eval"}))
        s.flush()
        group = RolloutGroup(id=f"g-{run_id}", run_id=run_id, step=0, bench_task_id="dbbench/train/0001",
                             harness_id=harness, k=1, role="eval", checkpoint="c", n_success=int(success))  # fmt: skip
        s.add(group)
        s.flush()
        traj = _trajectory(group, 0, success, harness, "ok")
        traj.run_id = run_id
        s.add(traj)


def test_the_same_task_under_a_sibling_or_before_training_is_one_click_from_a_group(explorer_db):
    _evaluation(explorer_db, "before-training", "h0id", False)
    _evaluation(explorer_db, "under-sibling", "sibid", True)
    client = TestClient(create_app(explorer_db))
    for path in ("/groups/g-dead", "/trajectories/g-dead-1"):
        page = client.get(path)
        links = re.findall(r'class="compare-link" href="/compare\?a=g-dead&amp;b=([^"]+)"', page.text)
        assert links == ["g-rescue", "g-before-training", "g-under-sibling"], path  # this run first, then by age
    side_by_side = client.get("/compare?a=g-dead&b=g-under-sibling")
    assert side_by_side.status_code == 200 and side_by_side.text.count('class="side"') == 2
    assert "0/2" in side_by_side.text and "1/1" in side_by_side.text


def test_two_runs_compared_task_by_task_with_the_reports_interval_and_verdict(explorer_db):
    _evaluation(explorer_db, "other", "h0id", True)
    client = TestClient(create_app(explorer_db))
    page = client.get(f"/compare/runs?a={RUN}&b=other")
    # RUN solved 1 of its 4 rollouts of the one shared task, the other run 1 of 1: -0.75 on one task
    assert page.status_code == 200 and "-0.750 [-0.750, -0.750]" in page.text
    assert '<strong id="verdict">within noise</strong>' in page.text  # one task: the sign-flip test cannot reject
    assert client.get(f"/compare/runs?a={RUN}&b=nope").status_code == 404


def test_hs_ui_refuses_a_missing_database_or_a_busy_port_in_one_line(explorer_db, tmp_path):
    import socket

    from typer.testing import CliRunner

    from cli.main import app

    missing = CliRunner().invoke(app, ["ui", "--database-url", f"sqlite:///{tmp_path / 'none.db'}"])
    assert missing.exit_code == 2 and "no trajectory database" in missing.output and "Traceback" not in missing.output
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        result = CliRunner().invoke(app, ["ui", "--database-url", explorer_db, "--port", str(port)])
    assert result.exit_code == 2 and f"cannot serve on 127.0.0.1:{port}" in result.output
