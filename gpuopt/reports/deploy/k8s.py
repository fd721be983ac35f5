"""Kubernetes manifests: a Deployment and a Service per planned deployment; a LeaderWorkerSet when one
replica spans several instances (pipeline stages on several nodes, joined in a Ray cluster).

Shapes follow vLLM's own Kubernetes guide and real manifests (shared/data/fixtures/k8s, the LWS example in
fixtures/bench): `nvidia.com/gpu` limits, a memory-backed /dev/shm (NCCL falls back to shared memory where
peer-to-peer is blocked), a model cache volume, readiness and liveness on vLLM's `/health`, and a startup
probe that allows a long model download before liveness starts counting. Nodes are selected by the cloud's
well-known `node.kubernetes.io/instance-type` label, which the provider's cloud controller sets to the SKU.
AMD GPUs are `amd.com/gpu` (the resource SkyPilot requests), in an image the user names (vLLM's official
image is a CUDA build). A local checkpoint is refused: which volume holds it is the cluster's to say.
"""

from __future__ import annotations

import json
import re
import shlex
from typing import Any

from gpuopt.planner.plan import Deployment, Plan
from gpuopt.reports.deploy.common import (
    AMD_GPU_RESOURCE,
    VLLM_PORT,
    Artifact,
    DeployOptions,
    artifact_name,
    check_not_serverless,
    default_image,
    deployable,
    dollar_literal,
    is_amd,
    local_checkpoint,
    nodes,
    plan_id,
    price_kind_note,
    refusal,
    refuse,
    refuse_all,
    serve_args,
    to_yaml,
    trace_labels,
    unseen_checkpoint,
)

INSTANCE_TYPE_LABEL = "node.kubernetes.io/instance-type"
LABEL_VALUE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")
"""A label value as the API server checks it (apimachinery's IsValidLabelValue: this pattern, at most 63
characters); nodeSelector values are label values."""
NVIDIA_GPU_RESOURCE = "nvidia.com/gpu"
NODE_PROVIDERS = ("aws", "alibaba", "tencent", "digitalocean")
"""Providers whose GPU machines join a managed Kubernetes cluster as nodes labelled with their SKU (EKS,
ACK, TKE, DOKS). RunPod rents pods, not nodes."""
SHM_SIZE = "16Gi"
MODEL_CACHE = "/root/.cache/huggingface"


def _probes() -> dict[str, Any]:
    http = {"path": "/health", "port": VLLM_PORT}
    return {
        # a first start downloads the weights: allow up to 30 minutes before liveness takes over
        "startupProbe": {"httpGet": http, "periodSeconds": 30, "failureThreshold": 60},
        "readinessProbe": {"httpGet": http, "periodSeconds": 10},
        "livenessProbe": {"httpGet": http, "periodSeconds": 30, "failureThreshold": 5},
    }


def _volumes() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    volumes = [{"name": "shm", "emptyDir": {"medium": "Memory", "sizeLimit": SHM_SIZE}},
               {"name": "model-cache", "emptyDir": {}}]
    mounts = [{"name": "shm", "mountPath": "/dev/shm"}, {"name": "model-cache", "mountPath": MODEL_CACHE}]
    return volumes, mounts


def _gpu_resources(d: Deployment, gpus: int) -> dict[str, Any]:
    """The GPUs a pod requests, under its vendor's device-plugin resource (AMD's as SkyPilot names it)."""
    key = AMD_GPU_RESOURCE if is_amd(d) else NVIDIA_GPU_RESOURCE
    return {"limits": {key: str(gpus)}, "requests": {key: str(gpus)}}


def _hf_token_env() -> list[dict[str, Any]]:
    return [{"name": "HF_TOKEN",
             "valueFrom": {"secretKeyRef": {"name": "hf-token", "key": "token", "optional": True}}}]


def _pod_spec(d: Deployment, container: dict[str, Any]) -> dict[str, Any]:
    volumes, _ = _volumes()
    spec: dict[str, Any] = {"nodeSelector": {INSTANCE_TYPE_LABEL: d.sku}}
    if not is_amd(d):
        # the taint of NVIDIA GPU nodes (fixtures/k8s eks-agentic-ai manifest); no source at hand names the
        # taint AMD GPU nodes carry, so an AMD pod tolerates none: add your cluster's if it has one
        spec["tolerations"] = [{"key": NVIDIA_GPU_RESOURCE, "operator": "Exists", "effect": "NoSchedule"}]
    return {**spec, "containers": [container], "volumes": volumes}


def _single_node(plan: Plan, d: Deployment, name: str, opts: DeployOptions, pid: str) -> list[dict[str, Any]]:
    labels = {"app": name}
    _, mounts = _volumes()
    container = {
        "name": "vllm",
        "image": default_image(plan, d, opts),
        "command": ["vllm", "serve"],
        "args": [dollar_literal(a) for a in serve_args(d)],
        "env": _hf_token_env(),
        "ports": [{"containerPort": VLLM_PORT, "name": "http"}],
        "resources": _gpu_resources(d, d.gpus_per_replica),
        "volumeMounts": mounts,
        **_probes(),
    }
    metadata = {"name": name, "namespace": opts.namespace, "labels": labels, "annotations": trace_labels(plan, d, pid)}
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": metadata,
        "spec": {
            "replicas": d.replicas,
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels, "annotations": trace_labels(plan, d, pid)},
                         "spec": _pod_spec(d, container)},
        },
    }
    return [deployment, _service(name, labels, opts)]


