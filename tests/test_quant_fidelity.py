"""Quantization as vLLM loads it: which modules a checkpoint leaves in 16-bit (each format's matching rule), which
known checkpoints a plan may name, and what vLLM refuses on ROCm or in a release on any platform.

Expected figures are computed by hand from the configs in tests/fixtures/model_configs (copies of
../shared/data/model_configs) and restate rules read in vLLM's sources (quantization.py names the files).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gpuopt.hardware import get_gpu
from gpuopt.physics.architecture import ModelArchitecture, from_hf_dict, get_model
from gpuopt.physics.checkpoint_table import find, table
from gpuopt.physics.quantization import (
    described,
    kernel_on,
    modelopt_fp8_runs,
    read_quantization,
    select_kernel,
)
from gpuopt.physics.resolution import from_local_path
from gpuopt.physics.serving_config import precision_unsupported
from gpuopt.physics.weights import layer_weight_bytes, weights_bytes
from gpuopt.planner.checkpoints import known_checkpoint

FIXTURES = Path(__file__).parent / "fixtures" / "model_configs"
KIMI_NVFP4 = FIXTURES / "nvidia__Kimi-K2.5-NVFP4.json"
MAVERICK_FP8 = FIXTURES / "meta-llama__Llama-4-Maverick-17B-128E-Instruct-FP8.ktransformers-modified.json"


def with_quantization(arch: ModelArchitecture, **update: Any) -> ModelArchitecture:
    assert arch.quantization is not None
    return arch.model_copy(update={"quantization": arch.quantization.model_copy(update=update)})


def all_layers_weights(arch: ModelArchitecture, tp: int) -> float:
    assert arch.quantization is not None
    return weights_bytes(arch, arch.quantization.weight_format, tp, range(arch.num_hidden_layers), True, True)


# ---- defect 1: a plan names only a checkpoint whose weights it sizes ---------------------------------------


def test_an_fp8_plan_of_llama_405b_does_not_name_metas_fbgemm_checkpoint() -> None:
    """meta-llama/Llama-3.1-405B-Instruct-FP8 is FBGEMM FP8 "per-channel quantization in the MLP layer" (the row's
    vLLM-blog quote): attention stays BF16. An fp8 plan sizes all 126 layers' attention in FP8; at TP 8 that is
    126 x (2 x 16384 x 16384 + 2 x 16384 x 1024) / 8 = 8,984,199,168 weights per GPU, 8.37 GiB more in BF16 (2 B)
    than in FP8 (1 B) that the FBGEMM checkpoint holds beyond the plan's 47.78 GiB. The plan names NVIDIA's
    ModelOpt FP8 checkpoint (every linear layer FP8) instead."""
    fbgemm = find("meta-llama/Llama-3.1-405B-Instruct-FP8")
    assert fbgemm is not None and fbgemm.vllm_quantization == "fbgemm_fp8" and fbgemm.use == "ok"
    assert not fbgemm.readable and not fbgemm.usable(True, 8)
    base = get_model("meta-llama/Llama-3.1-405B-Instruct")
    assert base.num_hidden_layers * base.layer_params(0).attention // 8 == 8_984_199_168
    chosen = known_checkpoint("meta-llama/Llama-3.1-405B-Instruct", "fp8", True, 8)
    assert chosen is not None and chosen.checkpoint == "nvidia/Llama-3.1-405B-Instruct-FP8"


def test_every_checkpoint_a_plan_can_name_is_one_gpuopt_reads_in_the_plans_format() -> None:
    formats = {"awq": "int4", "gptq": "int4", "w4a16": "int4", "int8-w8a8": "int8", "fp8": "fp8"}
    for row in table():
        if row.method in formats and row.usable(True, 1):
            found = described(row.method, row.weight_bits, row.vllm_quantization, row.group_size)
            assert found is not None, row.checkpoint
            quant, _ = found
            assert quant.weight_format == ("int8" if row.weight_bits == 8 and row.method == "gptq"
                                           else formats[row.method]), row.checkpoint


# ---- defect 2: excluded modules matched as vLLM matches them; dense and shared MLPs counted ----------------


def test_kimi_k25_nvfp4_wildcards_leave_every_layers_attention_in_16_bit() -> None:
    """nvidia/Kimi-K2.5-NVFP4 ignores `language_model.model.layers.N.self_attn*` for N = 0..60: ModelOpt patterns
    vLLM matches with fnmatch (modelopt.py is_layer_excluded). Per layer, TP-sharded attention q_b 1536 x 64 x 192
    + kv_b 512 x 64 x 256 + o 64 x 128 x 7168 = 85,983,232 and the replicated MLA down-projections q_a 7168 x 1536
    + kv_a 7168 x 576 = 15,138,816 are BF16 (2 B), not NVFP4 (0.5625 B): at TP 8, 61 x (85,983,232 / 8 +
    15,138,816) x 1.4375 = 2,269,941,760 B (2.11 GiB) more per GPU. Its dense layer 0 MLP and shared experts
    are not in the list: NVFP4."""
    arch = from_local_path(KIMI_NVFP4, name="nvidia/Kimi-K2.5-NVFP4")
    q = arch.quantization
    assert q is not None and q.method == "modelopt" and q.scheme == "nvfp4"
    assert (q.attention_excluded, q.excluded_mixer_layers, q.experts_only) == (True, (), False)
    assert (arch.layer_params(0).attention, arch.layer_params(0).replicated_linear) == (85_983_232, 15_138_816)
    quantized_attention = with_quantization(arch, attention_excluded=False)
    extra = all_layers_weights(arch, 8) - all_layers_weights(quantized_attention, 8)
    assert extra == pytest.approx(61 * (85_983_232 / 8 + 15_138_816) * (2 - 0.5625), rel=1e-12)
    assert extra == pytest.approx(2_269_941_760, rel=1e-12)


def test_maverick_fp8_leaves_its_dense_mlps_and_shared_experts_in_bf16() -> None:
    """meta-llama/Llama-4-Maverick-17B-128E-Instruct-FP8 (compressed-tensors, per-channel FP8: 1 B per weight)
    ignores, by exact name, every layer's attention, the feed_forward.{gate,up,down}_proj of its 24 dense layers
    and the feed_forward.shared_expert.* of its 24 MoE layers: only the routed experts are FP8. Dense MLP
    3 x 5120 x 16384 = 251,658,240 and shared expert 3 x 5120 x 8192 = 125,829,120 per layer in BF16: 24 x
    (251,658,240 + 125,829,120) x (2 - 1) = 9,059,696,640 B (8.44 GiB) more than with only the attention BF16."""
    arch = from_local_path(MAVERICK_FP8, name="meta-llama/Llama-4-Maverick-17B-128E-Instruct-FP8")
    q = arch.quantization
    assert q is not None and q.method == "compressed-tensors" and q.bytes_per_weight == 1.0
    assert (q.experts_only, q.attention_excluded) == (True, True)
    dense, moe = arch.layer_params(0), arch.layer_params(1)
    assert (dense.linear - dense.attention, dense.experts) == (251_658_240, 0)
    assert (moe.linear - moe.attention, moe.experts > 0) == (125_829_120, True)
    attention_only = with_quantization(arch, experts_only=False)
    extra = all_layers_weights(arch, 1) - all_layers_weights(attention_only, 1)
    assert extra == pytest.approx(24 * (251_658_240 + 125_829_120) * (2 - 1.0), rel=1e-12)


def test_each_format_matches_its_exclusion_list_as_vllm_does() -> None:
    from gpuopt.physics.quantization import excluded_layers  # new with this rule

    attn = "language_model.model.layers.1.self_attn*"
    # ModelOpt: fnmatch (and vLLM's substring rule), so layers.1.self_attn* is layer 1 only, never 10 or 11
    assert excluded_layers("modelopt", (attn,), 12).mixers == (1,)
    # ... while a pattern that stops at the number takes every layer whose number starts with it, as fnmatch does
    assert excluded_layers("modelopt", ("model.layers.1*",), 12).mixers == (1, 10, 11)
    # compressed-tensors: exact names, and re: patterns by re.match; shell wildcards are not patterns to it
    assert excluded_layers("compressed-tensors", (attn,), 12).mixers == ()
    assert excluded_layers("compressed-tensors", ("re:.*layers\\.1\\.self_attn.*",), 12).mixers == (1,)
    # fp8: exact names only; AWQ: substrings; bitsandbytes: a dotted component
    assert excluded_layers("fp8", ("self_attn",), 4).mixers == ()
    assert excluded_layers("awq", ("self_attn",), 4).every_mixer
    assert excluded_layers("bitsandbytes", ("self_attn",), 4).every_mixer
    assert excluded_layers("bitsandbytes", ("self_att",), 4).mixers == ()
    # a dense MLP counts when its up and down projections are both left in 16-bit
    mlp = excluded_layers("fp8", ("model.layers.0.mlp.gate_proj", "model.layers.0.mlp.up_proj",
                                  "model.layers.0.mlp.down_proj", "model.layers.1.mlp.down_proj"), 3)
    assert (mlp.ffns, mlp.every_ffn, mlp.mixers) == ((0,), False, ())
    # a vision tower's numbered layers are not the language model's
    assert excluded_layers("fp8", ("vision_model.model.layers.0.self_attn.q_proj",
                                   "model.layers.2.self_attn.q_proj"), 3).mixers == (2,)


def test_partial_mlp_exclusions_are_recorded_for_the_memory_model() -> None:
    q = read_quantization({"num_hidden_layers": 4, "quantization_config": {
        "quant_method": "compressed-tensors", "ignore": ["lm_head", "re:.*layers\\.0\\.mlp\\..*"],
        "config_groups": {"g": {"weights": {"num_bits": 8, "type": "float", "strategy": "channel"}}}}})
    assert q is not None and (q.excluded_ffn_layers, q.experts_only, q.attention_excluded) == ((0,), False, False)


# ---- defect 3: asymmetric W4A16 on Hopper ----------------------------------------------------------------


def test_asymmetric_w4a16_runs_on_machete_which_takes_zero_points() -> None:
    """The audit said Machete rejects zero points. vLLM's MacheteLinearKernel.can_implement checks the type against
    query_machete_supported_quant_types(zero_points) = [uint4, uint8] with zero points (utils/machete_utils.py,
    0.11.0 through 0.34.0), and CompressedTensorsWNA16 hands it uint4 with zero_points = not symmetric: Machete,
    first in _POSSIBLE_KERNELS, takes it on sm90; Marlin elsewhere (uint4 with zero points is a Marlin type)."""
    q = read_quantization({"quantization_config": {"quant_method": "compressed-tensors", "config_groups": {"g": {
        "weights": {"num_bits": 4, "type": "int", "strategy": "group", "group_size": 128, "symmetric": False}}}}})
    assert q is not None and not q.symmetric and q.bytes_per_weight == 0.5 + 2 / 128 + 0.5 / 128
    assert [q.kernel_path(cc).linear for cc in (80, 89, 90, 100)] == ["marlin", "marlin", "machete", "marlin"]


# ---- defects 4 and 5: release rules on every platform, and what ROCm loads ---------------------------------

BNB = {"quant_method": "bitsandbytes", "load_in_4bit": True, "bnb_4bit_quant_type": "nf4"}


def test_bitsandbytes_is_refused_from_028_on_amd_too() -> None:
    """bitsandbytes is gone from vLLM 0.28 on every platform; on ROCm it is listed only from 0.17 for the MI3xx
    (gfx9: not in 0.11's RocmPlatform.supported_quantization, excluded on gfx9 in 0.13-0.16)."""
    q = read_quantization({"quantization_config": BNB})
    assert q is not None
    mi300x = get_gpu("MI300X-192GB")
    verdicts = {v: kernel_on(q, mi300x, v).supported for v in ("0.11", "0.13", "0.16", "0.17", "0.27", "0.28", "0.33")}
    assert verdicts == {"0.11": False, "0.13": False, "0.16": False, "0.17": True, "0.27": True, "0.28": False,
                        "0.33": False}
    assert "removed in 0.28" in kernel_on(q, mi300x, "0.33").note  # type: ignore[union-attr]


def test_modelopt_checkpoints_on_rocm_follow_the_releases_platform_list() -> None:
    """RocmPlatform.supported_quantization lists modelopt_fp4 from 0.20.0 (not in 0.19.0) and modelopt from 0.21.0
    (not in 0.20.0); both are in 0.33.0, the default release, so there a ModelOpt FP8 checkpoint does load on an
    MI300X (the audit expected a refusal there)."""
    cfg = json.loads((FIXTURES / "nvidia__Llama-3.1-70B-Instruct-FP8.json").read_text())
    side = json.loads((FIXTURES / "nvidia__Llama-3.1-70B-Instruct-FP8.hf_quant_config.json").read_text())
    arch = from_hf_dict(cfg, name="nvidia/Llama-3.1-70B-Instruct-FP8", hf_quant_config=side)
    mi300x = get_gpu("MI300X-192GB")
    assert "not in RocmPlatform.supported_quantization" in (precision_unsupported(mi300x, "fp8", arch, "0.20") or "")
    assert precision_unsupported(mi300x, "fp8", arch, "0.21") is None
    assert precision_unsupported(mi300x, "fp8", arch) is None
    assert [modelopt_fp8_runs(None, v) for v in ("0.11", "0.20", "0.21", "0.33")] == [False, False, True, True]
    nvfp4 = read_quantization({}, hf_quant_config={"quantization": {"quant_algo": "NVFP4", "group_size": 16}})
    assert nvfp4 is not None
    assert [select_kernel(nvfp4, None, v).supported for v in ("0.19", "0.20", "0.33")] == [False, True, True]
    # CUDA is unchanged: ModelOpt FP8 on an H100 in every release
    assert select_kernel(arch.quantization, 90, "0.11").supported  # type: ignore[arg-type]


def test_a_layers_16_bit_mlp_is_stored_in_16_bit() -> None:
    """Llama-3.1-8B as an FP8 W8A8 checkpoint whose layer 0 MLP is left in BF16: that layer's MLP (3 x 4,096 x
    14,336 = 176,160,768 weights) costs 2 bytes instead of 1 + the checkpoint's per-channel scales, so the
    weights grow by 176,160,768 x (2 - bytes_per_weight) bytes at TP 1, and by half that per GPU at TP 2."""
    base = get_model("meta-llama/Llama-3.1-8B-Instruct")
    config = {"quant_method": "compressed-tensors", "config_groups": {"g": {
        "weights": {"num_bits": 8, "type": "float", "strategy": "channel"}}}}
    whole = read_quantization({"num_hidden_layers": 32, "quantization_config": {**config, "ignore": ["lm_head"]}})
    part = read_quantization({"num_hidden_layers": 32, "quantization_config": {
        **config, "ignore": ["lm_head", "re:.*layers\\.0\\.mlp\\..*"]}})
    assert whole is not None and part is not None and part.excluded_ffn_layers == (0,)
    mlp = 3 * 4096 * 14336
    assert base.layer_params(0).linear - base.layer_params(0).attention == mlp
    for tp in (1, 2):
        fp8 = layer_weight_bytes(base.model_copy(update={"quantization": whole}), "fp8", tp, range(32))
        kept = layer_weight_bytes(base.model_copy(update={"quantization": part}), "fp8", tp, range(32))
        assert kept.dense - fp8.dense == pytest.approx(mlp * (2 - whole.bytes_per_weight) / tp, rel=1e-12)
        assert kept.experts == fp8.experts
