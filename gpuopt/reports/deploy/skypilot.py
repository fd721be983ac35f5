"""SkyPilot task YAML per planned deployment (`sky launch`; `sky serve up` when the plan runs several
replicas, through SkyServe's `service:` section).

The instance is pinned by `instance_type` (an AWS or DigitalOcean SKU is the cloud's instance type, which
SkyPilot maps to its accelerators; a RunPod pod is renamed to SkyPilot's `{count}x_{accelerator}_SECURE`),
with the plan's cloud and region, and `use_spot` for spot offerings. SkyPilot knows AWS, RunPod and
DigitalOcean among gpuopt's providers (its `sky/clouds` package has no Alibaba or Tencent cloud), so those
plans are refused with the reason. Deployments that share the plan's machines (common.shared_machines) are
one `sky launch` task of those machines, each node running its machine's replicas. A local checkpoint (a
directory, not a Hub repository) is uploaded to each node by `file_mounts`.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Iterable
from functools import cache
from typing import Any

from gpuopt.datafiles import data_csv
from gpuopt.planner.plan import Deployment, Plan
from gpuopt.reports.deploy.common import (
    PUBLISH_CHECKPOINT,
    VLLM_PORT,
    Artifact,
    DeployOptions,
    SharedMachines,
    Slot,
    artifact_name,
    check_not_serverless,
    default_image,
    deployable,
    group_of,
    instance_type_problem,
    is_amd,
    local_checkpoint,
    machine_layout,
    machines,
    native_multi_node,
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
    trace_env,
    vllm_release,
)


@cache
def runpod_accelerators() -> dict[str, str]:
    """gpuopt GPU -> the accelerator name in SkyPilot's RunPod instance types (data/skypilot_runpod_accelerators.csv,
    each row read from SkyPilot's own GPU_NAME_MAP and fetch_runpod.py name overrides)."""
    return {row["gpu"]: row["skypilot_accelerator"] for row in data_csv("skypilot_runpod_accelerators.csv")}


def instance_type(d: Deployment) -> str:
    """The plan's machine as SkyPilot's catalog names it. AWS and DigitalOcean SKUs are the clouds' own
    instance types, which SkyPilot uses; RunPod's are gpuopt's "2x H100 NVL", which SkyPilot names
    `{count}x_{accelerator}_SECURE` (sky/catalog/data_fetchers/fetch_runpod.py), the name it parses back
    into RunPod's GPU id, count and cloud type when it launches (sky/provision/runpod/utils.py)."""
    if d.provider != "runpod":
        return d.sku
    if d.service != "pod-secure":
        raise refuse(d, "skypilot", f"SkyPilot's RunPod catalog has secure-cloud pods only (fetch_runpod.py skips "
                                    f"community cloud), and the plan chose {d.service}")
    accelerator = runpod_accelerators().get(d.gpu)
    if accelerator is None:
        raise refuse(d, "skypilot", f"gpuopt knows no SkyPilot RunPod name for {d.gpu}")
    return f"{d.gpus_per_instance}x_{accelerator}_SECURE"


SKYPILOT_CLOUDS = {"aws": "aws", "runpod": "runpod", "digitalocean": "do"}
"""gpuopt provider -> SkyPilot cloud name (sky/clouds: AWS, RunPod, DO)."""
UNNAMED_REGIONS = ("global", "unknown", "")
SINGLE_NODE_CLOUDS = ("runpod",)
"""SkyPilot clouds that launch one node per cluster: sky/clouds/runpod.py lists MULTI_NODE among its unsupported
features ("the interconnection among nodes are non-trivial on RunPod"), so a task with num_nodes > 1 finds no
launchable resources there. Machines that only share an offering (packed replicas, deployments sharing
machines) are then launched one cluster per machine from the same file, each told its machine by GPUOPT_POD."""
POD_VAR = "GPUOPT_POD"
RUNPOD_REGIONS = ("AU", "CA", "CZ", "DK", "FR", "IN", "IS", "JP", "NL", "NO", "RO", "SE", "SG", "US")
"""SkyPilot's RunPod regions: country codes, each a set of RunPod data centres (REGION_ZONES in
sky/catalog/data_fetchers/fetch_runpod.py, SkyPilot 0.14.1; a test reads it from the installed SkyPilot)."""


