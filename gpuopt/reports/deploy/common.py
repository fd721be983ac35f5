"""What every deployment target needs from a planned deployment: its `vllm serve` arguments, its name, its
node count, and the labels that tie a running service back to the plan."""

from __future__ import annotations

import hashlib
import json
import math
import re
import shlex
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import yaml

from gpuopt.errors import InputError
from gpuopt.hardware import get_gpu
from gpuopt.planner.plan import HOURS_PER_MONTH, Deployment, Plan, WorkloadSummary, split_exactly

VLLM_PORT = 8000
"""The port every artifact serves on (vLLM's default, passed explicitly so probes and services agree)."""
LABEL_PREFIX = "gpuopt.io"
SERVERLESS_PROVIDERS = ("modal", "replicate")
"""Per-second serverless GPUs: they run a function or a model version, not a server we can describe here."""


# a Kubernetes namespace is an RFC 1123 label (kubectl refuses anything else)
NAMESPACE = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")
# an image reference as the OCI distribution spec and docker read it: [host[:port]/]path[:tag][@digest]
_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
IMAGE = re.compile(rf"(?:[A-Za-z0-9.-]+(?::[0-9]+)?/)?{_COMPONENT}(?:/{_COMPONENT})*"
                   r"(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(?:@sha256:[0-9a-f]{64})?")


@dataclass(frozen=True)
class DeployOptions:
    image: str | None = None  # container image; default vllm/vllm-openai at the plan's vLLM release
    namespace: str = "default"

    def problems(self) -> list[str]:
        """Values the artifacts cannot carry: each lands in a manifest, a SkyPilot or Compose file or an EAS
        service spec that its tool would refuse (or, for an image with a space or a ';', pass to a shell)."""
        out = []
        if self.image is not None and not IMAGE.fullmatch(self.image):
            out.append(f"--image {self.image!r} is not a container image reference ([registry/]name[:tag][@sha256:"
                       f"digest], lowercase name)")
        if not NAMESPACE.fullmatch(self.namespace):
            out.append(f"--namespace {self.namespace!r} is not a Kubernetes namespace (lowercase letters, digits "
                       f"and '-', at most 63, starting and ending with a letter or digit)")
        return out


@dataclass(frozen=True)
class Artifact:
    """One file: `filename` inside the output directory, and its text."""

    deployment: str
    filename: str
    text: str


def plan_id(plan: Plan) -> str:
    """A short, stable id of the plan: the first 12 hex digits of the SHA-256 of its JSON contract in the
    `--candidates none` form. The candidate fields (`candidates`, `candidates_form`, `candidate_summary`) are
    all that differs between the forms one solve is saved in (docs/reports.md), so the plan saved with
    `--candidates all`, `summary` or `none` has one id."""
    from gpuopt.reports.plan_json import render_json

    bare = plan.model_copy(update={"candidates": [], "candidates_form": "none", "candidate_summary": None})
    return hashlib.sha256(render_json(bare).encode("utf-8")).hexdigest()[:12]


def vllm_release(plan: Plan) -> str:
    """The plan's vLLM release as a full version: profiles are named by minor release ("0.19" covers
    0.19.x), and release tags and PyPI versions are three-part, so "0.19" means its first release 0.19.0."""
    parts = plan.vllm_version.split(".")
    return ".".join(parts + ["0"] * (3 - len(parts)))


ROCM_IMAGE_PLACEHOLDER = "FILL-IN: a vLLM ROCm image (pass --image)"
"""The image of a deployment on AMD GPUs when --image is not given: vllm/vllm-openai is built for CUDA, and no
source at hand (vLLM's package, SkyPilot, the fixtures) names vLLM's ROCm image, so the artifact carries this
text, which no registry resolves, rather than a guessed name."""
AMD_GPU_RESOURCE = "amd.com/gpu"
"""The Kubernetes extended resource of AMD GPUs, as SkyPilot requests them (sky/provision/kubernetes/utils.py
SUPPORTED_GPU_RESOURCE_KEYS = {'amd': 'amd.com/gpu', 'nvidia': 'nvidia.com/gpu'})."""


