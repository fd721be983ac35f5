import dataclasses
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuopt.errors import InputError
from gpuopt.hardware import get_gpu
from gpuopt.physics.architecture import get_model
from gpuopt.physics.kv_cache import kv_layout
from gpuopt.physics.memory import GIB, estimate
from gpuopt.physics.serving_config import ServingConfig
from gpuopt.physics.weights import stage_layers, weights_bytes

H100 = get_gpu("H100-SXM-80GB")
LLAMA8 = get_model("meta-llama/Llama-3.1-8B-Instruct")
LLAMA70 = get_model("meta-llama/Llama-3.1-70B-Instruct")


def kv_bytes_per_token(arch, tp=1, dtype_bytes=2):
    return arch.num_hidden_layers * arch.kv_values_per_token_per_layer(tp) * dtype_bytes


def test_llama_70b_kv_bytes_per_token_bf16():
    # 80 layers x 2 (K and V) x 8 KV heads x 128 head_dim x 2 bytes = 327,680 B (not 64 attention heads)
    assert kv_bytes_per_token(LLAMA70) == 327_680


def test_deepseek_v3_mla_kv_is_the_same_at_every_tp():
    # MLA: 61 layers x (512 kv_lora_rank + 64 rope) x 2 bytes = 70,272 B, not split across TP ranks
    ds = get_model("deepseek-ai/DeepSeek-V3")
    for tp in (1, 2, 4, 8, 16):
        assert kv_bytes_per_token(ds, tp) == 70_272


def test_kv_heads_are_replicated_when_tp_exceeds_them():
    # Llama-3.1-8B has 8 KV heads: TP=16 keeps max(1, 8 // 16) = 1 head per rank -> 2 x 1 x 128 values
    assert LLAMA8.kv_values_per_token_per_layer(16) == 2 * 1 * 128
    assert LLAMA8.kv_values_per_token_per_layer(8) == 2 * 1 * 128
    assert LLAMA8.kv_values_per_token_per_layer(2) == 2 * 4 * 128


def test_llama_8b_on_h100_reproduces_the_v019_log_by_hand():
    # weights: 8,030,261,248 params x 2 B + rotary cache 131072 x 128 x 2 B = 16,094,087,168 B = 14.9888 GiB
    # budget: ceil(79.19 GiB x 0.95); KV tokens = floor(KV bytes / (16 x 131,072 B)) x 16
    est = estimate(LLAMA8, H100, ServingConfig(max_model_len=8192, gpu_memory_utilization=0.95, vllm_version="0.19"))
    rank = est.ranks[0]
    assert rank.weights_gib * GIB == pytest.approx(8_030_261_248 * 2 + 131072 * 128 * 2)
    assert rank.budget_gib == pytest.approx(79.19 * 0.95, abs=1e-6)
    assert rank.kv_bytes_per_token == 131_072
    expected_blocks = math.floor(rank.kv_cache_gib * GIB / (16 * 131_072))
    assert rank.num_blocks == expected_blocks
    assert est.kv_cache_tokens == expected_blocks * 16
    assert est.kv_cache_tokens == pytest.approx(476_016, rel=0.01)  # vLLM v0.19 logged 476,016
    assert est.max_concurrency == pytest.approx(expected_blocks / 512)
    assert not rank.cuda_graph_in_budget  # v0.19 did not subtract the graph estimate


def test_v020_counts_cuda_graphs_inside_a_092_budget():
    est = estimate(LLAMA8, H100, ServingConfig(max_model_len=8192, vllm_version="0.20"))
    rank = est.ranks[0]
    assert est.config.gpu_memory_utilization == 0.92
    assert rank.cuda_graph_in_budget
    assert rank.kv_cache_gib == pytest.approx(
        rank.budget_gib - rank.weights_gib - rank.activation_gib - rank.non_torch_gib - rank.cuda_graph_gib)


