"""Hybrid and sparse attention as vLLM sizes it: per-token KV only on full-attention layers, a constant
per-sequence state on Gated DeltaNet / Mamba-2 layers, DSA indexer keys, and the hybrid block size.

Expected values are computed by hand from the config fields (../shared/data/model_configs.md §1.4, §2, §4).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpuopt.cli.models import kv_bytes_per_token, state_bytes_per_sequence
from gpuopt.hardware import GIB, get_gpu
from gpuopt.physics.architecture import from_hf_dict, get_model
from gpuopt.physics.kv_cache import hybrid_block_size, kv_groups
from gpuopt.physics.memory import estimate
from gpuopt.physics.serving_config import ServingConfig
from gpuopt.physics.weights import indexer_layers
from gpuopt.vocabulary import KV_LAYER_KINDS, LAYER_KINDS, STATE_LAYER_KINDS

NEXT = "Qwen/Qwen3-Next-80B-A3B-Instruct"
QWEN35 = "Qwen/Qwen3.5-35B-A3B"
NEMOTRON = "nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16"


def test_layer_kinds_are_defined_once() -> None:
    assert set(STATE_LAYER_KINDS) <= set(LAYER_KINDS) and set(KV_LAYER_KINDS) <= set(LAYER_KINDS)
    assert not set(STATE_LAYER_KINDS) & set(KV_LAYER_KINDS)
    assert {"mamba", "ffn"} <= set(LAYER_KINDS)


@pytest.mark.parametrize(("model", "kinds"), [
    (NEXT, {"linear": 36, "full": 12}),
    (QWEN35, {"linear": 30, "full": 10}),
    (NEMOTRON, {"mamba": 23, "ffn": 23, "full": 6}),
])
def test_layer_patterns(model: str, kinds: dict[str, int]) -> None:
    arch = get_model(model)
    assert arch.layer_kind_counts(range(arch.num_hidden_layers)) == kinds


def test_kv_counts_only_full_attention_layers() -> None:
    # 12 full layers x 2 (K, V) x 2 KV heads x 256 x 2 B -- not 48 layers (4x too much)
    assert kv_bytes_per_token(get_model(NEXT), 2) == 12 * 2 * 2 * 256 * 2 == 24_576
    # Nemotron: 6 attention layers x 2 x 2 heads x 128 x 2 B -- not 52 layers (8.7x too much)
    assert kv_bytes_per_token(get_model(NEMOTRON), 2) == 6 * 2 * 2 * 128 * 2 == 6_144


def test_gated_deltanet_state() -> None:
    # conv (4 - 1) x (2 x 16 x 128 + 32 x 128) values in bf16 + recurrent 32 x 128 x 128
    conv = 3 * 8192 * 2
    assert get_model(NEXT).state_bytes_per_layer("linear", 1, 2.0) == conv + 524_288 * 2  # no ssm dtype: bf16
    assert get_model(QWEN35).state_bytes_per_layer("linear", 1, 2.0) == conv + 524_288 * 4  # float32 state
    # TP splits heads and channels
    assert get_model(QWEN35).state_bytes_per_layer("linear", 4, 2.0) == (conv + 524_288 * 4) / 4


def test_mamba2_state() -> None:
    # conv 3 x (64 x 64 + 2 x 8 x 128) bf16 + SSM 64 heads x 64 x 128 float32, 23 layers
    per_layer = 3 * 6144 * 2 + 64 * 64 * 128 * 4
    arch = get_model(NEMOTRON)
    assert arch.state_bytes_per_layer("mamba", 1, 2.0) == per_layer == 2_134_016
    assert state_bytes_per_sequence(arch) == 23 * per_layer


def test_dsa_indexer_keys_join_the_mla_latent() -> None:
    # 61 layers x (576 bf16 latent + 128 fp8 indexer key + one fp32 scale per 128)
    assert kv_bytes_per_token(get_model("deepseek-ai/DeepSeek-V3.2"), 2) == 61 * (576 * 2 + 132)
    assert kv_bytes_per_token(get_model("deepseek-ai/DeepSeek-V3"), 2) == 61 * 576 * 2


def test_hybrid_block_size_holds_one_state_page() -> None:
    arch = get_model(NEXT)
    groups = kv_groups(arch, range(48), 1, 2.0, 2.0)
    # state 1,097,728 B per layer; a full layer stores 2 x 2 x 256 x 2 = 2,048 B per token
    assert hybrid_block_size(groups, 16) == 16 * math.ceil(1_097_728 / (16 * 2048)) == 544
    assert hybrid_block_size(kv_groups(get_model("meta-llama/Llama-3.1-8B-Instruct"), range(32), 1, 2.0), 16) == 16


def test_hybrid_estimate_counts_one_state_page_per_group_and_request() -> None:
    est = estimate(get_model(NEXT), get_gpu("H100-SXM-80GB"),
                   ServingConfig(tensor_parallel=4, max_model_len=32768, vllm_version="0.19"))
    rank = est.ranks[0]
    # TP=4: 1 KV head (replicated), state / 4: block 16 x ceil(274,432 / (16 x 1,024)) = 272 tokens
    # groups of 12 layers: 3 GDN groups (1 page each per request) + 1 full group (ceil(32768 / 272))
    assert rank.blocks_per_request == 3 + math.ceil(32768 / 272)
    assert est.max_concurrency == rank.num_blocks / rank.blocks_per_request
    assert est.kv_cache_tokens == rank.num_blocks // 4 * 272


@given(max_len=st.integers(min_value=1024, max_value=262_144))
def test_state_makes_capacity_less_than_proportional_to_length(max_len: int) -> None:
    """A request's state does not grow with its length: doubling max_model_len less than halves concurrency."""
    arch, gpu = get_model(NEXT), get_gpu("H100-SXM-80GB")
    short = estimate(arch, gpu, ServingConfig(tensor_parallel=4, max_model_len=max_len, vllm_version="0.19"))
    long = estimate(arch, gpu, ServingConfig(tensor_parallel=4, max_model_len=2 * max_len, vllm_version="0.19"))
    assert long.max_concurrency * 2 >= short.max_concurrency


