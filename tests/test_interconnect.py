"""The offering's link reaches both models the planner evaluates a shape with: the latency model's all-reduce
terms (per-call latency and link bandwidth) and the memory model's non-torch memory (custom all-reduce buffers
only over NVLink)."""

from __future__ import annotations

import pytest

from gpuopt.hardware import get_gpu
from gpuopt.inputs.workload import Slo, Workload
from gpuopt.physics import latency
from gpuopt.physics.architecture import get_model
from gpuopt.physics.vllm_profile import get_profile
from gpuopt.planner.candidates import Evaluator, Shape

LLAMA8 = "meta-llama/Llama-3.1-8B-Instruct"
H100 = "H100-SXM-80GB"


def evaluate(link: str):
    # a TPOT target no replica meets: the rejection carries the lone request's TPOT (ms_over + 1 ms)
    w = Workload(name="w", model=LLAMA8, requests_per_second=1, input_tokens=1000, output_tokens=200,
                 slo=Slo(tpot_ms=1.0))
    return Evaluator(w, get_model(LLAMA8), 8192, None)(Shape(H100, link, 4, 1, "bf16", "auto"))


def test_tp4_over_pcie_has_a_higher_tpot_by_the_all_reduce_terms() -> None:
    pcie, nvlink = evaluate("pcie"), evaluate("nvlink")
    assert pcie.reason_kind == nvlink.reason_kind == "tpot"
    cal, gpu = latency.calibration(), get_gpu(H100)
    # a batch-1 decode step runs 2 all-reduces per layer over 32 layers; each costs the link's call latency,
    # plus a ring all-reduce of one token's hidden state: 2 (tp - 1) / tp x 4096 x 2 B = 12,288 B over the link
    calls = 2 * 32
    latency_s = calls * (cal.allreduce_latency_us["pcie"] - cal.allreduce_latency_us["nvlink"]) * 1e-6
    moved = calls * 2 * 3 / 4 * 4096 * 2  # 786,432 B per step
    pcie_bytes_per_s = cal.pcie_gb_s[str(gpu.pcie_gen)] * 1e9  # Gen5 x16, per direction
    nvlink_bytes_per_s = gpu.nvlink_gb_s * 1e9 / 2  # datasheet figure is bidirectional
    bandwidth_s = moved / pcie_bytes_per_s - moved / nvlink_bytes_per_s
    assert pcie.ms_over - nvlink.ms_over == pytest.approx((latency_s + bandwidth_s) * 1e3, rel=1e-9)
    assert pcie.ms_over > nvlink.ms_over


def test_tp4_over_pcie_has_no_custom_all_reduce_buffers() -> None:
    pcie, nvlink = evaluate("pcie"), evaluate("nvlink")
    nt = get_profile(None).non_torch
    assert pcie.memory.config.interconnect == "pcie" and nvlink.memory.config.interconnect == "nvlink"
    assert pcie.memory.ranks[0].non_torch_gib == nt.tp_pcie_gib
    assert nvlink.memory.ranks[0].non_torch_gib == nt.tp_multi_gib
    # the rest of the budget is the same: PCIe leaves the difference to the KV cache
    assert pcie.memory.ranks[0].kv_cache_gib - nvlink.memory.ranks[0].kv_cache_gib == pytest.approx(
        nt.tp_multi_gib - (nt.tp_pcie_gib or nt.tp1_gib))