def is_amd(d: Deployment) -> bool:
    """Whether the deployment's GPUs are AMD Instinct (ROCm), from the GPU table: a CUDA image, NVIDIA device
    resources or a pip-installed (CUDA) vLLM would not run there."""
    return get_gpu(d.gpu).is_rocm


def default_image(plan: Plan, d: Deployment, opts: DeployOptions) -> str:
    """--image, else vLLM's official OpenAI-server image at the release the plan was made for (tags are
    `v<release>`), which is a CUDA build: AMD GPUs get ROCM_IMAGE_PLACEHOLDER instead."""
    if opts.image:
        return opts.image
    return ROCM_IMAGE_PLACEHOLDER if is_amd(d) else f"vllm/vllm-openai:v{vllm_release(plan)}"


class _PlainDumper(yaml.SafeDumper):
    """Repeated label dicts are written out again, never as YAML anchors and aliases (`&id001`): readers
    (and reviewers) of manifests expect plain documents."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def _str(dumper: yaml.SafeDumper, data: str) -> yaml.ScalarNode:
    """Multi-line strings (run scripts) as literal blocks, as a person would write them."""
    return dumper.represent_scalar("tag:yaml.org,2002:str", data, style="|" if "\n" in data else None)


_PlainDumper.add_representer(str, _str)


def to_yaml(document: Any) -> str:
    return yaml.dump(document, Dumper=_PlainDumper, sort_keys=False, allow_unicode=True)


def dns_name(*parts: str) -> str:
    """A DNS-1035 label: lowercase letters, digits and '-', at most 63 characters, starting with a letter and
    ending with an alphanumeric. Kubernetes Services must be one (a Service named `7b-chat` or `123` is
    refused, though a Deployment may start with a digit), and so must SkyPilot cluster names (a letter first:
    sky/skylet/constants.py CLUSTER_NAME_VALID_REGEX). The same name serves every object of a deployment, so
    one that would start with a digit or be empty gets the prefix `vllm-` (`7B_Chat.v2` -> `vllm-7b-chat-v2`,
    `123` -> `vllm-123`)."""
    text = re.sub(r"[^a-z0-9-]+", "-", "-".join(parts).lower()).strip("-")
    text = re.sub(r"-{2,}", "-", text)
    if not text[:1].isalpha():
        text = f"vllm-{text}"
    return text[:63].strip("-")


# the variable gpuopt's command serves when it knows no checkpoint in the plan's format (serve_command.py)
CHECKPOINT_PLACEHOLDER = re.compile(r"\$([A-Z0-9]+)_CHECKPOINT")

NODE_FLAGS = {"--nnodes": 1, "--node-rank": 1, "--master-addr": 1, "--headless": 0,
              "--distributed-executor-backend": 1}
"""Flags of the plan's per-node steps (flag -> values it takes): each target starts the nodes its own way."""


def _without_note(line: str) -> str:
    """A command line without the plan's trailing `  # note`: cut at the first "  # " outside quotes (one
    inside a quoted checkpoint path is part of it: QA, a folder named `llama  # v2` made the command
    unparseable). shlex's own comments would also cut an unquoted `a#b`, which a shell keeps."""
    start = 0
    while (at := line.find("  # ", start)) >= 0:
        try:
            shlex.split(line[:at])
        except ValueError:  # an open quote: the "  # " is inside it
            start = at + 1
            continue
        return line[:at].strip()
    return line.strip()