def _multi_node(plan: Plan, d: Deployment, name: str, opts: DeployOptions, pid: str) -> list[dict[str, Any]]:
    """One LeaderWorkerSet group per replica: the leader starts the Ray head and `vllm serve`, workers join
    it (vLLM's multi-node-serving.sh, shipped in the vllm/vllm-openai image), one pod per instance."""
    size = nodes(d)
    gpus_per_pod = d.gpus_per_replica // size
    _, mounts = _volumes()
    script = "/vllm-workspace/examples/online_serving/multi-node-serving.sh"
    # the nodes join the image's Ray cluster, whichever way the plan starts them
    serve = dollar_literal(shlex.join(["vllm", "serve", *serve_args(d, ray=True)]))  # $(LWS_...) stay variables
    leader_cmd = f"bash {script} leader --ray_cluster_size=$(LWS_GROUP_SIZE); {serve}"
    worker_cmd = f"bash {script} worker --ray_address=$(LWS_LEADER_ADDRESS)"
    anti_affinity = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{
        "labelSelector": {"matchExpressions": [{"key": "leaderworkerset.sigs.k8s.io/name", "operator": "In",
                                                "values": [name]}]},
        "topologyKey": "kubernetes.io/hostname"}]}}

    def template(role: str, command: str, ports: list[int]) -> dict[str, Any]:
        container = {
            "name": f"vllm-{role}",
            "image": default_image(plan, d, opts),
            "command": ["sh", "-c", command],
            "env": _hf_token_env(),
            "ports": [{"containerPort": p} for p in ports],
            "resources": _gpu_resources(d, gpus_per_pod),
            "volumeMounts": mounts,
        }
        if role == "leader":
            container["readinessProbe"] = _probes()["readinessProbe"]
        spec = _pod_spec(d, container)
        spec["affinity"] = anti_affinity
        return {"metadata": {"labels": {"role": role}, "annotations": trace_labels(plan, d, pid)}, "spec": spec}

    lws = {
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "kind": "LeaderWorkerSet",
        "metadata": {"name": name, "namespace": opts.namespace, "annotations": trace_labels(plan, d, pid)},
        "spec": {
            "replicas": d.replicas,
            "leaderWorkerTemplate": {
                "size": size,
                "restartPolicy": "RecreateGroupOnPodRestart",
                "leaderTemplate": template("leader", leader_cmd, [VLLM_PORT, 6379]),
                "workerTemplate": template("worker", worker_cmd, [VLLM_PORT]),
            },
        },
    }
    selector = {"leaderworkerset.sigs.k8s.io/name": name, "role": "leader"}
    return [lws, _service(name, selector, opts)]


def _service(name: str, selector: dict[str, str], opts: DeployOptions) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "namespace": opts.namespace},
        "spec": {"selector": selector, "type": "ClusterIP",
                 "ports": [{"name": "http", "protocol": "TCP", "port": 80, "targetPort": VLLM_PORT}]},
    }


def _problems(d: Deployment) -> list[str]:
    """What keeps `d` from a manifest the API server accepts and a node runs."""
    check_not_serverless(d, "k8s")
    if d.provider not in NODE_PROVIDERS:
        raise refuse(d, "k8s", f"{d.provider} machines are not Kubernetes nodes; use --target skypilot")
    out = []
    if not (0 < len(d.sku) <= 63 and LABEL_VALUE.fullmatch(d.sku)):
        # an overlay CSV may give any text as a SKU: quoted YAML, so nothing is injected, but a Deployment whose
        # nodeSelector is not a label value is refused by the API server after `deploy` said success
        out.append(refusal(d, "k8s", f"its SKU {json.dumps(d.sku, ensure_ascii=False)} is not a Kubernetes label "
                                     f"value (1 to 63 letters, digits, '-', '_' or '.', starting and ending with a "
                                     f"letter or digit), which the nodeSelector {INSTANCE_TYPE_LABEL} must be: "
                                     f"the API server would refuse the Deployment"))
    if (path := local_checkpoint(d)) is not None:
        # a volume could hold it (a PersistentVolumeClaim, a hostPath on the right nodes), but which one is the
        # cluster's: a manifest that guessed would start pods that fail on a missing directory
        out.append(unseen_checkpoint(d, "k8s", path, "a pod", "use --target skypilot (which uploads it) or "
                                                               "compose (which mounts it from the host)"))
    return out


def render_k8s(plan: Plan, opts: DeployOptions) -> list[Artifact]:
    out = []
    pid = plan_id(plan)
    refuse_all(deployable(plan), _problems)
    for d in deployable(plan):
        name = artifact_name(plan, d)
        docs = _multi_node(plan, d, name, opts, pid) if nodes(d) > 1 else _single_node(plan, d, name, opts, pid)
        text = price_kind_note(d, "k8s") + "---\n".join(to_yaml(doc) for doc in docs)
        out.append(Artifact(deployment=name, filename=f"{name}.yaml", text=text))
    return out