def test_from_v021_the_logged_token_count_is_concurrency_times_max_model_len():
    # gemma-3-4b (5 global + 29 sliding layers: 1 full + 6 sliding groups of 5): v0.20 logs
    # num_blocks // 7 x 16, v0.21 max_concurrency x max_model_len (kv_cache_utils.py of each wheel)
    gemma, l4 = get_model("google/gemma-3-4b-it"), get_gpu("L4-24GB")
    old = estimate(gemma, l4, ServingConfig(max_model_len=8192, vllm_version="0.20"))
    new = estimate(gemma, l4, ServingConfig(max_model_len=8192, vllm_version="0.21"))
    assert old.kv_cache_tokens == old.binding_rank.num_blocks // 7 * 16
    assert new.kv_cache_tokens == int(new.max_concurrency * 8192)
    # a request needs only window-many sliding blocks, so the v0.21 figure is the larger one (row 98 of
    # vllm_memory_observed.csv logs 176,721 tokens on an L4, 2.5 x the blocks formula)
    assert new.kv_cache_tokens > 2 * old.kv_cache_tokens


def test_fp8_weights_keep_embeddings_in_16_bit():
    # linear params 32 x 218,103,808 = 6,979,321,856 x 1 B + embed & lm_head 2 x 525,336,576 x 2 B
    # + norms (32 x 8192 + 4096) x 2 B + rotary cache 131072 x 128 x 2 B
    expected = 6_979_321_856 + 4 * 525_336_576 + (32 * 8192 + 4096) * 2 + 131072 * 128 * 2
    got = weights_bytes(LLAMA8, "fp8", 1, range(32), first=True, last=True)
    assert got == pytest.approx(expected)


def test_pipeline_stages_put_embedding_first_and_lm_head_last():
    est = estimate(LLAMA8, H100, ServingConfig(pipeline_parallel=4, max_model_len=8192, vllm_version="0.19",
                                               gpu_memory_utilization=0.95))
    w = [r.weights_gib for r in est.ranks]
    assert w[0] == pytest.approx(w[3], abs=1e-3) and w[1] == pytest.approx(w[2]) and w[0] > w[1]  # final norm: 8 KiB
    assert w[0] == pytest.approx(4.26, abs=0.02) and w[1] == pytest.approx(3.28, abs=0.02)  # v0.19 log values


def test_stage_layers_cover_every_layer_once():
    for n, pp in ((32, 4), (61, 4), (80, 3), (7, 7)):
        stages = stage_layers(n, pp)
        assert sum(len(s) for s in stages) == n
        assert max(len(s) for s in stages) - min(len(s) for s in stages) <= 1


def test_gemma2_hybrid_groups_reproduce_logged_token_count():
    # 21 sliding + 21 full layers -> group size 21, 2 groups sharing one pool; page 16 x 2 x 8 x 256 x 2 B.
    # vLLM v0.19 logged 54.12 GiB available -> floor(54.12 GiB / (131072 x 21)) // 2 x 16 = 168,880 tokens.
    gemma = get_model("google/gemma-2-9b-it")
    kinds = gemma.layer_kinds()
    assert kinds.count("sliding") == 21 and kinds.count("full") == 21
    est = estimate(gemma, H100, ServingConfig(max_model_len=8192, gpu_memory_utilization=0.95, vllm_version="0.19"))
    size, layout = kv_layout(est.ranks[0].kv_groups)
    assert size == 21 and sorted(n for _, n in layout) == [1, 1]
    blocks = math.floor(54.12 * GIB / (131_072 * 21))
    assert blocks // 2 * 16 == 168_880
    assert est.kv_cache_tokens == pytest.approx(168_880, rel=0.01)


def test_sliding_window_requests_need_fewer_blocks_than_full_ones():
    gemma = get_model("google/gemma-2-9b-it")
    est = estimate(gemma, H100, ServingConfig(max_model_len=32768, vllm_version="0.19"))
    # full group: 32768/16 = 2048 blocks; sliding group: ceil(min(4095 + 8192, 32768)/16) + 1 = 769
    assert est.ranks[0].blocks_per_request == 2048 + 769


def test_does_not_fit_says_why():
    est = estimate(LLAMA70, get_gpu("A100-SXM-80GB"), ServingConfig(max_model_len=32768))
    assert not est.fits
    assert "weights need" in (est.reason or "")


@pytest.mark.parametrize("cfg, needle", [
    (ServingConfig(tensor_parallel=3), "does not divide the 32 attention heads"),
    (ServingConfig(pipeline_parallel=40), "exceeds the 32 layers"),
    (ServingConfig(max_model_len=0), "--max-model-len must be positive"),
    (ServingConfig(gpu_memory_utilization=1.5), "--gpu-memory-utilization"),
    (ServingConfig(data_parallel=0), "--dp must be >= 1"),
])
def test_invalid_configurations_are_input_errors(cfg, needle):
    with pytest.raises(InputError) as info:
        estimate(LLAMA8, H100, cfg)
    assert needle in str(info.value)


