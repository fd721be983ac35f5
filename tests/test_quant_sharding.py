"""Which TP sizes vLLM shards a block-FP8 MoE checkpoint's experts over (physics/quant_sharding.py): whole
128 x 128 blocks per GPU before 0.29, scales refined to gcd(128, slice, hidden) >= 32 from 0.29."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from gpuopt.cli.main import cli
from gpuopt.physics import quant_sharding
from gpuopt.physics.resolution import resolve_model

QWEN235 = "Qwen/Qwen3-235B-A22B-FP8"  # 128 experts of 1,536, hidden 4,096
GLM_AIR = "zai-org/GLM-4.5-Air-FP8"  # 128 experts of 1,408, hidden 4,096
MINIMAX = "MiniMaxAI/MiniMax-M2"  # natively block FP8: 1,536, hidden 3,072


@pytest.mark.parametrize(("model", "precision", "tp", "dp", "ep", "release", "slice_"), [
    (QWEN235, "fp8", 8, 1, False, "0.28", 192),  # 1,536 / 8 = 192: not whole blocks, no refinement yet
    (QWEN235, "fp8", 8, 1, False, "0.29", None),  # gcd(128, 192, 4,096) = 64 >= 32: refined
    (QWEN235, "fp8", 4, 1, False, "0.28", None),  # 384 = 3 blocks
    (QWEN235, "fp8", 4, 2, False, "0.28", 192),  # experts split over TP x DP = 8
    (QWEN235, "fp8", 8, 1, True, "0.28", None),  # expert parallel: whole experts, 1,536 = 12 blocks
    (GLM_AIR, "fp8", 8, 1, False, "0.33", 176),  # gcd(128, 176, 4,096) = 16 < 32
    (GLM_AIR, "fp8", 4, 1, False, "0.33", None),  # gcd(128, 352, 4,096) = 32
    (GLM_AIR, "fp8", 4, 1, False, "0.28", 352),
    (MINIMAX, "fp8", 8, 1, False, "0.27", 192),  # the native FP8 checkpoint
    (MINIMAX, "bf16", 8, 1, False, "0.27", None),  # not block FP8: nothing to align
    ("Qwen/Qwen3-32B-FP8", "fp8", 16, 1, False, "0.28", None),  # dense: no experts to split
    ("Qwen/Qwen3-30B-A3B", "bf16", 16, 1, False, "0.28", None),  # unquantized MoE
])
def test_expert_slices_must_hold_whole_fp8_blocks(model: str, precision: str, tp: int, dp: int, ep: bool,
                                                  release: str, slice_: int | None) -> None:
    why = quant_sharding.tp_problem(resolve_model(model), precision, tp, dp, ep, release)  # type: ignore[arg-type]
    if slice_ is None:
        assert why is None
    else:
        assert why is not None and f"= {slice_:,}, is not a multiple of 128" in why


def test_fit_refuses_the_tp_vllm_cannot_shard_and_names_the_way_out() -> None:
    args = ["fit", "--model", QWEN235, "--gpu", "H100-SXM-80GB", "--tp", "8", "--max-model-len", "8192"]
    refused = CliRunner().invoke(cli, [*args, "--vllm-version", "0.28"])
    assert refused.exit_code == 2
    assert refused.stderr.strip().endswith(
        "error: --tp 8: Qwen/Qwen3-235B-A22B-FP8's 128 x 128 FP8 blocks: each expert's intermediate size, 1,536 / "
        "TP 8 = 192, is not a multiple of 128 (vLLM 0.28 needs whole blocks (it refines them from 0.29)); use a TP "
        "whose slice is, or --enable-expert-parallel")
    assert CliRunner().invoke(cli, [*args, "--vllm-version", "0.28", "--enable-expert-parallel"]).exit_code == 0
    assert CliRunner().invoke(cli, [*args, "--vllm-version", "0.29"]).exit_code == 0