def _one_cluster_per_machine(d: Deployment) -> bool:
    return d.provider in SINGLE_NODE_CLOUDS


def _rank_var(d: Deployment) -> str:
    """The variable that tells a node which of the plan's machines it is."""
    return POD_VAR if _one_cluster_per_machine(d) else "SKYPILOT_NODE_RANK"


def _launch_lines(d: Deployment, name: str, count: int) -> str:
    """The `sky launch` of each machine, where the cloud has no multi-node clusters."""
    return ("# SkyPilot's RunPod cloud launches one pod per cluster (no multi-node), so launch this file once per "
            "pod:\n" + "".join(f"#   sky launch -c {name}-{i} --env {POD_VAR}={i} <this file>\n" for i in range(count)))


def _packed_run(d: Deployment) -> str:
    """Every replica of a machine on that machine, each on its own GPUs (CUDA_VISIBLE_DEVICES, which vLLM
    honours on ROCm too: platforms/rocm.py keeps it in step with HIP_VISIBLE_DEVICES) and its own port. With
    several machines every node runs this script; a replica that exists only on the first machines (3 replicas,
    2 per machine: the second machine holds one) is started on nodes whose $SKYPILOT_NODE_RANK is below the
    count of machines that hold it ($GPUOPT_POD where each machine is a cluster of its own)."""
    per_host, hosts = per_machine(d), machines(d)
    lines = []
    for i in range(per_host):
        serve = shlex.join(["vllm", "serve", *serve_args(d, VLLM_PORT + i)])
        line = f"CUDA_VISIBLE_DEVICES={','.join(replica_devices(d, i))} {serve} &"
        holding = -(-(d.replicas - i) // per_host)  # machines on which replica slot i runs
        if holding < hosts:
            line = f'if [ "${_rank_var(d)}" -lt {holding} ]; then {line} fi'
        lines.append(line)
    return "\n".join([*lines, "wait"]) + "\n"


def _run(d: Deployment) -> str:
    if per_machine(d) > 1:
        return _packed_run(d)
    serve = shlex.join(["vllm", "serve", *serve_args(d)])
    if nodes(d) == 1:
        return serve + "\n"
    if native_multi_node(d):  # vLLM's own multi-node flags, as the plan prints them: no Ray to install
        spread = f'--nnodes {nodes(d)} --master-addr "$HEAD_IP"'
        return (
            'HEAD_IP=$(echo "$SKYPILOT_NODE_IPS" | head -n1)\n'
            'if [ "$SKYPILOT_NODE_RANK" = "0" ]; then\n'
            f"  {serve} {spread} --node-rank 0\n"
            "else\n"
            f'  {serve} {spread} --node-rank "$SKYPILOT_NODE_RANK" --headless\n'
            "fi\n"
        )
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


def _pinned_regions(d: Deployment) -> list[str]:
    """The SkyPilot regions a `global` RunPod offering must be launched in to keep the plan's residency (its
    pinned countries; QA: the plan said "pin it to a data centre in US" and the task let SkyPilot choose any)."""
    return [c for c in d.pinned_countries or () if c in RUNPOD_REGIONS] if d.provider == "runpod" else []


def _resources(d: Deployment, ports: int | list[int]) -> dict[str, Any]:
    resources: dict[str, Any] = {"cloud": SKYPILOT_CLOUDS[d.provider], "instance_type": instance_type(d),
                                 "ports": ports}
    if d.region not in UNNAMED_REGIONS:
        resources["region"] = d.region
    elif len(pinned := _pinned_regions(d)) == 1:
        resources["region"] = pinned[0]
    elif pinned:  # any of them: SkyPilot picks the cheapest with capacity
        resources["any_of"] = [{"region": region} for region in pinned]
    if d.price_kind == "spot":
        resources["use_spot"] = True
    return resources


def _checkpoints(deployments: Iterable[Deployment]) -> list[str]:
    """The local checkpoints (common.local_checkpoint) of `deployments`, each once, in their order."""
    return list(dict.fromkeys(p for d in deployments if (p := local_checkpoint(d)) is not None))


def _file_mounts(task: dict[str, Any], deployments: Iterable[Deployment]) -> None:
    """Each local checkpoint uploaded by SkyPilot's `file_mounts` (remote path: local path) from the machine
    that runs `sky launch` to the same path on every node, so the plan's command serves it unchanged (and
    clients name the model as the plan does). SkyPilot makes a path outside the home directory writable
    itself (a symlink into its own mount directory)."""
    paths = _checkpoints(deployments)
    if paths:
        task["file_mounts"] = {p: p for p in paths}


def _checkpoint_note(deployments: Iterable[Deployment]) -> str:
    return "".join(f"# file_mounts uploads the local checkpoint {json.dumps(p)} from the machine "
                   "that runs sky launch to that path on each node\n" for p in _checkpoints(deployments))


def _software(plan: Plan, d: Deployment, opts: DeployOptions, task: dict[str, Any]) -> None:
    """vLLM on the machines: a container image that has it, or `pip install` at the plan's release."""
    if opts.image or is_amd(d):
        # a container image that has vLLM: nothing to install. `pip install vllm` is a CUDA build, so AMD GPUs
        # run an image with a ROCm build, which the user names (default_image's placeholder otherwise)
        task["resources"]["image_id"] = f"docker:{default_image(plan, d, opts)}"
    else:
        task["setup"] = f"pip install {shlex.quote('vllm==' + vllm_release(plan))}\n"


def _task(plan: Plan, d: Deployment, name: str, opts: DeployOptions, pid: str) -> dict[str, Any]:
    per_host = per_machine(d)
    ports: int | list[int] = VLLM_PORT if per_host == 1 else [VLLM_PORT + i for i in range(per_host)]
    task: dict[str, Any] = {"name": name}
    pods = per_host > 1 and machines(d) > 1 and _one_cluster_per_machine(d)
    if nodes(d) > 1:
        task["num_nodes"] = nodes(d)
    elif per_host > 1 and machines(d) > 1 and not pods:
        task["num_nodes"] = machines(d)  # one cluster of the plan's machines, each running its replicas
    task["envs"] = trace_env(plan, d, pid) | ({POD_VAR: "0"} if pods else {})
    task["resources"] = _resources(d, ports)
    _file_mounts(task, [d])
    _software(plan, d, opts, task)
    task["run"] = _run(d)
    if d.replicas > 1 and per_host == 1:
        task["service"] = {"readiness_probe": {"path": "/health", "initial_delay_seconds": 1200},
                           "replicas": d.replicas}
    return task


def _header(d: Deployment, name: str) -> str:
    """What the file launches, and, when the plan packs replicas on a machine, why it is a cluster and not a
    SkyServe service: SkyServe's load balancer sends traffic to one port of each replica
    (sky/serve/service_spec.py: `ports` is one int), and a SkyServe replica of one vLLM server per machine
    would buy per_machine times the machines the plan prices."""
    per_host, hosts = per_machine(d), machines(d)
    if per_host == 1:
        command = "sky serve up" if d.replicas > 1 else "sky launch"
        return (f"# {name}: {d.replicas} replica(s) on {hosts} {json.dumps(d.sku)} machine(s); {command} <this file>\n"
                f"{_checkpoint_note([d])}")
    last = VLLM_PORT + per_host - 1
    pods = hosts > 1 and _one_cluster_per_machine(d)
    return (f"# {name}: {d.replicas} replicas of {d.gpus_per_replica} GPU(s), {per_host} per {json.dumps(d.sku)} "
            f"machine, on {hosts} machine(s) as the plan prices them.\n"
            f"# Each machine serves its replicas on ports {VLLM_PORT}-{last}. SkyServe balances over one port per "
            "replica,\n"
            "# so this is a `sky launch` cluster, not a `sky serve` service: put your own load balancer in front "
            "of the ports.\n"
            + (_launch_lines(d, name, hosts) if pods else "")
            + f"{_checkpoint_note([d])}")


def _shared_env(plan: Plan, group: SharedMachines, pid: str) -> dict[str, str]:
    """The plan's id, the offering, the machines' rent and what the plan charges the deployments on them (the
    sum of theirs, GPUOPT_COST_PER_HOUR), then each deployment's own GPUOPT_* facts numbered
    in the header's order (GPUOPT_1_WORKLOAD, GPUOPT_1_PLANNED_LOAD, ...): a task has one set of envs."""
    d = group.first
    cost = group.cost_per_hour()
    env = {"GPUOPT_PLAN_ID": pid,
           "GPUOPT_OFFERING": f"{d.provider}/{d.service}/{d.sku}/{d.region}/{d.price_kind}",
           "GPUOPT_MACHINES": str(len(group.machines)),
           "GPUOPT_MACHINES_PRICE_PER_HOUR": f"{group.machines_price_per_hour():.4f} {plan.currency}",
           "GPUOPT_COST_PER_HOUR": f"{cost:.4f} {plan.currency}",
           # the deployments' own monthly figures summed, as the plan's total is (the hourly sum x 730 read 999.95
           # beside the plan's 1,000.00, QA)
           "GPUOPT_COST_PER_MONTH": f"{sum(m.cost_per_month for m in group.deployments):.2f} {plan.currency}"}
    for i, member in enumerate(group.deployments):
        for key, value in trace_env(plan, member, pid).items():
            if key not in ("GPUOPT_PLAN_ID", "GPUOPT_OFFERING"):
                env[f"GPUOPT_{i + 1}_{key.removeprefix('GPUOPT_')}"] = value
    return env


def _shared_run(group: SharedMachines) -> str:
    """Each machine's replicas on that machine, on their own GPUs and ports; with several machines, node
    $SKYPILOT_NODE_RANK ($GPUOPT_POD on RunPod) runs machine rank + 1's."""
    def lines(machine: tuple[Slot, ...], indent: str) -> list[str]:
        return [f"{indent}CUDA_VISIBLE_DEVICES={','.join(s.devices)} "
                f"{shlex.join(['vllm', 'serve', *serve_args(s.deployment, s.port)])} &" for s in machine]

    if len(group.machines) == 1:
        return "\n".join([*lines(group.machines[0], ""), "wait"]) + "\n"
    out = [f'case "${_rank_var(group.first)}" in']
    for rank, machine in enumerate(group.machines):
        out += [f"  {rank})", *lines(machine, "    "), "    ;;"]
    return "\n".join([*out, "esac", "wait"]) + "\n"


def _shared_task(plan: Plan, group: SharedMachines, opts: DeployOptions, pid: str) -> dict[str, Any]:
    d = group.first
    task: dict[str, Any] = {"name": group.name}
    pods = len(group.machines) > 1 and _one_cluster_per_machine(d)
    if len(group.machines) > 1 and not pods:
        task["num_nodes"] = len(group.machines)
    task["envs"] = _shared_env(plan, group, pid) | ({POD_VAR: "0"} if pods else {})
    task["resources"] = _resources(d, group.ports)
    _file_mounts(task, group.deployments)
    _software(plan, d, opts, task)
    task["run"] = _shared_run(group)
    return task


def _shared_header(plan: Plan, group: SharedMachines) -> str:
    d = group.first
    members = ", ".join(f"{i + 1}. {artifact_name(plan, x)} ({x.replicas} replica(s) of {x.gpus_per_replica} GPU(s))"
                        for i, x in enumerate(group.deployments))
    layout = "".join(f"#   {line}\n" for line in machine_layout(group, plan))
    return (f"# {group.name}: {len(group.machines)} of the plan's {offering_machines(plan, d)} {json.dumps(d.sku)} "
            f"machine(s), shared by deployments "
            f"{members};\n"
            f"# the plan prices them together, so one cluster runs them all (GPUOPT_<n>_* are deployment n's facts):\n"
            f"{layout}"
            "# SkyServe balances over one port per replica, so this is a `sky launch` cluster, not a `sky serve` "
            "service:\n# put your own load balancer in front of the ports."
            + ("\n" + _launch_lines(d, group.name, len(group.machines))
               if len(group.machines) > 1 and _one_cluster_per_machine(d) else " sky launch <this file>\n")
            + f"{_checkpoint_note(group.deployments)}")


def _unrecorded_pin(plan: Plan, d: Deployment) -> bool:
    """A plan saved before deployments recorded `pinned_countries` whose warnings say this offering must be
    pinned (solve.pin_notes' words): the countries are not in the file, so the task could not keep them (review:
    such a plan deployed unpinned, exit 0)."""
    return d.pinned_countries is None and d.region in UNNAMED_REGIONS and any(
        w.startswith(f"{d.provider} {d.sku} ({d.region}) meets residency ") for w in plan.warnings)


def _problems(d: Deployment, plan: Plan) -> list[str]:
    """What keeps `d` from a task SkyPilot launches: a cloud it has, a machine its catalog can name, the data
    centre the plan's residency needs."""
    check_not_serverless(d, "skypilot")
    if d.provider not in SKYPILOT_CLOUDS:
        raise refuse(d, "skypilot", f"SkyPilot has no {d.provider} cloud (it knows "
                                    f"{', '.join(sorted(SKYPILOT_CLOUDS))} of gpuopt's providers)")
    if d.provider == "aws" and d.region.startswith("cn-"):
        # SkyPilot's AWS catalog is the standard partition's (sky/catalog/data_fetchers/fetch_aws.py ALL_REGIONS)
        raise refuse(d, "skypilot", f"SkyPilot's AWS cloud has no China regions ({d.region} is in the aws-cn "
                                    "partition, with its own accounts); use --target k8s on an EKS cluster there")
    if d.pinned_countries and d.region in UNNAMED_REGIONS and not _pinned_regions(d):
        # a droplet of an unstated region, or countries SkyPilot has no RunPod region for: the task cannot say
        # where, and launched anywhere it would break the residency the plan was made for
        raise refuse(d, "skypilot", f"the plan keeps its residency only if this {d.provider} machine runs in a data "
                                    f"centre in {', '.join(d.pinned_countries)}, which a SkyPilot task cannot pin "
                                    f"for {d.provider} {d.sku} ({d.region}): create it there yourself")
    if _unrecorded_pin(plan, d):
        raise refuse(d, "skypilot", "the plan keeps its residency only if this machine is pinned to a data centre, "
                                    "and it was saved before plans recorded where: solve again, then deploy")
    if nodes(d) > 1 and _one_cluster_per_machine(d):
        raise refuse(d, "skypilot", f"a replica spans {nodes(d)} {d.provider} machines, and SkyPilot's {d.provider} "
                                    "cloud launches one node per cluster (no multi-node): plan it on one machine "
                                    "(gpuopt's planner no longer spans pods) or on EC2, ECS, CVM or droplets")
    out = instance_type_problem(d, "skypilot", instance_type(d), "SkyPilot's resources.instance_type")
    if (path := local_checkpoint(d)) is not None:
        out += relative_checkpoint(d, "skypilot", path) or _unsafe_mount(d, path)
    return out


def _unsafe_mount(d: Deployment, path: str) -> list[str]:
    """A checkpoint path SkyPilot cannot upload intact: it writes a file_mounts destination into the nodes'
    shell commands unquoted (`mkdir -p`, `ln -s`: sky/backends/backend_utils.py FileMountHelper), so a path
    with a space or `$(...)` would be split or run there. Refused unless it is a word a shell leaves alone
    (shlex.quote leaves it as it is)."""
    if shlex.quote(path) == path:
        return []
    return [refusal(d, "skypilot", f"its local checkpoint {json.dumps(path, ensure_ascii=False)} would be uploaded "
                                   "by file_mounts, whose destination SkyPilot writes into shell commands on the "
                                   "nodes unquoted: move it to a path of letters, digits and @%+=:,./-_ only and "
                                   f"solve again, or {PUBLISH_CHECKPOINT}")]


def render_skypilot(plan: Plan, opts: DeployOptions) -> list[Artifact]:
    """One task per deployment; deployments that share the plan's machines (shared_machines), one task for
    those machines, in the place of the first of them."""
    out = []
    pid = plan_id(plan)
    refuse_all(deployable(plan), lambda d: _problems(d, plan))
    groups = shared_machines(plan)
    for d in deployable(plan):
        group = group_of(groups, d)
        if group is None:
            name = artifact_name(plan, d)
            text = _header(d, name) + price_kind_note(d, "skypilot") + to_yaml(_task(plan, d, name, opts, pid))
        elif group.first is d:
            name = group.name
            text = (_shared_header(plan, group) + price_kind_note(group.first, "skypilot")
                    + to_yaml(_shared_task(plan, group, opts, pid)))
        else:
            continue
        out.append(Artifact(deployment=name, filename=f"{name}.sky.yaml", text=text))
    return out