MODELS = ["meta-llama/Llama-3.1-8B-Instruct", "meta-llama/Llama-3.1-70B-Instruct", "Qwen/Qwen3-30B-A3B",
          "deepseek-ai/DeepSeek-V2-Lite-Chat", "google/gemma-2-9b-it", "microsoft/phi-4"]


@settings(max_examples=40, deadline=None)
@given(model=st.sampled_from(MODELS), tp_exp=st.integers(0, 3),
       precision=st.sampled_from(["bf16", "fp8", "int4"]))
def test_more_tp_never_raises_per_gpu_weights(model, tp_exp, precision):
    arch = get_model(model)
    tp = 2**tp_exp
    if arch.num_attention_heads % (tp * 2):
        return
    a = weights_bytes(arch, precision, tp, range(arch.num_hidden_layers), True, True)
    b = weights_bytes(arch, precision, tp * 2, range(arch.num_hidden_layers), True, True)
    assert b <= a


@settings(max_examples=30, deadline=None)
@given(model=st.sampled_from(MODELS), gmu=st.floats(0.5, 0.98), max_len=st.sampled_from([2048, 8192, 32768]))
def test_fp8_kv_doubles_kv_tokens_for_the_same_budget(model, gmu, max_len):
    arch = get_model(model)
    gpu = get_gpu("H200-141GB")
    auto = estimate(arch, gpu, ServingConfig(gpu_memory_utilization=gmu, max_model_len=max_len, tensor_parallel=2))
    fp8 = estimate(arch, gpu, ServingConfig(gpu_memory_utilization=gmu, max_model_len=max_len, tensor_parallel=2,
                                            kv_cache_dtype="fp8"))
    assert fp8.ranks[0].kv_bytes_per_token * 2 == auto.ranks[0].kv_bytes_per_token
    # same bytes, half the block size: twice the blocks, give or take the one block floor() drops
    assert 2 * auto.ranks[0].num_blocks <= fp8.ranks[0].num_blocks <= 2 * auto.ranks[0].num_blocks + 1


@settings(max_examples=30, deadline=None)
@given(model=st.sampled_from(MODELS), lo=st.floats(0.3, 0.97), delta=st.floats(0.0, 0.3))
def test_more_gpu_memory_utilization_never_lowers_kv_tokens(model, lo, delta):
    arch = get_model(model)
    hi = min(1.0, lo + delta)
    gpu = get_gpu("B200-180GB")
    a = estimate(arch, gpu, ServingConfig(gpu_memory_utilization=lo, max_model_len=4096, tensor_parallel=2))
    b = estimate(arch, gpu, ServingConfig(gpu_memory_utilization=hi, max_model_len=4096, tensor_parallel=2))
    assert b.kv_cache_tokens >= a.kv_cache_tokens


def test_enforce_eager_and_language_model_only():
    # vllm_memory_observed.csv line 98: gemma-3-4b, L4, v0.21, --enforce-eager --language-model-only
    gemma, l4 = get_model("google/gemma-3-4b-it"), get_gpu("L4-24GB")
    full = estimate(gemma, l4, ServingConfig(max_model_len=8192, vllm_version="0.21"))
    text = estimate(gemma, l4, ServingConfig(max_model_len=8192, vllm_version="0.21", enforce_eager=True,
                                             language_model_only=True))
    a, b = full.ranks[0], text.ranks[0]
    assert b.cuda_graph_gib == 0.0 and a.cuda_graph_gib > 0  # no graphs captured, none budgeted
    assert a.weights_gib - b.weights_gib == pytest.approx(0.42e9 * 2 / 2**30)  # the SigLIP tower + projector
    assert b.kv_cache_gib - a.kv_cache_gib == pytest.approx(a.weights_gib - b.weights_gib + a.cuda_graph_gib)
    assert b.weights_gib == pytest.approx(7.82, rel=0.01)  # "Model loading took 7.82 GiB"