def test_gemma3_vision_tower_is_in_the_weights() -> None:
    # the SigLIP tower gemma-3-4b documents, + 1152 x 5376 projector: 0.4231 B at 2 B
    assert get_model("google/gemma-3-27b-it").vision_params() == 423_100_000


def test_the_vision_tower_is_split_over_tp_like_the_language_model() -> None:
    """vLLM builds SigLIP from QKV/column/row-parallel layers (mm_encoder_tp_mode "weights", the default): at TP 2
    each rank holds half the tower, 423,100,000 x 2 B / 2 = 0.39404 GiB (whole: 0.78809 GiB), on the first
    PP stage only; --language-model-only loads none of it."""
    from gpuopt.physics.weights import weights_bytes

    arch = get_model("google/gemma-3-27b-it")
    layers = range(arch.num_hidden_layers)
    with_tower = weights_bytes(arch, "bf16", 2, layers, first=True, last=True)
    without = weights_bytes(arch, "bf16", 2, layers, first=True, last=True, vision=False)
    assert (with_tower - without) / GIB == pytest.approx(423_100_000 * 2 / 2 / GIB, rel=1e-12)
    assert (with_tower - without) / GIB == pytest.approx(0.39404, abs=5e-6)
    later = weights_bytes(arch, "bf16", 2, range(31, 62), first=False, last=True)
    assert later == weights_bytes(arch, "bf16", 2, range(31, 62), first=False, last=True, vision=False)


GLM52 = "zai-org/GLM-5.2"
GLM52_CONFIG = Path(__file__).parent / "fixtures" / "model_configs" / "zai-org__GLM-5.2.json"  # from ../shared/data


