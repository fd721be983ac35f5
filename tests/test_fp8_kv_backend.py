"""Where vLLM has an attention backend for an fp8 KV cache below Ada (physics/fp8_kv_backend.py): the rules read
in the 0.11-0.34 wheels, checked shape by shape, then through `fit` and the planner."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from gpuopt.cli.main import cli
from gpuopt.hardware import get_gpu
from gpuopt.inputs.workload import Workload
from gpuopt.physics import fp8_kv_backend
from gpuopt.physics.architecture import get_model
from gpuopt.planner.candidates import Evaluator, Shape

LLAMA8 = "meta-llama/Llama-3.1-8B-Instruct"  # head size 128, no sinks


@pytest.mark.parametrize(("model", "gpu", "release", "refused_because"), [
    # Hopper, Ada, Blackwell: Triton reads fp8e4nv natively (FA3 / FlashInfer too)
    (LLAMA8, "H100-SXM-80GB", "0.33", None), (LLAMA8, "L4-24GB", "0.11", None), (LLAMA8, "B200-180GB", "0.33", None),
    # Ampere: FlashInfer takes it from 0.12 (priority list); 0.11 sent it to Triton
    (LLAMA8, "A100-SXM-80GB", "0.33", None), (LLAMA8, "A10-24GB", "0.12", None),
    (LLAMA8, "A100-SXM-80GB", "0.11", "FlashInfer only when asked for"),
    # Turing: FlashInfer's floor was SM75 until 0.23, SM80 from 0.24
    (LLAMA8, "T4-16GB", "0.23", None), (LLAMA8, "T4-16GB", "0.24", "FlashInfer needs sm80+"),
    # Volta: never
    (LLAMA8, "V100-32GB", "0.19", "FlashInfer needs sm75+"), (LLAMA8, "V100-32GB", "0.33", "FlashInfer needs sm80+"),
    # FlashInfer's head sizes: Phi-3's 96 is not one of them
    ("microsoft/Phi-3-mini-4k-instruct", "A100-SXM-80GB", "0.33", "head sizes 64, 128, 256, 512, not 96"),
    ("microsoft/Phi-3-mini-4k-instruct", "A100-SXM-80GB", "0.21", "head sizes 64, 128, 256, not 96"),
    # attention sinks (gpt-oss) only on Hopper / Blackwell
    ("openai/gpt-oss-20b", "A100-SXM-80GB", "0.33", "attention sinks"),
    ("openai/gpt-oss-20b", "H100-SXM-80GB", "0.33", None),
    # MLA: Triton MLA is the only backend below Hopper
    ("deepseek-ai/DeepSeek-V2-Lite-Chat", "A100-SXM-80GB", "0.33", "MLA has no FlashInfer backend"),
    ("deepseek-ai/DeepSeek-V2-Lite-Chat", "L40S-48GB", "0.33", None),
    # ROCm is not judged here
    (LLAMA8, "MI300X-192GB", "0.33", None),
])
def test_fp8_kv_cache_backends(model: str, gpu: str, release: str, refused_because: str | None) -> None:
    why = fp8_kv_backend.unsupported(get_model(model), get_gpu(gpu), "fp8", release)
    if refused_because is None:
        assert why is None
    else:
        assert why is not None and refused_because in why


@pytest.mark.parametrize("gpu", ["V100-32GB", "T4-16GB", "A100-SXM-80GB"])
def test_the_model_dtype_cache_always_has_a_backend(gpu: str) -> None:
    assert fp8_kv_backend.unsupported(get_model("openai/gpt-oss-20b"), get_gpu(gpu), "auto", "0.11") is None


def test_fit_refuses_an_fp8_cache_vllm_cannot_start_and_says_what_to_use() -> None:
    result = CliRunner().invoke(cli, ["fit", "--model", LLAMA8, "--gpu", "T4-16GB", "--precision", "fp16",
                                      "--kv-cache-dtype", "fp8", "--max-model-len", "8192"])
    assert result.exit_code == 2
    assert result.stderr.strip() == (
        "error: --kv-cache-dtype fp8: an fp8 KV cache on T4-16GB (sm75): vLLM 0.33's Triton kernels need native "
        "FP8 (SM89+) and FlashInfer needs sm80+ in this release; use --kv-cache-dtype auto")


def test_fit_never_suggests_an_fp8_cache_the_gpu_cannot_run() -> None:
    """Llama-3.1-8B in fp16 at 131,072 tokens needs 16.00 GiB of KV cache where a V100 on vLLM 0.19 (the last
    release built for it) has 12.64: an fp8 cache (8.00) would hold it, but no backend serves one there, so the
    suggestions leave it out (they offered it before); on an A10 at 40,000 tokens (4.88 needed, 3.51 there,
    2.44 in fp8) it is offered."""
    result = CliRunner().invoke(cli, ["fit", "--model", LLAMA8, "--gpu", "V100-32GB", "--precision", "fp16",
                                      "--vllm-version", "0.19"])
    assert result.exit_code == 1
    assert "--max-model-len" in result.stdout and "--kv-cache-dtype fp8" not in result.stdout
    on_a10 = CliRunner().invoke(cli, ["fit", "--model", LLAMA8, "--gpu", "A10-24GB", "--max-model-len", "40000"])
    assert on_a10.exit_code == 1 and "smallest changes that fit: --kv-cache-dtype fp8;" in on_a10.stdout


def test_the_planner_rejects_the_shape_as_a_precision_it_cannot_run() -> None:
    w = Workload(name="w", model=LLAMA8, requests_per_second=1, input_tokens=1000, output_tokens=200,
                 kv_cache_dtypes=["fp8", "auto"])
    evaluate = Evaluator(w, get_model(LLAMA8), 8192, "0.19")
    shapes = dict(evaluate.shapes(get_gpu("V100-32GB"), 1, "pcie"))
    refused = shapes[Shape("V100-32GB", "pcie", 1, 1, "fp16", "fp8")]
    assert (refused.feasible, refused.reason_kind) == (False, "precision")
    assert refused.reason is not None and refused.reason.startswith("an fp8 KV cache on V100-32GB (sm70)")
    assert shapes[Shape("V100-32GB", "pcie", 1, 1, "fp16", "auto")].feasible