def serve_args(d: Deployment, port: int = VLLM_PORT, ray: bool | None = None) -> list[str]:
    """The arguments after `vllm serve` (the model first), from the plan's command, with the port made
    explicit (`port`: a second replica on the same machine needs its own). A single-node command is one line
    (its trailing `# ...` note is not an argument); a multi-node one is the steps per node, of which the
    node-0 `vllm serve` line is taken without its node flags."""
    lines = [_without_note(line) for line in d.vllm_command.splitlines()]
    serve = [line for line in lines if line.startswith("vllm serve ")]
    if not serve:
        raise InputError(f"deployment {d.workload}: its command has no `vllm serve MODEL ...` line")
    try:
        argv = shlex.split(serve[0])
    except ValueError as exc:
        raise InputError(f"deployment {d.workload}: its vllm command does not parse ({exc})") from None
    args: list[str] = []
    rest = iter(argv[2:])
    for token in rest:
        if token in NODE_FLAGS:
            for _ in range(NODE_FLAGS[token]):
                next(rest, None)
            continue
        args.append(token)
    if not args:
        raise InputError(f"deployment {d.workload}: its command names no model")
    if (placeholder := CHECKPOINT_PLACEHOLDER.fullmatch(args[0])) is not None:
        # the plan's own "$INT4_CHECKPOINT": gpuopt knows no checkpoint in that format, and an artifact has no
        # shell to read the variable from (Kubernetes passes it literally, Compose would need it exported)
        precision = placeholder.group(1).lower()
        raise InputError(f"deployment {d.workload}: its plan serves {args[0]}, a placeholder -- gpuopt knows no "
                         f"{precision} checkpoint of {d.model}; name one in the workload file (checkpoints: "
                         f"{{{precision}: organisation/repository}}) and solve again")
    for token in args:
        flag = token.split("=", 1)[0]
        if flag in TARGET_FLAGS:
            raise InputError(f"deployment {d.workload}: its command sets {flag} (edited by hand?); "
                             f"{TARGET_FLAGS[flag]}: remove it from the plan's vllm_command")
    # a replica on several nodes joins them in a Ray cluster unless the plan starts them with vLLM's own flags;
    # `ray` overrides the plan's choice for a target that always starts Ray (k8s's LeaderWorkerSet recipe)
    if nodes(d) > 1 and (not native_multi_node(d) if ray is None else ray):
        args += ["--distributed-executor-backend", "ray"]
    return [*args, "--port", str(port)]


def native_multi_node(d: Deployment) -> bool:
    """Whether the plan starts a replica's nodes with vLLM's own multi-node flags (`--nnodes N --node-rank R
    --master-addr HEAD`, `--headless` off node 0: from 0.12, the form the plan prints for such releases) rather
    than a Ray cluster. From 0.18 `pip install vllm` no longer installs Ray (its wheels dropped the ray[cgraph]
    requirement), so a task that ran `ray start` after installing vLLM could not start."""
    return "--headless" in d.vllm_command


TARGET_FLAGS = {
    "--port": "the artifact assigns each replica its port (8000 and up on a machine) and points the health "
              "checks, Services and published ports at it",
    "--host": "the artifact's health checks and Services reach vLLM from outside its container, on every "
              "interface (vLLM's default)",
}
"""`vllm serve` flags an artifact owns: a plan's command never prints them (serve_command.py), and one edited
into a saved plan would leave the probes and ports of the artifact on another address than vLLM's (a
`--port 9000` served beside probes and a published port of 8000)."""


def local_checkpoint(d: Deployment) -> str | None:
    """The directory `d` serves when its checkpoint is a local path, not a Hugging Face repository; None for a
    repository. The planner serves a local checkpoint (`model: /data/ckpt` in the workload file) from its
    absolute path on the machine that made the plan; vLLM in a pod, a container or a cloud machine has no such
    path unless the artifact mounts or uploads it. A path is what solve takes for one
    (physics.resolution.looks_like_path: absolute, `./`, `../`, `~`, or more than one `/`)."""
    from gpuopt.physics.resolution import looks_like_path

    served = serve_args(d)[0]
    return served if looks_like_path(served) else None


PUBLISH_CHECKPOINT = ("publish it to a Hugging Face Hub repository and serve that (the workload's model: "
                      "{config: <its config.json>, name: organisation/repository} plans from the local config "
                      "and serves the repository)")