def test_indexcache_builds_the_indexers_the_config_lists() -> None:
    """GLM-5.2 (index_topk_freq 4, index_skip_topk_offset 3): vLLM 0.27.1+ builds an indexer where
    max(layer - 2, 0) % 4 == 0, which is exactly where the config's own `indexer_types` says "full"."""
    arch = get_model(GLM52)
    built = [i for i in range(arch.num_hidden_layers) if not arch.indexer_skipped(i)]
    config = json.loads(GLM52_CONFIG.read_text(encoding="utf-8"))
    assert built == [i for i, kind in enumerate(config["indexer_types"]) if kind == "full"]
    assert len(built) == 21
    read = from_hf_dict(config, "x/glm52")
    assert (read.index_topk_freq, read.index_skip_topk_offset) == (4, 3)
    layers = range(78)
    assert indexer_layers(arch, layers, "0.33") == 21 and indexer_layers(arch, layers, "0.27") == 21
    assert indexer_layers(arch, layers, "0.21") == 78  # 0.21 builds every indexer (skips only at run time)
    glm5 = get_model("zai-org/GLM-5")  # no IndexCache: an indexer on every layer in every release
    assert indexer_layers(glm5, layers, "0.33") == 78


def test_indexcache_memory_by_release() -> None:
    """The 57 skipped indexers: 57 x 9,371,904 replicated parameters (wq_b 2,048 x 32 x 128, wk 6,144 x 128,
    k_norm 2 x 128, weights_proj 6,144 x 32), wq_b in FP8 (1 B: vLLM builds it with the quant_config) and the
    other 983,296 in 16-bit (wk is fused with weights_proj, unquantised, from 0.20): 57 x (8,388,608 x 1 +
    983,296 x 2) B = 590,246,400 B = 0.54971 GiB less on every GPU; KV per token per GPU
    (MLA 512 + 64 values x 2 B, not split by TP) 78 x 1,152 + 21 x 132 index bytes = 92,628 B, against
    78 x (1,152 + 132) = 100,152 B when every layer holds index keys."""
    arch, gpu = get_model(GLM52), get_gpu("B200-180GB")

    def at(version: str):
        return estimate(arch, gpu, ServingConfig(tensor_parallel=8, precision="fp8", max_model_len=65536,
                                                 vllm_version=version)).binding_rank
    old, new = at("0.21"), at("0.33")
    assert arch.indexer_params == 2048 * 32 * 128 + 6144 * 128 + 2 * 128 + 6144 * 32 == 9_371_904
    assert old.weights_gib - new.weights_gib == pytest.approx(57 * (8_388_608 + 983_296 * 2) / 2**30, rel=1e-9)
    assert old.kv_bytes_per_token == 100_152 and new.kv_bytes_per_token == pytest.approx(92_628, abs=1e-6)


def test_the_hybrid_block_aligns_to_the_configured_block_from_0_33() -> None:
    """Qwen3-Next at TP 1: a DeltaNet state of 1,097,728 B against 2,048 B a token of a full-attention layer.
    Aligned to 16 tokens (up to 0.19, and later at a block of 16): 16 x ceil(1,097,728 / 32,768) = 544; from 0.20
    to the configured block when larger -- 0.34's default 64: 64 x ceil(1,097,728 / 131,072) = 576; 0.19 with
    --block-size 64 still aligns to 16 and keeps the larger of 64 and 544."""
    groups = kv_groups(get_model(NEXT), range(48), 1, 2.0)
    assert hybrid_block_size(groups, 16, "0.19") == hybrid_block_size(groups, 16, "0.33") == 544
    assert hybrid_block_size(groups, 64, "0.34") == hybrid_block_size(groups, 64, "0.29") == 576
    assert hybrid_block_size(groups, 64, "0.19") == 544
    est = estimate(get_model(NEXT), get_gpu("H100-SXM-80GB"),
                   ServingConfig(tensor_parallel=4, max_model_len=32768, vllm_version="0.34"))
    assert est.config.block_size == 64 and est.kv_cache_tokens > 0


