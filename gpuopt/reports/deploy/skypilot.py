"""SkyPilot task YAML per planned deployment (`sky launch`; `sky serve up` when the plan runs several
replicas, through SkyServe's `service:` section).

The instance is pinned by `instance_type` (the catalog's SKU is the cloud's instance type, which SkyPilot
maps to its accelerators), with the plan's cloud and region, and `use_spot` for spot offerings. SkyPilot
knows AWS, RunPod and DigitalOcean among gpuopt's providers (its `sky/clouds` package has no Alibaba or
Tencent cloud), so those plans are refused with the reason.
"""

from __future__ import annotations

import shlex
from typing import Any

from gpuopt.planner.plan import Deployment, Plan
from gpuopt.reports.deploy.common import (
    VLLM_PORT,
    Artifact,
    DeployOptions,
    artifact_name,
    check_not_serverless,
    deployable,
    nodes,
    plan_id,
    refuse,
    serve_args,
    to_yaml,
    trace_env,
    vllm_release,
)

SKYPILOT_CLOUDS = {"aws": "aws", "runpod": "runpod", "digitalocean": "do"}
"""gpuopt provider -> SkyPilot cloud name (sky/clouds: AWS, RunPod, DO)."""
UNNAMED_REGIONS = ("global", "unknown", "")


def _run(d: Deployment) -> str:
    serve = shlex.join(["vllm", "serve", *serve_args(d)])
    if nodes(d) == 1:
        return serve + "\n"
    # pipeline stages on several nodes: a Ray cluster, head on node 0 (vLLM's multi-node recipe)
    return (
        'HEAD_IP=$(echo "$SKYPILOT_NODE_IPS" | head -n1)\n'
        'if [ "$SKYPILOT_NODE_RANK" = "0" ]; then\n'
        "  ray start --head --port 6379\n"
        f"  {serve}\n"
        "else\n"
        '  ray start --address "$HEAD_IP:6379" --block\n'
        "fi\n"
    )


def _task(plan: Plan, d: Deployment, name: str, opts: DeployOptions, pid: str) -> dict[str, Any]:
    resources: dict[str, Any] = {"cloud": SKYPILOT_CLOUDS[d.provider], "instance_type": d.sku,
                                 "ports": VLLM_PORT}
    if d.region not in UNNAMED_REGIONS:
        resources["region"] = d.region
    if d.price_kind == "spot":
        resources["use_spot"] = True
    task: dict[str, Any] = {"name": name}
    if nodes(d) > 1:
        task["num_nodes"] = nodes(d)
    task["envs"] = trace_env(plan, d, pid)
    task["resources"] = resources
    if opts.image:  # a container image that has vLLM: nothing to install
        resources["image_id"] = f"docker:{opts.image}"
    else:
        task["setup"] = f"pip install {shlex.quote('vllm==' + vllm_release(plan))}\n"
    task["run"] = _run(d)
    if d.replicas > 1:
        task["service"] = {"readiness_probe": {"path": "/health", "initial_delay_seconds": 1200},
                           "replicas": d.replicas}
    return task


def render_skypilot(plan: Plan, opts: DeployOptions) -> list[Artifact]:
    out = []
    pid = plan_id(plan)
    for d in deployable(plan):
        check_not_serverless(d, "skypilot")
        if d.provider not in SKYPILOT_CLOUDS:
            raise refuse(d, "skypilot", f"SkyPilot has no {d.provider} cloud (it knows "
                                        f"{', '.join(sorted(SKYPILOT_CLOUDS))} of gpuopt's providers)")
        name = artifact_name(plan, d)
        text = to_yaml(_task(plan, d, name, opts, pid))
        out.append(Artifact(deployment=name, filename=f"{name}.sky.yaml", text=text))
    return out
