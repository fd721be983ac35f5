import csv
import json
from importlib import resources
from pathlib import Path

import pytest

from gpuopt.errors import ConfigError, UnknownNameError
from gpuopt.physics.architecture import from_hf_config, get_model, registry, registry_model
from gpuopt.vocabulary import KV_LAYER_KINDS, LAYER_KINDS

REQUIRED = [
    "codellama/CodeLlama-7b-hf", "google/gemma-7b", "google/gemma-2-2b-it", "google/gemma-3-4b-it",
    "ibm-granite/granite-3.1-2b-instruct", "ibm-granite/granite-3.1-8b-instruct",
    "ibm-granite/granite-3.3-8b-instruct", "microsoft/phi-2", "mistralai/Mistral-Small-3.1-24B-Instruct-2503",
    "Qwen/Qwen1.5-MoE-A2.7B", "Qwen/Qwen2.5-Coder-32B-Instruct", "Qwen/Qwen3-0.6B", "Qwen/Qwen3-14B",
    "deepseek-ai/DeepSeek-V2-Lite-Chat", "moonshotai/Kimi-VL-A3B-Instruct", "moonshotai/Kimi-Dev-72B",
    "meta-llama/Llama-4-Scout-17B-16E-Instruct", "meta-llama/Llama-3.2-11B-Vision-Instruct",
]


def _csv_ids() -> list[str]:
    text = resources.files("gpuopt").joinpath("data/models.csv").read_text(encoding="utf-8")
    return [row["hf_id"] for row in csv.DictReader(text.splitlines())]


def test_every_row_of_models_csv_loads_once_and_the_required_models_are_there():
    ids = _csv_ids()
    assert sorted(i for i in set(ids) if ids.count(i) > 1) == []
    assert sorted(registry()) == sorted(ids)
    for hf_id in REQUIRED:
        assert hf_id in registry()


@pytest.mark.parametrize("arch", list(registry().values()), ids=lambda m: m.hf_id)
def test_every_registry_row_is_consistent(arch):
    """Per row, so adding a model adds a case instead of breaking a count."""
    assert arch.source, "provenance"
    assert arch.inconsistencies() == [], "the check a config.json is refused with (from_hf_dict)"
    if arch.attention_kind == "mha":
        assert arch.num_key_value_heads == arch.num_attention_heads
    kinds = arch.layer_kinds()
    assert len(kinds) == arch.num_hidden_layers and set(kinds) <= set(LAYER_KINDS)
    assert any(k in KV_LAYER_KINDS for k in kinds), "some layer keeps a KV cache"
    if arch.is_mla:
        assert set(kinds) == {"mla"}
    if arch.attention_kind not in ("mha", "gqa"):
        assert set(kinds) != {"full"}, f"layer_kinds() does not map attention kind {arch.attention_kind!r}"
    if arch.missing_fields():
        return
    total, active = arch.total_params() / 1e9, arch.active_params() / 1e9
    assert 0 < active <= total
    if arch.active_params_b_reference:
        assert active == pytest.approx(arch.active_params_b_reference, rel=0.02)
    if arch.published_params_b:
        # published sizes are names (Gemma-7B has 8.5 B parameters): only a gross mismatch such as an
        # active count in the total's column is caught here; the 2 % check below uses computed references
        assert abs(total - arch.published_params_b) / arch.published_params_b <= 0.25


def test_at_least_60_models_are_complete_for_fit():
    complete = [m for m in registry().values() if not m.missing_fields()]
    assert len(complete) >= 60


@pytest.mark.parametrize("arch", [m for m in registry().values() if m.total_params_b_reference],
                         ids=lambda m: m.hf_id)
def test_parameter_count_from_architecture_matches_reference_within_2_percent(arch):
    if arch.missing_fields():
        pytest.skip(f"incomplete: {arch.missing_fields()}")
    ours = arch.total_params() / 1e9
    assert abs(ours - arch.total_params_b_reference) / arch.total_params_b_reference <= 0.02


def test_llama_3_1_8b_parameters_by_hand():
    # embed 128256*4096 = 525,336,576 (x2: untied lm_head)
    # per layer: q,o 4096*4096*2 = 33,554,432; k,v 4096*1024*2 = 8,388,608; MLP 3*4096*14336 = 176,160,768;
    #            norms 2*4096 = 8,192  -> 218,112,000 x 32 = 6,979,584,000; final norm 4,096
    m = get_model("meta-llama/Llama-3.1-8B-Instruct")
    assert m.total_params() == 2 * 525_336_576 + 6_979_584_000 + 4_096