def test_a_dsa_model_keeps_an_fp8_kv_cache_in_the_fp8_ds_mla_layout() -> None:
    """FlashMLA sparse serves --kv-cache-dtype fp8 as fp8_ds_mla: 512 fp8 latent values, 4 fp32 scales and the 64
    RoPE values in bf16 = 656 B a token and layer (not 576), plus the 132 B of index keys; a dense MLA model
    (DeepSeek-V3) keeps 576 at fp8."""
    gpu = get_gpu("H200-141GB")

    def per_token(model: str) -> float:
        return estimate(get_model(model), gpu, ServingConfig(tensor_parallel=8, max_model_len=32768,
                                                             kv_cache_dtype="fp8")).binding_rank.kv_bytes_per_token
    assert per_token("deepseek-ai/DeepSeek-V3.2") == pytest.approx(61 * (656 + 132))
    assert per_token("deepseek-ai/DeepSeek-V3") == 61 * 576


@pytest.mark.parametrize(("gpu", "kv", "release", "per_layer"), [
    ("H200-141GB", "auto", "0.33", 576 * 2),  # FlashMLA sparse / FlashAttention sparse: bf16
    ("H200-141GB", "fp8", "0.33", 656),  # FlashMLA sparse: fp8_ds_mla
    ("B200-180GB", "fp8", "0.33", 576),  # FlashInfer sparse first for quantized caches: plain fp8
    ("B200-180GB", "fp8", "0.19", 576),
    ("B200-180GB", "fp8", "0.17", 656),  # 0.17's FlashInfer sparse took bf16 only: FlashMLA's layout
    ("B200-180GB", "auto", "0.33", 576 * 2),
    ("RTX-PRO-6000-96GB", "auto", "0.33", 656),  # FlashInfer SM120 maps auto to fp8_ds_mla
    ("RTX-PRO-6000-96GB", "fp8", "0.24", 656),
    ("H200-141GB", "auto", "0.11", 656),  # 0.11 rewrote auto to fp8_ds_mla for every DSA model
])
def test_a_dsa_cache_layout_follows_the_sparse_mla_backend_of_the_gpu_and_release(
        gpu: str, kv: str, release: str, per_layer: int) -> None:
    est = estimate(get_model("deepseek-ai/DeepSeek-V3.2"), get_gpu(gpu),
                   ServingConfig(tensor_parallel=8, max_model_len=32768, kv_cache_dtype=kv,  # type: ignore[arg-type]
                                 vllm_version=release))
    assert est.binding_rank.kv_bytes_per_token == pytest.approx(61 * (per_layer + 132))


def test_sm100_fp8_in_0_18_is_plain_only_when_a_gpu_holds_at_most_16_heads() -> None:
    """0.18 preferred FlashInfer sparse (plain fp8) by head count alone: DeepSeek-V3.2's 128 heads over TP 8 are
    16 a GPU (FlashInfer, 576 B), over TP 4 32 (FlashMLA, fp8_ds_mla 656 B)."""
    from gpuopt.physics.sparse_mla import kv_format
    arch = get_model("deepseek-ai/DeepSeek-V3.2")
    assert kv_format(arch, 100, "fp8", 8, "0.18") == "fp8"
    assert kv_format(arch, 100, "fp8", 4, "0.18") == "fp8_ds_mla"
    assert kv_format(get_model("deepseek-ai/DeepSeek-V3"), 120, "auto", 8, "0.33") == "model"  # dense MLA: as asked


@pytest.mark.parametrize(("gpu", "release", "said"), [
    ("A100-SXM-80GB", "0.33", "A100-SXM-80GB is Ampere (sm80)"),
    ("L40S-48GB", "0.33", "L40S-48GB is Ada Lovelace (sm89)"),
    ("RTX-PRO-6000-96GB", "0.21", "sm120 has a sparse MLA backend from vLLM 0.24"),
])
def test_no_sparse_mla_backend_refuses_a_dsa_model(gpu: str, release: str, said: str) -> None:
    from gpuopt.physics.serving_config import gpu_unsupported
    arch = get_model("deepseek-ai/DeepSeek-V3.2")
    why = gpu_unsupported(get_gpu(gpu), "int4", arch, release)
    assert why is not None and said in why
    assert gpu_unsupported(get_gpu("H100-SXM-80GB"), "int4", arch, release) is None
    assert gpu_unsupported(get_gpu(gpu), "int4", get_model("deepseek-ai/DeepSeek-V3"), release) is None


