"""Register every harness-s flow as a Prefect deployment on a process work pool (scheduling from the UI).

Each deployment points at this checkout (the worker runs the flow from the repository root, so
it uses the same code, configs and frozen pools) and carries the flow's typed parameters: the
pydantic config becomes a JSON schema, which the Prefect UI renders as a form, prefilled from
the config file listed below. A worker started with `prefect worker start --pool <pool>` on any
machine that has the checkout (and HS_DATABASE_URL pointing at the shared PostgreSQL) runs them.
"""

from __future__ import annotations

from pathlib import Path

import yaml

from flows.registry import FLOWS, entrypoint, load_flow

REPO = Path(__file__).resolve().parents[1]
DEFAULT_POOL = "harness-s"
DEFAULT_CONFIGS = {  # flow -> the config file whose values prefill the UI form
    "pipeline": "configs/quickstart.yaml",
    "evolve": "configs/evolve_dbbench_smol.yaml",
    "train": "configs/train_dbbench_smol.yaml",
    "evaluate": "configs/eval_dbbench.yaml",
    "sft": "configs/sft_dbbench_smol.yaml",
    "pool-report": None,
}
CONFIG_MODELS = {
    "pipeline": ("configs.pipeline", "PipelineConfig"),
    "evolve": ("configs.schema", "EvolveConfig"),
    "train": ("configs.schema", "TrainConfig"),
    "evaluate": ("configs.schema", "EvalConfig"),
    "sft": ("configs.schema", "SftConfig"),
}


def default_parameters(flow_name: str) -> dict:
    """The prefilled form: the validated config file as JSON (every field explicit)."""
    path = DEFAULT_CONFIGS.get(flow_name)
    if path is None:
        return {}
    from importlib import import_module

    module, cls = CONFIG_MODELS[flow_name]
    model = getattr(import_module(module), cls)
    return {"config": model.model_validate(yaml.safe_load((REPO / path).read_text())).model_dump(mode="json")}


def check_api(client) -> None:
    """One line instead of a traceback when the Prefect API is unreachable."""
    error = client.api_healthcheck()
    if error is not None:
        raise LookupError(
            f"Prefect API at {client.api_url} is unreachable ({type(error).__name__}): start it "
            "(infra/start-prefect-server.sh) or fix PREFECT_API_URL"
        )


def ensure_work_pool(name: str) -> None:
    from prefect import get_client
    from prefect.client.schemas.actions import WorkPoolCreate
    from prefect.exceptions import ObjectAlreadyExists

    with get_client(sync_client=True) as client:
        check_api(client)
        try:
            client.create_work_pool(WorkPoolCreate(name=name, type="process"))
        except ObjectAlreadyExists:
            pass


def deploy_all(
    work_pool: str = DEFAULT_POOL,
    names: list[str] | None = None,
    tags: list[str] | None = None,
    env: dict[str, str] | None = None,
) -> dict[str, str]:
    """Create or update one deployment per flow ('<flow>/<flow>'); returns flow name -> deployment id.
    `env` is set in every flow run's environment (e.g. HS_DATABASE_URL of the shared database)."""
    chosen = names or list(FLOWS)
    unknown = [n for n in chosen if n not in FLOWS]
    if unknown:
        raise LookupError(f"unknown flows {unknown}; choose from {', '.join(FLOWS)}")
    ensure_work_pool(work_pool)
    out = {}
    for name in chosen:
        source_flow = load_flow(name).from_source(source=str(REPO), entrypoint=entrypoint(name))
        deployment_id = source_flow.deploy(
            name=name,
            work_pool_name=work_pool,
            build=False,
            push=False,
            parameters=default_parameters(name),
            job_variables={"working_dir": str(REPO), "env": dict(env or {})},
            tags=tags or ["harness-s"],
            description=_summary(name),
            print_next_steps=False,
        )
        out[name] = str(deployment_id)
    return out


def _summary(flow_name: str) -> str:
    """The first line of the flow module's docstring (what the UI shows under the deployment)."""
    from importlib import import_module

    doc = import_module(FLOWS[flow_name][0]).__doc__ or flow_name
    return doc.strip().splitlines()[0]
