"""The offering's link reaches both models the planner evaluates a shape with: the latency model's all-reduce
terms (per-call latency and link bandwidth) and the memory model's non-torch memory (custom all-reduce buffers
only over NVLink)."""

from __future__ import annotations

import pytest

from gpuopt.hardware import get_gpu
from gpuopt.inputs.workload import Slo, Workload
from gpuopt.physics import latency, latency_factors
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
    cal, gpu = latency_factors.calibration(), get_gpu(H100)
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


@pytest.mark.parametrize("gpu", ["H100-PCIE-80GB", "A100-PCIE-80GB", "RTX-A6000-48GB", "A40-48GB", "A30-24GB"])
def test_a_bridged_card_defaults_to_pcie_and_nvlink_joins_only_its_pair(gpu: str) -> None:
    """data/nvlink_bridges.csv: these PCIe boards reach NVLink through a 2-card bridge, which the GPU table's
    notes say clouds rarely fit; an SXM board's NVLink is its baseboard's."""
    spec = get_gpu(gpu)
    assert spec.nvlink_gb_s and spec.nvlink_bridge_gpus == 2
    assert spec.default_link == "pcie"
    assert spec.nvlink_joins(2) and not spec.nvlink_joins(4)
    sxm = get_gpu(H100)
    assert sxm.nvlink_bridge_gpus is None and sxm.default_link == "nvlink" and sxm.nvlink_joins(8)
    assert get_gpu("L40S-48GB").default_link == "pcie" and not get_gpu("L40S-48GB").nvlink_joins(2)


def test_fit_refuses_nvlink_across_more_cards_than_a_bridge_joins() -> None:
    from click.testing import CliRunner

    from gpuopt.cli.main import cli

    args = ["fit", "--model", "meta-llama/Llama-3.1-70B-Instruct", "--gpu", "H100-PCIE-80GB", "--max-model-len",
            "8192", "--input-tokens", "4000", "--output-tokens", "200", "--json"]
    runner = CliRunner()
    refused = runner.invoke(cli, [*args, "--tp", "4", "--interconnect", "nvlink"])
    assert refused.exit_code == 2
    assert "a bridge between 2 cards" in refused.output
    default, pcie = (runner.invoke(cli, [*args, "--tp", "4", *extra]) for extra in ([], ["--interconnect", "pcie"]))
    assert default.exit_code == pcie.exit_code == 0
    assert default.stdout == pcie.stdout  # no flag: the 4 cards talk over PCIe
    bridged = runner.invoke(cli, [*args, "--tp", "2", "--interconnect", "nvlink"])
    unbridged = runner.invoke(cli, [*args, "--tp", "2"])
    assert bridged.exit_code == unbridged.exit_code == 0
    import json
    assert json.loads(bridged.stdout)["tpot_ms"] < json.loads(unbridged.stdout)["tpot_ms"]


@pytest.mark.parametrize("tp, links", [(2, 1), (4, 3), (8, 7)])
def test_infinity_fabric_gives_a_tp_group_the_links_to_its_members(tp: int, links: int) -> None:
    """MI300X: 896 GB/s over 7 point-to-point links to the peers of an 8-GPU board (gpus.csv notes), no switch:
    TP 2 all-reduces over one link, 64 GB/s a direction; an NVSwitch H100 has its 450 GB/s at any TP."""
    from gpuopt.physics.memory import estimate
    from gpuopt.physics.serving_config import ServingConfig

    arch = get_model(LLAMA8)
    for gpu, expected in (("MI300X-192GB", 896e9 / 2 * links / 7), (H100, 900e9 / 2)):
        spec = get_gpu(gpu)
        mem = estimate(arch, spec, ServingConfig(tensor_parallel=tp, max_model_len=8192, interconnect="nvlink"))
        assert latency.build_replica(arch, spec, mem).link_bytes_per_s == pytest.approx(expected)