def test_sm120_needs_index_topk_2048() -> None:
    from gpuopt.physics.sparse_mla import backend_problem
    arch = get_model("deepseek-ai/DeepSeek-V3.2")
    assert backend_problem(arch, 120, "0.33") is None
    why = backend_problem(arch.model_copy(update={"index_topk": 1024}), 120, "0.33")
    assert why is not None and "requires index_topk 2048" in why


# ---- prefix caching puts a hybrid's state layers in "align" mode (state_cache) ---------------------------


@pytest.mark.parametrize(("kind", "model", "cc", "release", "caching", "pages"), [
    ("linear", QWEN35, 90, "0.33", True, 3),  # Gated DeltaNet on Hopper: FlashInfer prefill exports a checkpoint
    ("linear", QWEN35, 89, "0.33", True, 2),  # Ada runs Triton/FLA: no checkpoint
    ("linear", QWEN35, 100, "0.33", True, 3),  # Blackwell with 128-wide keys (CUDA 13 wheel)
    ("linear", QWEN35, 90, "0.29", True, 2),  # align mode: the last two block boundaries
    ("mamba", NEMOTRON, 90, "0.32", True, 3),  # Mamba-2 exports a checkpoint from 0.32
    ("mamba", NEMOTRON, 80, "0.28", True, 2),
    ("linear", QWEN35, 90, "0.33", False, 1),  # mamba_cache_mode "none"
    ("mamba", NEMOTRON, 90, "0.25", True, 1),  # before 0.26 not modelled: one page
])
def test_state_pages_a_request_holds(kind: str, model: str, cc: int, release: str, caching: bool, pages: int) -> None:
    from gpuopt.physics.state_cache import pages_per_request
    assert pages_per_request(kind, get_model(model), cc, release, caching) == pages


def test_prefix_caching_is_on_by_default_for_hybrids_only_from_0_28() -> None:
    from gpuopt.physics.state_cache import prefix_caching_default
    assert not prefix_caching_default(get_model(QWEN35), "0.27")
    assert prefix_caching_default(get_model(QWEN35), "0.28")
    assert prefix_caching_default(get_model("meta-llama/Llama-3.1-8B-Instruct"), "0.21")  # not a hybrid: on


def test_align_mode_costs_a_hybrid_request_two_more_pages_per_state_group() -> None:
    """Qwen3.5-35B-A3B: 30 Gated DeltaNet + 10 full-attention layers -> groups of 10: 3 state groups and one
    attention group. On 0.33 on an H100 a request holds 3 pages in each state group with prefix caching (vLLM's
    default there), 1 without: 2 x 3 = 6 blocks more per request, in memory and in the simulator's scheduler."""
    from gpuopt.physics.simulator import SchedulerConfig
    arch, gpu = get_model(QWEN35), get_gpu("H100-SXM-80GB")

    def rank(caching: bool | None):  # type: ignore[no-untyped-def]
        est = estimate(arch, gpu, ServingConfig(max_model_len=32768, vllm_version="0.33",
                                                enable_prefix_caching=caching))
        return est, est.binding_rank
    (on, r_on), (off, r_off) = rank(None), rank(False)
    assert on.config.enable_prefix_caching and not off.config.enable_prefix_caching
    assert r_on.num_blocks == r_off.num_blocks
    assert r_on.blocks_per_request - r_off.blocks_per_request == 6
    assert (r_on.state_blocks_per_request, r_off.state_blocks_per_request) == (9, 3)
    assert on.max_concurrency == pytest.approx(r_on.num_blocks / r_on.blocks_per_request)
    assert SchedulerConfig.from_memory(on).state_groups == 9


