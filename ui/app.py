"""The explorer's web app: one Starlette route per page, Jinja2 templates with autoescape on.

Chosen stack: Starlette (the maintained ASGI toolkit under FastAPI, already installed with Prefect)
for routing and errors, Jinja2 for escaped HTML, uvicorn to serve; charts are SVG drawn by the
template, so no script or style sheet comes from outside the package."""

from __future__ import annotations

import logging
import time
from functools import lru_cache
from pathlib import Path

from jinja2 import Environment, FileSystemLoader, select_autoescape
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from db.engine import session_scope
from db.models import RolloutGroup, Run, Trajectory
from ui import queries
from ui.database import read_only_engine

HERE = Path(__file__).parent
log = logging.getLogger(__name__)
TEMPLATES = Environment(
    loader=FileSystemLoader(HERE / "templates"), autoescape=select_autoescape(default=True, default_for_string=True)
)


def _page(name: str, status: int = 200, **context) -> HTMLResponse:
    return HTMLResponse(TEMPLATES.get_template(name).render(**context), status_code=status)


def _int(request: Request, key: str, default: int = 0) -> int:
    raw = request.query_params.get(key, "")
    if not raw:
        return default
    if not raw.isdigit() or len(raw) > 9:
        raise HTTPException(404, f"{key}={raw!r} is not a page number")
    return int(raw)


@lru_cache(maxsize=4)
def _tokenizer(model: str):
    """The tokenizer of a run's policy, to show token text; None when it cannot be found here."""
    try:
        from transformers import AutoTokenizer

        from rl.model_store import resolve_model

        return AutoTokenizer.from_pretrained(str(resolve_model(model)))
    except Exception as exc:  # noqa: BLE001 - any failure only means the ids are shown without text
        log.info("no tokenizer for %s (%s): the token view shows ids", model, exc)
        return None


CHOICES_TTL_S = 60.0  # the search form's drop-down choices scan every trajectory: cached this long