"""What to do about a local checkpoint a target cannot see."""


def unseen_checkpoint(d: Deployment, target: str, path: str, who: str, instead: str) -> str:
    """The refusal of a deployment whose local checkpoint `who` (the target's machines) cannot see."""
    return refusal(d, target, f"it serves the local checkpoint {json.dumps(path, ensure_ascii=False)}, a directory "
                              f"on the machine that made the plan, which {who} cannot see: {PUBLISH_CHECKPOINT}, "
                              f"or {instead}")


def relative_checkpoint(d: Deployment, target: str, path: str) -> list[str]:
    """A local checkpoint the target would mount or upload must be an absolute path: a relative one (only a
    hand-edited plan has one; the planner writes absolute paths) is relative to a directory the plan does not
    name."""
    if path.startswith("/"):
        return []
    return [refusal(d, target, f"its local checkpoint {json.dumps(path, ensure_ascii=False)} is not an absolute "
                               "path, and the plan does not say what it is relative to: solve again (the planner "
                               "writes a local checkpoint as its absolute path)")]


def dollar_literal(text: str) -> str:
    """Text a target's own variable syntax must leave alone: Kubernetes expands `$(VAR)` in a container's
    command, args and env values (a model named `m$(HF_TOKEN)` would get the token from the pod's Secret), and
    Compose interpolates `$VAR` / `${VAR}` in every value; both read `$$` as one literal `$`."""
    return text.replace("$", "$$")