def test_the_simulated_scheduler_follows_the_release_default_of_prefix_caching() -> None:
    """A hybrid on 0.27 starts without prefix caching (one state page, no prefix hits); on 0.28 with it."""
    from gpuopt.physics.simulator import SchedulerConfig
    gpu = get_gpu("H100-SXM-80GB")
    for release, caching in (("0.27", False), ("0.28", True)):
        est = estimate(get_model(QWEN35), gpu, ServingConfig(max_model_len=32768, vllm_version=release))
        sched = SchedulerConfig.from_memory(est)
        assert sched.enable_prefix_caching is caching
        assert sched.state_groups == (6 if caching else 3)  # 3 state groups x 2 pages (align, 0.28) or x 1
    dense = estimate(get_model("meta-llama/Llama-3.1-8B-Instruct"), gpu, ServingConfig(max_model_len=8192,
                                                                                       vllm_version="0.27"))
    assert SchedulerConfig.from_memory(dense).enable_prefix_caching


def test_a_short_request_of_a_hybrid_holds_its_state_pages_in_the_latency_model() -> None:
    """Qwen3.5-35B-A3B on one H100 at 32k context (vLLM 0.33, prefix caching: align mode): 113 blocks of 1,056
    tokens (3.1109 GiB of KV after 1.2701 GiB of graphs: 0.0937 + (0.01315 + 0.01001 expert) x 40 layers + 0.25 of
    FlashAttention 3 buffers, less the 446,571,248-parameter vision tower in BF16, 0.8318 GiB: 2.2791 GiB in
    blocks of 10 layers x 2,162,688 B), 1 full-attention group and 9 state pages a request. A 1000/200 request
    holds 1000 + 100 + 528 tokens = 1.54 blocks of attention plus its 9 pages: 10.54 blocks, so 113 / 10.54 = 10.7
    run at once -- where the KV tokens vLLM logs (in 32k requests) would give many more of 1,628 tokens."""
    from gpuopt.physics import analytic_load, latency

    arch, gpu = get_model(QWEN35), get_gpu("H100-SXM-80GB")
    est = estimate(arch, gpu, ServingConfig(max_model_len=32768))
    pool = est.kv_pool
    assert (pool.block_size, pool.num_blocks, pool.full_groups, pool.state_groups) == (1056, 113, 1, 9)
    held_blocks = (1000 + 100 + 528) / 1056 + 9
    replica = latency.build_replica(arch, gpu, est, None)
    assert analytic_load.replica_held_tokens(replica, 1000, 200) == pytest.approx(
        held_blocks / 113 * est.effective_kv_tokens)
    top = analytic_load.max_rate(replica, 1000, 200)
    assert top.running <= 113 / held_blocks * (1 + 1e-6)
    assert top.running > 0.85 * 113 / held_blocks  # the KV cache is what binds (less the prefills in flight)
    # the simulator's scheduler takes the same pool from the replica (the planner's simulated capacity)
    from gpuopt.physics.simulator import SchedulerConfig

    assert SchedulerConfig.from_replica(replica).pool == pool == SchedulerConfig.from_memory(est).pool


def test_a_sliding_window_group_holds_a_short_request_whole() -> None:
    """gemma-3-27b (62 layers: 52 sliding over 1,024 tokens, 10 full; kv_layout puts them in groups of 10: six
    windowed groups and one full one): a request shorter than the window holds its tokens in all seven, a
    long one the window's 66 blocks in each windowed group."""
    arch, gpu = get_model("google/gemma-3-27b-it"), get_gpu("H100-SXM-80GB")
    pool = estimate(arch, gpu, ServingConfig(max_model_len=32768)).kv_pool
    assert (pool.full_groups, pool.window_groups, pool.window_blocks, pool.state_groups) == (1, 6, 66, 0)
    short, long = 500.0, 20000.0
    assert pool.blocks_held(short) == pytest.approx((pool.full_groups + pool.window_groups) * short / pool.block_size)
    assert pool.blocks_held(long) == pytest.approx(pool.full_groups * long / pool.block_size
                                                   + pool.window_groups * pool.window_blocks)


