"""`gpuopt deploy`: artifacts that validate against each target's own schema and carry the plan."""

from __future__ import annotations

import csv
import hashlib
import json
import os
import re
import shlex
import subprocess
from pathlib import Path

import kubernetes_validate
import pytest
import yaml
from click.testing import CliRunner

from gpuopt.cli.main import cli
from gpuopt.errors import InputError
from gpuopt.planner.plan import Deployment, Plan
from gpuopt.reports.deploy import DeployOptions, render_deploy
from gpuopt.reports.plan_json import render_json

EXAMPLES = Path(__file__).parent.parent / "examples"
K8S_VERSION = kubernetes_validate.latest_version()


def _solve(tmp: Path, example: str, *flags: str) -> Path:
    out = tmp / f"{example}.json"
    result = CliRunner().invoke(cli, ["solve", str(EXAMPLES / example), "--format", "json", "-o", str(out),
                                      *flags])
    assert result.exit_code == 0, result.output
    return out


@pytest.fixture(scope="module")
def plans(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    os.environ["GPUOPT_TODAY"] = "2026-11-29"
    tmp = tmp_path_factory.mktemp("plans")
    return {"two": _solve(tmp, "two-models.yaml", "--provider", "aws"),
            "cn": _solve(tmp, "cn-chat-70b.yaml", "--region", "cn", "--provider", "alibaba")}


def _plan(path: Path) -> Plan:
    return Plan.model_validate_json(path.read_text(encoding="utf-8"))


def _multi_node(plan: Plan, release: str | None = None) -> Plan:
    """The plan's first deployment with a replica of 16 GPUs on 8-GPU instances (TP 8 x PP 2); its command the
    planner's node steps for `release` when one is given (vLLM's own --nnodes/--headless form from 0.12, a Ray
    cluster before), else the single line edited."""
    from gpuopt.planner.serve_command import _multi_node as node_steps

    d = plan.deployments[0]
    command = re.sub(r"--tensor-parallel-size \d+", "--tensor-parallel-size 8 --pipeline-parallel-size 2",
                     d.vllm_command)
    if release is not None:
        command = "\n".join(node_steps(shlex.split(command.split("  # ")[0]), 2, 8, release))
    first = d.model_copy(update={"gpus_per_replica": 16, "gpus_per_instance": 8, "tensor_parallel": 8,
                                 "pipeline_parallel": 2, "vllm_command": command})
    return plan.model_copy(update={"deployments": [first]})


def test_k8s_manifests_validate_and_carry_the_plan(plans: dict[str, Path]) -> None:
    plan = _plan(plans["two"])
    artifacts = render_deploy(plan, "k8s", DeployOptions())
    names = [d.workload for d in plan.deployments]
    assert [a.filename for a in artifacts] == [
        f"{w}.yaml" if names.count(w) == 1 else f"{w}-{names[:i + 1].count(w)}.yaml" for i, w in enumerate(names)]
    # the plan's JSON in the --candidates none form (the fixture saved the default, summary)
    bare = plan.model_copy(update={"candidates": [], "candidates_form": "none", "candidate_summary": None})
    plan_id = hashlib.sha256(render_json(bare).encode()).hexdigest()[:12]
    for artifact, d in zip(artifacts, plan.deployments, strict=True):
        docs = list(yaml.safe_load_all(artifact.text))
        for doc in docs:
            kubernetes_validate.validate(doc, K8S_VERSION, strict=True)
        deployment, service = docs
        assert (deployment["kind"], service["kind"]) == ("Deployment", "Service")
        assert deployment["spec"]["replicas"] == d.replicas
        pod = deployment["spec"]["template"]["spec"]
        container = pod["containers"][0]
        assert container["resources"]["limits"]["nvidia.com/gpu"] == str(d.gpus_per_replica)
        assert pod["nodeSelector"] == {"node.kubernetes.io/instance-type": d.sku}
        assert container["command"] + container["args"] == shlex.split(d.vllm_command.split("  #")[0]) + [
            "--port", "8000"]
        assert {p["httpGet"]["path"] for p in (container["readinessProbe"], container["livenessProbe"])} == {"/health"}
        assert {v["mountPath"] for v in container["volumeMounts"]} == {"/dev/shm", "/root/.cache/huggingface"}
        notes = deployment["metadata"]["annotations"]
        assert notes["gpuopt.io/plan-id"] == plan_id
        assert notes["gpuopt.io/cost-per-hour"] == f"{d.cost_per_hour:.4f} {plan.currency}"
        assert service["spec"]["selector"] == deployment["spec"]["selector"]["matchLabels"]


def test_a_multi_node_skypilot_task_starts_its_nodes_as_the_plan_does(plans: dict[str, Path]) -> None:
    """QA: from vLLM 0.18 `pip install vllm` installs no Ray, and the task's `ray start` could not run. A plan
    whose nodes start with vLLM's own flags (0.33) gets them; one of a release before 0.12 keeps the Ray cluster,
    whose Ray came with vLLM then. Kubernetes' LeaderWorkerSet runs the image's Ray recipe either way."""
    plan = _plan(plans["two"])
    native = yaml.safe_load(render_deploy(_multi_node(plan, "0.33"), "skypilot", DeployOptions())[0].text)
    lines = [line.strip() for line in native["run"].splitlines()]
    assert not any(line.startswith("ray ") for line in lines) and "ray" not in native.get("setup", "")
    head, other = (next(line for line in lines if line.startswith("vllm serve") and cue in line)
                   for cue in ("--node-rank 0", "--headless"))
    assert shlex.split(head)[-6:] == ["--nnodes", "2", "--master-addr", "$HEAD_IP", "--node-rank", "0"]
    assert shlex.split(other)[-7:] == ["--nnodes", "2", "--master-addr", "$HEAD_IP", "--node-rank",
                                       "$SKYPILOT_NODE_RANK", "--headless"]
    assert "--distributed-executor-backend" not in head
    ray = yaml.safe_load(render_deploy(_multi_node(plan, "0.11"), "skypilot", DeployOptions())[0].text)
    assert "ray start --head --port 6379" in ray["run"] and "--distributed-executor-backend ray" in ray["run"]
    [group] = render_deploy(_multi_node(plan, "0.33"), "k8s", DeployOptions())
    assert "--distributed-executor-backend ray --port 8000" in group.text


def test_k8s_multi_node_replica_is_a_leader_worker_set(plans: dict[str, Path]) -> None:
    plan = _multi_node(_plan(plans["two"]))
    [artifact] = render_deploy(plan, "k8s", DeployOptions())
    lws, service = yaml.safe_load_all(artifact.text)
    assert lws["kind"] == "LeaderWorkerSet"
    group = lws["spec"]["leaderWorkerTemplate"]
    assert group["size"] == 2 and lws["spec"]["replicas"] == plan.deployments[0].replicas
    for role in ("leaderTemplate", "workerTemplate"):
        template = group[role]
        # LeaderWorkerSet is a CRD the schema set does not know: its pod templates are core PodTemplates
        kubernetes_validate.validate({"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": "t"},
                                      "template": template}, K8S_VERSION, strict=True)
        assert template["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "8"
    leader = group["leaderTemplate"]["spec"]["containers"][0]["command"][2]
    assert "--pipeline-parallel-size 2" in leader and "leader --ray_cluster_size" in leader
    kubernetes_validate.validate(service, K8S_VERSION, strict=True)


def _validate_with_skypilot(paths: list[Path]) -> None:
    """SkyPilot's own schemas and validator, in the interpreter that has SkyPilot (CI installs it in a
    venv of its own: SkyPilot pins click below the release gpuopt uses)."""
    python = os.environ.get("GPUOPT_SKYPILOT_PYTHON")
    if not python:
        pytest.skip("GPUOPT_SKYPILOT_PYTHON is not set (.ci/run sets it)")
    script = (
        "import sys, yaml\n"
        "from sky.utils import schemas, common_utils\n"
        "for path in sys.argv[1:]:\n"
        "    task = yaml.safe_load(open(path))\n"
        "    common_utils.validate_schema(task, schemas.get_task_schema(), path + ': ')\n"
        "    common_utils.validate_schema(task['resources'], schemas.get_resources_schema(), path + ': ')\n"
        "    if 'service' in task:\n"
        "        common_utils.validate_schema(task['service'], schemas.get_service_schema(), path + ': ')\n"
    )
    done = subprocess.run([python, "-c", script, *map(str, paths)], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr[-2000:]


def test_skypilot_tasks_pin_the_instance_and_validate(plans: dict[str, Path], tmp_path: Path) -> None:
    plan = _plan(plans["two"])
    spot = plan.deployments[0].model_copy(update={"price_kind": "spot", "replicas": 1})
    variants = [plan, plan.model_copy(update={"deployments": [spot]}), _multi_node(plan),
                _multi_node(plan, "0.33")]
    paths = []
    for i, variant in enumerate(variants):
        for artifact, d in zip(render_deploy(variant, "skypilot", DeployOptions()), variant.deployments, strict=True):
            task = yaml.safe_load(artifact.text)
            assert task["resources"]["instance_type"] == d.sku
            assert task["resources"]["cloud"] == "aws"
            assert task["resources"].get("use_spot", False) == (d.price_kind == "spot")
            packed = d.replicas > 1 and d.gpus_per_instance // d.gpus_per_replica > 1  # no SkyServe for those
            assert task.get("service", {}).get("replicas", 1) == (1 if packed else d.replicas)
            assert task.get("num_nodes", 1) == -(-d.gpus_per_replica // d.gpus_per_instance)
            path = tmp_path / f"{i}-{artifact.filename}"
            path.write_text(artifact.text, encoding="utf-8")
            paths.append(path)
    _validate_with_skypilot(paths)


def test_pai_eas_service_has_the_shape_of_alibabas_examples(plans: dict[str, Path]) -> None:
    plan = _plan(plans["cn"])
    fixture = json.loads((Path(__file__).parent / "fixtures" / "pai_eas_pattern1_vllm.json").read_text())
    for artifact, d in zip(render_deploy(plan, "pai-eas", DeployOptions()), plan.deployments, strict=True):
        service = json.loads(artifact.text)
        assert set(service) <= set(fixture) | {"cloud"}
        assert set(service["containers"][0]) <= set(fixture["containers"][0]) | {"env"}
        assert re.fullmatch(r"[a-z0-9_]{3,63}", service["metadata"]["name"])
        assert service["metadata"]["instance"] == d.replicas
        if "cloud" in service:
            assert service["cloud"]["computing"]["instance_type"] == d.sku
        else:  # replicas packed on a machine: a dedicated resource group of the plan's machines
            assert d.sku in service["metadata"]["resource"]
        served = shlex.split(d.vllm_command.split("  #")[0])[2]  # the repository the plan serves
        assert service["containers"][0]["command"].startswith(f"vllm serve {served} ")
        env = {e["name"]: e["value"] for e in service["containers"][0]["env"]}
        assert env["GPUOPT_WORKLOAD"] == d.workload
        # QA: Alibaba's 420 s (for a 0.5B model from OSS) failed a 70B replica still loading; k8s gives 30 min
        check = service["containers"][0]["startup_check"]
        assert check["initial_delay_seconds"] + check["period_seconds"] * check["failure_threshold"] == 1920


def _packed(plan: Plan, replicas: int, gpus_per_replica: int, gpus_per_instance: int) -> Plan:
    d = plan.deployments[0].model_copy(update={"replicas": replicas, "gpus_per_replica": gpus_per_replica,
                                               "gpus_per_instance": gpus_per_instance, "pipeline_parallel": 1})
    return plan.model_copy(update={"deployments": [d]})


def test_skypilot_runs_every_replica_of_a_machine_on_it(plans: dict[str, Path], tmp_path: Path) -> None:
    """3 replicas of 1 GPU on 2-GPU machines: the plan prices 2 machines (2 + 1 replicas), not 3 SkyServe
    replicas of a 2-GPU machine each. Run with a stub `vllm`, node 0 starts replicas on GPUs 0 and 1 (ports
    8000, 8001), node 1 only the third (GPU 0, port 8000)."""
    plan = _packed(_plan(plans["two"]), replicas=3, gpus_per_replica=1, gpus_per_instance=2)
    [artifact] = render_deploy(plan, "skypilot", DeployOptions())
    task = yaml.safe_load(artifact.text)
    assert "service" not in task and task["num_nodes"] == 2
    assert task["resources"]["ports"] == [8000, 8001]
    assert "ports 8000-8001" in artifact.text and "not a `sky serve` service" in artifact.text
    stub = tmp_path / "bin"
    stub.mkdir()
    (stub / "vllm").write_text('#!/bin/sh\nshift $(($# - 1)); echo "gpu=$CUDA_VISIBLE_DEVICES port=$1"\n')
    (stub / "vllm").chmod(0o755)
    started = {}
    for rank in (0, 1):
        env = {"PATH": f"{stub}:/usr/bin:/bin", "SKYPILOT_NODE_RANK": str(rank)}
        done = subprocess.run(["bash", "-c", task["run"]], env=env, capture_output=True, text=True, check=True)
        started[rank] = sorted(done.stdout.splitlines())
    assert started == {0: ["gpu=0 port=8000", "gpu=1 port=8001"], 1: ["gpu=0 port=8000"]}
    path = tmp_path / artifact.filename
    path.write_text(artifact.text, encoding="utf-8")
    _validate_with_skypilot([path])


def test_runpod_pods_are_one_cluster_each(plans: dict[str, Path], tmp_path: Path) -> None:
    """QA: SkyPilot's RunPod cloud has no multi-node clusters (sky/clouds/runpod.py), so `num_nodes: 2` found
    nothing to launch. 3 replicas on two 2-GPU pods: one file launched once per pod, GPUOPT_POD telling each its
    replicas; a replica pipelined across pods is refused (the planner no longer makes one)."""
    d = _plan(plans["two"]).deployments[0].model_copy(update={
        "provider": "runpod", "service": "pod-secure", "sku": "2x H100 NVL", "gpu": "H100-NVL-94GB",
        "region": "global", "replicas": 3, "gpus_per_replica": 1, "gpus_per_instance": 2, "pipeline_parallel": 1})
    plan = _plan(plans["two"]).model_copy(update={"deployments": [d]})
    [artifact] = render_deploy(plan, "skypilot", DeployOptions())
    task = yaml.safe_load(artifact.text)
    assert "num_nodes" not in task and task["envs"]["GPUOPT_POD"] == "0"
    name = artifact.filename.removesuffix(".sky.yaml")
    assert f"#   sky launch -c {name}-0 --env GPUOPT_POD=0 <this file>\n" \
           f"#   sky launch -c {name}-1 --env GPUOPT_POD=1 <this file>\n" in artifact.text
    started = {}
    for pod in (0, 1):
        env = {**_stub_vllm(tmp_path), "GPUOPT_POD": str(pod)}
        done = subprocess.run(["bash", "-c", task["run"]], env=env, capture_output=True, text=True, check=True)
        started[pod] = len(done.stdout.splitlines())
    assert started == {0: 2, 1: 1}
    path = tmp_path / artifact.filename
    path.write_text(artifact.text, encoding="utf-8")
    _validate_with_skypilot([path])
    shared = _on_one_offering(plan.model_copy(update={"deployments": [d.model_copy(update={"replicas": 1})]}), 4,
                              alpha=(5, 1), beta=(3, 1))
    [group] = render_deploy(shared, "skypilot", DeployOptions())
    pods = yaml.safe_load(group.text)
    assert "num_nodes" not in pods and pods["run"].startswith('case "$GPUOPT_POD" in')
    assert "--env GPUOPT_POD=1 <this file>" in group.text and " sky launch <this file>" not in group.text
    piped = d.model_copy(update={"sku": "8x H100 SXM", "gpu": "H100-SXM-80GB", "gpus_per_instance": 8,
                                 "replicas": 1, "gpus_per_replica": 16, "tensor_parallel": 8, "pipeline_parallel": 2})
    with pytest.raises(InputError, match="launches one node per cluster"):
        render_deploy(plan.model_copy(update={"deployments": [piped]}), "skypilot", DeployOptions())


def test_skypilot_one_packed_machine_is_one_node_with_disjoint_gpus(plans: dict[str, Path]) -> None:
    """2 TP=2 replicas on one 4-GPU machine: one node (no num_nodes), GPUs 0,1 and 2,3."""
    plan = _packed(_plan(plans["two"]), replicas=2, gpus_per_replica=2, gpus_per_instance=4)
    task = yaml.safe_load(render_deploy(plan, "skypilot", DeployOptions())[0].text)
    assert "num_nodes" not in task and "service" not in task
    assert [line.split(" ")[0] for line in task["run"].splitlines()] == [
        "CUDA_VISIBLE_DEVICES=0,1", "CUDA_VISIBLE_DEVICES=2,3", "wait"]


def test_pai_eas_packed_replicas_use_a_resource_group_of_the_planned_machines(plans: dict[str, Path]) -> None:
    """2 TP=2 replicas on one 4-GPU ECS type: a public-group EAS instance is a whole machine, so `instance: 2`
    of that type would buy 2 machines; the service asks for 2 instances of 2 GPUs in a dedicated resource
    group of 1 machine (Alibaba's Pattern 7: metadata.resource + metadata.gpu), whose id the user fills in."""
    plan = _packed(_plan(plans["cn"]), replicas=2, gpus_per_replica=2, gpus_per_instance=4)
    sku = plan.deployments[0].sku
    service = json.loads(render_deploy(plan, "pai-eas", DeployOptions())[0].text)
    assert "cloud" not in service  # cloud.computing and metadata.resource are mutually exclusive
    assert service["metadata"]["instance"] == 2 and service["metadata"]["gpu"] == 2
    assert service["metadata"]["shm_size"] == 64  # TP=2, as Alibaba's own TP2 example sets
    assert service["metadata"]["resource"].startswith("FILL-IN: id (eas-r-...) of a dedicated resource group of "
                                                      f"1 x {sku} ")
    three = _packed(_plan(plans["cn"]), replicas=3, gpus_per_replica=2, gpus_per_instance=4)
    assert f"group of 2 x {sku} " in json.loads(render_deploy(three, "pai-eas", DeployOptions())[0].text)[
        "metadata"]["resource"]
    one = _packed(_plan(plans["cn"]), replicas=1, gpus_per_replica=2, gpus_per_instance=4)
    alone = json.loads(render_deploy(one, "pai-eas", DeployOptions())[0].text)
    assert alone["cloud"] == {"computing": {"instance_type": sku}} and "resource" not in alone["metadata"]
    assert alone["metadata"]["shm_size"] == 64
    single = _packed(_plan(plans["cn"]), replicas=1, gpus_per_replica=1, gpus_per_instance=1)
    assert "shm_size" not in json.loads(render_deploy(single, "pai-eas", DeployOptions())[0].text)["metadata"]


def _on_mi300x(plan: Plan) -> Plan:
    """The plan's first deployment on DigitalOcean's 8 x MI300X droplet (an AMD Instinct, ROCm GPU)."""
    d = plan.deployments[0].model_copy(update={"provider": "digitalocean", "service": "droplet",
                                               "sku": "gpu-mi300x8-1536gb", "region": "nyc1",
                                               "gpu": "MI300X-192GB", "gpus_per_instance": 8})
    return plan.model_copy(update={"deployments": [d]})


def test_amd_gpus_are_requested_as_amd_gpus_in_an_image_the_user_names(plans: dict[str, Path],
                                                                       tmp_path: Path) -> None:
    """MI300X: `amd.com/gpu` (SkyPilot's AMD resource key), no NVIDIA toleration, and no CUDA image: the image
    is --image or a FILL-IN placeholder no registry resolves; SkyPilot runs that image instead of
    `pip install vllm` (a CUDA build); Compose, with no sourced way to pass AMD GPUs, refuses."""
    plan = _on_mi300x(_plan(plans["two"]))
    gpus = str(plan.deployments[0].gpus_per_replica)
    for opts, image in ((DeployOptions(), "FILL-IN: a vLLM ROCm image (pass --image)"),
                        (DeployOptions(image="registry.example.com/vllm-rocm:1"), "registry.example.com/vllm-rocm:1")):
        deployment, _ = yaml.safe_load_all(render_deploy(plan, "k8s", opts)[0].text)
        kubernetes_validate.validate(deployment, K8S_VERSION, strict=True)
        pod = deployment["spec"]["template"]["spec"]
        assert pod["containers"][0]["resources"] == {"limits": {"amd.com/gpu": gpus}, "requests": {"amd.com/gpu": gpus}}
        assert "tolerations" not in pod and pod["containers"][0]["image"] == image
        [artifact] = render_deploy(plan, "skypilot", opts)
        task = yaml.safe_load(artifact.text)
        assert task["resources"]["image_id"] == f"docker:{image}" and "setup" not in task
        assert task["resources"]["cloud"] == "do"
        (tmp_path / f"{len(image)}.sky.yaml").write_text(artifact.text, encoding="utf-8")
    [group] = render_deploy(_multi_node(plan), "k8s", DeployOptions())
    lws = next(yaml.safe_load_all(group.text))
    worker = lws["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]
    assert worker["containers"][0]["resources"]["limits"] == {"amd.com/gpu": "8"} and "tolerations" not in worker
    with pytest.raises(InputError, match="MI300X-192GB is an AMD GPU, and gpuopt has no source for handing AMD GPUs"):
        render_deploy(plan, "compose", DeployOptions())
    _validate_with_skypilot(sorted(tmp_path.glob("*.sky.yaml")))


@pytest.mark.parametrize(("sku", "gpu", "count", "expected"), [
    ("2x H100 NVL", "H100-NVL-94GB", 2, "2x_H100-NVL_SECURE"),
    ("1x A100 SXM", "A100-SXM-80GB", 1, "1x_A100-80GB-SXM_SECURE"),
    ("8x H100 SXM", "H100-SXM-80GB", 8, "8x_H100-SXM_SECURE"),
    ("4x H200", "H200-141GB", 4, "4x_H200-SXM_SECURE"),
])
def test_runpod_pods_get_skypilots_instance_type_names(plans: dict[str, Path], sku: str, gpu: str, count: int,
                                                     expected: str) -> None:
    """SkyPilot names RunPod machines f'{count}x_{accelerator}_SECURE' (fetch_runpod.py) and parses that name
    back into RunPod's GPU id when it launches; gpuopt's "1x A100 SXM" is no SkyPilot instance type."""
    d = _plan(plans["two"]).deployments[0].model_copy(update={
        "provider": "runpod", "service": "pod-secure", "sku": sku, "gpu": gpu, "gpus_per_instance": count,
        "region": "global", "replicas": 1, "gpus_per_replica": count})
    plan = _plan(plans["two"]).model_copy(update={"deployments": [d]})
    task = yaml.safe_load(render_deploy(plan, "skypilot", DeployOptions())[0].text)
    assert task["resources"]["cloud"] == "runpod" and task["resources"]["instance_type"] == expected
    assert "region" not in task["resources"]
    community = plan.model_copy(update={"deployments": [d.model_copy(update={"service": "pod-community"})]})
    with pytest.raises(InputError, match="SkyPilot's RunPod catalog has secure-cloud pods only"):
        render_deploy(community, "skypilot", DeployOptions())


def test_the_runpod_name_table_is_skypilots_own(tmp_path: Path) -> None:
    """Every row names a GPU of gpuopt's table and an accelerator of SkyPilot's GPU_NAME_MAP with the RunPod
    GPU id the row states (read from the installed SkyPilot when GPUOPT_SKYPILOT_PYTHON is set)."""
    from gpuopt.hardware import get_gpu
    from gpuopt.reports.deploy.skypilot import runpod_accelerators

    rows = list(csv.DictReader((Path(__file__).parent.parent / "gpuopt" / "data" /
                                "skypilot_runpod_accelerators.csv").read_text().splitlines()))
    assert {r["gpu"]: r["skypilot_accelerator"] for r in rows} == runpod_accelerators()
    for r in rows:
        assert get_gpu(r["gpu"]).gpu == r["gpu"] and r["source"]
    python = os.environ.get("GPUOPT_SKYPILOT_PYTHON")
    if not python:
        pytest.skip("GPUOPT_SKYPILOT_PYTHON is not set (.ci/run sets it)")
    done = subprocess.run([python, "-c", "import json; from sky.provision.runpod.utils import GPU_NAME_MAP; "
                                         "print(json.dumps(GPU_NAME_MAP))"], capture_output=True, text=True, check=True)
    name_map = json.loads(done.stdout)
    assert {r["skypilot_accelerator"]: name_map.get(r["skypilot_accelerator"]) for r in rows} == {
        r["skypilot_accelerator"]: r["runpod_gpu_type_id"] for r in rows}


def test_compose_gives_each_replica_its_own_gpus_and_port(plans: dict[str, Path]) -> None:
    plan = _plan(plans["two"])
    d = plan.deployments[0]
    two = plan.model_copy(update={"deployments": [d.model_copy(update={"replicas": 2, "gpus_per_replica": 4,
                                                                      "gpus_per_instance": 8})]})
    [artifact] = render_deploy(two, "compose", DeployOptions())
    services = yaml.safe_load(artifact.text)["services"]
    devices = [s["deploy"]["resources"]["reservations"]["devices"][0]["device_ids"] for s in services.values()]
    assert devices == [["0", "1", "2", "3"], ["4", "5", "6", "7"]]
    assert [s["ports"] for s in services.values()] == [["8000:8000"], ["8001:8000"]]


@pytest.mark.parametrize("target", ["compose", "pai-eas"])
def test_targets_refuse_what_they_cannot_run(plans: dict[str, Path], target: str) -> None:
    plan = _multi_node(_plan(plans["cn"]))
    with pytest.raises(Exception, match="spans 2 instances"):
        render_deploy(plan, target, DeployOptions())


def test_cli_writes_files_and_refuses_bad_requests(plans: dict[str, Path], tmp_path: Path) -> None:
    runner = CliRunner()
    out = tmp_path / "k8s"
    ok = runner.invoke(cli, ["deploy", str(plans["two"]), "--target", "k8s", "-o", str(out)])
    assert ok.exit_code == 0, ok.output
    assert sorted(p.name for p in out.iterdir()) == sorted(a.filename for a in render_deploy(
        _plan(plans["two"]), "k8s", DeployOptions()))
    again = runner.invoke(cli, ["deploy", str(plans["two"]), "--target", "k8s", "-o", str(out)])
    assert again.exit_code == 2 and "already exists" in again.stderr
    aws_to_eas = runner.invoke(cli, ["deploy", str(plans["two"]), "--target", "pai-eas", "-o", str(tmp_path / "e")])
    assert aws_to_eas.exit_code == 2 and "PAI-EAS runs on Alibaba Cloud ECS" in aws_to_eas.stderr
    cn_to_sky = runner.invoke(cli, ["deploy", str(plans["cn"]), "--target", "skypilot"])
    assert cn_to_sky.exit_code == 2 and "SkyPilot has no alibaba cloud" in cn_to_sky.stderr
    old = tmp_path / "old.json"
    old.write_text(plans["two"].read_text().replace('"schema_version": 1', '"schema_version": 0', 1))
    stale = runner.invoke(cli, ["deploy", str(old), "--target", "k8s"])
    assert stale.exit_code == 2 and "schema_version 0 is not supported" in stale.stderr
    stream = runner.invoke(cli, ["deploy", str(plans["two"]), "--target", "k8s"])
    assert stream.exit_code == 0
    assert [d["kind"] for d in yaml.safe_load_all(stream.stdout)] == ["Deployment", "Service"] * len(
        _plan(plans["two"]).deployments)


def test_a_plans_release_is_numbers_before_it_reaches_a_pin_or_an_image_tag(plans: dict[str, Path],
                                                                           tmp_path: Path) -> None:
    """SkyPilot's setup ran `pip install vllm==<release>` unquoted and Compose interpolated the image tag: a
    hand-edited release "0.33.0; touch x #" or "0.33.0-${HF_TOKEN}" is now refused when the plan is read."""
    for release in ("0.33.0; touch PWNED #", "0.33.0-${HF_TOKEN}"):
        data = json.loads(plans["two"].read_text())
        data["vllm_version"] = release
        bad = tmp_path / "bad.json"
        bad.write_text(json.dumps(data))
        result = CliRunner().invoke(cli, ["deploy", str(bad), "--target", "skypilot"])
        assert result.exit_code == 2 and result.stdout == ""
        assert result.stderr.startswith(f"error: {bad}: not a valid gpuopt plan: vllm_version: String should match")
    [task] = [a for a in render_deploy(_plan(plans["two"]), "skypilot", DeployOptions())][:1]
    setup = yaml.safe_load(task.text).get("setup")
    assert setup is None or shlex.split(setup)[:2] == ["pip", "install"]


@pytest.mark.parametrize(("edit", "message"), [
    ({"workload": "nope"}, "deployments.0.workload: 'nope' is not one of the plan's workloads (chat, code)"),
    ({"gpus_per_instance": 0}, "deployments.0.gpus_per_instance: Input should be greater than or equal to 1"),
])
def test_a_hand_edited_plan_that_does_not_hold_together_is_exit_2(plans: dict[str, Path], tmp_path: Path,
                                                                  edit: dict[str, object], message: str) -> None:
    """A deployment of a workload the plan does not have, or of instances without GPUs: one error line, exit 2
    (they were a StopIteration and a ZeroDivisionError, exit 70)."""
    data = json.loads(plans["two"].read_text())
    data["deployments"][0].update(edit)
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(data))
    for target in ("skypilot", "compose"):
        result = CliRunner().invoke(cli, ["deploy", str(bad), "--target", target])
        assert result.exit_code == 2 and result.stdout == ""
        assert result.stderr == f"error: {bad}: not a valid gpuopt plan: {message}\n"


@pytest.mark.parametrize("target", ["k8s", "skypilot", "compose"])
def test_a_plan_without_a_known_checkpoint_is_not_deployed(plans: dict[str, Path], target: str) -> None:
    """A plan serving "$INT4_CHECKPOINT" (gpuopt knows no int4 checkpoint of the model) cannot become an
    artifact: Kubernetes would pass the text literally, and escaped for Compose it would be literal too."""
    plan = _plan(plans["two"])
    d = plan.deployments[0]
    d = d.model_copy(update={"vllm_command": d.vllm_command.replace(d.vllm_command.split()[2],
                                                                    '"$INT4_CHECKPOINT"', 1)})
    with pytest.raises(InputError, match=r"deployment chat: its plan serves \$INT4_CHECKPOINT, a placeholder -- "
                                         r"gpuopt knows no int4 checkpoint of .*; name one in the workload file"):
        render_deploy(plan.model_copy(update={"deployments": [d]}), target, DeployOptions())


@pytest.mark.parametrize("target", ["k8s", "skypilot", "compose", "pai-eas"])
@pytest.mark.parametrize("edit", ["--port 9000", "--port=9000", "--host 127.0.0.1"])
def test_a_port_or_host_edited_into_a_plan_is_refused(plans: dict[str, Path], target: str, edit: str) -> None:
    """A saved plan whose command was given `--port 9000` by hand was deployed with vLLM on 9000 and the health
    checks, published port and Service on 8000 (Compose, SkyPilot): a container that never turns healthy."""
    plan = _plan(plans["cn" if target == "pai-eas" else "two"])  # PAI-EAS deploys Alibaba machines only
    d = plan.deployments[0]
    d = d.model_copy(update={"vllm_command": d.vllm_command.replace(" --max-model-len", f" {edit} --max-model-len",
                                                                    1)})
    flag = edit.split()[0].split("=")[0]
    with pytest.raises(InputError, match=rf"^deployment {d.workload}: its command sets {flag} \(edited by hand\?\); "):
        render_deploy(plan.model_copy(update={"deployments": [d]}), target, DeployOptions())


def test_hostile_strings_stay_data(plans: dict[str, Path]) -> None:
    """A workload name reaches names (as a DNS label) and labels (quoted); a SKU reaches Compose only as a
    comment (JSON-quoted), and Kubernetes not at all: it refuses a SKU that is no label value (below)."""
    plan = _plan(plans["two"])
    evil = "x; rm -rf / #$(id)"
    d = plan.deployments[0].model_copy(update={"workload": evil})
    w = plan.workloads[0].model_copy(update={"name": evil})
    hostile = plan.model_copy(update={"deployments": [d], "workloads": [w]})
    [k8s] = render_deploy(hostile, "k8s", DeployOptions())
    deployment, _ = yaml.safe_load_all(k8s.text)
    assert re.fullmatch(r"[a-z]([a-z0-9-]*[a-z0-9])?", deployment["metadata"]["name"])
    assert deployment["metadata"]["annotations"]["gpuopt.io/workload"] == evil
    hostile = hostile.model_copy(update={"deployments": [d.model_copy(update={"sku": "p4d.24xlarge\nkind: Secret"})]})
    [compose] = render_deploy(hostile, "compose", DeployOptions())
    document = yaml.safe_load(compose.text)
    assert set(document) == {"name", "services", "volumes"}


@pytest.mark.parametrize(("workload", "expected"), [
    ("7B_Chat.v2", "vllm-7b-chat-v2"), ("123", "vllm-123"), ("Chat", "chat"), ("--", "vllm"),
    ("9" * 70, "vllm-" + "9" * 58),
])
def test_names_are_dns_1035_labels_that_kubernetes_services_and_skypilot_accept(
        plans: dict[str, Path], workload: str, expected: str) -> None:
    """A Service name must start with a letter (DNS-1035), as must a SkyPilot cluster name; a workload named
    `7B_Chat.v2` gave the Service `7b-chat-v2`, and `123` gave `'123'`, both refused by the API server."""
    plan = _plan(plans["two"])
    d = plan.deployments[0].model_copy(update={"workload": workload})
    w = plan.workloads[0].model_copy(update={"name": workload})
    renamed = plan.model_copy(update={"deployments": [d], "workloads": [w]})
    [artifact] = render_deploy(renamed, "k8s", DeployOptions())
    deployment, service = yaml.safe_load_all(artifact.text)
    assert (artifact.filename, deployment["metadata"]["name"], service["metadata"]["name"]) == (
        f"{expected}.yaml", expected, expected)
    assert yaml.safe_load(render_deploy(renamed, "skypilot", DeployOptions())[0].text)["name"] == expected


def test_a_dollar_in_user_text_is_literal_for_kubernetes_and_compose(plans: dict[str, Path]) -> None:
    """Kubernetes expands $(VAR) in args (a model named m$(HF_TOKEN) would receive the pod's Secret) and Compose
    interpolates ${VAR} everywhere; both read $$ as one $. The model and workload reach args, the sh -c line of
    a multi-node group and Compose's labels written that way; HF_TOKEN's own ${HF_TOKEN:-} stays a variable."""
    plan = _plan(plans["two"])
    model = "org/m$(HF_TOKEN)${HF_TOKEN}${X:?boom}"
    d = plan.deployments[0]
    d = d.model_copy(update={"model": model, "vllm_command": d.vllm_command.replace(
        d.vllm_command.split()[2], shlex.quote(model), 1)})
    hostile = plan.model_copy(update={"deployments": [d]})
    [k8s] = render_deploy(hostile, "k8s", DeployOptions())
    deployment, _ = yaml.safe_load_all(k8s.text)
    [container] = deployment["spec"]["template"]["spec"]["containers"]
    assert container["args"][0] == "org/m$$(HF_TOKEN)$${HF_TOKEN}$${X:?boom}"
    assert deployment["metadata"]["annotations"]["gpuopt.io/model"] == model  # annotations are not expanded
    [group] = render_deploy(_multi_node(hostile), "k8s", DeployOptions())
    leader = next(yaml.safe_load_all(group.text))["spec"]["leaderWorkerTemplate"]["leaderTemplate"]
    script = leader["spec"]["containers"][0]["command"][2]
    assert "'org/m$$(HF_TOKEN)$${HF_TOKEN}$${X:?boom}'" in script and "$(LWS_GROUP_SIZE)" in script
    [compose] = render_deploy(hostile, "compose", DeployOptions())
    service = yaml.safe_load(compose.text)["services"]["vllm-1"]
    assert service["command"][0] == "org/m$$(HF_TOKEN)$${HF_TOKEN}$${X:?boom}"
    assert service["labels"]["gpuopt.io/model"] == "org/m$$(HF_TOKEN)$${HF_TOKEN}$${X:?boom}"
    assert service["environment"] == {"HF_TOKEN": "${HF_TOKEN:-}"}


@pytest.mark.parametrize(("flag", "value", "ok"), [
    ("--image", "vllm/vllm-openai:v0.11.0", True),
    ("--image", "nvcr.io/nvidia/vllm:25.01-py3", True),
    ("--image", "registry.example.com:5000/team/vllm-openai:v0.11.0@sha256:" + "a" * 64, True),
    ("--image", "vllm/vllm-openai:v0.11 ; rm -rf /", False),  # lands in an image_id / command a tool runs
    ("--image", "VLLM/Upper:1", False),
    ("--namespace", "gpu-serving", True),
    ("--namespace", "Bad_NS", False),
    ("--namespace", "x" * 64, False),
])
def test_image_and_namespace_are_what_the_tools_accept(plans: dict[str, Path], tmp_path: Path, flag: str, value: str,
                                                       ok: bool) -> None:
    result = CliRunner().invoke(cli, ["deploy", str(plans["two"]), "--target", "k8s", "-o", str(tmp_path / "o"),
                                      flag, value])
    if ok:
        assert result.exit_code == 0, result.output
        assert value in "".join(p.read_text() for p in (tmp_path / "o").iterdir())
    else:
        assert result.exit_code == 2 and result.stderr.startswith(f"error: {flag} ")
        assert not (tmp_path / "o").exists()


def test_the_plan_id_is_the_same_in_every_candidates_form(tmp_path: Path) -> None:
    """One solve saved with --candidates none, summary and all differs in the candidate fields only, so its
    artifacts carry one plan id: the SHA-256 of the file saved with --candidates none (each form had its own)."""
    os.environ["GPUOPT_TODAY"] = "2026-11-29"
    ids = {}
    for form in ("none", "summary", "all"):
        path = _solve(tmp_path, "cn-chat-70b.yaml", "--region", "cn", "--provider", "alibaba", "--candidates", form)
        saved = path.rename(tmp_path / f"{form}.json")
        [artifact, *_] = render_deploy(_plan(saved), "k8s", DeployOptions())
        ids[form] = next(yaml.safe_load_all(artifact.text))["metadata"]["annotations"]["gpuopt.io/plan-id"]
        if form == "none":
            none_sha = hashlib.sha256(saved.read_bytes()).hexdigest()[:12]
    assert ids == {"none": none_sha, "summary": none_sha, "all": none_sha}


def _trace(target: str, artifact_text: str) -> dict[str, str]:
    """The GPUOPT facts of an artifact as label key -> value (environment variables named back as labels)."""
    if target == "pai-eas":
        env = {e["name"]: e["value"] for e in json.loads(artifact_text)["containers"][0]["env"]}
    elif target == "skypilot":
        env = yaml.safe_load(artifact_text)["envs"]
    elif target == "compose":
        return dict(next(iter(yaml.safe_load(artifact_text)["services"].values()))["labels"])
    else:
        return dict(next(yaml.safe_load_all(artifact_text))["metadata"]["annotations"])
    return {"gpuopt.io/" + k.removeprefix("GPUOPT_").lower().replace("_", "-"): v for k, v in env.items()}


@pytest.mark.parametrize("target", ["k8s", "skypilot", "compose", "pai-eas"])
def test_planned_load_is_the_deployments_own_load(plans: dict[str, Path], target: str) -> None:
    """planned-load was the workload's whole demand on every deployment (cn-chat's two deployments both said
    2 requests_per_second, 4 when summed). It is the deployment's share of the demand -- replicas x
    at_planned_load (requests per second, or requests in flight for a concurrency workload), scaled so that a
    workload's deployments add up to its demand at its sixth significant digit (QA: the plan's rounded
    per-replica rates gave 1.642 + 0.3581 = 2.0001). By hand: 3 x 0.5453 = 1.6359 and 2 x 0.1821 = 0.3642 of
    2.0001 -> 1.635818... and 0.364182... of 2, to 5 decimals 1.63582 + 0.36418; a concurrency workload's
    2 x 0.75 x 20 = 30 clients, where predicted.planned_requests_per_second_per_replica (0.7997) is a rate and
    must not be read."""
    plan = _plan(plans["cn" if target == "pai-eas" else "two"])
    d = plan.deployments[0]
    assert d.at_planned_load is not None
    w = next(x for x in plan.workloads if x.name == d.workload)

    def edited(replicas: int, rps: float, concurrency: float, sku: str) -> Deployment:
        at = d.at_planned_load.model_copy(update={"requests_per_second": rps, "concurrency": concurrency})
        return d.model_copy(update={"replicas": replicas, "at_planned_load": at, "sku": sku, "predicted":
                                    d.predicted.model_copy(update={"planned_requests_per_second_per_replica": 0.7997})})

    def labels(deployments: list[Deployment], unit: str, demand: float) -> list[dict[str, str]]:
        summary = w.model_copy(update={"demand": demand, "demand_unit": unit})
        one = plan.model_copy(update={"deployments": deployments, "workloads": [summary]})
        return [_trace(target, a.text) for a in render_deploy(one, target, DeployOptions())]

    rate = labels([edited(3, 0.5453, 17.34, "sku-a"), edited(2, 0.1821, 6.25, "sku-b")], "requests_per_second", 2.0)
    assert [(x["gpuopt.io/planned-load"], x["gpuopt.io/workload-demand"]) for x in rate] == [
        ("1.63582 requests_per_second", "2 requests_per_second"),
        ("0.36418 requests_per_second", "2 requests_per_second")]
    # a concurrency workload: the replicas x their share of the capacity's clients (2 x 0.75 x 20 = 30), not
    # at_planned_load's concurrency (at_concurrency's root, 63.96 for batch-summarisation's 64)
    d = d.model_copy(update={"utilisation": 0.75, "predicted": d.predicted.model_copy(
        update={"replica_concurrency": 20.0})})
    (conc,) = labels([edited(2, 0.7997, 14.9, "sku-a")], "concurrency", 30.0)
    assert (conc["gpuopt.io/planned-load"], conc["gpuopt.io/workload-demand"]) == ("30 concurrency", "30 concurrency")
    (trickle,) = labels([edited(1, 3e-05, 1.0, "sku-a")], "requests_per_second", 3e-05)
    assert trickle["gpuopt.io/planned-load"] == "3e-05 requests_per_second"


def test_a_workloads_deployments_split_its_demand(plans: dict[str, Path]) -> None:
    """cn-chat-70b in cn: support-chat is served by two deployments; their planned-load labels are their
    shares of the demand in proportion to their capacity (replicas x at_planned_load), and add up to the 2
    req/s of workload-demand exactly."""
    plan = _plan(plans["cn"])
    assert [d.workload for d in plan.deployments] == ["support-chat", "support-chat"]
    loads = []
    for artifact, d in zip(render_deploy(plan, "k8s", DeployOptions()), plan.deployments, strict=True):
        notes = next(yaml.safe_load_all(artifact.text))["metadata"]["annotations"]
        assert d.at_planned_load is not None
        assert float(notes["gpuopt.io/planned-load"].split()[0]) == pytest.approx(
            d.replicas * d.at_planned_load.requests_per_second, abs=2e-4)
        assert notes["gpuopt.io/workload-demand"] == "2 requests_per_second"
        loads.append(round(float(notes["gpuopt.io/planned-load"].split()[0]) * 1e5))
    assert loads[0] != loads[1] and sum(loads) == 200_000


SHARED_WORKLOAD = """\
schema_version: 1
residency: us
currency: USD
providers: [aws]
workloads:
  - name: alpha
    model: Qwen/Qwen2.5-7B-Instruct
    requests_per_second: 3
    input_tokens: 800
    output_tokens: 200
    max_model_len: 4096
    slo: {ttft_ms: 1500, tpot_ms: 40}
    min_replicas: 2
  - name: beta
    model: meta-llama/Llama-3.1-8B-Instruct
    requests_per_second: 2
    input_tokens: 500
    output_tokens: 300
    max_model_len: 4096
    slo: {ttft_ms: 1500, tpot_ms: 40}
"""
SHARED_OVERLAY = """\
provider,sku,region,price_kind,price_per_hour,currency
aws,g6e.12xlarge,us-east-1,on-demand,1.234567,USD
"""


@pytest.fixture(scope="module")
def shared_plan(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two workloads on one 4 x L40S g6e.12xlarge (an overlay makes it cheap): alpha's 2 one-GPU replicas and
    beta's one share the machine, which the plan prices once (instances 0.6667 + 0.3333)."""
    tmp = tmp_path_factory.mktemp("shared")
    (tmp / "w.yaml").write_text(SHARED_WORKLOAD, encoding="utf-8")
    (tmp / "overlay.csv").write_text(SHARED_OVERLAY, encoding="utf-8")
    out = tmp / "plan.json"
    with pytest.MonkeyPatch.context() as mp:  # today pinned for this solve only (not leaked to other modules)
        mp.setenv("GPUOPT_TODAY", "2026-11-29")
        result = CliRunner().invoke(cli, ["solve", str(tmp / "w.yaml"), "--catalog", str(tmp / "overlay.csv"),
                                          "--format", "json", "-o", str(out)])
    assert result.exit_code == 0, result.output
    plan = _plan(out)
    assert [(d.workload, d.sku, d.replicas, d.gpus_per_replica, d.instances) for d in plan.deployments] == [
        ("alpha", "g6e.12xlarge", 2, 1, 0.66666667), ("beta", "g6e.12xlarge", 1, 1, 0.33333333)]
    assert [(line.sku, line.instances, line.workloads) for line in plan.instances] == [
        ("g6e.12xlarge", 1, ["alpha", "beta"])]
    return out


def _stub_vllm(tmp_path: Path) -> dict[str, str]:
    stub = tmp_path / "bin"
    stub.mkdir(exist_ok=True)
    (stub / "vllm").write_text('#!/bin/sh\necho "gpu=$CUDA_VISIBLE_DEVICES model=$2 port=$(eval echo \\${$#})"\n')
    (stub / "vllm").chmod(0o755)
    return {"PATH": f"{stub}:/usr/bin:/bin"}


def test_deployments_sharing_a_machine_are_one_skypilot_cluster(shared_plan: Path, tmp_path: Path) -> None:
    """The plan prices one g6e.12xlarge for alpha and beta; `deploy --target skypilot` wrote alpha.sky.yaml and
    beta.sky.yaml, each launching a machine (twice the bill). Now one task launches the one machine and runs
    alpha's replicas on GPUs 0 and 1 (ports 8000, 8001) and beta's on GPU 2 (port 8002)."""
    out = tmp_path / "sky"
    result = CliRunner().invoke(cli, ["deploy", str(shared_plan), "--target", "skypilot", "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in out.iterdir()) == ["alpha-beta.sky.yaml"]
    text = (out / "alpha-beta.sky.yaml").read_text()
    task = yaml.safe_load(text)
    assert "num_nodes" not in task and "service" not in task
    assert task["resources"]["instance_type"] == "g6e.12xlarge" and task["resources"]["ports"] == [8000, 8001, 8002]
    assert "machine 1: alpha replica 1 on GPU 0 port 8000, alpha replica 2 on GPU 1 port 8001, beta replica 1 on " \
           "GPU 2 port 8002" in text
    envs = task["envs"]
    # the plan's one machine rents for 1.2346; GPUOPT_COST_PER_HOUR is what the plan charges alpha and beta, from
    # their monthly figures, which the plan apportions to the cent (rounded each, their hourly ones summed to
    # 1.2345: a third figure, QA), so every artifact's cost adds up to the plan's
    plan = _plan(shared_plan)
    month = sum(d.cost_per_month for d in plan.deployments)
    assert month == plan.total_cost_per_month
    assert (envs["GPUOPT_MACHINES"], envs["GPUOPT_MACHINES_PRICE_PER_HOUR"]) == ("1", "1.2346 USD")
    assert envs["GPUOPT_COST_PER_HOUR"] == f"{month / 730:.4f} USD" == "1.2346 USD"
    assert envs["GPUOPT_COST_PER_MONTH"] == f"{month:.2f} USD"
    numbered = [envs[f"GPUOPT_{n}_{key}"] for n in (1, 2) for key in ("WORKLOAD", "REPLICAS")]
    assert numbered == ["alpha", "2", "beta", "1"]
    plan = _plan(shared_plan)
    alpha, beta = (shlex.split(d.vllm_command.split("  #")[0])[2] for d in plan.deployments)
    done = subprocess.run(["bash", "-c", task["run"]], env=_stub_vllm(tmp_path), capture_output=True, text=True,
                          check=True)
    assert sorted(done.stdout.splitlines()) == [f"gpu=0 model={alpha} port=8000", f"gpu=1 model={alpha} port=8001",
                                                f"gpu=2 model={beta} port=8002"]
    _validate_with_skypilot([out / "alpha-beta.sky.yaml"])
    alone = CliRunner().invoke(cli, ["deploy", str(shared_plan), "--target", "skypilot"])  # one file: stdout
    assert alone.exit_code == 0 and alone.stdout == text


def test_deployments_sharing_a_machine_are_one_compose_host(shared_plan: Path) -> None:
    """alpha.compose.yaml and beta.compose.yaml each claimed a host, and on one host both reserved GPU 0 and
    port 8000. Now one file runs the plan's one machine: three services on GPUs 0, 1, 2 and ports 8000-8002,
    each labelled with its own deployment."""
    [artifact] = render_deploy(_plan(shared_plan), "compose", DeployOptions())
    assert artifact.filename == "alpha-beta.compose.yaml"
    document = yaml.safe_load(artifact.text)
    services = document["services"]
    assert list(services) == ["vllm-1-alpha", "vllm-2-alpha", "vllm-3-beta"]
    assert [s["deploy"]["resources"]["reservations"]["devices"][0]["device_ids"] for s in services.values()] == [
        ["0"], ["1"], ["2"]]
    assert [s["ports"] for s in services.values()] == [["8000:8000"], ["8001:8000"], ["8002:8000"]]
    assert [s["labels"]["gpuopt.io/workload"] for s in services.values()] == ["alpha", "alpha", "beta"]
    # Kubernetes was right already: its scheduler packs the pods (one Deployment per deployment, unchanged)
    k8s = render_deploy(_plan(shared_plan), "k8s", DeployOptions())
    assert [a.filename for a in k8s] == ["alpha.yaml", "beta.yaml"]


def _on_one_offering(plan: Plan, gpus_per_instance: int, **shapes: tuple[int, int]) -> Plan:
    """The plan's first deployment several times on its offering (machines of `gpus_per_instance` GPUs), as
    workloads named by `shapes` (serving org/<name>), each with its (replicas, GPUs per replica)."""
    d = plan.deployments[0]
    w = next(x for x in plan.workloads if x.name == d.workload)

    def one(name: str, replicas: int, gpus: int) -> Deployment:
        command = re.sub(r"--tensor-parallel-size \d+", f"--tensor-parallel-size {gpus}", d.vllm_command)
        command = command.replace(d.vllm_command.split()[2], f"org/{name}", 1)
        return d.model_copy(update={"workload": name, "replicas": replicas, "gpus_per_replica": gpus,
                                    "tensor_parallel": gpus, "pipeline_parallel": 1, "vllm_command": command,
                                    "gpus_per_instance": gpus_per_instance})

    return plan.model_copy(update={"deployments": [one(name, *shape) for name, shape in shapes.items()],
                                   "workloads": [w.model_copy(update={"name": name}) for name in shapes]})


def test_shared_machines_several_of_them(plans: dict[str, Path], tmp_path: Path) -> None:
    """alpha 5 x 1 GPU and beta 3 x 1 GPU on 4-GPU machines: 8 GPUs, 2 machines as the plan prices them (3 if
    each had its own). Machine 1 holds alpha's replicas 1-4, machine 2 alpha's 5th and beta's three: SkyPilot
    runs node rank 0 and 1 each with its own replicas; Compose writes a file per host."""
    plan = _on_one_offering(_plan(plans["two"]), 4, alpha=(5, 1), beta=(3, 1))
    [artifact] = render_deploy(plan, "skypilot", DeployOptions())
    task = yaml.safe_load(artifact.text)
    assert task["num_nodes"] == 2 and task["resources"]["ports"] == [8000, 8001, 8002, 8003]
    started = {}
    for rank in (0, 1):
        env = {**_stub_vllm(tmp_path), "SKYPILOT_NODE_RANK": str(rank)}
        done = subprocess.run(["bash", "-c", task["run"]], env=env, capture_output=True, text=True, check=True)
        started[rank] = sorted(done.stdout.splitlines())
    assert started == {
        0: ["gpu=0 model=org/alpha port=8000", "gpu=1 model=org/alpha port=8001", "gpu=2 model=org/alpha port=8002",
            "gpu=3 model=org/alpha port=8003"],
        1: ["gpu=0 model=org/alpha port=8000", "gpu=1 model=org/beta port=8001", "gpu=2 model=org/beta port=8002",
            "gpu=3 model=org/beta port=8003"]}
    assert "machine 2: alpha replica 5 on GPU 0 port 8000, beta replica 1 on GPU 1 port 8001, beta replica 2 on " \
           "GPU 2 port 8002, beta replica 3 on GPU 3 port 8003" in artifact.text
    path = tmp_path / artifact.filename
    path.write_text(artifact.text, encoding="utf-8")
    hosts = render_deploy(plan, "compose", DeployOptions())
    assert [a.filename for a in hosts] == ["alpha-beta.host-1.compose.yaml", "alpha-beta.host-2.compose.yaml"]
    second = yaml.safe_load(hosts[1].text)["services"]
    assert list(second) == ["vllm-1-alpha", "vllm-2-beta", "vllm-3-beta", "vllm-4-beta"]
    assert [s["deploy"]["resources"]["reservations"]["devices"][0]["device_ids"] for s in second.values()] == [
        ["0"], ["1"], ["2"], ["3"]]
    # TP=2 and TP=1 replicas on one 4-GPU machine: the 2-GPU block first, then the 1-GPU ones
    mixed = yaml.safe_load(render_deploy(_on_one_offering(_plan(plans["two"]), 4, alpha=(1, 2), beta=(2, 1)), "compose",
                                         DeployOptions())[0].text)["services"]
    assert [s["deploy"]["resources"]["reservations"]["devices"][0]["device_ids"] for s in mixed.values()] == [
        ["0", "1"], ["2"], ["3"]]
    _validate_with_skypilot([path])


def test_deployments_of_one_offering_that_fill_their_machines_keep_their_files(plans: dict[str, Path]) -> None:
    """alpha 4 x 1 GPU and beta 1 x 4 GPUs on 4-GPU machines: each fills a machine, sharing saves none, so
    each deployment keeps its own artifact, as before. Beside gamma's and delta's one-GPU replicas that do
    share a machine, a deployment filling its own (alpha) still keeps its file; beta's 3 replicas of 1 GPU
    and epsilon's one of 2 GPUs, though neither fills its machine, take 2 machines packed or not."""
    plan = _on_one_offering(_plan(plans["two"]), 4, alpha=(4, 1), beta=(1, 4))
    for target, suffix in (("skypilot", "sky.yaml"), ("compose", "compose.yaml")):
        assert [a.filename for a in render_deploy(plan, target, DeployOptions())] == [
            f"alpha.{suffix}", f"beta.{suffix}"]
    mixed = _on_one_offering(_plan(plans["two"]), 4, alpha=(4, 1), gamma=(2, 1), delta=(1, 1))
    [own, shared] = render_deploy(mixed, "skypilot", DeployOptions())
    assert (own.filename, shared.filename) == ("alpha.sky.yaml", "gamma-delta.sky.yaml")
    assert "machine 1: gamma replica 1 on GPU 0 port 8000, gamma replica 2 on GPU 1 port 8001, delta replica 1 " \
           "on GPU 2 port 8002" in shared.text
    apart = _on_one_offering(_plan(plans["two"]), 4, beta=(3, 1), epsilon=(1, 2))
    assert [a.filename for a in render_deploy(apart, "compose", DeployOptions())] == [
        "beta.compose.yaml", "epsilon.compose.yaml"]


def test_pai_eas_services_sharing_machines_name_one_resource_group(plans: dict[str, Path]) -> None:
    """Two TP=2 services on one 4-GPU ECS type: each alone was a public-group instance, i.e. a machine each
    (2 where the plan prices 1). Both now ask for their GPUs in the same dedicated resource group of 1 machine."""
    plan = _on_one_offering(_plan(plans["cn"]), 4, alpha=(1, 2), beta=(1, 2))
    sku = plan.deployments[0].sku
    services = [json.loads(a.text) for a in render_deploy(plan, "pai-eas", DeployOptions())]
    assert [("cloud" in s, s["metadata"]["instance"], s["metadata"]["gpu"]) for s in services] == [
        (False, 1, 2), (False, 1, 2)]
    [group] = {s["metadata"]["resource"] for s in services}
    assert group == (f"FILL-IN: id (eas-r-...) of a dedicated resource group of 1 x {sku} -- the machines this plan "
                     "prices, shared by the services alpha (1 replica(s) of 2 GPU(s)), beta (1 replica(s) of 2 "
                     "GPU(s)): one group, its id in each")


COLLIDING_WORKLOAD = """\
schema_version: 1
residency: us
currency: USD
providers: [aws]
workloads:
  - name: a_b
    model: meta-llama/Llama-3.1-8B-Instruct
    requests_per_second: 1
    input_tokens: 500
    output_tokens: 100
    max_model_len: 4096
    slo: {ttft_ms: 3000, tpot_ms: 80}
  - name: a.b
    model: Qwen/Qwen2.5-7B-Instruct
    requests_per_second: 1
    input_tokens: 500
    output_tokens: 100
    max_model_len: 4096
    slo: {ttft_ms: 3000, tpot_ms: 80}
  - name: A-B
    model: Qwen/Qwen2.5-7B-Instruct
    requests_per_second: 1
    input_tokens: 500
    output_tokens: 100
    max_model_len: 4096
    slo: {ttft_ms: 3000, tpot_ms: 80}
"""


def test_workloads_of_one_dns_name_get_files_and_objects_of_their_own(tmp_path: Path) -> None:
    """QA's plan: three workloads `a_b`, `a.b` and `A-B`, each a DNS label `a-b`. SkyPilot and Compose wrote
    `a-b.*` three times (one file left), and k8s named three Deployments and Services `a-b`, all selecting
    `app: a-b`. Now the first in plan order keeps `a-b` and the others get `-2` and `-3`; each file and object
    keeps its own workload's name in its labels."""
    (tmp_path / "w.yaml").write_text(COLLIDING_WORKLOAD, encoding="utf-8")
    plan_file = tmp_path / "plan.json"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("GPUOPT_TODAY", "2026-11-29")
        solved = CliRunner().invoke(cli, ["solve", str(tmp_path / "w.yaml"), "--format", "json", "-o",
                                          str(plan_file)])
    assert solved.exit_code == 0, solved.output
    order = [d.workload for d in _plan(plan_file).deployments]
    assert sorted(order) == ["A-B", "a.b", "a_b"]
    names = ["a-b", "a-b-2", "a-b-3"]  # by position in the plan
    for target, suffix, workload_of in (
            ("skypilot", "sky.yaml", lambda text: yaml.safe_load(text)["envs"]["GPUOPT_WORKLOAD"]),
            ("compose", "compose.yaml",
             lambda text: yaml.safe_load(text)["services"]["vllm-1"]["labels"]["gpuopt.io/workload"]),
            ("k8s", "yaml", lambda text: next(yaml.safe_load_all(text))["metadata"]["annotations"][
                "gpuopt.io/workload"])):
        out = tmp_path / target
        result = CliRunner().invoke(cli, ["deploy", str(plan_file), "--target", target, "-o", str(out)])
        assert result.exit_code == 0, result.output
        assert result.stderr.splitlines() == [f"wrote {out / f'{n}.{suffix}'}" for n in names]
        assert [workload_of((out / f"{n}.{suffix}").read_text()) for n in names] == order
    deployments = []
    for n, workload in zip(names, order, strict=True):
        deployment, service = yaml.safe_load_all((tmp_path / "k8s" / f"{n}.yaml").read_text())
        assert (deployment["metadata"]["name"], service["metadata"]["name"]) == (n, n)
        assert deployment["spec"]["selector"]["matchLabels"] == service["spec"]["selector"] == {"app": n}
        assert deployment["spec"]["template"]["metadata"]["labels"] == {"app": n}
        assert deployment["spec"]["template"]["metadata"]["annotations"]["gpuopt.io/workload"] == workload
        deployments.append(deployment)
    sky = [yaml.safe_load((tmp_path / "skypilot" / f"{n}.sky.yaml").read_text())["name"] for n in names]
    compose = [yaml.safe_load((tmp_path / "compose" / f"{n}.compose.yaml").read_text())["name"] for n in names]
    assert sky == compose == names
    stream = CliRunner().invoke(cli, ["deploy", str(plan_file), "--target", "k8s"])
    assert [d["metadata"]["name"] for d in yaml.safe_load_all(stream.stdout)] == [
        "a-b", "a-b", "a-b-2", "a-b-2", "a-b-3", "a-b-3"]  # a Deployment and its Service each


@pytest.mark.parametrize(("workloads", "expected"), [
    (["a_b", "a.b", "A-B"], ["a-b", "a-b-2", "a-b-3"]),
    # a suffix never takes a name the plan's own workloads have: A-B skips a-b-2, which is a workload's
    (["a_b", "A-B", "a-b-2"], ["a-b", "a-b-3", "a-b-2"]),
    # one workload's numbered deployments (chat-1, chat-2) against a workload named chat-1
    (["chat", "chat", "Chat_1"], ["chat-1", "chat-2", "chat-1-2"]),
    (["x" * 70, "X" * 70], ["x" * 63, "x" * 61 + "-2"]),
])
def test_artifact_names_are_unique_across_the_plan(plans: dict[str, Path], workloads: list[str],
                                                  expected: list[str]) -> None:
    from gpuopt.reports.deploy.common import artifact_name, artifact_names

    plan = _plan(plans["two"])
    d, w = plan.deployments[0], plan.workloads[0]
    renamed = plan.model_copy(update={
        "deployments": [d.model_copy(update={"workload": name}) for name in workloads],
        "workloads": [w.model_copy(update={"name": name}) for name in dict.fromkeys(workloads)]})
    assert artifact_names(renamed) == expected
    # equal deployments of one workload (a hand-edited plan may repeat one) are two names, not the first twice
    assert [artifact_name(renamed, x) for x in renamed.deployments] == expected


def test_pai_eas_service_names_are_unique_across_the_plan(plans: dict[str, Path]) -> None:
    """PAI-EAS names are the artifact names with `_` for `-` (`a-b-2` is `a_b_2`), and a name shorter than 3
    is padded (`ab` is `ab_svc`): a workload named `ab-svc` beside `ab` takes the next suffix."""
    plan = _on_one_offering(_plan(plans["cn"]), 4, **{"a_b": (1, 4), "a.b": (1, 4), "A-B": (1, 4),
                                                      "ab": (1, 4), "ab-svc": (1, 4)})
    artifacts = render_deploy(plan, "pai-eas", DeployOptions())
    assert [a.filename for a in artifacts] == [
        "a-b.pai-eas.json", "a-b-2.pai-eas.json", "a-b-3.pai-eas.json", "ab.pai-eas.json", "ab-svc.pai-eas.json"]
    assert [json.loads(a.text)["metadata"]["name"] for a in artifacts] == [
        "a_b", "a_b_2", "a_b_3", "ab_svc", "ab_svc_2"]


def test_a_shared_machines_name_avoids_every_deployments_name(plans: dict[str, Path]) -> None:
    """a_b and A-B share a machine (names a-b and a-b-2, the cluster a-b-a-b-2); a workload of that name
    fills a machine of its own and keeps it, so the cluster takes a-b-a-b-2-2."""
    plan = _on_one_offering(_plan(plans["two"]), 4, **{"a_b": (1, 1), "A-B": (1, 1), "a-b-a-b-2": (1, 4)})
    assert [a.filename for a in render_deploy(plan, "skypilot", DeployOptions())] == [
        "a-b-a-b-2-2.sky.yaml", "a-b-a-b-2.sky.yaml"]


def test_deploy_writes_nothing_when_two_artifacts_share_a_name(plans: dict[str, Path], tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """A renderer that made two files of one name (the bug QA found) is an internal error before any file is
    written, never the second file over the first."""
    import gpuopt.reports.deploy as deploy_module
    from gpuopt.reports.deploy.common import Artifact

    twice = [Artifact(deployment="a-b", filename="a-b.sky.yaml", text="first\n"),
             Artifact(deployment="a-b", filename="a-b.sky.yaml", text="second\n")]
    monkeypatch.setattr(deploy_module, "render_deploy", lambda plan, target, opts: twice)
    result = CliRunner().invoke(cli, ["deploy", str(plans["two"]), "--target", "skypilot", "-o",
                                      str(tmp_path / "out")])
    assert result.exit_code == 70
    assert "deploy made two artifacts named a-b.sky.yaml: nothing written" in result.stderr
    assert not (tmp_path / "out").exists()


QA_SKU = "g6.x $(touch /tmp/x) `id` <b>x</b>|y"



def _first_with_sku(plans: dict[str, Path], sku: str) -> Plan:
    """The two-model plan's first deployment alone, its SKU replaced (as an overlay CSV may give any text)."""
    plan = _plan(plans["two"])
    return plan.model_copy(update={"deployments": [plan.deployments[0].model_copy(update={"sku": sku})]})


@pytest.mark.parametrize(("sku", "ok"), [
    ("g6.xlarge", True), ("ecs.gn7i-c8g1.2xlarge", True), ("Standard_NC24ads_A100_v4", True), ("a", True),
    ("x" * 63, True),
    ("x" * 64, False),  # longer than a label value
    ("g6.", False), ("-g6", False),  # a label value starts and ends with a letter or digit
    ("HCCPNV4h (8-GPU)", False),  # a row of the shipped Tencent catalog: a display name, no instance type
    ("p4d.24xlarge\nkind: Secret", False), (QA_SKU, False), ("", False),
])
def test_a_sku_reaches_the_node_selector_only_as_a_label_value(plans: dict[str, Path], sku: str, ok: bool) -> None:
    """The nodeSelector's node.kubernetes.io/instance-type is a label value (IsValidLabelValue: at most 63 of
    [-A-Za-z0-9_.], letters or digits at both ends); an overlay's SKU that is not one made a Deployment the API
    server refuses, after deploy said success."""
    one = _first_with_sku(plans, sku)
    if ok:
        deployment, _ = yaml.safe_load_all(render_deploy(one, "k8s", DeployOptions())[0].text)
        kubernetes_validate.validate(deployment, K8S_VERSION, strict=True)
        assert deployment["spec"]["template"]["spec"]["nodeSelector"] == {"node.kubernetes.io/instance-type": sku}
        return
    with pytest.raises(InputError) as refused:
        render_deploy(one, "k8s", DeployOptions())
    assert refused.value.problems == (
        f"deployment chat (aws {sku}): --target k8s cannot deploy it: its SKU {json.dumps(sku)} is not a Kubernetes "
        "label value (1 to 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit), which "
        "the nodeSelector node.kubernetes.io/instance-type must be: the API server would refuse the Deployment",)


@pytest.mark.parametrize(("sku", "ok"), [
    ("g6.xlarge", True), ("gpu-h100x8-640gb", True), ("x" * 64, True),  # no label: no 63-character limit
    ("g6.", True),  # spelled as instance types are; whether the cloud has it is sky launch's check
    (QA_SKU, False), ("HCCPNV4h (8-GPU)", False), ("p4d.24xlarge\nkind: Secret", False), ("", False),
    ("-g6", False),
])
def test_skypilot_instance_type_is_spelled_as_a_cloud_names_machines(plans: dict[str, Path], sku: str,
                                                                    ok: bool) -> None:
    one = _first_with_sku(plans, sku)
    if ok:
        assert yaml.safe_load(render_deploy(one, "skypilot", DeployOptions())[0].text)["resources"][
            "instance_type"] == sku
        return
    with pytest.raises(InputError) as refused:
        render_deploy(one, "skypilot", DeployOptions())
    assert refused.value.problems == (
        f"deployment chat (aws {sku}): --target skypilot cannot deploy it: its SKU {json.dumps(sku)} is not a cloud "
        "instance type name (letters, digits, '.', '_' and '-', starting with a letter or digit), which SkyPilot's "
        "resources.instance_type must be",)


def test_an_overlay_sku_that_no_target_can_carry_is_one_error_per_deployment(plans: dict[str, Path],
                                                                            tmp_path: Path) -> None:
    """QA's overlay SKU on two deployments: `deploy` exits 2 before writing anything, one `error:` line per
    deployment naming it and the SKU (k8s and skypilot); nothing on stdout. A RunPod SKU is SkyPilot's own
    name from the GPU, so only the AWS one is checked there."""
    plan = _plan(plans["two"])
    assert [d.workload for d in plan.deployments] == ["chat", "chat", "code"]
    kept = [plan.deployments[i].model_copy(update={"sku": QA_SKU}) for i in (0, 2)]
    offerings = {(d.provider, d.service, d.region, d.price_kind, plan.deployments[i].sku)
                 for i, d in zip((0, 2), kept, strict=True)}
    lines = [x.model_copy(update={"sku": QA_SKU}) for x in plan.instances
             if (x.provider, x.service, x.region, x.price_kind, x.sku) in offerings]
    bad = plan.model_copy(update={"deployments": kept, "instances": lines,  # what is kept adds up, as a file must
                                  "total_cost_per_hour": round(sum(d.cost_per_hour for d in kept), 4),
                                  "total_cost_per_month": round(sum(d.cost_per_month for d in kept), 2)})
    path = tmp_path / "plan.json"
    path.write_text(render_json(bad), encoding="utf-8")
    for target, why in (("k8s", "is not a Kubernetes label value"), ("skypilot", "is not a cloud instance type name")):
        result = CliRunner().invoke(cli, ["deploy", str(path), "--target", target, "-o", str(tmp_path / target)])
        assert result.exit_code == 2 and result.stdout == ""
        lines = result.stderr.splitlines()
        assert [line.split(": --target")[0] for line in lines] == [
            f"error: deployment chat (aws {QA_SKU})", f"error: deployment code (aws {QA_SKU})"]
        assert all(f'its SKU "{QA_SKU}" {why}' in line for line in lines)
        assert not (tmp_path / target).exists()
    # a RunPod pod's instance type is SkyPilot's name made from the GPU (2x_H100-NVL_SECURE), never the SKU
    pod = plan.deployments[0].model_copy(update={"provider": "runpod", "service": "pod-secure", "sku": "2x H100 NVL",
                                                 "gpu": "H100-NVL-94GB", "gpus_per_instance": 2, "region": "global",
                                                 "replicas": 1, "gpus_per_replica": 2})
    task = yaml.safe_load(render_deploy(plan.model_copy(update={"deployments": [pod]}), "skypilot",
                                        DeployOptions())[0].text)
    assert task["resources"]["instance_type"] == "2x_H100-NVL_SECURE"


def test_pai_eas_instance_type_is_spelled_as_ecs_names_machines(plans: dict[str, Path]) -> None:
    plan = _plan(plans["cn"])
    bad = plan.model_copy(update={"deployments": [plan.deployments[0].model_copy(update={"sku": QA_SKU})]})
    with pytest.raises(InputError, match=re.escape(f'its SKU "{QA_SKU}" is not a cloud instance type name (letters, '
                                                   "digits, '.', '_' and '-', starting with a letter or digit), "
                                                   "which an ECS instance type must be")):
        render_deploy(bad, "pai-eas", DeployOptions())


def _serving(plan: Plan, *paths: str) -> Plan:
    """The plan's first deployments, each serving the checkpoint at `paths` (as solve writes a local one: the
    path in place of the repository, shell-quoted)."""
    out = []
    for d, path in zip(plan.deployments, paths, strict=False):
        served = d.vllm_command.split()[2]
        out.append(d.model_copy(update={"vllm_command": d.vllm_command.replace(served, shlex.quote(path), 1)}))
    return plan.model_copy(update={"deployments": out})


@pytest.mark.parametrize("target", ["k8s", "pai-eas"])
def test_a_local_checkpoint_is_refused_where_the_target_cannot_see_it(plans: dict[str, Path], target: str) -> None:
    """A pod or an EAS service has no directory of the machine that made the plan, and gpuopt cannot know
    the volume (PVC, OSS, NAS) that would hold it: one error line per deployment, naming its checkpoint."""
    plan = _serving(_plan(plans["cn" if target == "pai-eas" else "two"]), "/data/ckpt/one", "/data/ckpt/two")
    who, instead = {
        "k8s": ("a pod", "use --target skypilot (which uploads it) or compose (which mounts it from the host)"),
        "pai-eas": ("an EAS service", "copy it to OSS or NAS and mount that in the service yourself")}[target]
    with pytest.raises(InputError) as refused:
        render_deploy(plan, target, DeployOptions())
    assert refused.value.problems == tuple(
        f"deployment {d.workload} ({d.provider} {d.sku}): --target {target} cannot deploy it: it serves the local "
        f'checkpoint "{path}", a directory on the machine that made the plan, which {who} cannot see: publish it '
        "to a Hugging Face Hub repository and serve that (the workload's model: {config: <its config.json>, name: "
        f"organisation/repository}} plans from the local config and serves the repository), or {instead}"
        for d, path in zip(plan.deployments, ["/data/ckpt/one", "/data/ckpt/two"], strict=True))
    if target == "k8s":  # a multi-node replica (a LeaderWorkerSet) likewise
        with pytest.raises(InputError, match='it serves the local checkpoint "/data/ckpt/one"'):
            render_deploy(_multi_node(plan), "k8s", DeployOptions())
    # a Hugging Face id is not a path; org/repo/sub (two `/`) is, as solve reads it
    assert render_deploy(_serving(plan, "org/repo"), target, DeployOptions())
    with pytest.raises(InputError, match='local checkpoint "org/repo/sub"'):
        render_deploy(_serving(plan, "org/repo/sub"), target, DeployOptions())


HOSTILE_CHECKPOINT = "/data/my model $(touch pwned): #x"


def test_compose_mounts_a_local_checkpoint_read_only_at_its_path(plans: dict[str, Path]) -> None:
    """Compose runs on a host that may hold the checkpoint: it is bind-mounted read-only at the same path, so
    the plan's command is unchanged. Long syntax (the short form splits on the `:`), create_host_path off (the
    short form would create an empty directory and start vLLM on it); `$` written `$$`, as in the command."""
    plan = _serving(_plan(plans["two"]), HOSTILE_CHECKPOINT)
    [artifact] = render_deploy(plan, "compose", DeployOptions())
    service = yaml.safe_load(artifact.text)["services"]["vllm-1"]
    literal = "/data/my model $$(touch pwned): #x"
    assert service["command"][0] == literal
    assert service["volumes"] == ["hf-cache:/root/.cache/huggingface",
                                  {"type": "bind", "source": literal, "target": literal, "read_only": True,
                                   "bind": {"create_host_path": False}}]
    assert artifact.text.splitlines()[1] == (
        '# the local checkpoint "/data/my model $(touch pwned): #x" is mounted read-only from the host at that '
        "path: copy it there first")
    # a repository mounts nothing
    base = _plan(plans["two"])
    [plain] = render_deploy(base.model_copy(update={"deployments": base.deployments[:1]}), "compose", DeployOptions())
    assert yaml.safe_load(plain.text)["services"]["vllm-1"]["volumes"] == ["hf-cache:/root/.cache/huggingface"]
    assert "local checkpoint" not in plain.text


def test_deployments_sharing_a_host_each_mount_their_own_checkpoint(plans: dict[str, Path]) -> None:
    """alpha's two replicas and beta's one on one 4-GPU host: alpha's services mount /ckpt/alpha, beta's
    /ckpt/beta; SkyPilot's one task uploads both."""
    shared = _on_one_offering(_plan(plans["two"]), 4, alpha=(2, 1), beta=(1, 1))
    plan = _serving(shared, "/ckpt/alpha", "/ckpt/beta")
    [host] = render_deploy(plan, "compose", DeployOptions())
    services = yaml.safe_load(host.text)["services"]
    assert {name: s["volumes"][1]["source"] for name, s in services.items()} == {
        "vllm-1-alpha": "/ckpt/alpha", "vllm-2-alpha": "/ckpt/alpha", "vllm-3-beta": "/ckpt/beta"}
    [task] = render_deploy(plan, "skypilot", DeployOptions())
    assert yaml.safe_load(task.text)["file_mounts"] == {"/ckpt/alpha": "/ckpt/alpha", "/ckpt/beta": "/ckpt/beta"}


def test_skypilot_uploads_a_local_checkpoint_to_its_path(plans: dict[str, Path], tmp_path: Path) -> None:
    """SkyPilot's file_mounts uploads the directory from the machine that runs sky launch to the same path on
    each node (SkyPilot task YAML: remote path -> local path), and the run line serves that path."""
    checkpoint = tmp_path / "ckpt" / "qwen3-32b-fp8"
    checkpoint.mkdir(parents=True)
    plan = _serving(_plan(plans["two"]), str(checkpoint))
    d = plan.deployments[0]
    one = _packed(plan, replicas=1, gpus_per_replica=d.gpus_per_replica, gpus_per_instance=d.gpus_per_replica)
    [artifact] = render_deploy(one, "skypilot", DeployOptions())
    task = yaml.safe_load(artifact.text)
    assert task["file_mounts"] == {str(checkpoint): str(checkpoint)}
    assert shlex.split(task["run"])[:3] == ["vllm", "serve", str(checkpoint)]
    assert (f'# file_mounts uploads the local checkpoint "{checkpoint}" from the machine that runs sky launch to '
            "that path on each node") in artifact.text
    packed = yaml.safe_load(render_deploy(_packed(plan, replicas=2, gpus_per_replica=1, gpus_per_instance=2),
                                          "skypilot", DeployOptions())[0].text)
    assert packed["file_mounts"] == {str(checkpoint): str(checkpoint)}
    assert "file_mounts" not in yaml.safe_load(render_deploy(_plan(plans["two"]), "skypilot",
                                                             DeployOptions())[0].text)
    path = tmp_path / artifact.filename
    path.write_text(artifact.text, encoding="utf-8")
    _validate_with_skypilot([path])
    # and SkyPilot reads it as a task with that mount (sky.Task, as `sky launch` does)
    python = os.environ["GPUOPT_SKYPILOT_PYTHON"]
    done = subprocess.run([python, "-c", "import sys, sky; print(sky.Task.from_yaml(sys.argv[1]).file_mounts)",
                           str(path)], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == repr({str(checkpoint): str(checkpoint)})


@pytest.mark.parametrize(("target", "path", "why"), [
    ("skypilot", HOSTILE_CHECKPOINT,
     'its local checkpoint "/data/my model $(touch pwned): #x" would be uploaded by file_mounts, whose destination '
     "SkyPilot writes into shell commands on the nodes unquoted: move it to a path of letters, digits and "
     "@%+=:,./-_ only and solve again, or publish it to a Hugging Face Hub repository and serve that (the "
     "workload's model: {config: <its config.json>, name: organisation/repository} plans from the local config "
     "and serves the repository)"),
    ("skypilot", "./ckpt",
     'its local checkpoint "./ckpt" is not an absolute path, and the plan does not say what it is relative to: '
     "solve again (the planner writes a local checkpoint as its absolute path)"),
    ("compose", "~/ckpt",
     'its local checkpoint "~/ckpt" is not an absolute path, and the plan does not say what it is relative to: '
     "solve again (the planner writes a local checkpoint as its absolute path)"),
])
def test_a_local_checkpoint_the_target_cannot_carry_is_refused(plans: dict[str, Path], target: str, path: str,
                                                              why: str) -> None:
    plan = _serving(_plan(plans["two"]), path)
    d = plan.deployments[0]
    with pytest.raises(InputError) as refused:
        render_deploy(plan, target, DeployOptions())
    assert refused.value.problems == (f"deployment chat ({d.provider} {d.sku}): --target {target} cannot deploy "
                                      f"it: {why}",)


def test_a_workload_on_a_local_checkpoint_from_solve_to_deploy(tmp_path: Path) -> None:
    """QA's case end to end: a workload whose model is a local checkpoint directory (here with a space in
    its name) is solved to `vllm serve <its absolute path>`; k8s refuses it (exit 2, one line, nothing
    written), compose mounts it and skypilot uploads it."""
    checkpoint = tmp_path / "local ckpt"
    checkpoint.mkdir()
    fixture = Path(__file__).parent / "fixtures" / "model_configs" / "Qwen__Qwen3-32B-FP8.json"
    (checkpoint / "config.json").write_text(fixture.read_text(encoding="utf-8"), encoding="utf-8")
    workload = tmp_path / "w.yaml"
    workload.write_text(yaml.safe_dump({
        "schema_version": 1, "providers": ["aws"], "workloads": [{
            "name": "loc", "model": str(checkpoint), "requests_per_second": 1, "input_tokens": 1000,
            "output_tokens": 200, "max_model_len": 8192}]}), encoding="utf-8")
    plan_file = tmp_path / "plan.json"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("GPUOPT_TODAY", "2026-11-29")
        solved = CliRunner().invoke(cli, ["solve", str(workload), "--format", "json", "-o", str(plan_file)])
    assert solved.exit_code == 0, solved.output
    [d] = _plan(plan_file).deployments
    assert shlex.split(d.vllm_command)[:3] == ["vllm", "serve", str(checkpoint)]
    k8s = CliRunner().invoke(cli, ["deploy", str(plan_file), "--target", "k8s", "-o", str(tmp_path / "k8s")])
    assert k8s.exit_code == 2 and k8s.stdout == "" and not (tmp_path / "k8s").exists()
    [line] = k8s.stderr.splitlines()
    assert line.startswith(f'error: deployment loc (aws {d.sku}): --target k8s cannot deploy it: it serves the '
                           f'local checkpoint "{checkpoint}", a directory on the machine that made the plan')
    compose = CliRunner().invoke(cli, ["deploy", str(plan_file), "--target", "compose"])
    assert compose.exit_code == 0, compose.output
    mount = yaml.safe_load(compose.stdout)["services"]["vllm-1"]["volumes"][1]
    assert (mount["source"], mount["target"], mount["read_only"]) == (str(checkpoint), str(checkpoint), True)
    sky = CliRunner().invoke(cli, ["deploy", str(plan_file), "--target", "skypilot"])
    assert sky.exit_code == 2  # a space: SkyPilot would split it in its shell commands on the node
    assert f'its local checkpoint "{checkpoint}" would be uploaded by file_mounts' in sky.stderr


def test_each_target_takes_only_machines_it_can_start(plans: dict[str, Path]) -> None:
    """QA: --target pai-eas refused the PAI-EAS offering itself, while k8s and compose wrote a TI-ONE spec into a
    nodeSelector and a Compose host; compose took RunPod pods (containers without Docker); SkyPilot pinned
    cn-north-1, which its AWS catalog does not have."""
    cn = _plan(plans["cn"])
    d = cn.deployments[0]
    eas = cn.model_copy(update={"deployments": [d.model_copy(update={"service": "pai-eas"})]})
    [artifact] = render_deploy(eas, "pai-eas", DeployOptions())
    assert json.loads(artifact.text)["cloud"]["computing"]["instance_type"] == d.sku
    for target in ("k8s", "compose", "skypilot"):
        with pytest.raises(InputError, match="managed platform's, not a machine.*through PAI-EAS"):
            render_deploy(eas, target, DeployOptions())
    tione = cn.model_copy(update={"deployments": [d.model_copy(update={"provider": "tencent", "service": "ti-one",
                                                                       "sku": "TI.GN7.8XLARGE128.POST"})]})
    for target in ("k8s", "compose", "pai-eas"):
        with pytest.raises(InputError, match="tencent|TI-ONE"):
            render_deploy(tione, target, DeployOptions())
    two = _plan(plans["two"])
    pod = two.model_copy(update={"deployments": [two.deployments[0].model_copy(update={
        "provider": "runpod", "service": "pod-secure", "sku": "1x H100 NVL", "gpu": "H100-NVL-94GB",
        "gpus_per_instance": 1, "gpus_per_replica": 1, "tensor_parallel": 1, "region": "global"})]})
    with pytest.raises(InputError, match="is itself a container, with no Docker daemon"):
        render_deploy(pod, "compose", DeployOptions())
    china = two.model_copy(update={"deployments": [two.deployments[0].model_copy(update={"region": "cn-north-1"})]})
    with pytest.raises(InputError, match="SkyPilot's AWS cloud has no China regions"):
        render_deploy(china, "skypilot", DeployOptions())


def test_a_note_is_cut_at_the_first_hash_outside_quotes() -> None:
    """QA: a checkpoint folder `llama  # v2` (quoted in the plan's command) was cut at its "  # " and the
    command did not parse; the plan's own trailing note still goes."""
    from gpuopt.reports.deploy.common import _without_note

    assert _without_note("vllm serve '/m/llama  # v2' --tp 1  # a note") == "vllm serve '/m/llama  # v2' --tp 1"
    assert _without_note("vllm serve org/m --tp 1  # note  # more") == "vllm serve org/m --tp 1"
    assert _without_note("vllm serve a#b --tp 1") == "vllm serve a#b --tp 1"
    assert _without_note("vllm serve 'open  # never closed") == "vllm serve 'open  # never closed"


def test_a_global_pod_is_pinned_where_the_residency_allows(plans: dict[str, Path], tmp_path: Path) -> None:
    """QA: the plan said a RunPod pod meets residency 'us' only in a US data centre, and the SkyPilot task let
    SkyPilot pick any region. SkyPilot's RunPod regions are country codes: one country is `region`, several
    `any_of`; a pinned machine SkyPilot cannot pin is refused."""
    two = _plan(plans["two"])
    d = two.deployments[0].model_copy(update={
        "provider": "runpod", "service": "pod-secure", "sku": "1x H100 NVL", "gpu": "H100-NVL-94GB",
        "gpus_per_instance": 1, "gpus_per_replica": 1, "tensor_parallel": 1, "region": "global", "replicas": 1})
    paths = []
    for countries, expected in ((["US"], {"region": "US"}),
                                (["CZ", "NL", "XX"], {"any_of": [{"region": "CZ"}, {"region": "NL"}]})):
        plan = two.model_copy(update={"deployments": [d.model_copy(update={"pinned_countries": countries})]})
        [artifact] = render_deploy(plan, "skypilot", DeployOptions())
        resources = yaml.safe_load(artifact.text)["resources"]
        assert {k: v for k, v in resources.items() if k in ("region", "any_of")} == expected
        paths.append(tmp_path / f"{len(paths)}.sky.yaml")
        paths[-1].write_text(artifact.text, encoding="utf-8")
    _validate_with_skypilot(paths)
    droplet = d.model_copy(update={"provider": "digitalocean", "service": "droplet", "sku": "gpu-h100x1-80gb",
                                   "gpu": "H100-SXM-80GB", "region": "unknown", "pinned_countries": ["US"]})
    with pytest.raises(InputError, match="only if this digitalocean machine runs in a data centre in US"):
        render_deploy(two.model_copy(update={"deployments": [droplet]}), "skypilot", DeployOptions())
    # the plan records the countries where its residency needs them, and not otherwise
    assert two.deployments[0].pinned_countries is None and "pinned_countries" not in plans["two"].read_text()


def test_a_plan_saved_before_pins_were_recorded_is_not_deployed_unpinned(plans: dict[str, Path]) -> None:
    """Review: a plan written before deployments[].pinned_countries says in its warnings that a pod must be pinned
    to a US data centre, and the SkyPilot task let SkyPilot pick any region, exit 0."""
    two = _plan(plans["two"])
    d = two.deployments[0].model_copy(update={
        "provider": "runpod", "service": "pod-secure", "sku": "1x H100 NVL", "gpu": "H100-NVL-94GB",
        "gpus_per_instance": 1, "gpus_per_replica": 1, "tensor_parallel": 1, "region": "global", "replicas": 1})
    note = "runpod 1x H100 NVL (global) meets residency 'us' only if pinned to a data centre in US: choose one there"
    old = two.model_copy(update={"deployments": [d], "warnings": [*two.warnings, note]})
    with pytest.raises(InputError, match="saved before plans recorded where: solve again"):
        render_deploy(old, "skypilot", DeployOptions())
    recorded = old.model_copy(update={"deployments": [d.model_copy(update={"pinned_countries": ["US"]})]})
    assert yaml.safe_load(render_deploy(recorded, "skypilot", DeployOptions())[0].text)["resources"]["region"] == "US"


def test_skypilots_runpod_regions_are_its_own() -> None:
    from gpuopt.reports.deploy.skypilot import RUNPOD_REGIONS

    python = os.environ.get("GPUOPT_SKYPILOT_PYTHON")
    if not python:
        pytest.skip("GPUOPT_SKYPILOT_PYTHON is not set (.ci/run sets it)")
    # read from the module's source: importing it needs the runpod SDK, which SkyPilot's base install lacks
    script = ("import ast, importlib.util\n"
              "path = importlib.util.find_spec('sky.catalog.data_fetchers.fetch_runpod').origin\n"
              "tree = ast.parse(open(path).read())\n"
              "zones = next(n.value for n in tree.body if isinstance(n, ast.Assign)\n"
              "             and getattr(n.targets[0], 'id', '') == 'REGION_ZONES')\n"
              "print(' '.join(ast.literal_eval(zones)))\n")
    done = subprocess.run([python, "-c", script], capture_output=True, text=True, check=True)
    assert tuple(done.stdout.split()) == RUNPOD_REGIONS


def test_a_price_kind_the_artifact_cannot_buy_is_said_in_its_header(plans: dict[str, Path]) -> None:
    """QA: a spot plan's Kubernetes pods landed on any node of the type and a capacity-block plan's SkyPilot task
    launched on demand, under labels claiming the plan's price. SkyPilot asks for spot itself (use_spot)."""
    two = _plan(plans["two"])
    spot = two.model_copy(update={"deployments": [two.deployments[0].model_copy(update={"price_kind": "spot"})]})
    [k8s] = render_deploy(spot, "k8s", DeployOptions())
    assert k8s.text.startswith("# price kind spot: the plan's price holds only on spot capacity, which this k8s "
                               "artifact does not ask for: schedule these pods on spot nodes")
    assert [doc["kind"] for doc in yaml.safe_load_all(k8s.text)] == ["Deployment", "Service"]
    [sky] = render_deploy(spot, "skypilot", DeployOptions())
    assert "# price kind" not in sky.text and yaml.safe_load(sky.text)["resources"]["use_spot"] is True
    blocked = two.deployments[0].model_copy(update={"price_kind": "capacity-block"})
    block = two.model_copy(update={"deployments": [blocked]})
    for target in ("k8s", "skypilot", "compose"):
        [artifact] = render_deploy(block, target, DeployOptions())
        assert "# price kind capacity-block: the plan's price holds only on capacity-block capacity" in artifact.text
    [compose] = render_deploy(spot, "compose", DeployOptions())
    assert "# price kind spot: the plan's price holds only on spot capacity, which this compose artifact does not " \
           "ask for: run it on hosts bought as spot instances" in compose.text
    [plain] = render_deploy(two.model_copy(update={"deployments": two.deployments[:1]}), "k8s", DeployOptions())
    assert "# price kind" not in plain.text