def test_marlin_pads_mxfp4_experts_on_ampere():
    # gpt-oss-20b: 24 layers x 32 experts x (gate_up 2 x 2880 x 2880 + down 2880 x 2880) MXFP4 weights;
    # Marlin (A100) pads hidden 2880 -> 3072 and intermediate 2880 -> 2944; Triton (H100) keeps 2880 (64 | 2880)
    oss = get_model("openai/gpt-oss-20b")
    a100 = estimate(oss, get_gpu("A100-SXM-80GB"), ServingConfig(max_model_len=8192))
    h100 = estimate(oss, H100, ServingConfig(max_model_len=8192))
    extra = 24 * 32 * 3 * (3072 * 2944 - 2880 * 2880) * (0.5 + 1 / 32)
    # (the registry counts the experts' biases, 3 x 2880 each, with the experts: 0.03 % more)
    assert (a100.ranks[0].weights_gib - h100.ranks[0].weights_gib) * GIB == pytest.approx(extra, rel=5e-4)
    assert a100.ranks[0].weights_gib == pytest.approx(13.72, rel=0.01)  # vLLM v0.19 log on an A100: 13.72 GiB


@pytest.mark.parametrize(("version", "key"), [
    ("0.11", (0, 11)), ("v0.11.0", (0, 11, 0)), ("0.10.1.1", (0, 10, 1, 1)),
    ("0.28.1rc1.dev580+g385dce36b", (0, 28, 1)),  # a pre-release of 0.28.1, not "0.28.11"
    ("0.6.3.post2.dev308+gb489fc3c", (0, 6, 3)),
])
def test_one_release_key_for_every_per_release_rule(version: str, key: tuple[int, ...]):
    from gpuopt.physics.vllm_profile import release_key

    assert release_key(version) == key


def test_data_parallel_splits_a_moe_models_experts_across_every_engine():
    """vLLM flattens TP across DP for MoE layers (FusedMoEParallelConfig.make): with --data-parallel-size 2
    each GPU of Mixtral-8x7B holds half of the routed experts, 32 layers x 8 experts x 3 x 4096 x 14336
    bf16 parameters / 2 = 45,097,156,608 B = 42.00 GiB fewer; attention, the KV cache per token and the
    other per-engine figures do not change, and the KV cache gains exactly what the weights lose."""
    mixtral, h200 = get_model("mistralai/Mixtral-8x7B-Instruct-v0.1"), get_gpu("H200-141GB")
    one = estimate(mixtral, h200, ServingConfig(max_model_len=8192))
    two = estimate(mixtral, h200, ServingConfig(max_model_len=8192, data_parallel=2))
    half_experts = 32 * 8 * 3 * 4096 * 14336 * 2 / 2 / GIB
    assert half_experts == pytest.approx(42.0, abs=0.01)
    a, b = one.ranks[0], two.ranks[0]
    assert a.weights_gib - b.weights_gib == pytest.approx(half_experts, rel=1e-12)
    assert a.kv_bytes_per_token == b.kv_bytes_per_token
    # the expert layers now communicate across the two engines' GPUs over NVLink: the multi-GPU NCCL / custom
    # all-reduce figure of the release replaces the single-GPU one (the only other change to the budget)
    profile_nt = two.config  # same release for both
    assert profile_nt.vllm_version == one.config.vllm_version
    assert b.kv_cache_gib - a.kv_cache_gib == pytest.approx(half_experts - (b.non_torch_gib - a.non_torch_gib),
                                                            rel=1e-12)
    assert b.non_torch_gib > a.non_torch_gib
    # a dense model's DP ranks are independent replicas: nothing changes per GPU
    dense = [estimate(LLAMA8, H100, ServingConfig(max_model_len=8192, data_parallel=dp)).ranks[0] for dp in (1, 4)]
    assert dense[0] == dense[1]


def test_deepseek_r1_fits_eight_h200s_as_eight_data_parallel_engines():
    """`vllm serve deepseek-ai/DeepSeek-R1 --data-parallel-size 8 --enable-expert-parallel`: each H200 holds
    the dense part whole (TP=1) and 1/8 of the routed experts; as one TP=1 engine it needs all 671B."""
    r1, h200 = get_model("deepseek-ai/DeepSeek-R1"), get_gpu("H200-141GB")
    alone = estimate(r1, h200, ServingConfig(max_model_len=8192))
    dp8 = estimate(r1, h200, ServingConfig(max_model_len=8192, data_parallel=8))
    assert not alone.fits and dp8.fits
    experts = r1.layer_sums(range(r1.num_hidden_layers)).experts
    per_gpu_fp8 = alone.ranks[0].weights_gib - dp8.ranks[0].weights_gib
    # 58 MoE layers x 256 experts x 3 x 7168 x 2048 = 653.9 B routed parameters at 1 B each (the registry's
    # fp8; a checkpoint read from the Hub adds its block scales), 7/8 of them leave each GPU: 532.88 GiB
    assert experts == 58 * 256 * 3 * 7168 * 2048
    assert per_gpu_fp8 == pytest.approx(experts * 7 / 8 / GIB, rel=1e-12)
    assert per_gpu_fp8 == pytest.approx(532.88, abs=0.005)


