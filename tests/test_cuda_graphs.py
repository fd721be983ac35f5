"""CUDA-graph memory (physics/cuda_graphs.py). Expected values are worked by hand from vLLM's
`_set_cudagraph_sizes` (vllm/config/vllm.py) and the FlashAttention 3 split bound (flash_attn.py,
`flash_attn_max_num_splits_for_cuda_graph` = 32), on the calibrations in gpuopt/data/vllm_versions.yaml."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpuopt.hardware import GIB, get_gpu
from gpuopt.physics import cuda_graphs
from gpuopt.physics.architecture import get_model
from gpuopt.physics.memory import ServingConfig, estimate
from gpuopt.physics.vllm_profile import CudaGraphCalibration

H100, A100, L4, B200 = (get_gpu(g) for g in ("H100-SXM-80GB", "A100-SXM-80GB", "L4-24GB", "B200-180GB"))
L8 = get_model("meta-llama/Llama-3.1-8B-Instruct")
FLAT = CudaGraphCalibration(base_gib=0.1, per_layer_gib=0.01, moe_per_layer_gib=0.02, mxfp4_moe_per_layer_gib=0.05,
                            lora_per_layer_gib=0.03, fitted_on="test")


def test_the_default_capture_list_is_vllms_51_sizes() -> None:
    sizes = cuda_graphs.capture_sizes(512)
    # 1, 2, 4 + 8..248 by 8 (31) + 256..512 by 16 (17)
    assert len(sizes) == 51 and sizes[:5] == [1, 2, 4, 8, 16] and sizes[-2:] == [496, 512]
    assert cuda_graphs.capture_sizes(16) == [1, 2, 4, 8, 16]  # --max-num-seqs 8
    assert cuda_graphs.capture_sizes(3) == [1, 2]
    # --performance-mode interactivity: 1..32 (32) + 40..248 by 8 (27) + 256..512 by 16 (17)
    assert len(cuda_graphs.capture_sizes(512, interactivity=True)) == 76


def test_the_largest_capture_is_twice_the_sequences_capped_by_the_ceiling_and_the_token_budget() -> None:
    assert cuda_graphs.max_capture_size(1024, 8192, H100, "0.33") == 512
    assert cuda_graphs.max_capture_size(8, 2048, L4, "0.33") == 16
    assert cuda_graphs.max_capture_size(256, 128, L4, "0.33") == 128
    # datacenter Blackwell captures up to 1,024 from 0.28
    assert cuda_graphs.max_capture_size(1024, 16384, B200, "0.33") == 1024
    assert cuda_graphs.max_capture_size(1024, 16384, B200, "0.27") == 512


def test_flashattention_3_split_buffers_only_on_hopper_from_0_11() -> None:
    # 32 splits x 512 tokens x 32 heads x 128 x 4 B = 0.25 GiB; TP 2 halves the heads
    assert cuda_graphs.split_accumulator_bytes(L8, H100, 1, 512, "0.33", "bf16") == 32 * 512 * 32 * 128 * 4
    assert cuda_graphs.split_accumulator_bytes(L8, H100, 2, 512, "0.33", "bf16") / GIB == 0.125
    assert cuda_graphs.split_accumulator_bytes(L8, A100, 1, 512, "0.33", "bf16") == 0.0  # FlashAttention 2
    assert cuda_graphs.split_accumulator_bytes(L8, H100, 1, 512, "0.10", "bf16") == 0.0  # piecewise graphs only
    assert cuda_graphs.split_accumulator_bytes(L8, H100, 1, 512, "0.33", "fp32") == 0.0  # no FlashAttention
    # MLA: FlashAttention 3's MLA kernel from 0.12, the 512-wide latent as value head: 32 x 512 x 16 x 512 x 4 B
    lite = get_model("deepseek-ai/DeepSeek-V2-Lite-Chat")
    assert cuda_graphs.split_accumulator_bytes(lite, H100, 1, 512, "0.19", "bf16") / GIB == 0.5
    assert cuda_graphs.split_accumulator_bytes(lite, H100, 1, 512, "0.11", "bf16") == 0.0  # FlashMLA
    # an attention-free stack (Mamba layers only) runs no attention backend
    mamba = L8.model_copy(update={"layer_pattern": "M" * 32})
    assert cuda_graphs.split_accumulator_bytes(mamba, H100, 1, 512, "0.33", "bf16") == 0.0


def test_graphs_grow_with_layers_capture_sizes_moe_and_lora() -> None:
    kw = {"tp": 1, "max_num_seqs": 256, "max_num_batched_tokens": 2048, "vllm_version": "0.33", "precision": "bf16"}
    # 0.1 + 0.01 x 32 on an L4 (no split buffers)
    assert cuda_graphs.graph_gib(FLAT, L8, L4, layers=32, **kw) == pytest.approx(0.42)
    # with LoRA a second set runs its kernels: + 0.03 x 32
    assert cuda_graphs.graph_gib(FLAT, L8, L4, layers=32, lora=True, **kw) == pytest.approx(1.38)
    # before 0.12 only the LoRA set: 0.1 + 0.03 x 32
    old = {**kw, "vllm_version": "0.11"}
    assert cuda_graphs.graph_gib(FLAT, L8, L4, layers=32, lora=True, **old) == pytest.approx(1.06)
    # --max-num-seqs 8: 5 of the 51 sizes
    few = {**kw, "max_num_seqs": 8}
    assert cuda_graphs.graph_gib(FLAT, L8, L4, layers=32, **few) == pytest.approx(0.1 + 0.32 * 5 / 51)
    mixtral = get_model("mistralai/Mixtral-8x7B-Instruct-v0.1")
    assert cuda_graphs.graph_gib(FLAT, mixtral, L4, layers=32, **kw) == pytest.approx(0.1 + 0.03 * 32)
    # MXFP4 experts (gpt-oss) run their own, longer kernel chain: 0.1 + (0.01 + 0.05) x 24
    gpt_oss = get_model("openai/gpt-oss-20b")
    mxfp4 = {**kw, "precision": "mxfp4"}
    assert cuda_graphs.graph_gib(FLAT, gpt_oss, L4, layers=24, **mxfp4) == pytest.approx(0.1 + 0.06 * 24)
    # on an H100 the split buffers come on top, sized by the largest full (decode) graph: 256 sequences, so
    # 32 x 256 x 32 x 128 x 4 B = 0.125 GiB; with 1,024 sequences the 512-token graph, 0.25 GiB
    assert cuda_graphs.graph_gib(FLAT, L8, H100, layers=32, **kw) == pytest.approx(0.545)
    assert cuda_graphs.graph_gib(FLAT, L8, H100, layers=32, **{**kw, "max_num_seqs": 1024}) == pytest.approx(0.67)


@given(st.integers(1, 2048), st.integers(1, 2048), st.integers(1, 126))
def test_more_sequences_or_layers_never_take_less_graph_memory(seqs: int, more: int, layers: int) -> None:
    kw = {"tp": 1, "max_num_batched_tokens": 8192, "vllm_version": "0.33", "precision": "bf16"}
    low = cuda_graphs.graph_gib(FLAT, L8, H100, layers=layers, max_num_seqs=seqs, **kw)
    assert cuda_graphs.graph_gib(FLAT, L8, H100, layers=layers, max_num_seqs=seqs + more, **kw) >= low
    assert cuda_graphs.graph_gib(FLAT, L8, H100, layers=layers + 1, max_num_seqs=seqs, **kw) > low


def test_interactivity_mode_captures_more_graphs() -> None:
    """76 sizes instead of 51: Llama-3.1-8B on an H100 at 0.33, 0.0937 + 0.01109 x 32 x 76 / 51 + 0.25."""
    cfg = ServingConfig(max_model_len=8192, vllm_version="0.33", performance_mode="interactivity")
    assert estimate(L8, H100, cfg).binding_rank.cuda_graph_gib == pytest.approx(
        0.0937 + 0.01109 * 32 * 76 / 51 + 0.25, abs=1e-6)


def test_the_runner_that_captures_picks_the_calibration() -> None:
    """Llama-3.1-8B on an H100: v0.19 runs the V1 runner, 0.1486 + 0.01582 x 32 + 0.25 = 0.90484 GiB; 0.33
    the V2 runner, 0.0937 + 0.01109 x 32 + 0.25 = 0.69858 GiB; --enforce-eager none."""
    def graphs(version: str, **kw: object) -> float:
        cfg = ServingConfig(max_model_len=8192, vllm_version=version, **kw)
        return estimate(L8, H100, cfg).binding_rank.cuda_graph_gib

    assert graphs("0.19") == pytest.approx(0.90484, abs=1e-5)
    assert graphs("0.33") == pytest.approx(0.69858, abs=1e-5)
    assert graphs("0.33", enforce_eager=True) == 0.0
