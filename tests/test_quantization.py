"""Quantized checkpoints: bytes per weight (scales and zero points included) and vLLM's kernel per GPU.

Expected kernels restate vLLM v0.11's selection rules (awq_marlin / gptq_marlin conversion at sm80, Machete
only on sm90 without act-order, FP8 Marlin below sm89, CUTLASS block FP8 on sm90/sm100, MXFP4 Triton on
sm90 and FlashInfer on sm100, NVFP4 W4A4 only on Blackwell).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpuopt.errors import ConfigError
from gpuopt.hardware import get_gpu
from gpuopt.physics.architecture import from_hf_dict, get_model
from gpuopt.physics.memory import GIB, estimate
from gpuopt.physics.quantization import kernel_on, read_quantization
from gpuopt.physics.resolution import from_local_path
from gpuopt.physics.serving_config import ServingConfig, precision_unsupported
from gpuopt.physics.weights import weights_bytes

FIXTURES = Path(__file__).parent / "fixtures" / "model_configs"

AWQ = {"quant_method": "awq", "bits": 4, "group_size": 128, "zero_point": True, "version": "gemm"}
GPTQ = {"quant_method": "gptq", "bits": 4, "group_size": 128, "sym": True, "desc_act": False}


FP8 = {"quant_method": "fp8", "activation_scheme": "dynamic"}  # the fields Fp8Config.from_config requires


def q(config: dict[str, Any]) -> Any:
    result = read_quantization({"quantization_config": config})
    assert result is not None
    return result


def test_awq_bytes_and_kernels() -> None:
    awq = q(AWQ)
    assert awq.bytes_per_weight == 0.5 + 2 / 128 + 0.5 / 128  # 4-bit + fp16 scale + 4-bit zero per 128
    assert awq.weight_format == "int4"
    assert awq.kernel_path(80).vllm_method == "awq_marlin"
    assert awq.kernel_path(90).linear == "marlin"  # AWQ Marlin does not go through Machete
    turing = awq.kernel_path(75, "0.11")  # AWQMarlinConfig needs sm80 in 0.11-0.13
    assert (turing.vllm_method, turing.linear) == ("awq", "awq-gemm")
    assert awq.kernel_path(75, "0.14").linear == "marlin"  # Marlin from sm75 in 0.14
    assert not awq.kernel_path(70).supported


def test_gptq_picks_machete_on_hopper_unless_act_order() -> None:
    gptq = q(GPTQ)
    assert gptq.kernel_path(90).linear == "machete"
    assert gptq.kernel_path(89).linear == "marlin"
    assert q({**GPTQ, "desc_act": True}).kernel_path(90).linear == "marlin"
    assert q({**GPTQ, "group_size": 256}).kernel_path(90).vllm_method == "gptq"  # not Marlin-compatible
    assert gptq.kernel_path(90).activation_bits == 16


def test_fp8_block_and_tensor() -> None:
    block = q({**FP8, "weight_block_size": [128, 128]})
    assert block.bytes_per_weight == 1 + 4 / 16384
    assert block.kernel_path(90).linear == "cutlass-block-fp8"
    assert block.kernel_path(89).linear == "triton-block-fp8"
    ampere = block.kernel_path(80)
    assert (ampere.linear, ampere.activation_bits) == ("marlin-fp8", 16)
    tensor = q({**FP8, "activation_scheme": "static"})
    assert (tensor.scheme, tensor.bytes_per_weight) == ("fp8-tensor", 1.0)
    assert tensor.kernel_path(89).linear == "cutlass-fp8"


def test_compressed_tensors_schemes() -> None:
    def ct(weights: dict[str, Any], acts: dict[str, Any] | None) -> Any:
        return q({"quant_method": "compressed-tensors",
                  "config_groups": {"group_0": {"weights": weights, "input_activations": acts, "targets": ["Linear"]}},
                  "ignore": ["lm_head"]})

    w8a8 = ct({"num_bits": 8, "type": "int", "strategy": "channel", "symmetric": True},
              {"num_bits": 8, "type": "int", "strategy": "token", "dynamic": True})
    assert (w8a8.weight_format, w8a8.bytes_per_weight, w8a8.kernel_path(80).linear) == ("int8", 1.0, "cutlass-int8")
    w4a16 = ct({"num_bits": 4, "type": "int", "strategy": "group", "group_size": 128, "symmetric": True}, None)
    assert w4a16.bytes_per_weight == 0.5 + 2 / 128
    assert w4a16.kernel_path(90).linear == "machete" and w4a16.kernel_path(86).linear == "marlin"
    fp8 = ct({"num_bits": 8, "type": "float", "strategy": "channel"}, {"num_bits": 8, "type": "float"})
    assert fp8.weight_format == "fp8" and fp8.kernel_path(89).activation_bits == 8
    nvfp4 = ct({"num_bits": 4, "type": "float", "strategy": "tensor_group", "group_size": 16},
               {"num_bits": 4, "type": "float"})
    assert nvfp4.bytes_per_weight == 0.5 + 1 / 16
    assert nvfp4.kernel_path(100).activation_bits == 4 and nvfp4.kernel_path(90).linear == "marlin-fp4"


def test_bitsandbytes_and_mxfp4() -> None:
    nf4 = q({"quant_method": "bitsandbytes", "load_in_4bit": True, "bnb_4bit_quant_type": "nf4",
             "bnb_4bit_use_double_quant": True})
    assert nf4.bytes_per_weight == 0.5 + 1 / 64 + 4 / (64 * 256)
    assert q({"quant_method": "bitsandbytes", "load_in_8bit": True}).weight_format == "int8"
    mx = q({"quant_method": "mxfp4"})
    assert mx.bytes_per_weight == 0.5 + 1 / 32 and mx.experts_only
    # get_mxfp4_backend (v0.11/v0.13): Marlin below sm90, triton_kernels on sm90, FlashInfer on sm100, and
    # Marlin on GeForce/RTX PRO Blackwell (sm120: triton_kernels is limited to sm90-sm10x from v0.13)
    assert [mx.kernel_path(cc).moe for cc in (80, 89, 90, 100, 120)] == [
        "marlin-mxfp4", "marlin-mxfp4", "triton-mxfp4", "flashinfer-mxfp4", "marlin-mxfp4"]


def test_modelopt_nvfp4_from_hf_quant_config() -> None:
    cfg = json.loads((FIXTURES / "nvidia__NVIDIA-Nemotron-3-Nano-30B-A3B-NVFP4.json").read_text())
    side = json.loads((FIXTURES / "nvidia__NVIDIA-Nemotron-3-Nano-30B-A3B-NVFP4.hf_quant_config.json").read_text())
    arch = from_hf_dict(cfg, name="nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-NVFP4", hf_quant_config=side)
    nv = arch.quantization
    assert nv is not None
    assert (nv.scheme, nv.group_size, nv.kv_cache_fp8, nv.attention_excluded) == ("nvfp4", 16, True, False)
    # exclude_modules names the 6 attention layers and 6 of the 23 Mamba mixers one by one
    assert nv.excluded_mixer_layers == (4, 5, 11, 12, 18, 19, 25, 26, 32, 33, 41, 42)
    assert nv.bytes_per_weight == 0.5 + 1 / 16
    assert nv.kernel_path(100).linear == "flashinfer-cutlass-fp4"
    assert not nv.kernel_path(75, "0.13").supported  # ModelOpt NVFP4 needs sm80 up to 0.13, sm75 from 0.14
    assert nv.kernel_path(75, "0.14").linear == "marlin-fp4"


def test_unknown_and_unmodelled_methods_are_config_errors() -> None:
    with pytest.raises(ConfigError, match="unknown quant_method 'exl3'"):
        q({"quant_method": "exl3"})
    with pytest.raises(ConfigError, match="quant_algo 'W4A8_AWQ'"):
        read_quantization({}, hf_quant_config={"quantization": {"quant_algo": "W4A8_AWQ"}})
    # FastDeploy's test config for ERNIE-4.5-21B-A3B (../shared/data/model_configs) describes Paddle's mix_quant
    # without the quant_method key vLLM reads: the error names the missing key and the keys that are there
    fastdeploy = {"dense_quant_type": "wint8", "moe_quant_type": "w4a8", "quantization": "mix_quant"}
    keys = r"\(keys: dense_quant_type, moe_quant_type, quantization;"
    with pytest.raises(ConfigError, match=r"no quant_method, .*" + keys):
        q(fastdeploy)


@given(bits=st.sampled_from([4, 8]), group=st.sampled_from([32, 64, 128, 256]), zero=st.booleans())
def test_grouped_schemes_cost_more_than_their_bits_and_less_with_bigger_groups(bits: int, group: int,
                                                                               zero: bool) -> None:
    small = q({**AWQ, "bits": bits, "group_size": group, "zero_point": zero}).bytes_per_weight
    big = q({**AWQ, "bits": bits, "group_size": group * 2, "zero_point": zero}).bytes_per_weight
    assert bits / 8 < big < small


def test_kimi_int4_quantizes_only_the_routed_experts() -> None:
    arch = from_local_path(FIXTURES / "moonshotai__Kimi-K2.5.json", name="moonshotai/Kimi-K2.5")
    kq = arch.quantization
    assert kq is not None and kq.experts_only and kq.scheme == "w4a16"
    assert kq.bytes_per_weight == 0.5 + 2 / 32


def test_checkpoint_quantization_sets_default_precision_and_weight_bytes() -> None:
    """An AWQ checkpoint of Llama-3.1-8B: its linear weights at 0.51953 B instead of 2 B, the rest unchanged."""
    base = get_model("meta-llama/Llama-3.1-8B-Instruct")
    cfg = {"architectures": ["LlamaForCausalLM"], "hidden_size": 4096, "intermediate_size": 14336,
           "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 128256,
           "max_position_embeddings": 131072, "torch_dtype": "float16", "quantization_config": AWQ}
    awq = from_hf_dict(cfg, name="hugging-quants/Meta-Llama-3.1-8B-Instruct-AWQ-INT4")
    h100 = get_gpu("H100-SXM-80GB")
    run = ServingConfig(max_model_len=8192, vllm_version="0.19")
    ours = estimate(awq, h100, run)
    assert ours.config.precision == "int4"
    bf16 = estimate(base, h100, run)
    linear = sum(p.linear for p, _ in base.layer_table)  # 6.98 B quantized projections
    expected = (bf16.ranks[0].weights_gib - linear * (2 - (0.5 + 2.5 / 128)) / GIB)
    assert ours.ranks[0].weights_gib == pytest.approx(expected, rel=1e-9)
    assert precision_unsupported(get_gpu("T4-16GB"), "int4", awq) is None  # awq GEMM runs on sm75
    assert precision_unsupported(get_gpu("V100-16GB"), "int4", awq) is not None


def test_a_quantized_checkpoint_is_served_only_in_its_own_format() -> None:
    cfg = json.loads((FIXTURES / "Qwen__Qwen3-32B-FP8.json").read_text())
    fp8 = from_hf_dict(cfg, name="Qwen/Qwen3-32B-FP8")
    h100, a100 = get_gpu("H100-SXM-80GB"), get_gpu("A100-SXM-80GB")
    assert precision_unsupported(h100, "fp8", fp8) is None
    assert "cannot be served as bf16" in (precision_unsupported(h100, "bf16", fp8) or "")
    path = kernel_on(fp8.quantization, a100)
    assert path is not None and (path.linear, path.activation_bits) == ("marlin-fp8", 16)
    assert kernel_on(None, a100) is None


def test_awq_checkpoint_config_from_the_hub_page() -> None:
    cfg = json.loads((FIXTURES / "TechxGenus__Mistral-Large-Instruct-2411-AWQ.hf-page.json").read_text())
    arch = from_hf_dict(cfg, name="TechxGenus/Mistral-Large-Instruct-2411-AWQ")
    awq = arch.quantization
    assert awq is not None and (awq.method, awq.group_size, awq.symmetric) == ("awq", 128, False)
    assert arch.torch_dtype == "float16"
    assert awq.kernel_path(get_gpu("L40S-48GB").compute_capability).vllm_method == "awq_marlin"


@pytest.mark.parametrize(("config", "field"), [
    ({"quant_method": "compressed-tensors", "config_groups": [{"weights": {"num_bits": 4}}]}, "config_groups"),
    ({"quant_method": "compressed-tensors", "config_groups": {"group_0": []}}, "config_groups.group_0"),
    ({"quant_method": "compressed-tensors", "config_groups": {"group_0": {"weights": {"num_bits": "4"}}}},
     "num_bits"),
    ({**AWQ, "bits": "four"}, "bits"),
    ({**GPTQ, "group_size": None}, "group_size"),
    ({**GPTQ, "group_size": 0}, "group_size"),
    ({"quant_method": "fp8", "weight_block_size": [128, 0]}, "weight_block_size"),
    ({"quant_method": "fp8", "weight_block_size": ["a", "b"]}, "weight_block_size"),
    ({"quant_method": "fp8", "weight_block_size": [128]}, "weight_block_size"),
    ({"quant_method": "fp8", "modules_to_not_convert": 5}, "modules_to_not_convert"),
])
def test_a_mistyped_quantization_field_is_one_error_naming_file_and_field(config: dict[str, Any],
                                                                          field: str) -> None:
    """Each used to escape as AttributeError / ValueError / TypeError / ZeroDivisionError (exit 70)."""
    with pytest.raises(ConfigError) as info:
        read_quantization({"quantization_config": config}, where="/ckpt/config.json")
    assert len(info.value.problems) == 1
    problem = info.value.problems[0]
    assert problem.startswith("/ckpt/config.json quantization_config") and f"field '{field}'" in problem


def test_a_side_file_error_names_the_side_file() -> None:
    with pytest.raises(ConfigError) as info:
        read_quantization({}, quantize_config={"bits": 4, "group_size": None}, where="/ckpt/config.json")
    assert info.value.problems == ("/ckpt/quantize_config.json: field 'group_size' must be an integer (got null)",)


def test_a_quantization_config_that_is_not_an_object_is_refused() -> None:
    """A string cannot carry the quant_method vLLM reads: refused rather than read as unquantized."""
    with pytest.raises(ConfigError) as info:
        read_quantization({"quantization_config": "fp8"}, where="/ckpt/config.json")
    assert info.value.problems == ("/ckpt/config.json: field 'quantization_config' must be a JSON object with a "
                                   "quant_method (got \"fp8\")",)


def test_awq_reads_w_bit_before_bits_as_vllm_does() -> None:
    # AutoAWQConfig.from_config: get_from_keys(config, ["w_bit", "bits"]); 8-bit, group 64, zero points:
    # 1 + 2/64 + 1/64 bytes per weight
    awq = q({"quant_method": "awq", "w_bit": 8, "bits": 4, "q_group_size": 64, "zero_point": True})
    assert awq.bytes_per_weight == 1 + 3 / 64


@pytest.mark.parametrize("release, kv_dtype, kv_bytes", [("0.13", "auto", 6144), ("0.14", "fp8", 3072),
                                                         ("0.33", "fp8", 3072)])
def test_a_modelopt_checkpoint_with_an_fp8_kv_cache_gets_it_from_014(release: str, kv_dtype: str,
                                                                     kv_bytes: int) -> None:
    """Nemotron-3-Nano-30B-A3B-NVFP4's hf_quant_config.json sets kv_cache_quant_algo FP8. From vLLM 0.14,
    `--kv-cache-dtype auto` resolves to fp8_e4m3 for such a ModelOpt checkpoint (resolve_kv_cache_dtype_string);
    0.13 keeps the model dtype. Its 6 attention layers x 2 KV heads x 128 x 2 (K and V) = 3,072 values a token:
    3,072 B in fp8, 6,144 in bf16."""
    cfg = json.loads((FIXTURES / "nvidia__NVIDIA-Nemotron-3-Nano-30B-A3B-NVFP4.json").read_text())
    side = json.loads((FIXTURES / "nvidia__NVIDIA-Nemotron-3-Nano-30B-A3B-NVFP4.hf_quant_config.json").read_text())
    arch = from_hf_dict(cfg, name="nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-NVFP4", hf_quant_config=side)
    est = estimate(arch, get_gpu("B200-180GB"), ServingConfig(max_model_len=8192, vllm_version=release))
    assert est.config.kv_cache_dtype == kv_dtype
    attention = [g for g in est.ranks[0].kv_groups if g.kind == "full"]
    assert sum(g.layers * g.bytes_per_token_per_layer for g in attention) == kv_bytes
    # an explicit dtype stays as given, and a compressed-tensors kv_cache_scheme is not read this way
    explicit = estimate(arch, get_gpu("B200-180GB"), ServingConfig(max_model_len=8192, kv_cache_dtype="fp8",
                                                                   vllm_version="0.13"))
    assert explicit.config.kv_cache_dtype == "fp8"


def test_a_plan_reports_the_kv_cache_dtype_vllm_runs_not_the_auto_it_was_asked(tmp_path: Path) -> None:
    """The plan's table, JSON and candidates say fp8 where the command (and the memory model) run fp8: an `auto`
    of a ModelOpt checkpoint with kv_cache_quant_algo FP8 (0.33, the default release)."""
    from click.testing import CliRunner

    from gpuopt.cli.main import cli

    ckpt = tmp_path / "nemotron-nvfp4"
    ckpt.mkdir()
    for name, target in (("nvidia__NVIDIA-Nemotron-3-Nano-30B-A3B-NVFP4.json", "config.json"),
                         ("nvidia__NVIDIA-Nemotron-3-Nano-30B-A3B-NVFP4.hf_quant_config.json",
                          "hf_quant_config.json")):
        (ckpt / target).write_text((FIXTURES / name).read_text())
    workload = tmp_path / "w.yaml"
    workload.write_text(f"schema_version: 1\nproviders: [runpod]\nworkloads:\n  - name: n\n    model: {ckpt}\n"
                        "    requests_per_second: 1\n    input_tokens: 1000\n    output_tokens: 100\n"
                        "    max_model_len: 4096\n    kv_cache_dtypes: [auto]\n")
    result = CliRunner().invoke(cli, ["solve", str(workload), "--format", "json", "--top", "0",
                                      "--candidates", "all"])
    assert result.exit_code == 0, result.stderr
    plan = json.loads(result.stdout)
    assert [d["kv_cache_dtype"] for d in plan["deployments"]] == ["fp8"] * len(plan["deployments"])
    assert all("--kv-cache-dtype fp8" in d["vllm_command"] for d in plan["deployments"])
    assert {c["kv_cache_dtype"] for c in plan["candidates"] if c["feasible"]} == {"fp8"}


@pytest.mark.parametrize(("release", "turing"), [
    # Marlin (and Fp8Config / GPTQMarlinConfig / AWQMarlinConfig) from sm80 in 0.11-0.13, from sm75 in 0.14
    ("0.11", "exllama"), ("0.13", "exllama"), ("0.14", "marlin"), ("0.33", "marlin"),
])
def test_marlin_runs_on_turing_from_0_14(release: str, turing: str) -> None:
    assert q(GPTQ).kernel_path(75, release).linear == turing
    fp8 = q({**FP8, "weight_block_size": [128, 128]})
    path = fp8.kernel_path(75, release)
    assert path.supported == (turing == "marlin")
    assert not path.supported or (path.linear, path.activation_bits) == ("marlin-fp8", 16)
    assert not q({"quant_method": "mxfp4"}).kernel_path(75, release).supported  # Mxfp4Config: sm80 throughout


@pytest.mark.parametrize(("release", "on_a100"), [("0.25", None), ("0.27", "marlin-fp8"), ("0.33", "marlin-fp8")])
def test_modelopt_fp8_runs_on_ampere_from_0_27(release: str, on_a100: str | None) -> None:
    """ModelOptFp8Config.get_min_capability: 89 up to 0.25.0, 80 from 0.27.1 (FP8 Marlin below sm89)."""
    modelopt = read_quantization({}, hf_quant_config={"quantization": {"quant_algo": "FP8"}})
    assert modelopt is not None
    path = modelopt.kernel_path(80, release)
    assert (path.linear if path.supported else None) == on_a100
    assert not modelopt.kernel_path(75, release).supported  # below 80 in every release
    assert modelopt.kernel_path(89, release).activation_bits == 8


def test_awq_8_bit_runs_in_no_release() -> None:
    """uint8 is not an AWQ Marlin type (zero-point types: uint4 only) and the AWQ GEMM kernel is 4-bit only."""
    eight = q({**AWQ, "bits": 8})
    for release in ("0.11", "0.14", "0.33"):
        for cc in (75, 80, 90):
            assert not eight.kernel_path(cc, release).supported


def test_bitsandbytes_is_gone_from_0_28() -> None:
    bnb = q({"quant_method": "bitsandbytes", "load_in_4bit": True})
    assert bnb.kernel_path(80, "0.27").supported and bnb.kernel_path(80, "0.27").removed_in is None
    assert "removed in 0.28" in bnb.kernel_path(80, "0.28").note
    assert bnb.kernel_path(80, "0.28").removed_in == (0, 28)  # as data, for the advice of an older release
    assert q(AWQ).kernel_path(80, "0.33").removed_in is None


def test_fp8_and_int4_plans_on_a_t4_by_release() -> None:
    base = get_model("Qwen/Qwen3-8B")
    t4, v100 = get_gpu("T4-16GB"), get_gpu("V100-16GB")
    assert "FP8 needs compute capability 8.0 or newer in vLLM 0.13" in (
        precision_unsupported(t4, "fp8", base, "0.13") or "")
    assert precision_unsupported(t4, "fp8", base, "0.14") is None
    assert precision_unsupported(t4, "fp8", base) is None  # the default release, 0.33
    assert precision_unsupported(t4, "int4", base, "0.11") is None  # AWQ GEMM on sm75
    assert precision_unsupported(t4, "mxfp4", get_model("openai/gpt-oss-20b")) is not None  # MXFP4 needs sm80
    assert precision_unsupported(v100, "fp8", base) is not None and precision_unsupported(v100, "int4", base)


def test_only_the_mixers_an_exclusion_list_names_stay_16_bit() -> None:
    cfg = json.loads((FIXTURES / "nvidia__NVIDIA-Nemotron-3-Nano-30B-A3B-NVFP4.json").read_text())
    side = json.loads((FIXTURES / "nvidia__NVIDIA-Nemotron-3-Nano-30B-A3B-NVFP4.hf_quant_config.json").read_text())
    arch = from_hf_dict(cfg, name="nv", hf_quant_config=side)
    every = arch.model_copy(update={"quantization": arch.quantization.model_copy(  # type: ignore[union-attr]
        update={"attention_excluded": True, "excluded_mixer_layers": ()})})
    layers = range(arch.num_hidden_layers)
    # a Mamba mixer: in_proj 2688 x (2 x 4096 + 2 x 8 x 128 + 64) = 27,697,152, out_proj 4096 x 2688 = 11,010,048,
    # conv1d (4096 + 2048) x (4 + 1) = 30,720 -> 38,737,920; 17 of the 23 are not named, so they are NVFP4
    # (0.5625 B) instead of 16-bit (2 B): 17 x 38,737,920 x 1.4375 = 946,657,920 B less
    assert arch.layer_params(4).attention == 38_737_920
    saved = (weights_bytes(every, "int4", 1, layers, True, True) - weights_bytes(arch, "int4", 1, layers, True, True))
    assert saved == pytest.approx(17 * 38_737_920 * (2 - 0.5625), rel=1e-12)


def test_a_dsa_indexers_norm_in_the_ignore_list_leaves_the_attention_quantized() -> None:
    """GLM-5-FP8 ignores each layer's `self_attn.indexer.k_norm` and `self_attn.indexers_proj`: no attention
    projection, so its attention stays FP8 (a substring test for "self_attn" made it all 16-bit)."""
    names = ["lm_head", "model.layers.0.self_attn.indexer.k_norm", "model.layers.0.self_attn.indexers_proj",
             "model.layers.0.self_attn.kv_a_layernorm", "model.layers.3.mlp.gate"]
    fp8 = q({**FP8, "weight_block_size": [128, 128], "modules_to_not_convert": names})
    assert (fp8.attention_excluded, fp8.excluded_mixer_layers, fp8.experts_only) == (False, (), False)
    named = q({**FP8, "modules_to_not_convert": ["model.layers.2.self_attn.o_proj"]})
    assert (named.attention_excluded, named.excluded_mixer_layers) == (False, (2,))
    # a bare "self_attn": Fp8Config matches names exactly (is_layer_skipped, match_mode "exact"), so no module is
    # left in 16-bit; AWQ matches substrings (every layer's attention), as does ModelOpt
    bare = q({**FP8, "modules_to_not_convert": ["self_attn"]})
    assert (bare.attention_excluded, bare.excluded_mixer_layers) == (False, ())
    pattern = q({**AWQ, "modules_to_not_convert": ["self_attn"]})
    assert (pattern.attention_excluded, pattern.excluded_mixer_layers) == (True, ())


def test_fbgemm_fp8_keeps_the_modules_it_names_in_16_bit_and_runs_w8a8_from_ada() -> None:
    """Meta's FBGEMM FP8 layout (Llama-3.1-405B-Instruct-FP8: MLPs in FP8, attention and the first and last
    layers' MLPs in BF16), here on Llama-3.1-8B's dims so the bytes can be counted by hand."""
    layers = 32
    kept = [f"model.layers.{i}.self_attn.{p}" for i in range(layers) for p in ("q_proj", "k_proj", "v_proj", "o_proj")]
    kept += [f"model.layers.{i}.mlp.{p}" for i in (0, layers - 1) for p in ("gate_proj", "up_proj", "down_proj")]
    config = {"quant_method": "fbgemm_fp8", "activation_scale_ub": 1200.0, "modules_to_not_convert": kept + ["lm_head"]}
    fb = q(config)
    assert (fb.scheme, fb.weight_format, fb.bytes_per_weight) == ("fp8-channel", "fp8", 1.0)
    assert fb.attention_excluded
    assert fb.excluded_ffn_layers == (0, layers - 1)
    hopper, ampere, turing = fb.kernel_path(90), fb.kernel_path(80), fb.kernel_path(75)
    assert (hopper.vllm_method, hopper.linear, hopper.activation_bits) == ("fbgemm_fp8", "cutlass-fp8", 8)
    assert (ampere.linear, ampere.activation_bits) == ("marlin-fp8", 16)  # use_marlin below sm89
    assert not turing.supported  # get_min_capability 80
    cfg = {"architectures": ["LlamaForCausalLM"], "hidden_size": 4096, "intermediate_size": 14336,
           "num_hidden_layers": layers, "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 128256,
           "max_position_embeddings": 131072, "torch_dtype": "bfloat16", "quantization_config": config}
    arch = from_hf_dict(cfg, name="example/Llama-3.1-8B-FBGEMM-FP8")
    run = ServingConfig(max_model_len=8192, vllm_version="0.28")
    ours = estimate(arch, get_gpu("H100-SXM-80GB"), run)
    assert ours.config.precision == "fp8"
    # by hand: 30 MLPs of 3 x 4096 x 14336 in FP8 (1 B); the rest in BF16: 2 MLPs, 32 attention blocks of
    # 2 x 4096 x 4096 + 2 x 4096 x 1024, embeddings and lm_head 2 x 128256 x 4096, 65 norms of 4096, and
    # the rotary cos/sin cache vLLM's "Model loading took" counts (131,072 positions x 128)
    mlp, attention = 3 * 4096 * 14336, 2 * 4096 * 4096 + 2 * 4096 * 1024
    expected = 30 * mlp + 2 * (2 * mlp + layers * attention + 2 * 128256 * 4096 + 65 * 4096 + 131072 * 128)
    assert ours.ranks[0].weights_gib == pytest.approx(expected / GIB, rel=1e-4)


def test_fbgemm_fp8_on_an_moe_model_is_refused_not_mis_sized() -> None:
    with pytest.raises(ConfigError, match="fbgemm_fp8' on an MoE model"):
        read_quantization({"num_local_experts": 8, "quantization_config": {"quant_method": "fbgemm_fp8"}})


def test_a_checkpoint_whose_fp8_kv_cache_no_backend_serves_says_where_the_fp8_came_from(tmp_path: Path) -> None:
    """With --kv-cache-dtype auto the message told the user to use --kv-cache-dtype auto: the fp8 came from the
    checkpoint's hf_quant_config.json (kv_cache_quant_algo FP8), and that is what it must say."""
    from click.testing import CliRunner

    from gpuopt.cli.main import cli

    for name, fixture in (("config.json", "nvidia__Llama-3.1-70B-Instruct-FP8.json"),
                          ("hf_quant_config.json", "nvidia__Llama-3.1-70B-Instruct-FP8.hf_quant_config.json")):
        (tmp_path / name).write_text((FIXTURES / fixture).read_text())
    result = CliRunner().invoke(cli, ["fit", "--model", str(tmp_path), "--gpu", "T4-16GB", "--tp", "8"])
    assert result.exit_code == 2
    (line,) = result.stderr.splitlines()
    assert "quantizes its KV cache to FP8 (kv_cache_quant_algo FP8 in its hf_quant_config.json)" in line
    assert "use --kv-cache-dtype auto" not in line


