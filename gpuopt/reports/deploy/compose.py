"""Docker Compose for single-node plans: one file per planned deployment, run on each of its hosts, with one
Compose service per replica that fits a host: each replica's own GPUs reserved through the NVIDIA device
driver (by device id), its own host port, a shared-memory size, the Hugging Face cache as a named volume and
a health check on vLLM's `/health`.

Compose drives one Docker host, so it fits plans whose replicas each live on one instance; a replica
spanning instances is refused (use k8s or skypilot).
"""

from __future__ import annotations

import json
import shlex
from typing import Any

from gpuopt.planner.plan import Deployment, Plan
from gpuopt.reports.deploy.common import (
    VLLM_PORT,
    Artifact,
    DeployOptions,
    artifact_name,
    check_not_serverless,
    default_image,
    deployable,
    dollar_literal,
    is_amd,
    machines,
    nodes,
    per_machine,
    plan_id,
    refuse,
    replica_devices,
    serve_args,
    to_yaml,
    trace_labels,
)


def _service(plan: Plan, d: Deployment, opts: DeployOptions, index: int, pid: str) -> dict[str, Any]:
    """Replica `index` of one host: its own GPUs (Docker's `count` would hand every container the same
    first GPUs) and its own host port."""
    service = _literal({
        "image": default_image(plan, d, opts),
        "entrypoint": ["vllm", "serve"],
        "command": serve_args(d),
        "ports": [f"{VLLM_PORT + index}:{VLLM_PORT}"],
        "ipc": "host",
        "shm_size": "16gb",
        "volumes": ["hf-cache:/root/.cache/huggingface"],
        "labels": trace_labels(plan, d, pid),
        "healthcheck": {"test": ["CMD", "curl", "-f", f"http://localhost:{VLLM_PORT}/health"],
                        "interval": "30s", "timeout": "5s", "retries": 5, "start_period": "30m"},
        "deploy": {"resources": {"reservations": {"devices": [
            {"driver": "nvidia", "device_ids": replica_devices(d, index),
             "capabilities": ["gpu"]}]}}},
    })
    # the one value Compose is meant to interpolate, added after every other value was made literal
    return {**service, "environment": {"HF_TOKEN": "${HF_TOKEN:-}"}}


def _literal(value: Any) -> Any:
    """Every string of a service written so Compose interpolates nothing in it (dollar_literal): a `$` may come
    from the plan file (a model name, a SKU, the release in the image tag)."""
    if isinstance(value, str):
        return dollar_literal(value)
    if isinstance(value, list):
        return [_literal(v) for v in value]
    if isinstance(value, dict):
        return {k: _literal(v) for k, v in value.items()}
    return value


def render_compose(plan: Plan, opts: DeployOptions) -> list[Artifact]:
    out = []
    pid = plan_id(plan)
    for d in deployable(plan):
        check_not_serverless(d, "compose")
        if is_amd(d):
            raise refuse(d, "compose", f"{d.gpu} is an AMD GPU, and gpuopt has no source for handing AMD GPUs to a "
                                       "Compose service (its device reservations here name the NVIDIA driver); "
                                       "use --target k8s or skypilot")
        if nodes(d) > 1:
            raise refuse(d, "compose", f"one replica spans {nodes(d)} instances; Compose drives one host")
        name = artifact_name(plan, d)
        per_host = per_machine(d)
        hosts = machines(d)
        services = {f"vllm-{i + 1}": _service(plan, d, opts, i, pid) for i in range(per_host)}
        document = {"name": name, "services": services, "volumes": {"hf-cache": {}}}
        header = (f"# {name}: {d.replicas} replica(s), {per_host} per {json.dumps(d.sku)} host, on {hosts} host(s);\n"
                  f"# on each host: docker compose -f {shlex.quote(name + '.compose.yaml')} up -d\n")
        text = header + to_yaml(document)
        out.append(Artifact(deployment=name, filename=f"{name}.compose.yaml", text=text))
    return out