@settings(max_examples=30, deadline=None)
@given(model=st.sampled_from(MODELS + ["mistralai/Mixtral-8x7B-Instruct-v0.1", "openai/gpt-oss-120b"]),
       dp_exp=st.integers(0, 3), kv=st.sampled_from(["auto", "fp8"]))
def test_more_data_parallel_engines_never_add_weights_and_only_moe_models_lose_any(model, dp_exp, kv):
    """Doubling --data-parallel-size halves what a GPU holds of the routed experts and nothing else: per-GPU
    weights never rise, fall for every MoE model and stay for a dense one (whose engines are plain replicas)."""
    arch, h200 = get_model(model), get_gpu("H200-141GB")
    dp = 2**dp_exp
    a, b = (estimate(arch, h200, ServingConfig(max_model_len=4096, kv_cache_dtype=kv, data_parallel=n)).ranks[0]
            for n in (dp, 2 * dp))
    assert b.weights_gib <= a.weights_gib
    assert (b.weights_gib < a.weights_gib) == arch.is_moe
    assert a.kv_bytes_per_token == b.kv_bytes_per_token
    if not arch.is_moe:
        assert a == b


def test_expert_slices_must_divide_the_intermediate_size_unless_experts_are_whole():
    """vLLM's FusedMoE asserts intermediate_size % tp_size == 0, tp_size being tp x dp for the expert layers
    without expert parallelism (1 with it). Qwen3-30B-A3B's experts have 768 intermediate channels: TP=2 x DP=3
    slices them into 6 x 128; DP=5 cannot (768 / 5 = 153.6)."""
    qwen = get_model("Qwen/Qwen3-30B-A3B")
    assert estimate(qwen, H100, ServingConfig(max_model_len=4096, tensor_parallel=2, data_parallel=3)).fits
    with pytest.raises(InputError) as info:
        estimate(qwen, H100, ServingConfig(max_model_len=4096, data_parallel=5))
    assert str(info.value).startswith("--tp 1 x --dp 5: vLLM slices each expert's 768 intermediate channels")
    # whole experts per GPU: nothing to slice, 128 experts dealt over 5 GPUs (26 on some)
    assert estimate(qwen, H100, ServingConfig(max_model_len=4096, data_parallel=5, expert_parallel=True)).fits
    # a dense model's data-parallel engines slice nothing
    assert estimate(LLAMA8, H100, ServingConfig(max_model_len=4096, data_parallel=5)).fits


def test_expert_parallel_deals_whole_experts_and_the_first_gpu_holds_the_remainder():
    """vLLM's determine_expert_map gives each of ep GPUs E // ep experts and the first E % ep one more. Mixtral's
    8 experts over 3 GPUs (TP=3 is not a head split of 32, so DP=3): 3, 3, 2 -- the first GPU holds 3/8 of the
    routed experts where slicing (not allowed here: 14336 / 3) would give 1/3. Over 4 GPUs: 2 each, 1/4."""
    mixtral, h200 = get_model("mistralai/Mixtral-8x7B-Instruct-v0.1"), get_gpu("H200-141GB")
    experts = 32 * 8 * 3 * 4096 * 14336 * 2 / GIB  # bf16 routed experts: 84.0 GiB
    one = estimate(mixtral, h200, ServingConfig(max_model_len=4096)).ranks[0].weights_gib
    for dp, share in ((3, 3 / 8), (4, 2 / 8)):
        ep = estimate(mixtral, h200, ServingConfig(max_model_len=4096, data_parallel=dp, expert_parallel=True))
        assert one - ep.ranks[0].weights_gib == pytest.approx(experts * (1 - share), rel=1e-12)


