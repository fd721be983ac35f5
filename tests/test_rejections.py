"""Why candidates are rejected is typed from the physics to the plan: the latency model raises which target
a lone request misses and by how much, and the planner reads those fields, never the message."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from gpuopt.cli.main import cli
from gpuopt.errors import InfeasibleError, SloUnreachableError
from gpuopt.hardware import get_gpu
from gpuopt.inputs.workload import Slo, Workload
from gpuopt.physics import analytic_load, latency
from gpuopt.physics.architecture import get_model
from gpuopt.physics.checkpoint_table import TABLE
from gpuopt.physics.memory import estimate
from gpuopt.physics.resolution import from_known_checkpoint
from gpuopt.physics.serving_config import ServingConfig
from gpuopt.planner.candidates import Evaluation, Evaluator, Shape
from gpuopt.vocabulary import REJECTION_KINDS

LLAMA8 = "meta-llama/Llama-3.1-8B-Instruct"
H100 = "H100-SXM-80GB"


def lone_request() -> analytic_load.LoadPoint:
    arch, gpu = get_model(LLAMA8), get_gpu(H100)
    replica = latency.build_replica(arch, gpu, estimate(arch, gpu, ServingConfig(max_model_len=8192)))
    return analytic_load.zero_load(replica, 1000, 200)


@pytest.mark.parametrize("ttft_ms, tpot_ms, target", [(1.0, None, "ttft"), (None, 1.0, "tpot"), (1.0, 1.0, "ttft")])
def test_max_rate_says_which_target_a_lone_request_misses_and_by_how_much(ttft_ms, tpot_ms, target):
    arch, gpu = get_model(LLAMA8), get_gpu(H100)
    replica = latency.build_replica(arch, gpu, estimate(arch, gpu, ServingConfig(max_model_len=8192)))
    alone = analytic_load.zero_load(replica, 1000, 200)
    with pytest.raises(SloUnreachableError) as info:
        analytic_load.max_rate(replica, 1000, 200, ttft_ms, tpot_ms)
    miss = info.value
    lone = alone.ttft_ms if target == "ttft" else alone.tpot_ms
    assert (miss.target, miss.target_ms, miss.lone_ms) == (target, 1.0, lone)  # TTFT is checked first
    assert miss.ms_over == pytest.approx(lone - 1.0)
    assert isinstance(miss, InfeasibleError) and miss.exit_code == 1  # still an infeasible answer (exit 1)


@pytest.mark.parametrize("slo, kind", [(Slo(ttft_ms=1.0), "ttft"), (Slo(tpot_ms=1.0), "tpot")])
def test_the_candidate_keeps_the_kind_and_the_margin(slo, kind):
    w = Workload(name="w", model=LLAMA8, requests_per_second=1, input_tokens=1000, output_tokens=200, slo=slo)
    evaluate = Evaluator(w, get_model(LLAMA8), 8192, None)
    ev = evaluate(Shape(H100, "pcie", 1, 1, "bf16", "auto"))
    alone = lone_request()
    assert (ev.feasible, ev.reason_kind) == (False, kind)
    target = slo.ttft_ms if kind == "ttft" else slo.tpot_ms
    assert ev.ms_over == pytest.approx((alone.ttft_ms if kind == "ttft" else alone.tpot_ms) - target)


def test_a_rejection_always_has_a_kind():
    with pytest.raises(ValueError, match="reason kind"):
        Evaluation(False, "no room", None)
    assert Evaluation(True, None, None).feasible
    assert {"fit", "ttft", "tpot", "capacity", "residency"} <= set(REJECTION_KINDS)


QWEN32_GPTQ = "Qwen/Qwen2.5-32B-Instruct-GPTQ-Int4"  # quantized_checkpoints.csv: avoid-multi-gpu (garbled output)
QWEN72_GPTQ = "Qwen/Qwen2.5-72B-Instruct-GPTQ-Int4"  # quantized_checkpoints.csv: avoid (may not stop generating)


def test_the_planner_never_offers_a_multi_gpu_replica_of_an_avoid_multi_gpu_checkpoint():
    arch = from_known_checkpoint(QWEN32_GPTQ)
    assert arch is not None
    w = Workload(name="w", model=QWEN32_GPTQ, requests_per_second=1, input_tokens=1000, output_tokens=200,
                 slo=Slo(ttft_ms=5000, tpot_ms=200))
    evaluate = Evaluator(w, arch, 8192, None)
    for tp, pp in ((2, 1), (1, 2)):
        ev = evaluate(Shape(H100, "nvlink", tp, pp, "int4", "auto"))
        assert (ev.feasible, ev.reason_kind) == (False, "fit")
        assert ev.reason == (f"{QWEN32_GPTQ} is marked avoid-multi-gpu in {TABLE}: garbled output on multi-GPU "
                             "vLLM (Qwen docs gptq.md known issues); this shape has 2 GPUs per replica, serve it "
                             "on one")
    assert evaluate(Shape(H100, "pcie", 1, 1, "int4", "auto")).feasible  # one GPU: the table has nothing against it


def test_fit_warns_about_a_checkpoint_the_table_marks_avoid():
    """The warning is the estimate's: fit prints it on stderr and carries it in its JSON `warnings`."""
    bad, multi = from_known_checkpoint(QWEN72_GPTQ), from_known_checkpoint(QWEN32_GPTQ)
    assert bad is not None and multi is not None
    gpu = get_gpu(H100)
    avoid = f"{QWEN72_GPTQ} is marked avoid in {TABLE}: may not stop generating (Qwen docs gptq.md known issues)"
    assert avoid in estimate(bad, gpu, ServingConfig(max_model_len=8192)).warnings
    one = estimate(multi, gpu, ServingConfig(max_model_len=8192)).warnings
    two = estimate(multi, gpu, ServingConfig(max_model_len=8192, tensor_parallel=2)).warnings
    assert not any("avoid" in w for w in one)
    assert [w for w in two if "avoid" in w] == [f"{QWEN32_GPTQ} is marked avoid-multi-gpu in {TABLE}: garbled output "
                                                "on multi-GPU vLLM (Qwen docs gptq.md known issues); this shape has 2 "
                                                "GPUs per replica, serve it on one"]