def test_moe_active_parameters_are_a_fraction_of_total():
    m = get_model("mistralai/Mixtral-8x7B-Instruct-v0.1")
    assert m.active_params() / 1e9 == pytest.approx(12.88, rel=0.01)
    assert m.total_params() / 1e9 == pytest.approx(46.70, rel=0.01)


def test_lookup_is_case_insensitive_and_accepts_short_names():
    assert get_model("qwen/qwen3-14b").hf_id == "Qwen/Qwen3-14B"
    assert get_model("Qwen3-14B").hf_id == "Qwen/Qwen3-14B"


def test_unknown_model_suggests_close_matches():
    with pytest.raises(UnknownNameError) as info:
        get_model("meta-llama/Llama-3.1-8B-Instruc")
    assert "meta-llama/Llama-3.1-8B-Instruct" in info.value.suggestions


def _write(tmp_path: Path, cfg: dict) -> Path:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    return path


LLAMA_8B_CONFIG = {
    "architectures": ["LlamaForCausalLM"], "hidden_size": 4096, "intermediate_size": 14336,
    "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8, "vocab_size": 128256,
    "max_position_embeddings": 131072, "tie_word_embeddings": False, "torch_dtype": "bfloat16",
}


def test_hf_config_reproduces_the_registry_entry(tmp_path):
    arch = from_hf_config(_write(tmp_path, LLAMA_8B_CONFIG), name="my-llama")
    ref = get_model("meta-llama/Llama-3.1-8B-Instruct")
    assert arch.hf_id == "my-llama"
    assert arch.total_params() == ref.total_params()
    assert arch.kv_values_per_token_per_layer(1) == ref.kv_values_per_token_per_layer(1)


def test_hf_config_missing_field_is_named(tmp_path):
    cfg = {k: v for k, v in LLAMA_8B_CONFIG.items() if k != "num_hidden_layers"}
    with pytest.raises(ConfigError) as info:
        from_hf_config(_write(tmp_path, cfg))
    assert "num_hidden_layers" in str(info.value)


def test_hf_config_reads_mla_and_nested_text_config(tmp_path):
    cfg = {"text_config": {"hidden_size": 2048, "intermediate_size": 10944, "moe_intermediate_size": 1408,
                           "num_attention_heads": 16, "num_key_value_heads": 16, "num_hidden_layers": 27,
                           "vocab_size": 102400, "kv_lora_rank": 512, "qk_rope_head_dim": 64,
                           "qk_nope_head_dim": 128, "v_head_dim": 128, "n_routed_experts": 64,
                           "num_experts_per_tok": 6, "n_shared_experts": 2, "first_k_dense_replace": 1}}
    arch = from_hf_config(_write(tmp_path, cfg), name="dsv2-lite")
    ref = get_model("deepseek-ai/DeepSeek-V2-Lite-Chat")
    assert arch.is_mla
    assert arch.kv_values_per_token_per_layer(4) == 576
    assert arch.total_params() == ref.total_params()


def test_hf_config_reads_the_dsa_indexer_and_its_top_k():
    config = Path(__file__).parent / "fixtures" / "model_configs" / "deepseek-ai__DeepSeek-V3.2.json"
    arch = from_hf_config(config, name="dsv32")
    assert (arch.index_n_heads, arch.index_head_dim, arch.index_topk) == (64, 128, 2048)
    # the registry row carries the same three facts (model_layers.csv)
    ref = get_model("deepseek-ai/DeepSeek-V3.2")
    assert (ref.index_n_heads, ref.index_head_dim, ref.index_topk) == (64, 128, 2048)
    assert get_model("zai-org/GLM-5").index_topk == 2048
    assert get_model("deepseek-ai/DeepSeek-V3").index_topk is None