def create_app(database_url: str) -> Starlette:
    engine = read_only_engine(database_url)
    cached_choices: dict = {}

    def search_choices(session) -> dict:
        """The search form's choices, read again at most once a minute (new runs show up then)."""
        now = time.monotonic()
        if not cached_choices or now - cached_choices["at"] > CHOICES_TTL_S:
            cached_choices.update(at=now, value=queries.search_choices(session))
        return cached_choices["value"]

    def runs_page(request: Request) -> HTMLResponse:
        wanted = {k: request.query_params.get(k, "") for k in ("kind", "benchmark", "method", "status")}
        with session_scope(engine) as s:
            return _page("runs.html", rows=queries.runs(s, **wanted), choices=queries.filter_choices(s), wanted=wanted)

    def run_page(request: Request) -> HTMLResponse:
        page = _int(request, "page")
        with session_scope(engine) as s:
            run = s.get(Run, request.path_params["run_id"]) or _missing("run", request.path_params["run_id"])
            steps = queries.train_steps(s, run.id)
            spent = sum(float(t.metrics.get("rollout/rollouts_spent", 0) or 0) for t in steps)
            return _page(
                "run.html", run=run, benchmark=queries.benchmark_of(run), method=queries.method_of(run),
                steps=steps, charts=queries.charts(steps), counts=queries.group_counts(s, run.id),
                groups=[] if steps else queries.groups(s, run.id, page=page), page=page, spent=spent,
                names=queries.harness_names(s), drawn=queries.drawn_tasks(s, run),
            )  # fmt: skip

    def update_page(request: Request) -> HTMLResponse:
        run_id, step = request.path_params["run_id"], request.path_params["step"]
        with session_scope(engine) as s:
            run = s.get(Run, run_id) or _missing("run", run_id)
            rows = queries.update_rows(s, run.id, step)
            if not rows:
                _missing("update", f"{run_id} step {step}")
            return _page("update.html", run=run, step=step, rows=rows, names=queries.harness_names(s))

    def group_page(request: Request) -> HTMLResponse:
        with session_scope(engine) as s:
            group = s.get(RolloutGroup, request.path_params["group_id"]) or _missing(
                "group", request.path_params["group_id"]
            )
            return _page(
                "group.html", group=group, trajectories=queries.trajectories_of(s, group.id),
                names=queries.harness_names(s), task=queries.task(s, group.bench_task_id),
                elsewhere=queries.same_task_groups(s, group),
            )  # fmt: skip

    def trajectory_page(request: Request) -> HTMLResponse:
        with session_scope(engine) as s:
            traj = s.get(Trajectory, request.path_params["trajectory_id"]) or _missing(
                "trajectory", request.path_params["trajectory_id"]
            )
            return _page(
                "trajectory.html", elsewhere=queries.same_task_groups(s, traj.group), **_trajectory_context(s, traj)
            )

    def compare_page(request: Request) -> HTMLResponse:
        a, b = request.query_params.get("a", ""), request.query_params.get("b", "")
        with session_scope(engine) as s:
            trajs = [s.get(Trajectory, a), s.get(Trajectory, b)]
            if all(trajs):
                return _page("compare.html", sides=[_trajectory_context(s, t) for t in trajs], kind="trajectories")
            found = [s.get(RolloutGroup, a), s.get(RolloutGroup, b)]
            if not all(found):
                _missing("pair to compare", f"a={a} b={b} (two trajectory ids or two group ids)")
            sides = [
                {"group": g, "trajectories": queries.trajectories_of(s, g.id), "task": queries.task(s, g.bench_task_id)}
                for g in found
            ]
            return _page("compare.html", sides=sides, kind="groups", names=queries.harness_names(s))

    def search_page(request: Request) -> HTMLResponse:
        wanted = {k: request.query_params.get(k, "").strip() for k in queries.SEARCH_FIELDS}
        for key in ("min_reward", "max_reward"):
            if wanted[key] and not _is_number(wanted[key]):
                raise HTTPException(404, f"{key}={wanted[key]!r} is not a number")
        page = _int(request, "page")
        with session_scope(engine) as s:
            found = queries.search(s, wanted, page) if any(wanted.values()) else []
            return _page(
                "search.html", wanted=wanted, found=found, page=page, choices=search_choices(s),
                names=queries.harness_names(s), more=len(found) == queries.PAGE,
            )  # fmt: skip

    def harnesses_page(request: Request) -> HTMLResponse:
        with session_scope(engine) as s:
            return _page("harnesses.html", pools=queries.pools(s), harnesses=queries.harnesses(s))

    def harness_page(request: Request) -> HTMLResponse:
        from db.models import Harness

        with session_scope(engine) as s:
            harness = s.get(Harness, request.path_params["harness_id"]) or _missing(
                "harness", request.path_params["harness_id"]
            )
            base = queries.base_of(s, harness)
            return _page(
                "harness.html", harness=harness, base=base, diff=queries.spec_diff(base, harness),
                profiles=queries.profiles_of(s, harness.id),
            )  # fmt: skip

    def compare_runs_page(request: Request) -> HTMLResponse:
        a, b = request.query_params.get("a", ""), request.query_params.get("b", "")
        with session_scope(engine) as s:
            runs = [s.get(Run, a), s.get(Run, b)]
            if not all(runs):
                _missing("pair of runs", f"a={a} b={b}")
            return _page("compare_runs.html", a=runs[0], b=runs[1], paired=queries.paired_runs(s, a, b))

    routes = [
        Route("/", runs_page),
        Route("/runs/{run_id}", run_page),
        Route("/runs/{run_id}/updates/{step:int}", update_page),
        Route("/groups/{group_id}", group_page),
        Route("/trajectories/{trajectory_id}", trajectory_page),
        Route("/compare", compare_page),
        Route("/compare/runs", compare_runs_page),
        Route("/search", search_page),
        Route("/harnesses", harnesses_page),
        Route("/harnesses/{harness_id}", harness_page),
        Mount("/static", StaticFiles(directory=HERE / "static"), name="static"),
    ]

    async def not_found(request: Request, exc: HTTPException) -> HTMLResponse:
        detail = exc.detail if exc.status_code == 404 and exc.detail != "Not Found" else str(request.url.path)
        return _page("error.html", status=exc.status_code, title="Not found", detail=detail)

    async def server_error(request: Request, exc: Exception) -> HTMLResponse:
        log.exception("page %s failed", request.url.path)
        return _page("error.html", status=500, title="This page failed", detail=f"{type(exc).__name__} (see the log)")

    return Starlette(routes=routes, exception_handlers={HTTPException: not_found, Exception: server_error})


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return len(text) < 32


def _missing(what: str, key: str):
    raise HTTPException(404, f"no {what} {key}")


def _trajectory_context(session, traj: Trajectory) -> dict:
    policy = (traj.run.config or {}).get("policy") or {}
    model = policy.get("model") or (traj.run.config or {}).get("init") or ""
    tokenizer = _tokenizer(model) if model and any(t.completion_ids for t in traj.turns) else None
    turns = []
    for turn in traj.turns:
        tokens = queries.token_rows(turn)
        if tokenizer is not None:
            for t in tokens:
                t["text"] = tokenizer.decode([t["id"]])
        turns.append({"turn": turn, "tokens": tokens})
    return {
        "traj": traj, "turns": turns, "task": queries.task(session, traj.bench_task_id),
        "names": queries.harness_names(session), "mismatch": (traj.details or {}).get("mismatch"),
    }  # fmt: skip
