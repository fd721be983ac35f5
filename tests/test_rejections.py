"""Why candidates are rejected is typed from the physics to the plan: the latency model raises which target
a lone request misses and by how much, and the planner reads those fields, never the message."""

from __future__ import annotations

import pytest

from gpuopt.errors import InfeasibleError, SloUnreachableError
from gpuopt.hardware import get_gpu
from gpuopt.inputs.workload import Slo, Workload
from gpuopt.physics import latency
from gpuopt.physics.architecture import get_model
from gpuopt.physics.memory import ServingConfig, estimate
from gpuopt.planner.candidates import Evaluation, Evaluator, Shape
from gpuopt.vocabulary import REJECTION_KINDS

LLAMA8 = "meta-llama/Llama-3.1-8B-Instruct"
H100 = "H100-SXM-80GB"


def lone_request() -> latency.LoadPoint:
    arch, gpu = get_model(LLAMA8), get_gpu(H100)
    replica = latency.build_replica(arch, gpu, estimate(arch, gpu, ServingConfig(max_model_len=8192)))
    return latency.zero_load(replica, 1000, 200)


@pytest.mark.parametrize("ttft_ms, tpot_ms, target", [(1.0, None, "ttft"), (None, 1.0, "tpot"), (1.0, 1.0, "ttft")])
def test_max_rate_says_which_target_a_lone_request_misses_and_by_how_much(ttft_ms, tpot_ms, target):
    arch, gpu = get_model(LLAMA8), get_gpu(H100)
    replica = latency.build_replica(arch, gpu, estimate(arch, gpu, ServingConfig(max_model_len=8192)))
    alone = latency.zero_load(replica, 1000, 200)
    with pytest.raises(SloUnreachableError) as info:
        latency.max_rate(replica, 1000, 200, ttft_ms, tpot_ms)
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