@pytest.mark.parametrize(("gpu", "version", "expected"), [
    ("B200-180GB", "0.27", (1024, 8192)),  # 177.25 GiB: the 0.27.1 wheel has two tiers only
    ("B200-180GB", "0.28", (1024, 16384)),  # the 0.28.0 wheel adds >= 160 GiB: 16384 for the API server
    ("MI300X-192GB", "0.29", (1024, 16384)),
    ("H200-141GB", "0.28", (1024, 8192)),  # 139.8 GiB: below the new tier
    ("L4-24GB", "0.28", (256, 2048)),
    ("A100-SXM-80GB", "0.28", (256, 2048)),  # vLLM keeps A100 on the small defaults by name
])
def test_scheduler_defaults_follow_the_release_and_the_gpu(gpu, version, expected):
    est = estimate(LLAMA8, get_gpu(gpu), ServingConfig(max_model_len=8192, vllm_version=version))
    assert (est.config.max_num_seqs, est.config.max_num_batched_tokens) == expected


def test_throughput_performance_mode_doubles_only_the_defaults():
    base = estimate(LLAMA8, H100, ServingConfig(max_model_len=8192, vllm_version="0.19"))
    fast = estimate(LLAMA8, H100, ServingConfig(max_model_len=8192, vllm_version="0.19", performance_mode="throughput"))
    assert (base.config.max_num_seqs, base.config.max_num_batched_tokens) == (1024, 8192)
    assert (fast.config.max_num_seqs, fast.config.max_num_batched_tokens) == (2048, 16384)
    # a value the user set stays as set (EngineArgs doubles only what it defaulted)
    mixed = estimate(LLAMA8, H100, ServingConfig(max_model_len=8192, vllm_version="0.19", max_num_seqs=64,
                                                 performance_mode="throughput"))
    assert (mixed.config.max_num_seqs, mixed.config.max_num_batched_tokens) == (64, 16384)
    # a larger profiling batch: more activation memory, so fewer KV tokens
    assert fast.ranks[0].activation_gib > base.ranks[0].activation_gib
    assert fast.kv_cache_tokens < base.kv_cache_tokens
    interactive = estimate(LLAMA8, H100, ServingConfig(max_model_len=8192, vllm_version="0.19",
                                                       performance_mode="interactivity"))
    assert interactive.config.max_num_batched_tokens == 8192
    with pytest.raises(InputError, match="--performance-mode is not a flag of vLLM 0.16"):
        estimate(LLAMA8, H100, ServingConfig(max_model_len=8192, vllm_version="0.16", performance_mode="throughput"))
    # one error line per problem: the release's missing flag and a block size it refuses, together
    with pytest.raises(InputError) as both:
        estimate(LLAMA8, H100, ServingConfig(max_model_len=8192, vllm_version="0.16", performance_mode="throughput",
                                             block_size=7))
    assert [p.split(" is ")[0] for p in both.value.problems] == ["--performance-mode", "--block-size 7"]


def test_vllms_config_checks_refuse_what_it_refuses():
    cfg = ServingConfig(max_model_len=8192, vllm_version="0.16")
    # --block-size choices: BlockSize in vllm/config/cache.py (0.11: up to 128; 0.12-0.17: 256 too; 0.18: any int)
    for version, size, ok in (("0.11", 256, False), ("0.12", 256, True), ("0.16", 7, False), ("0.19", 7, True)):
        c = dataclasses.replace(cfg, vllm_version=version, block_size=size)
        if ok:
            assert estimate(LLAMA8, H100, c).config.block_size == size
        else:
            with pytest.raises(InputError, match=f"--block-size {size} is not a value of vLLM {version}"):
                estimate(LLAMA8, H100, c)
    # max_num_batched_tokens >= max_num_seqs, naming the default when the user set only one
    with pytest.raises(InputError, match=r"--max-num-batched-tokens 512 is below max_num_seqs 1024 \(vLLM's default "
                                         r"on H100-SXM-80GB\)"):
        estimate(LLAMA8, H100, dataclasses.replace(cfg, max_num_batched_tokens=512))
    ok = estimate(LLAMA8, H100, dataclasses.replace(cfg, max_num_batched_tokens=512, max_num_seqs=512))
    assert (ok.config.max_num_seqs, ok.config.max_num_batched_tokens) == (512, 512)