def nodes(d: Deployment) -> int:
    """Instances one replica spans (pipeline stages across instances)."""
    return max(1, -(-d.gpus_per_replica // d.gpus_per_instance))


def per_machine(d: Deployment) -> int:
    """Replicas the plan packs on one instance: as many as its GPUs hold (two TP=2 replicas on a 4-GPU
    machine), never more than the deployment has. The plan prices machines, not replicas, so a target that
    gave each replica a machine of its own would buy this many times the planned bill."""
    if nodes(d) > 1:
        return 1
    return max(1, min(d.replicas, d.gpus_per_instance // d.gpus_per_replica))


def machines(d: Deployment) -> int:
    """Instances the deployment runs on: its replicas packed per_machine to an instance, each spanning
    nodes(d) instances when it is pipelined across them."""
    return -(-d.replicas // per_machine(d)) * nodes(d)


def replica_devices(d: Deployment, index: int) -> list[str]:
    """The GPU ids (0-based on its machine) of the machine's replica `index`: consecutive blocks of
    gpus_per_replica, so replicas sharing a machine never share a GPU."""
    first = index * d.gpus_per_replica
    return [str(first + g) for g in range(d.gpus_per_replica)]


def offering_key(d: Deployment) -> tuple[str, ...]:
    """The priced offering a deployment runs on, as the plan's `instances` lines count machines: deployments
    with the same key draw on the same machines."""
    return (d.provider, d.service, d.sku, d.region, d.price_kind, d.gpu, str(d.gpus_per_instance))


@dataclass(frozen=True)
class Slot:
    """One replica on a shared machine: its deployment, its number in the deployment (0-based), its GPU ids
    on the machine and the port it serves on there."""

    deployment: Deployment
    replica: int
    devices: tuple[str, ...]
    port: int


@dataclass(frozen=True)
class SharedMachines:
    """Deployments of one offering that the plan packs on the same machines (its `instances` line lists them
    with fractional `instances` each): `machines` holds the replicas of each machine, on disjoint GPUs and
    ports. `name` is the artifact's, unique among the plan's artifact names."""

    name: str
    deployments: tuple[Deployment, ...]
    machines: tuple[tuple[Slot, ...], ...]

    @property
    def first(self) -> Deployment:
        return self.deployments[0]

    @property
    def ports(self) -> list[int]:
        """The ports any machine serves on: 8000 up to the fullest machine's last replica."""
        return [VLLM_PORT + i for i in range(max(len(m) for m in self.machines))]

    def cost_per_hour(self) -> float:
        """What the plan charges these deployments, per hour: the sum of their monthly costs / 730. The plan spreads an
        offering's machines over all its deployments by GPUs, spare GPUs included, so this is not always the
        machines' price (a deployment filling a machine of its own beside them carries a share of the spare
        GPU): artifacts' costs add up to the plan's. The monthly figures, because the plan apportions them to the
        cent over an offering's deployments (solve._apportioned) where each hourly one is rounded alone: three
        shares of 1.36986301/h summed to 1.3698 beside the plan's 1.3699 (QA)."""
        return round(sum(d.cost_per_month for d in self.deployments) / HOURS_PER_MONTH, 4)

    def machines_price_per_hour(self) -> float:
        """What these machines cost to rent: their count x the instance price."""
        return len(self.machines) * self.first.instance_price_per_hour


def _pack(members: list[Deployment]) -> tuple[tuple[Slot, ...], ...]:
    """Every replica of `members` (single-node, one offering) on machines of gpus_per_instance GPUs, first fit
    in decreasing replica size (plan order among equals). The planner's replica sizes are powers of two that
    divide the machine's GPUs, so this fills every machine but the last: ceil(GPUs / GPUs per machine)
    machines, the count the plan prices."""
    size = members[0].gpus_per_instance
    order = sorted(((d, r) for d in members for r in range(d.replicas)), key=lambda dr: -dr[0].gpus_per_replica)
    machines: list[list[Slot]] = []
    used: list[int] = []
    for d, r in order:
        m = next((i for i, u in enumerate(used) if u + d.gpus_per_replica <= size), len(used))
        if m == len(used):
            machines.append([])
            used.append(0)
        devices = tuple(str(used[m] + g) for g in range(d.gpus_per_replica))
        machines[m].append(Slot(deployment=d, replica=r, devices=devices, port=VLLM_PORT + len(machines[m])))
        used[m] += d.gpus_per_replica
    return tuple(tuple(m) for m in machines)


def offering_machines(plan: Plan, d: Deployment) -> int:
    """The machines the plan rents of `d`'s offering, over all its deployments (its `instances` line; a plan
    without one: the deployments' shares, rounded up)."""
    line = plan.instance_line(d)
    if line is not None:
        return line.instances
    return math.ceil(sum(x.instances for x in plan.deployments if offering_key(x) == offering_key(d)) - 1e-6)


def fills_its_machines(d: Deployment) -> bool:
    """Whether every machine of the deployment's own is full (4 one-GPU replicas on a 4-GPU machine; a
    replica spanning machines takes them whole): it has no GPU left to share."""
    return nodes(d) > 1 or d.replicas * d.gpus_per_replica == machines(d) * d.gpus_per_instance


def shared_machines(plan: Plan) -> list[SharedMachines]:
    """The plan's deployments that share machines: those of one offering, each with a machine it does not
    fill, whose replicas packed together take fewer machines than each deployment on machines of its own
    (alpha's 2 one-GPU replicas and beta's one on a 4-GPU machine: 1 machine, not 2). The planner prices an
    offering's machines for all its deployments' GPUs together, so an artifact per deployment would buy the
    difference again. A deployment that fills its machines (or spans them) has nothing to share and keeps its
    own artifact: the planner's replica sizes divide the machine's GPUs, so leaving it out of the packing costs
    no machine."""
    groups: dict[tuple[str, ...], list[Deployment]] = {}
    for d in plan.deployments:
        if not fills_its_machines(d):
            groups.setdefault(offering_key(d), []).append(d)
    names = artifact_names(plan)
    taken = set(names)
    out = []
    for members in groups.values():
        if len(members) < 2:
            continue
        packed = _pack(members)
        if len(packed) >= sum(machines(d) for d in members):
            continue
        base = dns_name(*(names[plan_position(plan, d)] for d in members))
        name, n = base, 1
        while name in taken:  # a workload may already be called "alpha-beta"
            n += 1
            name = suffixed(base, n)
        taken.add(name)
        out.append(SharedMachines(name=name, deployments=tuple(members), machines=packed))
    return out


def group_of(groups: list[SharedMachines], d: Deployment) -> SharedMachines | None:
    """The shared machines `d` runs on (shared_machines), None when it has machines of its own."""
    return next((g for g in groups if any(x is d for x in g.deployments)), None)


def machine_layout(group: SharedMachines, plan: Plan) -> list[str]:
    """One line per machine: which replica runs on which GPUs and port (for the artifacts' headers)."""
    lines = []
    for i, machine in enumerate(group.machines):
        slots = ", ".join(f"{artifact_name(plan, s.deployment)} replica {s.replica + 1} on GPU "
                          f"{','.join(s.devices)} port {s.port}" for s in machine)
        lines.append(f"machine {i + 1}: {slots}")
    return lines


def workload_of(plan: Plan, d: Deployment) -> WorkloadSummary:
    return next(w for w in plan.workloads if w.name == d.workload)


def number(value: float) -> str:
    """A load as labels show it: 6 significant digits, no trailing zeros (2.0 -> "2", 1.63590 -> "1.6359",
    3e-05 -> "3e-05": four decimals turned a trickle into "0")."""
    return f"{value:.6g}"


def planned_load(d: Deployment, w: WorkloadSummary) -> float:
    """The load the plan sends this deployment, in the workload's demand unit: its replicas x the load it
    sends each (`at_planned_load`: requests per second of a rate workload, requests in flight of a concurrency
    one). A workload's demand is spread over its deployments in proportion to their capacity, so these add up
    to the demand across a workload's deployments (a plan file from before `at_planned_load` has a rate
    workload's per-replica rate in `predicted`)."""
    at = d.at_planned_load
    if w.demand_unit == "concurrency":
        # the clients the plan gives each replica: its share of the capacity's clients (at_planned_load's
        # concurrency is at_concurrency's root, within its tolerance: 63.96 of batch-summarisation's 64), which
        # older plan files have too
        return d.replicas * d.utilisation * d.predicted.replica_concurrency
    per_replica = d.predicted.planned_requests_per_second_per_replica if at is None else at.requests_per_second
    return d.replicas * per_replica


def apportioned_load(plan: Plan, d: Deployment, w: WorkloadSummary) -> str:
    """This deployment's planned load as a label writes it, apportioned so that the labels of a workload's
    deployments add up to its demand exactly: each deployment's share (planned_load, proportional to its
    capacity, but from the plan's rounded per-replica figures: 1.642 + 0.3581 = 2.0001 of a demand of 2) scaled
    to the demand, then rounded to the demand's sixth significant digit by largest remainder."""
    mine = [x for x in plan.deployments if x.workload == w.name]
    raw = [planned_load(x, w) for x in mine]
    total = sum(raw)
    index = next((i for i, x in enumerate(mine) if x is d), None)
    if total <= 0 or w.demand <= 0 or index is None:
        return number(planned_load(d, w))
    decimals = max(0, 5 - math.floor(math.log10(w.demand)))
    return number(split_exactly([w.demand * r / total for r in raw], decimals)[index])


def trace_labels(plan: Plan, d: Deployment, pid: str) -> dict[str, str]:
    """Plan id (`pid`: plan_id(plan), computed once per render: it serialises the whole plan), cost, the load
    the plan sends the deployment (and the workload's whole demand, which several deployments may share) and
    the SLO it was sized for, as string labels/annotations."""
    w = workload_of(plan, d)
    labels = {
        f"{LABEL_PREFIX}/plan-id": pid,
        f"{LABEL_PREFIX}/workload": d.workload,
        f"{LABEL_PREFIX}/model": d.model,
        f"{LABEL_PREFIX}/offering": f"{d.provider}/{d.service}/{d.sku}/{d.region}/{d.price_kind}",
        f"{LABEL_PREFIX}/cost-per-hour": f"{d.cost_per_hour:.4f} {plan.currency}",
        f"{LABEL_PREFIX}/cost-per-month": f"{d.cost_per_month:.2f} {plan.currency}",
        f"{LABEL_PREFIX}/replicas": str(d.replicas),
        f"{LABEL_PREFIX}/planned-load": f"{apportioned_load(plan, d, w)} {w.demand_unit}",
    }
    labels[f"{LABEL_PREFIX}/workload-demand"] = f"{number(w.demand)} {w.demand_unit}"
    if w.ttft_slo_ms is not None:
        labels[f"{LABEL_PREFIX}/slo-ttft-ms"] = f"{w.ttft_slo_ms:g}"
    if w.tpot_slo_ms is not None:
        labels[f"{LABEL_PREFIX}/slo-tpot-ms"] = f"{w.tpot_slo_ms:g}"
    return labels


def trace_env(plan: Plan, d: Deployment, pid: str) -> dict[str, str]:
    """The same facts as GPUOPT_* environment variables, for targets without free-form labels."""
    return {"GPUOPT_" + key.split("/", 1)[1].upper().replace("-", "_"): value
            for key, value in trace_labels(plan, d, pid).items()}


def price_kind_note(d: Deployment, target: str) -> str:
    """A header comment where the artifact cannot buy the price kind the plan priced (QA: a spot plan's
    Kubernetes pods landed on any node of the type, and a capacity-block plan launched on demand, both under
    labels claiming the plan's price): what the user must arrange for the plan's cost to hold."""
    if d.price_kind == "spot" and target == "k8s":
        todo = "schedule these pods on spot nodes (add your cluster's spot capacity-type label to the nodeSelector)"
    elif d.price_kind == "spot" and target == "compose":
        todo = "run it on hosts bought as spot instances"
    elif d.price_kind == "capacity-block":
        todo = "reserve the capacity block and run the machines in it"
    else:
        return ""
    return (f"# price kind {d.price_kind}: the plan's price holds only on {d.price_kind} capacity, which this "
            f"{target} artifact does not ask for: {todo}\n")


def deployable(plan: Plan) -> list[Deployment]:
    """The plan's deployments, or exit 2 when there is nothing to deploy."""
    if plan.status != "optimal" or not plan.deployments:
        raise InputError("the plan has no deployments (it is infeasible): nothing to deploy")
    return list(plan.deployments)


def refusal(d: Deployment, target: str, why: str) -> str:
    """The line that says why `target` cannot deploy `d`, naming the deployment and its offering."""
    return f"deployment {d.workload} ({d.provider} {d.sku}): --target {target} cannot deploy it: {why}"


def refuse(d: Deployment, target: str, why: str) -> InputError:
    return InputError(refusal(d, target, why))


def refuse_all(deployments: Iterable[Deployment], problems: Callable[[Deployment], list[str]]) -> None:
    """Every deployment's problems before any artifact is made, as one InputError (one `error:` line each):
    a plan of three deployments with local checkpoints says so three times in one run, not once per run.
    `problems` returns a deployment's problems, or raises (refuse) when one makes its others moot (a
    serverless offering has no SKU to check)."""
    found: list[str] = []
    for d in deployments:
        try:
            found += problems(d)
        except InputError as exc:
            found += exc.problems
    if found:
        raise InputError(*found)


# a cloud's instance type name as SkyPilot's catalogs and the clouds' APIs spell them (g6.xlarge,
# gpu-h100x8-640gb, Standard_NC24ads_A100_v4, 2x_H100-SXM_SECURE, ecs.gn7i-c8g1.2xlarge)
INSTANCE_TYPE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


def instance_type_problem(d: Deployment, target: str, name: str, field: str) -> list[str]:
    """`name` (the SKU, or the cloud's name for it) where `field` passes it to a cloud as an instance type:
    refused unless it is spelled as instance types are (INSTANCE_TYPE). An overlay CSV may give any text as a
    SKU; one with a space, `$(...)` or `|` is no machine the cloud has, and the target would fail on it after
    `deploy` said success. A well-spelled name the cloud does not have is left to the target's own check."""
    if INSTANCE_TYPE.fullmatch(name):
        return []
    return [refusal(d, target, f"its SKU {json.dumps(name, ensure_ascii=False)} is not a cloud instance type name "
                               f"(letters, digits, '.', '_' and '-', starting with a letter or digit), which "
                               f"{field} must be")]


MANAGED_PLATFORMS = {"pai-eas": "PAI-EAS (--target pai-eas)", "pai-dsw": "PAI-DSW", "ti-one": "TI-ONE"}
"""Services that price a managed platform's instance, not a machine: no Kubernetes node carries their spec
name and no one logs into them to run Docker (QA: k8s wrote a nodeSelector `TI.GN7.8XLARGE128.POST`)."""


def check_not_serverless(d: Deployment, target: str) -> None:
    """Refuses what is not a machine `target` can start vLLM on: serverless services, SageMaker endpoints and
    managed platforms (PAI-EAS only through its own target)."""
    if d.provider in SERVERLESS_PROVIDERS:
        raise refuse(d, target, f"{d.provider} is a serverless per-second service, not a machine to run "
                                "vllm serve on; deploy through its own SDK")
    if d.service == "sagemaker":
        raise refuse(d, target, "a SageMaker endpoint is deployed through SageMaker, not as a server")
    if d.service in MANAGED_PLATFORMS and not (target == "pai-eas" and d.service == "pai-eas"):
        raise refuse(d, target, f"a {d.provider} {d.service} instance is a managed platform's, not a machine to "
                                f"run vllm serve on; deploy it through {MANAGED_PLATFORMS[d.service]}")


def suffixed(base: str, n: int) -> str:
    """`base` with the suffix `-n`, the base cut so that the name stays within a label's 63 characters."""
    return dns_name(base[:62 - len(str(n))], str(n))


def plan_position(plan: Plan, d: Deployment) -> int:
    """`d`'s index in the plan: by identity, so that two deployments with equal fields (a hand-edited plan
    may repeat one) are two positions, not the first one twice."""
    found = next((i for i, x in enumerate(plan.deployments) if x is d), None)
    return plan.deployments.index(d) if found is None else found


def artifact_names(plan: Plan) -> list[str]:
    """Each deployment's name (plan order), unique across the plan: the workload as a DNS label, and its
    position when one workload has several deployments (`support-chat-1`, `-2`). Workload names that differ
    only where a DNS label cannot (`a_b`, `a.b` and `A-B` are all `a-b`) would name three Kubernetes objects,
    SkyPilot clusters and files alike, each replacing the one before: the first deployment in plan order
    keeps the name, each later one gets the first free suffix from `-2` on (`a-b`, `a-b-2`, `a-b-3`). Every
    deployment's own name is reserved first, so a suffix never takes the name of a workload the plan has
    (`a_b`, `A-B`, `a-b-2`: `a-b`, `a-b-3`, `a-b-2`). The workload's own name stays in the labels."""
    bases = []
    for i, d in enumerate(plan.deployments):
        same = [j for j, x in enumerate(plan.deployments) if x.workload == d.workload]
        bases.append(dns_name(d.workload) if len(same) == 1 else dns_name(d.workload, str(same.index(i) + 1)))
    taken = set(bases)
    names: list[str] = []
    for base in bases:
        name, n = base, 1
        while base in names and name in taken:
            n += 1
            name = suffixed(base, n)
        taken.add(name)
        names.append(name)
    return names


def artifact_name(plan: Plan, d: Deployment) -> str:
    """`d`'s name among the plan's (artifact_names): its files and the objects and clusters they create."""
    return artifact_names(plan)[plan_position(plan, d)]
