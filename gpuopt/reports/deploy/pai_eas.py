"""Alibaba Cloud PAI-EAS service JSON per planned deployment (the body of `eascmd create` / CreateService),
in the shape of Alibaba's own vLLM examples (shared/data/fixtures/pai_eas): `metadata` (name, instance =
replicas), `cloud.computing.instance_type` (the ECS GPU type the plan chose, public resource group),
`containers` (image, port, command, a startup check on vLLM's `/health`). A public-group instance is a whole
machine, so replicas the plan packs on one machine are instances of a dedicated resource group of the
plan's machines instead (Alibaba's Pattern 7: `metadata.resource` and `metadata.gpu`), whose id the user fills in.
Services whose deployments share the plan's machines (common.shared_machines) all name one such group.

PAI-EAS has no free-form labels in the documented fields, so the plan's id, cost and SLO travel as container
environment variables (`GPUOPT_*`), which the console and `eascmd desc` show.
"""

from __future__ import annotations

import json
import re
import shlex
from typing import Any

from gpuopt.planner.plan import Deployment, Plan
from gpuopt.reports.deploy.common import (
    VLLM_PORT,
    Artifact,
    DeployOptions,
    SharedMachines,
    artifact_name,
    artifact_names,
    check_not_serverless,
    default_image,
    deployable,
    group_of,
    instance_type_problem,
    local_checkpoint,
    machines,
    nodes,
    per_machine,
    plan_id,
    plan_position,
    refusal,
    refuse,
    refuse_all,
    serve_args,
    shared_machines,
    suffixed,
    trace_env,
    unseen_checkpoint,
)


def service_name(name: str) -> str:
    """PAI-EAS service names: lowercase letters, digits and underscores, 3-63 characters."""
    text = re.sub(r"[^a-z0-9_]", "_", name.lower())[:63]
    return text if len(text) >= 3 else (text + "_svc")[:63]


def service_names(plan: Plan) -> list[str]:
    """Each deployment's service name (plan order), unique across the plan: service_name of its artifact
    name, which is unique (artifact_names), except where a short one is padded (`ab` is `ab_svc`, as is a
    workload `ab-svc`): a later one then takes the artifact name's first free suffix from `-2` on, as
    artifact_names does (EAS refuses a second service of a name)."""
    names: list[str] = []
    for name in artifact_names(plan):
        text, n = service_name(name), 1
        while text in names:
            n += 1
            text = service_name(suffixed(name, n))
        names.append(text)
    return names


SHM_SIZE_GB = 64
"""`metadata.shm_size` (GB) of a replica on several GPUs: the value Alibaba's own vLLM TP=2 example sets
(fixtures/pai_eas aiops-skills_config-schema_full-example.json); NCCL exchanges through /dev/shm where
peer-to-peer is not available."""
STARTUP_CHECKS = 180
"""`startup_check.failure_threshold`: checks 10 s apart after 120 s, 32 minutes to download, load, compile and
capture graphs (the 30 of Alibaba's pattern are for a 0.5B model mounted from OSS; k8s gives 30 minutes)."""


def resource_group_placeholder(d: Deployment) -> str:
    """The id of the dedicated resource group the user must create: gpuopt cannot know it, and a value that
    is not an id makes CreateService fail rather than run on other machines."""
    return (f"FILL-IN: id (eas-r-...) of a dedicated resource group of {machines(d)} x {d.sku} -- the machines "
            f"this plan prices, {per_machine(d)} replicas of {d.gpus_per_replica} GPU(s) each")


def shared_group_placeholder(plan: Plan, group: SharedMachines) -> str:
    """The resource group of machines several services share (shared_machines): one group, whose id every
    one of those services carries."""
    names = service_names(plan)
    services = ", ".join(f"{names[plan_position(plan, d)]} ({d.replicas} replica(s) of {d.gpus_per_replica} "
                         f"GPU(s))" for d in group.deployments)
    return (f"FILL-IN: id (eas-r-...) of a dedicated resource group of {len(group.machines)} x {group.first.sku} -- "
            f"the machines this plan prices, shared by the services {services}: one group, its id in each")


def _problems(d: Deployment) -> list[str]:
    """What keeps `d` from a service EAS creates: an ECS machine type (priced as ECS or as PAI-EAS, whose
    offerings are ECS types at the platform's price), one machine per replica."""
    if d.provider != "alibaba" or d.service not in ("ecs", "pai-eas"):
        raise refuse(d, "pai-eas", "PAI-EAS runs on Alibaba Cloud ECS GPU types; this plan chose "
                                   f"{d.provider} {d.service}")
    check_not_serverless(d, "pai-eas")
    out = []
    if nodes(d) > 1:
        out.append(refusal(d, "pai-eas", f"one replica spans {nodes(d)} instances; a PAI-EAS service instance is "
                                         "one machine"))
    if (path := local_checkpoint(d)) is not None:
        # EAS mounts OSS or NAS, which gpuopt cannot know; it has no way to upload a directory of this machine
        out.append(unseen_checkpoint(d, "pai-eas", path, "an EAS service",
                                     "copy it to OSS or NAS and mount that in the service yourself"))
    # the ECS type of cloud.computing.instance_type, or of the dedicated resource group the user creates
    return out + instance_type_problem(d, "pai-eas", d.sku, "an ECS instance type")


def render_pai_eas(plan: Plan, opts: DeployOptions) -> list[Artifact]:
    out = []
    pid = plan_id(plan)
    groups = shared_machines(plan)
    services = service_names(plan)
    refuse_all(deployable(plan), _problems)
    for d in deployable(plan):
        name = artifact_name(plan, d)
        env = [{"name": key, "value": value} for key, value in trace_env(plan, d, pid).items()]
        metadata: dict[str, Any] = {"name": services[plan_position(plan, d)], "instance": d.replicas}
        if d.gpus_per_replica > 1:
            metadata["shm_size"] = SHM_SIZE_GB
        service: dict[str, Any] = {"metadata": metadata}
        group = group_of(groups, d)
        if group is not None:
            # machines shared with other deployments: every service of them in one dedicated resource group of
            # the plan's machines, which places their instances side by side
            metadata["resource"] = shared_group_placeholder(plan, group)
            metadata["gpu"] = d.gpus_per_replica
        elif per_machine(d) == 1:
            service["cloud"] = {"computing": {"instance_type": d.sku}}
        else:
            # several replicas to a machine: a public-group instance is a whole machine, so instances of a
            # dedicated resource group of the plan's machines, each taking its replica's GPUs (Pattern 7)
            metadata["resource"] = resource_group_placeholder(d)
            metadata["gpu"] = d.gpus_per_replica
        service["containers"] = [{
            "image": default_image(plan, d, opts),
            "port": VLLM_PORT,
            "command": shlex.join(["vllm", "serve", *serve_args(d)]),
            "env": env,
            # Alibaba's pattern waits 120 + 30 x 10 s, for a 0.5B model mounted from OSS; a 70B download, load,
            # compilation and CUDA-graph capture takes far longer: 120 + 180 x 10 s, the 30 minutes k8s gives
            "startup_check": {"http_get": {"path": "/health", "port": VLLM_PORT},
                              "initial_delay_seconds": 120, "period_seconds": 10,
                              "failure_threshold": STARTUP_CHECKS},
        }]
        text = json.dumps(service, indent=2, ensure_ascii=False) + "\n"
        out.append(Artifact(deployment=name, filename=f"{name}.pai-eas.json", text=text))
    return out