@given(st.integers(1, 200_000), st.integers(1, 50_000))
def test_a_single_group_pool_holds_what_held_kv_tokens_says(input_tokens: int, output_tokens: int) -> None:
    from gpuopt.physics import analytic_load
    from gpuopt.physics.kv_cache import KvPool

    pool = KvPool.plain(16, 1_000_000)
    assert analytic_load.held_cache_tokens(pool, 1_000_000, 16, input_tokens, output_tokens) == \
        analytic_load.held_kv_tokens(input_tokens, output_tokens, 16)
    assert analytic_load.held_cache_tokens(None, 1_000_000, 16, input_tokens, output_tokens) == \
        analytic_load.held_kv_tokens(input_tokens, output_tokens, 16)


def test_fit_says_how_many_requests_of_the_shape_the_kv_cache_holds() -> None:
    """vLLM's "Maximum concurrency" for the shape asked, in KV blocks: Qwen3.5-35B-A3B (above: 113 blocks of
    1,056 tokens, 9 state pages a request) holds 113 / (1,200 / 1,056 + 9) = 11.15 requests of 1,000 + 200
    tokens; Llama-3.1-8B at 8k, 449,280 tokens in one group (54.8456 GiB / 128 KiB a token = 449,294, in whole
    blocks of 16), 449,280 / 1,200 = 374.4."""
    from click.testing import CliRunner

    from gpuopt.cli.main import cli

    def held(model: str, max_len: str) -> float:
        result = CliRunner().invoke(cli, ["fit", "--model", model, "--gpu", "H100-SXM-80GB", "--max-model-len", max_len,
                                          "--input-tokens", "1000", "--output-tokens", "200", "--json"])
        assert result.exit_code == 0, result.output
        return float(json.loads(result.stdout)["requests_in_kv_cache"])

    assert held(QWEN35, "32768") == pytest.approx(113 / (1200 / 1056 + 9), abs=1e-3)
    assert held("meta-llama/Llama-3.1-8B-Instruct", "8192") == pytest.approx(449_280 / 1200, abs=1e-3)


def test_a_hybrid_that_does_not_fit_says_what_one_request_takes_from_the_pool() -> None:
    """Qwen3.5-35B-A3B on one H100 at its full 262,144 tokens (vLLM 0.33, align-mode prefix caching): a request
    takes ceil(262,144 / 1,056) = 249 full-attention blocks + 9 state pages = 258 block ids, each a 1,056-token
    page of 2 KV heads x 256 x 2 (K, V) x 2 B = 2,048 B per token in each of the 10 layers sharing the id:
    258 x 10 x 1,056 x 2,048 B = 5.196 GiB. (It said 0.08 GiB: 258 blocks x 20,480 B/token x 16 tokens.)"""
    est = estimate(get_model(QWEN35), get_gpu("H100-SXM-80GB"), ServingConfig())
    rank = est.binding_rank
    assert rank.blocks_per_request == 249 + 9 and rank.block_bytes == 10 * 1056 * 2048
    need = 258 * 10 * 1056 * 2048 / GIB
    assert not est.fits and est.reason is not None
    assert f"needs {need:.2f} GiB of KV cache but only {rank.kv_cache_gib:.2f} GiB" in est.reason
    assert est.kv_gib_short == pytest.approx(need - rank.kv_cache_gib)


def test_a_plain_model_that_does_not_fit_needs_its_tokens_times_its_bytes_per_token() -> None:
    """Llama-3.1-8B at 131,072 tokens: 8,192 blocks of 16 tokens x 32 layers x 2 x 8 heads x 128 x 2 B = 131,072 B
    per token = 16.00 GiB, the same figure the one-group layout gives (block_bytes = 16 x 131,072)."""
    est = estimate(get_model("meta-llama/Llama-3.1-8B-Instruct"), get_gpu("RTX4090-24GB"),
                   ServingConfig(max_model_len=131072))
    assert est.binding_rank.block_bytes == 16 * 131072
    assert est.reason is not None and "needs 16.00 GiB of KV cache" in est.reason