def test_a_format_the_release_dropped_points_to_a_release_not_to_another_gpu(tmp_path: Path) -> None:
    """bitsandbytes is gone from vLLM 0.28 on every GPU: "pick another GPU" sent the user after GPUs that could
    not help; --vllm-version 0.27 fits."""
    from click.testing import CliRunner

    from gpuopt.cli.main import cli

    config = {"architectures": ["LlamaForCausalLM"], "hidden_size": 4096, "intermediate_size": 14336,
              "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 128256,
              "max_position_embeddings": 8192, "torch_dtype": "bfloat16",
              "quantization_config": {"quant_method": "bitsandbytes", "load_in_4bit": True,
                                      "bnb_4bit_quant_type": "nf4"}}
    (tmp_path / "config.json").write_text(json.dumps(config))
    new = CliRunner().invoke(cli, ["fit", "--model", str(tmp_path), "--gpu", "H100-SXM-80GB"])
    assert new.exit_code == 2 and "plan it with --vllm-version 0.27 (the last release with it)" in new.stderr
    assert "--gpu" not in new.stderr  # the release is the problem, not the GPU
    assert "pick another GPU" not in new.stderr
    old = CliRunner().invoke(cli, ["fit", "--model", str(tmp_path), "--gpu", "H100-SXM-80GB", "--vllm-version", "0.27"])
    assert old.exit_code == 0


@pytest.mark.parametrize(("config", "missing"), [
    ({"quant_method": "awq", "group_size": 128, "zero_point": True}, "field 'w_bit' or 'bits' is missing"),
    ({"quant_method": "gptq", "bits": 4, "group_size": 128}, "field 'desc_act' is missing"),
    ({"quant_method": "fp8"}, "field 'activation_scheme' is missing"),
])
def test_fields_vllm_requires_are_required(config: dict[str, Any], missing: str) -> None:
    """AutoAWQConfig / AutoGPTQConfig / Fp8Config.from_config (0.28.0) read these with get_from_keys, which
    raises when none of a field's keys is present: a default would plan a checkpoint vLLM does not start."""
    with pytest.raises(ConfigError, match=missing):
        q(config)