def test_a_plan_for_an_avoid_checkpoint_warns(tmp_path):
    workload = tmp_path / "w.yaml"
    workload.write_text(f"schema_version: 1\nproviders: [runpod]\nworkloads:\n  - name: w\n    model: {QWEN72_GPTQ}\n"
                        "    requests_per_second: 1\n    input_tokens: 1000\n    output_tokens: 200\n"
                        "    max_model_len: 8192\n    slo: {ttft_ms: 5000, tpot_ms: 200}\n")
    result = CliRunner().invoke(cli, ["solve", str(workload), "--format", "json", "--candidates", "none"])
    assert result.exit_code == 0, result.output
    assert (f"{QWEN72_GPTQ} is marked avoid in {TABLE}: may not stop generating (Qwen docs gptq.md known issues)"
            in json.loads(result.stdout)["warnings"])


def test_a_model_only_pods_joined_together_would_hold_is_explained_as_such(tmp_path):
    """Review: DeepSeek-V3 in BF16 over RunPod fits across two 8-GPU pods, which RunPod does not join into one
    server; the refusal was filed as a provider (policy) rejection and the explanation blamed memory ("8x B200 is
    0.38 GiB short"). The binding constraint is now the multi-node one, after every check those shapes passed."""
    path = tmp_path / "ds.yaml"
    path.write_text("schema_version: 1\nworkloads:\n  - name: big\n    model: deepseek-ai/DeepSeek-V3\n"
                    "    requests_per_second: 1\n    input_tokens: 1000\n    output_tokens: 200\n"
                    "    max_model_len: 8192\n    precisions: [bf16]\n")
    result = CliRunner().invoke(cli, ["solve", str(path), "--provider", "runpod", "--format", "json"])
    assert result.exit_code == 1
    lines = json.loads(result.stdout)["explanation"]
    assert lines[1].startswith("workload big: binding constraint: multi-node (stopped ")
    assert lines[1].endswith("every one that passed precision, fit, ttft, tpot and capacity)")