@pytest.mark.parametrize(("release", "blocks"), [
    # 0.10.1-0.13: the hybrid allocator is off for attention_chunk_size models, all 48 layers full length:
    # 131,072 / 16 = 8,192 blocks, every layer sharing each block id
    ("0.11", 8192), ("0.13", 8192),
    # 0.14+: 12 full + 36 chunked layers, groups of 12 -> 1 full group (8,192 blocks) and 3 chunked groups of
    # ceil(min(8192 + 8192 batched, 131072) / 16) = 1,024 blocks each: 8,192 + 3 x 1,024 = 11,264;
    # from 0.26 the chunked layers keep both batches in flight (async scheduling): ceil((8192 + 2 x 8192) / 16)
    # = 1,536 blocks each, 8,192 + 3 x 1,536 = 12,800
    ("0.14", 11264), ("0.25", 11264), ("0.33", 12800),
])
def test_llama4_chunked_layers_are_cached_at_full_length_before_0_14(release: str, blocks: int) -> None:
    scout = get_model("meta-llama/Llama-4-Scout-17B-16E-Instruct")
    est = estimate(scout, get_gpu("H100-SXM-80GB"),
                   ServingConfig(tensor_parallel=4, max_model_len=131_072, vllm_version=release))
    assert est.ranks[0].blocks_per_request == blocks
    assert {g.kind: g.layers for g in est.ranks[0].kv_groups} == (
        {"full": 48} if blocks == 8192 else {"full": 12, "chunked": 36})


def test_fit_json_names_the_hybrid_block_the_scheduler_uses() -> None:
    """`block_size` is the flag (16); a hybrid's blocks hold `attention_block_size` tokens: Qwen3-Next at TP=4 on
    0.19, 16 x ceil(274,432 / (16 x 1,024)) = 272 (as above), the block the simulator's pool takes too."""
    from gpuopt.physics.kv_cache import KvPool
    from tests.conftest import run

    result = run("fit", "--model", NEXT, "--gpu", "H100-SXM-80GB", "--tp", "4", "--max-model-len", "32768",
                 "--vllm-version", "0.19", "--json")
    out = json.loads(result.stdout)
    assert (out["block_size"], out["attention_block_size"]) == (16, 272)
    est = estimate(get_model(NEXT), get_gpu("H100-SXM-80GB"),
                   ServingConfig(tensor_parallel=4, max_model_len=32768, vllm_version="0.19"))
    assert KvPool.from_estimate(est).block_size == 272
    text = run("fit", "--model", NEXT, "--gpu", "H100-SXM-80GB", "--tp", "4", "--max-model-len", "32768",
               "--vllm-version", "0.19").stdout
    assert "blocks of 272 tokens, a request holds 3 of them in the Mamba / linear-attention layers" in text


@pytest.mark.parametrize(("model", "tp", "refused"), [
    ("nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16", 8, None),  # 64 Mamba heads, 8 B/C groups: 8 per rank, 1 group
    ("nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16", 16, "8 Mamba B/C groups"),  # 4 heads a rank, half a group
    ("Qwen/Qwen3.5-35B-A3B", 16, None),  # Gated DeltaNet: 16 key, 32 value heads
])
def test_tp_must_divide_the_recurrent_layers_heads_and_groups(model, tp, refused):
    """vLLM 0.28's MambaMixer2 asserts (n_groups % tp == 0) or n_groups == 1; QA: Nemotron-3-Nano "fit" at TP 16."""
    from gpuopt.physics.serving_config import ServingConfig, validate
    problems = validate(get_model(model), ServingConfig(tensor_parallel=tp, max_model_len=8192))
    if refused is None:
        assert problems == []
    else:
        assert any(refused in p for p in problems), problems