def test_without_chunked_prefill_a_prompt_must_fit_one_step():
    off = ServingConfig(max_model_len=16384, vllm_version="0.16", chunked_prefill=False)
    # 0.12 on: max(max_model_len, the default); 0.10-0.11: max_model_len itself
    assert estimate(LLAMA8, H100, off).config.max_num_batched_tokens == 16384
    assert estimate(LLAMA8, H100, dataclasses.replace(off, max_model_len=4096)).config.max_num_batched_tokens == 8192
    old = dataclasses.replace(off, max_model_len=4096, vllm_version="0.11")
    assert estimate(LLAMA8, H100, dataclasses.replace(old, max_num_seqs=256)).config.max_num_batched_tokens == 4096
    with pytest.raises(InputError, match="--max-num-batched-tokens 8192 is below --max-model-len 16384 with chunked "
                                         "prefill off"):
        estimate(LLAMA8, H100, dataclasses.replace(off, max_num_batched_tokens=8192))


def test_expert_parallel_over_more_gpus_than_experts_is_refused():
    mixtral = get_model("mistralai/Mixtral-8x7B-Instruct-v0.1")  # 8 routed experts
    ok = estimate(mixtral, H100, ServingConfig(tensor_parallel=2, data_parallel=4, expert_parallel=True,
                                               max_model_len=8192))
    assert ok.config.moe_shards(mixtral) == 8
    with pytest.raises(InputError, match="more GPUs than the 8 routed experts"):
        estimate(mixtral, H100, ServingConfig(tensor_parallel=2, data_parallel=8, expert_parallel=True,
                                              max_model_len=8192))


@pytest.mark.parametrize("release, pp, v2, expected", [
    ("0.25", 1, False, 8192),      # the scheduled step only
    ("0.26", 1, False, 16384),     # async scheduling (default from 0.14): 2 batches in flight on the V1 runner
    ("0.33", 1, True, 16384),      # the V2 runner: PP + 1 = 2
    ("0.33", 2, True, 3 * 8192),   # PP 2 on the V2 runner: 3
    ("0.33", 2, False, 2 * 8192),  # the V1 runner does not add a batch to PP
])
def test_windowed_layers_keep_every_batch_in_flight_from_026(release, pp, v2, expected):
    """vLLM 0.26+ sizes a sliding-window request as window - 1 + max_in_flight_tokens (max_concurrent_batches x
    max_num_batched_tokens), 0.25 as window - 1 + max_num_batched_tokens."""
    from gpuopt.physics.kv_cache import KvGroup, blocks_for, in_flight_tokens
    from gpuopt.physics.serving_config import resolve
    from gpuopt.physics.vllm_profile import get_profile

    cfg, profile = resolve(LLAMA8, get_gpu("H100-SXM-80GB"),
                           ServingConfig(pipeline_parallel=pp, max_model_len=32768, max_num_batched_tokens=8192,
                                         vllm_version=release))
    assert profile == get_profile(release)
    assert in_flight_tokens(cfg, profile, v2) == expected
    # a 4,096-token window in 16-token blocks: ceil((4,095 + in flight) / 16) + 1 blocks a request
    window = KvGroup(kind="sliding", layers=1, bytes_per_token_per_layer=1.0, window=4096)
    assert blocks_for(window, 32768, 16, expected) == -(-(4095 + expected) // 16) + 1


def test_a_dsa_indexers_projections_are_stored_in_the_weight_format_as_vllm_builds_them():
    """DeepSeek-V3.2's indexer (64 heads x 128, q_lora_rank 1,536, hidden 7,168) in each of its 61 layers: vLLM
    builds wq_b with the model's quant_config in every release, and wk too up to 0.19; 0.20 fused wk with
    weights_proj into one unquantised linear. In FP8 (1 B a weight) against 16-bit (2 B), per GPU (replicated):
    wq_b saves 61 x 1,536 x 64 x 128 x 1 B = 767,557,632 B from 0.20, and wk 61 x 7,168 x 128 x 1 B =
    55,967,744 B more up to 0.19."""
    from gpuopt.physics.weights import indexer_linear_params

    arch = get_model("deepseek-ai/DeepSeek-V3.2")
    assert indexer_linear_params(arch, "0.33") == 1536 * 64 * 128
    assert indexer_linear_params(arch, "0.19") == 1536 * 64 * 128 + 7168 * 128
    assert indexer_linear_params(LLAMA8, "0.33") == 0
    old, new = (weights_bytes(arch, "fp8", 8, range(61), True, True, vllm_version=v) for v in ("0.19", "0.33"))
    assert new - old == 55_967_744