@pytest.mark.parametrize(("change", "expected"), [
    ({"num_key_value_heads": 0}, "field 'num_key_value_heads' must be a positive integer (got 0)"),
    ({"num_attention_heads": 0}, "field 'num_attention_heads' must be a positive integer (got 0)"),
    ({"num_hidden_layers": 0}, "field 'num_hidden_layers' must be a positive integer (got 0)"),
    ({"vocab_size": -5}, "field 'vocab_size' must be a positive integer (got -5)"),
    ({"max_position_embeddings": -1}, "field 'max_position_embeddings' must be a positive integer (got -1)"),
    ({"hidden_size": "4096x"}, "field 'hidden_size' must be an integer (got \"4096x\")"),
    # JSON's true is not a count: not 1 (a vocabulary of one), nor absent (MHA where the config says GQA)
    ({"num_hidden_layers": True}, "field 'num_hidden_layers' must be an integer (got true)"),
    ({"num_key_value_heads": True}, "field 'num_key_value_heads' must be an integer (got true)"),
    ({"vocab_size": False}, "field 'vocab_size' must be an integer (got false)"),
    ({"num_local_experts": -8}, "field 'num_local_experts' must be a non-negative integer (got -8)"),
    # bounded: 10^20 layers never finished loading, 10^30 (a JSON float) overflowed an index
    ({"num_hidden_layers": 10**20}, "field 'num_hidden_layers' must be at most 10,000 (got 1e+20)"),
    ({"num_hidden_layers": 1e30}, "field 'num_hidden_layers' must be at most 10,000 (got 1e+30)"),
    ({"vocab_size": 2**31}, "field 'vocab_size' must be at most 2,147,483,647 (got 2.14748e+09)"),
    # 32 query heads over 7 KV heads: 32 % 7 = 4, no whole groups
    ({"num_key_value_heads": 7}, "field 'num_key_value_heads': the 32 attention heads do not divide into groups "
                                 "over 7 KV heads"),
    ({"num_local_experts": 8, "num_experts_per_tok": 16},
     "field 'num_experts_per_tok': 16 experts per token but only 8 experts"),
    ({"sliding_window": 4096, "layer_types": ["sliding_attention"] * 3},
     "field 'layer_types' has 3 entries but num_hidden_layers is 32"),
    # (with the Mamba-2 fields the pattern declares a need for: test_config_fields.py)
    ({"hybrid_override_pattern": "X" * 32, "mamba_num_heads": 64, "mamba_head_dim": 64, "ssm_state_size": 128,
      "n_groups": 8, "conv_kernel": 4},
     "field 'hybrid_override_pattern' has unknown block kind(s) 'X' (known: M * - E)"),
])
def test_an_impossible_config_is_one_error_naming_file_and_field(tmp_path, change, expected):
    path = _write(tmp_path, {**LLAMA_8B_CONFIG, **change})
    with pytest.raises(ConfigError) as info:
        from_hf_config(path)
    assert info.value.problems == (f"{path}: {expected}",)


def test_the_consistency_check_the_registry_rows_are_held_to_catches_a_bad_row():
    """inconsistencies() refuses a config (above) and holds every registry row (test_every_registry_row_...)."""
    moe = get_model("mistralai/Mixtral-8x7B-Instruct-v0.1")
    assert moe.model_copy(update={"experts_per_token": 9}).inconsistencies() == [
        ("experts_per_token", "9 experts per token but only 8 experts")]


# Maverick's text_config (../shared/data/model_configs/meta-llama__Llama-4-Maverick-17B-128E-Instruct
# .aiconfigurator-abridged.json), the keys vLLM's llama4.py reads
MAVERICK_TEXT = {
    "model_type": "llama4_text", "hidden_size": 5120, "intermediate_size": 8192, "intermediate_size_mlp": 16384,
    "num_attention_heads": 40, "num_key_value_heads": 8, "head_dim": 128, "num_hidden_layers": 48,
    "vocab_size": 202048, "num_local_experts": 128, "num_experts_per_tok": 1, "interleave_moe_layer_step": 2,
    "attention_chunk_size": 8192, "use_qk_norm": False, "torch_dtype": "bfloat16",
}


