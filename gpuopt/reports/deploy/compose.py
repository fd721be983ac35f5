"""Docker Compose for single-node plans: one file per planned deployment, run on each of its hosts, with one
Compose service per replica that fits a host: each replica's own GPUs reserved through the NVIDIA device
driver (by device id), its own host port, a shared-memory size, the Hugging Face cache as a named volume and
a health check on vLLM's `/health`. A local checkpoint (a directory, not a Hub repository) is bind-mounted
read-only from the host at its path.

Deployments that share the plan's machines (common.shared_machines) get a file per machine instead, each
replica on the machine a service on its own GPUs and port.

Compose drives one Docker host, so it fits plans whose replicas each live on one instance; a replica
spanning instances is refused (use k8s or skypilot).
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Iterable
from typing import Any

from gpuopt.planner.plan import Deployment, Plan
from gpuopt.reports.deploy.common import (
    VLLM_PORT,
    Artifact,
    DeployOptions,
    SharedMachines,
    artifact_name,
    check_not_serverless,
    default_image,
    deployable,
    dollar_literal,
    group_of,
    is_amd,
    local_checkpoint,
    machine_layout,
    machines,
    nodes,
    offering_machines,
    per_machine,
    plan_id,
    price_kind_note,
    refusal,
    refuse,
    refuse_all,
    relative_checkpoint,
    replica_devices,
    serve_args,
    shared_machines,
    to_yaml,
    trace_labels,
)


def _service(plan: Plan, d: Deployment, opts: DeployOptions, index: int, pid: str,
             devices: list[str] | None = None) -> dict[str, Any]:
    """Replica `index` of one host: its own GPUs (Docker's `count` would hand every container the same
    first GPUs: `devices`, else replica_devices) and its own host port."""
    service = _literal({
        "image": default_image(plan, d, opts),
        "entrypoint": ["vllm", "serve"],
        "command": serve_args(d),
        "ports": [f"{VLLM_PORT + index}:{VLLM_PORT}"],
        "ipc": "host",
        "shm_size": "16gb",
        "volumes": ["hf-cache:/root/.cache/huggingface", *_checkpoint_mount(d)],
        "labels": trace_labels(plan, d, pid),
        "healthcheck": {"test": ["CMD", "curl", "-f", f"http://localhost:{VLLM_PORT}/health"],
                        "interval": "30s", "timeout": "5s", "retries": 5, "start_period": "30m"},
        "deploy": {"resources": {"reservations": {"devices": [
            {"driver": "nvidia", "device_ids": replica_devices(d, index) if devices is None else devices,
             "capabilities": ["gpu"]}]}}},
    })
    # the one value Compose is meant to interpolate, added after every other value was made literal
    return {**service, "environment": {"HF_TOKEN": "${HF_TOKEN:-}"}}


def _checkpoint_mount(d: Deployment) -> list[dict[str, Any]]:
    """A local checkpoint (common.local_checkpoint) bind-mounted read-only from the host at the same path, so
    the plan's command serves it unchanged (and clients name the model as the plan does). The long syntax, as
    a path may hold a `:` (the short form's separator), with create_host_path off: the short form, and Docker
    for a missing path, would create an empty directory on the host and start vLLM on it; this way
    `docker compose up` refuses a host without the checkpoint."""
    path = local_checkpoint(d)
    if path is None:
        return []
    return [{"type": "bind", "source": path, "target": path, "read_only": True,
             "bind": {"create_host_path": False}}]


def _checkpoint_note(deployments: Iterable[Deployment]) -> str:
    """Header lines for the local checkpoints the file mounts: they must be on the host first."""
    paths = dict.fromkeys(p for d in deployments if (p := local_checkpoint(d)) is not None)
    return "".join(f"# the local checkpoint {json.dumps(p)} is mounted read-only from the host "
                   "at that path: copy it there first\n" for p in paths)


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


def _shared_hosts(plan: Plan, group: SharedMachines, opts: DeployOptions, pid: str) -> list[Artifact]:
    """One file per machine of deployments that share the plan's machines: each of its replicas a service
    (`vllm-<n>-<deployment>`) on its own GPUs and host port, labelled with its own deployment's facts."""
    out = []
    count = len(group.machines)
    layout = machine_layout(group, plan)
    members = ", ".join(artifact_name(plan, d) for d in group.deployments)
    for m, machine in enumerate(group.machines):
        name = group.name if count == 1 else f"{group.name}-{m + 1}"
        filename = f"{group.name}.compose.yaml" if count == 1 else f"{group.name}.host-{m + 1}.compose.yaml"
        services = {f"vllm-{i + 1}-{artifact_name(plan, s.deployment)}":
                    _service(plan, s.deployment, opts, i, pid, list(s.devices)) for i, s in enumerate(machine)}
        document = {"name": name, "services": services, "volumes": {"hf-cache": {}}}
        header = (f"# {name}: host {m + 1} of the {count} of the plan's {offering_machines(plan, group.first)} "
                  f"{json.dumps(group.first.sku)} machine(s) shared "
                  f"by deployments {members} (the plan prices them together);\n"
                  f"# {layout[m]}\n"
                  f"{_checkpoint_note(s.deployment for s in machine)}"
                  f"# on that host: docker compose -f {shlex.quote(filename)} up -d\n")
        out.append(Artifact(deployment=name, filename=filename,
                            text=header + price_kind_note(group.first, "compose") + to_yaml(document)))
    return out


def _problems(d: Deployment) -> list[str]:
    """What keeps `d` from a Compose file one NVIDIA host runs."""
    check_not_serverless(d, "compose")
    if d.provider == "runpod":
        raise refuse(d, "compose", f"a RunPod pod ({d.service}) is itself a container, with no Docker daemon to "
                                   "run Compose; use --target skypilot")
    out = []
    if is_amd(d):
        out.append(refusal(d, "compose", f"{d.gpu} is an AMD GPU, and gpuopt has no source for handing AMD GPUs to "
                                         "a Compose service (its device reservations here name the NVIDIA driver); "
                                         "use --target k8s or skypilot"))
    if nodes(d) > 1:
        out.append(refusal(d, "compose", f"one replica spans {nodes(d)} instances; Compose drives one host"))
    if (path := local_checkpoint(d)) is not None:
        out += relative_checkpoint(d, "compose", path)
    return out


def render_compose(plan: Plan, opts: DeployOptions) -> list[Artifact]:
    """A file per deployment, run on each of its hosts; deployments that share the plan's machines
    (shared_machines), a file per machine, in the place of the first of them."""
    out = []
    pid = plan_id(plan)
    refuse_all(deployable(plan), _problems)
    groups = shared_machines(plan)
    for d in deployable(plan):
        group = group_of(groups, d)
        if group is not None:
            if group.first is d:
                out += _shared_hosts(plan, group, opts, pid)
            continue
        name = artifact_name(plan, d)
        per_host = per_machine(d)
        hosts = machines(d)
        services = {f"vllm-{i + 1}": _service(plan, d, opts, i, pid) for i in range(per_host)}
        document = {"name": name, "services": services, "volumes": {"hf-cache": {}}}
        header = (f"# {name}: {d.replicas} replica(s), {per_host} per {json.dumps(d.sku)} host, on {hosts} host(s);\n"
                  f"{_checkpoint_note([d])}"
                  f"# on each host: docker compose -f {shlex.quote(name + '.compose.yaml')} up -d\n")
        text = header + price_kind_note(d, "compose") + to_yaml(document)
        out.append(Artifact(deployment=name, filename=f"{name}.compose.yaml", text=text))
    return out
