"""CUDA-graph memory (physics/cuda_graphs.py). Expected values are worked by hand from vLLM's
`_set_cudagraph_sizes` (vllm/config/vllm.py) and the FlashAttention 3 split bound (flash_attn.py,
`flash_attn_max_num_splits_for_cuda_graph` = 32), on the calibrations in gpuopt/data/vllm_versions.yaml."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpuopt.hardware import GIB, get_gpu
from gpuopt.physics import cuda_graphs
from gpuopt.physics.architecture import get_model
from gpuopt.physics.memory import estimate
from gpuopt.physics.serving_config import ServingConfig
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
    # 0.10-0.11 step by 8 all the way: 1, 2, 4 + 8..512 by 8 (64)
    old = cuda_graphs.capture_sizes(512, vllm_version="0.11")
    assert len(old) == 67 and old[-3:] == [496, 504, 512]


def test_piecewise_graphs_for_every_size_full_ones_for_decode_batches() -> None:
    """FULL_AND_PIECEWISE (0.11+): 51 piecewise graphs, and full graphs for the sizes a decode batch takes
    (<= max_num_seqs): all 51 at 1,024 sequences, 35 (1, 2, 4, 8..256) at 256."""
    default = cuda_graphs.GraphSettings()
    plan = cuda_graphs.capture_plan(default, H100, "0.19", 1024, 8192)
    assert (len(plan.piecewise), len(plan.full), plan.graphs, plan.largest_full) == (51, 51, 102, 512)
    plan = cuda_graphs.capture_plan(default, L4, "0.28", 256, 2048)
    assert (len(plan.piecewise), len(plan.full), plan.largest_full) == (51, 35, 256)
    # 0.10: piecewise only, on the 8-step grid
    plan = cuda_graphs.capture_plan(default, A100, "0.10", 256, 2048)
    assert (len(plan.piecewise), len(plan.full)) == (67, 0)


def test_the_token_budget_and_the_sequences_join_the_list_where_vllm_adds_them() -> None:
    default = cuda_graphs.GraphSettings()
    # a 100-token budget: the grid to 96, then 100 itself (0.21+); 0.19 stops at 96
    assert cuda_graphs.capture_plan(default, L4, "0.33", 256, 100).piecewise[-2:] == (96, 100)
    assert cuda_graphs.capture_plan(default, L4, "0.19", 256, 100).piecewise[-1] == 96
    # --max-num-seqs 100: 100 joins as a uniform-decode size from 0.31, and is the largest full graph
    plan = cuda_graphs.capture_plan(default, L4, "0.33", 100, 2048)
    assert 100 in plan.piecewise and plan.largest_full == 100
    assert 100 not in cuda_graphs.capture_plan(default, L4, "0.29", 100, 2048).piecewise


def test_modes_and_levels_choose_which_graphs_are_captured() -> None:
    def plan(gpu: object = H100, version: str = "0.33", **kw: object) -> cuda_graphs.CapturePlan:
        return cuda_graphs.capture_plan(cuda_graphs.GraphSettings(**kw), gpu, version, 1024, 8192,  # type: ignore
                                        full_mixed=gpu is H100)
    assert plan(mode="NONE").graphs == 0
    assert plan(mode="PIECEWISE").full == () and plan(mode="PIECEWISE").graphs == 51
    assert plan(mode="FULL_DECODE_ONLY").piecewise == () and plan(mode="FULL_DECODE_ONLY").graphs == 51
    assert plan(mode="FULL").graphs == 51 and plan(mode="FULL").largest_full == 512
    # FlashAttention 2 cannot capture mixed batches: vLLM falls back to FULL_AND_PIECEWISE
    assert plan(A100, mode="FULL").graphs == 102
    # -O0 nothing, -O1 piecewise only, -O2/-O3 the default (0.12+); before 0.12 the compilation level: 3 or none
    assert [plan(optimization_level=n).graphs for n in range(4)] == [0, 51, 102, 102]
    assert [plan(version="0.11", optimization_level=n).graphs for n in range(4)] == [0, 0, 0, 67 + 67]
    eager = cuda_graphs.capture_plan(cuda_graphs.GraphSettings(), H100, "0.33", 1024, 8192, enforce_eager=True)
    assert eager.graphs == 0
    # a list replaces the grid (cut at the token budget); a ceiling cuts it
    listed = cuda_graphs.capture_plan(cuda_graphs.GraphSettings(capture_sizes=(1, 8, 64, 9000)), H100, "0.33", 32, 8192)
    assert (listed.piecewise, listed.full) == ((1, 8, 64), (1, 8))
    capped = cuda_graphs.capture_plan(cuda_graphs.GraphSettings(max_capture_size=64), H100, "0.33", 1024, 8192)
    assert capped.piecewise[-1] == 64 and len(capped.piecewise) == 11  # 1, 2, 4, 8..64


def test_a_compilation_mode_other_than_vllm_compile_leaves_no_piecewise_graphs() -> None:
    """Nothing compiled into pieces, nothing to capture piecewise (VllmConfig.__post_init__): 0.12 drops every
    graph, 0.13-0.29 the modes that need pieces, 0.30+ only their piecewise half. H100, 1,024 sequences: 51 sizes."""
    def plan(version: str, gpu: object = H100, breakable: bool = False, **kw: object) -> cuda_graphs.CapturePlan:
        return cuda_graphs.capture_plan(cuda_graphs.GraphSettings(**kw), gpu, version, 1024, 8192,  # type: ignore
                                        full_mixed=gpu is H100, breakable=breakable)
    uncompiled = {"compilation_mode": "NONE"}
    assert plan("0.12", **uncompiled).graphs == plan("0.12", mode="FULL", **uncompiled).graphs == 0
    assert plan("0.19", **uncompiled).mode == "NONE"  # FULL_AND_PIECEWISE needs pieces
    assert plan("0.19", mode="FULL_DECODE_ONLY", **uncompiled).graphs == 51
    assert plan("0.19", mode="FULL", **uncompiled).graphs == 51  # FA3 captures mixed batches whole
    assert plan("0.33", **uncompiled).mode == "FULL_DECODE_ONLY" and plan("0.33", **uncompiled).graphs == 51
    assert plan("0.33", mode="PIECEWISE", **uncompiled).graphs == 0
    assert plan("0.33", compilation_mode="VLLM_COMPILE").graphs == 102  # the default, said out loud
    # FULL off FlashAttention 3 falls back by what was compiled: FULL_AND_PIECEWISE split at attention, else
    # FULL_DECODE_ONLY
    assert plan("0.33", A100, mode="FULL").mode == "FULL_AND_PIECEWISE"
    assert plan("0.33", A100, mode="FULL", **uncompiled).mode == "FULL_DECODE_ONLY"
    # -O0 compiles nothing: a cudagraph_mode set beside it keeps only what needs no pieces
    assert plan("0.33", mode="FULL_AND_PIECEWISE", optimization_level=0).mode == "FULL_DECODE_ONLY"
    assert plan("0.19", mode="FULL_AND_PIECEWISE", optimization_level=0).graphs == 0
    # breakable graphs compile nothing whatever the mode, and keep their pieces
    assert plan("0.33", breakable=True, **uncompiled).graphs == 102


def test_which_architectures_vllm_serves_with_breakable_graphs_by_release_and_platform() -> None:
    """DeepSeek-V3.2 and GLM-5 join the list in 0.29 (on NVIDIA; AMD drops DeepSeek-V3.2 in 0.29 and keeps only
    DeepSeek-V4.1 from 0.30), Qwen3.5 in 0.34 on NVIDIA only; Llama never."""
    mi300x = get_gpu("MI300X-192GB")
    v32, glm5, qwen35 = (get_model(m) for m in ("deepseek-ai/DeepSeek-V3.2-Exp", "zai-org/GLM-5.2",
                                                "Qwen/Qwen3.5-35B-A3B"))
    breakable = cuda_graphs.breakable_by_default
    assert [breakable(v32, H100, v) for v in ("0.22", "0.28", "0.29", "0.33")] == [False, False, True, True]
    assert breakable(glm5, H100, "0.29") and breakable(glm5, mi300x, "0.29") and not breakable(glm5, mi300x, "0.30")
    assert not breakable(v32, mi300x, "0.29")
    assert breakable(qwen35, H100, "0.34") and not breakable(qwen35, H100, "0.33")
    assert not breakable(qwen35, mi300x, "0.34")
    assert not any(breakable(L8, gpu, "0.34") for gpu in (H100, mi300x))


def test_settings_vllm_refuses_are_named() -> None:
    assert cuda_graphs.settings_problem(cuda_graphs.GraphSettings(capture_sizes=(1, 2, 8), max_capture_size=16)) \
        is not None
    assert cuda_graphs.settings_problem(cuda_graphs.GraphSettings(capture_sizes=(1, 2, 8), max_capture_size=8)) is None
    assert "positive" in (cuda_graphs.settings_problem(cuda_graphs.GraphSettings(capture_sizes=())) or "")


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
    share = 86 / 102  # 256 sequences: 51 piecewise + 35 full graphs, of the reference 102
    # 0.1 + 0.01 x 32 x 86/102 on an L4 (no split buffers)
    assert cuda_graphs.graph_gib(FLAT, L8, L4, layers=32, **kw) == pytest.approx(0.1 + 0.32 * share)
    # with LoRA a second set runs its kernels: + 0.03 x 32 x 86/102
    assert cuda_graphs.graph_gib(FLAT, L8, L4, layers=32, lora=True, **kw) == pytest.approx(0.1 + 1.28 * share)
    # before 0.12 only the LoRA set: 0.1 + 0.03 x 32, on 0.11's 67 piecewise (8-step grid) + 35 full = 102 graphs
    old = {**kw, "vllm_version": "0.11"}
    assert cuda_graphs.graph_gib(FLAT, L8, L4, layers=32, lora=True, **old) == pytest.approx(1.06)
    # --max-num-seqs 8: 5 piecewise (1, 2, 4, 8, 16) + 4 full (1, 2, 4, 8) graphs
    few = {**kw, "max_num_seqs": 8}
    assert cuda_graphs.graph_gib(FLAT, L8, L4, layers=32, **few) == pytest.approx(0.1 + 0.32 * 9 / 102)
    mixtral = get_model("mistralai/Mixtral-8x7B-Instruct-v0.1")
    assert cuda_graphs.graph_gib(FLAT, mixtral, L4, layers=32, **kw) == pytest.approx(0.1 + 0.03 * 32 * share)
    # MXFP4 experts (gpt-oss) run their own, longer kernel chain: 0.1 + (0.01 + 0.05) x 24 x 86/102
    gpt_oss = get_model("openai/gpt-oss-20b")
    mxfp4 = {**kw, "precision": "mxfp4"}
    assert cuda_graphs.graph_gib(FLAT, gpt_oss, L4, layers=24, **mxfp4) == pytest.approx(0.1 + 0.06 * 24 * share)
    # on an H100 the split buffers come on top, sized by the largest full (decode) graph: 256 sequences, so
    # 32 x 256 x 32 x 128 x 4 B = 0.125 GiB; with 1,024 sequences the 512-token graph, 0.25 GiB (and 102 graphs)
    assert cuda_graphs.graph_gib(FLAT, L8, H100, layers=32, **kw) == pytest.approx(0.1 + 0.32 * share + 0.125)
    assert cuda_graphs.graph_gib(FLAT, L8, H100, layers=32, **{**kw, "max_num_seqs": 1024}) == pytest.approx(0.67)
    # piecewise graphs only: no full graph, so no split buffers; --enforce-eager: nothing
    piecewise = cuda_graphs.GraphSettings(mode="PIECEWISE")
    assert cuda_graphs.graph_gib(FLAT, L8, H100, layers=32, settings=piecewise, **kw) == pytest.approx(
        0.1 + 0.32 * 51 / 102)
    assert cuda_graphs.graph_gib(FLAT, L8, H100, layers=32, enforce_eager=True, **kw) == 0.0


@given(st.integers(1, 2048), st.integers(1, 2048), st.integers(1, 126))
def test_more_sequences_or_layers_never_take_less_graph_memory(seqs: int, more: int, layers: int) -> None:
    """Up to 0.30. From 0.31 an off-grid max_num_seqs is captured as a size of its own, so 506 sequences
    capture one graph more than 512 (vLLM's own list, tested above): there only layers are monotone."""
    kw = {"tp": 1, "max_num_batched_tokens": 8192, "vllm_version": "0.29", "precision": "bf16"}
    low = cuda_graphs.graph_gib(FLAT, L8, H100, layers=layers, max_num_seqs=seqs, **kw)
    assert cuda_graphs.graph_gib(FLAT, L8, H100, layers=layers, max_num_seqs=seqs + more, **kw) >= low
    assert cuda_graphs.graph_gib(FLAT, L8, H100, layers=layers + 1, max_num_seqs=seqs, **kw) > low
    new = {**kw, "vllm_version": "0.33"}
    assert cuda_graphs.graph_gib(FLAT, L8, H100, layers=layers + 1, max_num_seqs=seqs, **new) > \
        cuda_graphs.graph_gib(FLAT, L8, H100, layers=layers, max_num_seqs=seqs, **new)


def test_interactivity_mode_captures_more_graphs() -> None:
    """76 sizes instead of 51, each piecewise and full (1,024 sequences): Llama-3.1-8B on an H100 at 0.33,
    0.0937 + 0.01315 x 32 x 152 / 102 + 0.25."""
    cfg = ServingConfig(max_model_len=8192, vllm_version="0.33", performance_mode="interactivity")
    assert estimate(L8, H100, cfg).binding_rank.cuda_graph_gib == pytest.approx(
        0.0937 + 0.01315 * 32 * 152 / 102 + 0.25, abs=1e-6)


def test_the_runner_that_captures_picks_the_calibration() -> None:
    """Llama-3.1-8B on an H100: v0.19 runs the V1 runner, 0.1434 + 0.01634 x 32 + 0.25 = 0.91628 GiB; 0.33
    the V2 runner, 0.0937 + 0.01315 x 32 + 0.25 = 0.7645 GiB (both 102 graphs at the H100's 1,024 sequences);
    --enforce-eager none, -O1 (piecewise only) the 51 piecewise graphs without the split buffers."""
    def graphs(version: str, **kw: object) -> float:
        cfg = ServingConfig(max_model_len=8192, vllm_version=version, **kw)
        return estimate(L8, H100, cfg).binding_rank.cuda_graph_gib

    assert graphs("0.19") == pytest.approx(0.91628, abs=1e-5)
    assert graphs("0.33") == pytest.approx(0.7645, abs=1e-5)
    assert graphs("0.33", enforce_eager=True) == 0.0
    assert graphs("0.33", cudagraphs=cuda_graphs.GraphSettings(optimization_level=1)) == pytest.approx(
        0.0937 + 0.01315 * 32 * 51 / 102, abs=1e-5)


def test_fit_takes_the_compilation_config_and_the_optimization_level() -> None:
    """Llama-3.1-8B on an H100 at 0.33, 8k: piecewise graphs only (cudagraph_mode PIECEWISE, or -O1) hold
    0.0937 + 0.01315 x 32 x 51/102 = 0.3041 GiB and no FlashAttention 3 buffers: (54.8456 + 0.7645 - 0.3041) x
    8,192 = 453,066.8 -> 453,056 tokens; -O0 none: 455,552, as --enforce-eager."""
    import json

    from click.testing import CliRunner

    from gpuopt.cli.main import cli

    def fit(*extra: str) -> dict[str, object]:
        result = CliRunner().invoke(cli, ["fit", "--model", "meta-llama/Llama-3.1-8B-Instruct", "--gpu",
                                          "H100-SXM-80GB", "--max-model-len", "8192", "--json", *extra])
        assert result.exit_code == 0, result.output
        return dict(json.loads(result.stdout))

    piecewise = fit("--compilation-config", '{"cudagraph_mode": "piecewise"}')
    assert (piecewise["cuda_graph_gib"], piecewise["kv_cache_tokens"]) == (0.3041, 453_056)
    assert piecewise["cuda_graphs"] == {"mode": "PIECEWISE", "piecewise": 51, "full": 0}
    assert fit()["cuda_graphs"] == {"mode": "FULL_AND_PIECEWISE", "piecewise": 51, "full": 51}
    assert fit("--optimization-level", "1")["kv_cache_tokens"] == 453_056
    assert fit("--optimization-level", "0")["kv_cache_tokens"] == fit("--enforce-eager")["kv_cache_tokens"] == 455_552
    # compilation mode NONE at 0.33: full decode graphs only, 0.0937 + 0.01315 x 32 x 51/102 + 0.25 (FA3's
    # buffers) = 0.5541 GiB: (55.6101 - 0.5541) x 8,192 = 451,018.8 -> 451,008 tokens
    uncompiled = fit("--compilation-config", '{"mode": 0}')
    assert uncompiled["cuda_graphs"] == {"mode": "FULL_DECODE_ONLY", "piecewise": 0, "full": 51}
    assert (uncompiled["cuda_graph_gib"], uncompiled["kv_cache_tokens"]) == (0.5541, 451_008)
    bad = CliRunner().invoke(cli, ["fit", "--model", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "H100-SXM-80GB",
                                   "--compilation-config", '{"cudagraph_capture_sizes": [8, 16], '
                                   '"max_cudagraph_capture_size": 32}'])
    assert bad.exit_code == 2 and bad.stdout == ""
    assert bad.stderr.startswith("error: max_cudagraph_capture_size 32 differs from the largest of "
                                 "cudagraph_capture_sizes (16)")


def test_a_multimodal_prefix_lm_runs_no_flashattention_3() -> None:
    """gemma-3 is in vLLM's MM_PREFIX_LM_MODELS (0.13+): its image tokens attend bidirectionally, which FA3
    cannot, so no split buffers. gemma-3-12b (48 layers) on an H100: v0.19 0.1434 + 0.01634 x 48 = 0.92772 GiB
    (logged 0.94; 1.18 with the buffers), text-only or not; at 0.33 0.0937 + 0.01315 x 48 = 0.7249, and from 0.27
    --language-model-only drops the prefix LM: FA3 again, + 32 x 512 x 16 heads x 256 x 4 B = 0.25 GiB."""
    gemma3, gemma2 = get_model("google/gemma-3-12b-it"), get_model("google/gemma-2-9b-it")

    def graphs(model: object, version: str, text_only: bool = False) -> float:
        cfg = ServingConfig(max_model_len=8192, vllm_version=version, language_model_only=text_only)
        return estimate(model, H100, cfg).binding_rank.cuda_graph_gib  # type: ignore[arg-type]

    assert graphs(gemma3, "0.19") == graphs(gemma3, "0.19", text_only=True) == pytest.approx(0.92772, abs=1e-5)
    assert graphs(gemma3, "0.33") == pytest.approx(0.7249, abs=1e-5)
    assert graphs(gemma3, "0.33", text_only=True) == pytest.approx(0.9749, abs=1e-5)
    assert not cuda_graphs.mm_prefix_lm(gemma3, "0.12")  # the list came in 0.13
    assert not cuda_graphs.mm_prefix_lm(gemma2, "0.33")  # gemma-2 is text only: FA3 and its buffers
    assert cuda_graphs.split_accumulator_bytes(gemma2, H100, 1, 512, "0.19", "bf16") / GIB == 0.25