def test_llama4_config_has_dense_mlp_layers_a_shared_expert_and_chunked_attention(tmp_path):
    cfg = {"architectures": ["Llama4ForConditionalGeneration"], "model_type": "llama4", "text_config": MAVERICK_TEXT}
    arch = from_hf_config(_write(tmp_path, cfg), name="maverick")
    # attention: q 40x128 = 5120, kv 8x128 = 1024; q_proj + o_proj 2 x 5120 x 5120 = 52,428,800, k/v 2 x 5120 x
    # 1024 = 10,485,760 -> 62,914,560; two RMSNorms 2 x 5120 = 10,240
    # layer 0 (dense, (0 + 1) % 2 != 0): MLP of intermediate_size_mlp, 3 x 5120 x 16384 = 251,658,240
    assert arch.layer_params(0).total == 62_914_560 + 251_658_240 + 10_240
    # layer 1 (MoE): 128 experts x 3 x 5120 x 8192 = 16,106,127,360, shared expert 3 x 5120 x 8192 =
    # 125,829,120, router 5120 x 128 = 655,360
    p = arch.layer_params(1)
    assert (p.experts, p.linear, p.replicated) == (16_106_127_360, 62_914_560 + 125_829_120, 655_360 + 10_240)
    # one token: attention + shared expert + router/norms + 1 of 128 experts (125,829,120)
    assert arch.layer_active_params(1) == 188_743_680 + 665_600 + 125_829_120
    # no no_rope_layers: transformers' default, NoPE (full attention) when (i + 1) % 4 == 0, else chunked
    assert arch.layer_kinds()[:4] == ["chunked", "chunked", "chunked", "full"]
    assert (arch.attention_kind, arch.sliding_window, arch.sliding_layers) == ("chunked-local mix", 8192, 36)
    ref = get_model("meta-llama/Llama-4-Maverick-17B-128E-Instruct")
    assert (arch.total_params(), arch.active_params()) == (ref.total_params(), ref.active_params())
    assert arch.layer_kinds() == ref.layer_kinds()


def test_llama4_scout_config_agrees_with_the_registry_row(tmp_path):
    scout = {**MAVERICK_TEXT, "num_local_experts": 16, "interleave_moe_layer_step": 1}
    arch = from_hf_config(_write(tmp_path, scout), name="scout")
    ref = get_model("meta-llama/Llama-4-Scout-17B-16E-Instruct")
    assert (arch.total_params(), arch.active_params()) == (ref.total_params(), ref.active_params())
    assert round(arch.total_params() / 1e9, 2) == 107.77 and round(arch.active_params() / 1e9, 2) == 17.17
    assert arch.layer_kinds() == ref.layer_kinds() and ref.layer_kinds().count("chunked") == 36


def test_llama4_no_rope_layers_decide_which_layers_are_chunked(tmp_path):
    # vLLM: no_rope_layers[i] == 0 -> NoPE layer, plain Attention; otherwise ChunkedLocalAttention
    arch = from_hf_config(_write(tmp_path, {**MAVERICK_TEXT, "no_rope_layers": [0, 1] * 24}))
    assert arch.layer_kinds()[:3] == ["full", "chunked", "full"] and arch.sliding_layers == 24
    no_chunk = from_hf_config(_write(tmp_path, {**MAVERICK_TEXT, "attention_chunk_size": None}))
    assert set(no_chunk.layer_kinds()) == {"full"} and no_chunk.sliding_window is None


@pytest.mark.parametrize(("change", "expected"), [
    ({"no_rope_layers": [1] * 40}, "field 'no_rope_layers' has 40 entries but num_hidden_layers is 48"),
    ({"intermediate_size_mlp": "16k"}, "field 'intermediate_size_mlp' must be a positive integer (got \"16k\")"),
])
def test_a_bad_llama4_field_is_one_error_naming_file_and_field(tmp_path, change, expected):
    path = _write(tmp_path, {**MAVERICK_TEXT, **change})
    with pytest.raises(ConfigError) as info:
        from_hf_config(path)
    assert info.value.problems == (f"{path}: {expected}",)


def test_a_registry_model_is_found_by_its_id_in_any_case_and_nothing_else_is():
    assert registry_model("meta-llama/Llama-3.1-8B-Instruct") is get_model("meta-llama/Llama-3.1-8B-Instruct")
    assert registry_model("META-LLAMA/llama-3.1-8b-instruct") is get_model("meta-llama/Llama-3.1-8B-Instruct")
    assert registry_model("Llama-3.1-8B-Instruct") is None  # the short name is get_model's convenience only
    assert registry_model("Qwen/Qwen3-32B-AWQ") is None  # a checkpoint, not a registry model
