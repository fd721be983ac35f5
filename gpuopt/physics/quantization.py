"""Quantized checkpoints: what format a checkpoint stores its weights in, and the kernel vLLM runs it with.

A checkpoint says how it is quantized in `config.json` (`quantization_config`), or for ModelOpt exports in
`hf_quant_config.json`, or for AutoGPTQ exports in `quantize_config.json`. `read_quantization` turns any
of them into one `Quantization`: the bytes each quantized weight takes with its scales and zero points (the
memory model's weight size), the modules left in 16-bit, and `kernel_path(gpu)` -- the GEMM and MoE kernels
vLLM selects on that GPU generation, which decides the speed the latency model should assume.

The selection rules were first read in vLLM v0.11.0's source (vllm/model_executor/layers/quantization/: awq_marlin.py
`is_awq_marlin_compatible`, gptq_marlin.py `is_gptq_marlin_compatible`, kernels/mixed_precision/__init__.py
`_POSSIBLE_KERNELS` (Machete before Marlin, Machete sm90 only and without act-order), fp8.py `use_marlin`
below sm89, mxfp4.py `get_mxfp4_backend`, modelopt.py NVFP4 backends, compressed_tensors.py scheme choice,
utils/marlin_utils.py `MARLIN_SUPPORTED_GROUP_SIZES`); the GPU generations later releases admit (Marlin from
sm75, ModelOpt FP8 from sm80, no bitsandbytes) were read in their sources and are selected by release
(select_kernel). Nothing is vendored; the rules are restated here.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from fnmatch import translate
from functools import cache
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from gpuopt.errors import ConfigError
from gpuopt.hardware import GpuSpec
from gpuopt.physics.vllm_profile import release_key, release_or_default
from gpuopt.vocabulary import WeightFormat

QuantMethod = Literal["fp8", "compressed-tensors", "awq", "gptq", "bitsandbytes", "mxfp4", "modelopt", "fbgemm_fp8"]
QUANT_METHODS: tuple[str, ...] = ("fp8", "compressed-tensors", "awq", "gptq", "bitsandbytes", "mxfp4", "modelopt",
                                  "fbgemm_fp8")
_MOE_KEYS = ("num_local_experts", "num_experts", "n_routed_experts", "moe_num_experts")

MARLIN_GROUP_SIZES = (-1, 32, 64, 128)  # utils/marlin_utils.py MARLIN_SUPPORTED_GROUP_SIZES
MACHETE_GROUP_SIZES = (-1, 64, 128)  # utils/machete_utils.py query_machete_supported_group_sizes (16-bit act)


class KernelPath(BaseModel):
    """The kernels vLLM runs a quantized checkpoint with on one GPU generation.

    `vllm_method` is the quantization name vLLM settles on (after its override, e.g. awq -> awq_marlin);
    `linear` and `moe` the GEMM kernels of dense layers and experts; `activation_bits` 16 for weight-only
    kernels (W4A16/W8A16: weights are dequantized, math in 16-bit), 8 for W8A8 (FP8/INT8 tensor cores),
    4 for W4A4 (NVFP4 on Blackwell). `supported` is False when vLLM refuses the checkpoint on that GPU;
    `removed_in` is the release that dropped the method on every GPU, when that is why (an older release
    plans it, no other GPU does).
    """

    model_config = ConfigDict(frozen=True)

    vllm_method: str
    linear: str
    moe: str | None
    weight_bits: int
    activation_bits: int
    supported: bool = True
    note: str = ""
    removed_in: tuple[int, int] | None = None


class Quantization(BaseModel):
    """How a checkpoint stores its weights (read from its files, never guessed from its name)."""

    model_config = ConfigDict(frozen=True)

    method: QuantMethod
    scheme: str  # e.g. fp8-block, fp8-tensor, w8a8-int8, w4a16, w8a16-fp8, awq, gptq, nf4, nvfp4, mxfp4
    weight_bits: int
    activation_bits: int  # 16 for weight-only schemes
    group_size: int | None = None  # -1: one group per output channel
    symmetric: bool = True
    desc_act: bool = False
    bytes_per_weight: float  # quantized weights with their scales and zero points
    weight_format: WeightFormat  # the memory/planning family: fp8, int8, int4 or mxfp4
    experts_only: bool = False  # only routed MoE experts are quantized (gpt-oss MXFP4, Kimi-K2.5 INT4)
    attention_excluded: bool = False  # attention / token-mixer projections of every layer left in 16-bit
    # decoder layers whose token-mixer projections the checkpoint names one by one as left in 16-bit
    # (Nemotron-3-Nano NVFP4: its 6 attention layers and 6 of its 23 Mamba mixers); see excluded_layers
    excluded_mixer_layers: tuple[int, ...] = ()
    excluded_modules: tuple[str, ...] = ()  # left in 16-bit (lm_head, attention, vision tower, ...)
    # decoder layers whose dense MLP or shared expert the list leaves in 16-bit, when not every layer's is (every
    # layer's mixer and MLP left so is experts_only); see excluded_layers; weights.layer_weight_bytes stores them so
    excluded_ffn_layers: tuple[int, ...] = ()
    kv_cache_fp8: bool = False
    source: str = "config.json quantization_config"

    @property
    def label(self) -> str:
        """Method and scheme for a sentence, without saying one twice: "awq", "fp8-block", "compressed-tensors
        w4a16" (QA: "a awq awq checkpoint", "a fp8 fp8-block checkpoint")."""
        return self.scheme if self.scheme.startswith(self.method) else f"{self.method} {self.scheme}"

    def kernel_path(self, capability: int | None, vllm_version: str | None = None) -> KernelPath:
        """The kernels vLLM `vllm_version` (None: the default release) picks on a GPU of this CUDA compute
        capability (None: ROCm/unknown)."""
        return select_kernel(self, capability, vllm_version)


# ---- bytes per weight -----------------------------------------------------------------------------


KNOWN_CHECKPOINT_SOURCE = "gpuopt's table of known quantized checkpoints"
"""How a Quantization read from gpuopt/data/quantized_checkpoints.csv (not from a checkpoint's files) says so in
its `source`: resolution marks models resolved offline with it, and quant_sharding.group_problem judges only
sizes a checkpoint's own config states."""


def _grouped_bytes(bits: int, group: int | None, scale_bytes: float, zero_point: bool) -> float:
    """Packed `bits`-bit weights + one scale (and a `bits`-bit zero point) per group of `group` weights.

    Per-channel scales (group -1 or None) are one value per output row: negligible next to the weights.
    """
    if not group or group <= 0:
        return bits / 8
    return bits / 8 + scale_bytes / group + (bits / 8 / group if zero_point else 0.0)


def _format_for(bits: int, float_weights: bool, source: str) -> WeightFormat:
    if bits == 8:
        return "fp8" if float_weights else "int8"
    if bits == 4:
        return "int4"
    raise ConfigError(f"{source}: {bits}-bit weights are not modelled (4 or 8 bits are)")


# ---- typed fields -----------------------------------------------------------------------------------
# A checkpoint's quantization file is input like any other: a value of the wrong type is refused here, naming
# the file and the field, instead of failing inside int() or a division further down (exit 70).


def _int_field(q: dict[str, Any], source: str, keys: tuple[str, ...], default: int | None,
               nullable: bool = False) -> int | None:
    """The first of `keys` the config has, as vLLM's QuantizationConfig.get_from_keys reads it (a key that is
    present wins even when its value is null), which must be an integer; `default` when none is present.
    `nullable`: null means unset (compressed-tensors' pydantic schemes declare such fields Optional)."""
    for key in keys:
        if key in q:
            value = q[key]
            if value is None and nullable:
                return default
            if isinstance(value, bool) or not isinstance(value, int):
                raise ConfigError(f"{source}: field '{key}' must be an integer (got {json.dumps(value)})")
            return value
    return default


def _require(q: dict[str, Any], source: str, method: str, *fields: tuple[str, ...]) -> None:
    """The fields vLLM's config class for `method` reads with get_from_keys, which stops the start-up ("Cannot
    find any of [...] in the model's quantization config") when none of a field's keys is present (0.28.0:
    AutoAWQConfig, AutoGPTQConfig and Fp8Config.from_config): planning on a default would print a command that
    cannot start."""
    missing = [" or ".join(f"'{k}'" for k in keys) for keys in fields if not any(k in q for k in keys)]
    if missing:
        what = f"field {missing[0]} is" if len(missing) == 1 else f"fields {', '.join(missing)} are"
        raise ConfigError(f"{source}: {what} missing, which vLLM's {method} config requires (it stops at "
                          "start-up without it)")


def _group_field(q: dict[str, Any], source: str, keys: tuple[str, ...], default: int) -> int:
    """A quantization group size: a positive number of weights, or -1 for one group per output channel. vLLM
    divides each layer's input size by it (auto_gptq.py / auto_awq.py create_weights), so null or 0 cannot
    load."""
    group = _int_field(q, source, keys, default)
    if group is None or (group <= 0 and group != -1):
        key = next((k for k in keys if k in q), keys[0])
        raise ConfigError(f"{source}: field '{key}' must be a positive group size or -1 (got {json.dumps(group)})")
    return group


def _block_field(q: dict[str, Any], source: str, key: str) -> tuple[int, int] | None:
    """A block-quantization shape [rows, columns] of positive integers (None when absent): vLLM's Fp8Config
    refuses any other length ("must have 2 dimensions", fp8.py) and divides weight shapes by both."""
    block = q.get(key)
    if block is None:
        return None
    if (not isinstance(block, list) or len(block) != 2
            or not all(isinstance(b, int) and not isinstance(b, bool) and b > 0 for b in block)):
        raise ConfigError(f"{source}: field '{key}' must be two positive integers [rows, columns] "
                          f"(got {json.dumps(block)})")
    return block[0], block[1]


def _names_field(q: dict[str, Any], source: str, keys: tuple[str, ...]) -> tuple[str, ...]:
    """A list of module names (left unquantized): the first of `keys` that is set, each entry a string."""
    for key in keys:
        names = q.get(key)
        if not names:
            continue
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            raise ConfigError(f"{source}: field '{key}' must be a list of module names (got {json.dumps(names)})")
        return tuple(names)
    return ()


def _dict_field(q: dict[str, Any], source: str, key: str) -> dict[str, Any] | None:
    """A nested object of the config (None when absent or null)."""
    value = q.get(key)
    if value is None:
        return None
    if not isinstance(value, dict):
        raise ConfigError(f"{source}: field '{key}' must be a JSON object (got {json.dumps(value)})")
    return value


# ---- readers, one per on-disk format ------------------------------------------------------------------


def _fp8(q: dict[str, Any], source: str) -> Quantization:
    block = _block_field(q, source, "weight_block_size")
    excluded = _names_field(q, source, ("modules_to_not_convert", "ignored_layers"))
    _require(q, source, "fp8", ("activation_scheme",))
    if block is not None:
        # one fp32 scale per block of block[0] x block[1] weights
        per = 1 + 4 / (block[0] * block[1])
        return Quantization(method="fp8", scheme="fp8-block", weight_bits=8, activation_bits=8,
                            group_size=block[1], bytes_per_weight=per, weight_format="fp8", excluded_modules=excluded)
    return Quantization(method="fp8", scheme="fp8-tensor", weight_bits=8, activation_bits=8, bytes_per_weight=1.0,
                        weight_format="fp8", excluded_modules=excluded)


def _awq(q: dict[str, Any], source: str) -> Quantization:
    # AutoAWQConfig.from_config reads w_bit before bits and q_group_size before group_size
    bits = _int_field(q, source, ("w_bit", "bits"), 4) or 0
    group = _group_field(q, source, ("q_group_size", "group_size"), 128)
    _require(q, source, "AWQ", ("w_bit", "bits"), ("q_group_size", "group_size"), ("zero_point",))
    zero = bool(q.get("zero_point", True))
    return Quantization(method="awq", scheme="awq", weight_bits=bits, activation_bits=16, group_size=group,
                        symmetric=not zero, bytes_per_weight=_grouped_bytes(bits, group, 2, zero),
                        weight_format=_format_for(bits, False, source),
                        excluded_modules=_names_field(q, source, ("modules_to_not_convert",)))


def _gptq(q: dict[str, Any], source: str) -> Quantization:
    bits = _int_field(q, source, ("bits",), 4) or 0
    group = _group_field(q, source, ("group_size",), 128)
    # `sym` is not required: before AutoGPTQConfig (0.28 reads it with get_from_keys) a config without it fell
    # back from Marlin to the plain GPTQ kernel, which starts; gpuopt reads it as symmetric
    _require(q, source, "GPTQ", ("bits",), ("group_size",), ("desc_act",))
    # GPTQ stores qzeros even when symmetric, and a g_idx of one int32 per input row (negligible)
    return Quantization(method="gptq", scheme="gptq", weight_bits=bits, activation_bits=16, group_size=group,
                        symmetric=bool(q.get("sym", True)), desc_act=bool(q.get("desc_act", False)),
                        bytes_per_weight=_grouped_bytes(bits, group, 2, True),
                        weight_format=_format_for(bits, False, source),
                        excluded_modules=_names_field(q, source, ("modules_to_not_convert",)), source=source)


def _bitsandbytes(q: dict[str, Any], source: str) -> Quantization:
    skipped = _names_field(q, source, ("llm_int8_skip_modules",))
    if q.get("load_in_8bit"):
        return Quantization(method="bitsandbytes", scheme="llm-int8", weight_bits=8, activation_bits=16,
                            bytes_per_weight=1.0, weight_format="int8", excluded_modules=skipped)
    # NF4/FP4 blocks of 64 with an absmax each: fp32, or 8-bit plus an fp32 per 256 absmaxes (double quant)
    absmax = 1 / 64 + 4 / (64 * 256) if q.get("bnb_4bit_use_double_quant") else 4 / 64
    return Quantization(method="bitsandbytes", scheme=str(q.get("bnb_4bit_quant_type", "nf4")), weight_bits=4,
                        activation_bits=16, group_size=64, bytes_per_weight=0.5 + absmax, weight_format="int4",
                        excluded_modules=skipped)


def _mxfp4(q: dict[str, Any], source: str) -> Quantization:
    # OCP MX: 4-bit E2M1 values + one E8M0 scale byte per 32; vLLM quantizes the MoE experts only
    return Quantization(method="mxfp4", scheme="mxfp4", weight_bits=4, activation_bits=16, group_size=32,
                        bytes_per_weight=0.5 + 1 / 32, weight_format="mxfp4", experts_only=True,
                        excluded_modules=_names_field(q, source, ("modules_to_not_convert",)))


def _fbgemm_fp8(q: dict[str, Any], source: str, config: dict[str, Any]) -> Quantization:
    """Meta's FBGEMM FP8 (meta-llama/Llama-3.1-405B-Instruct-FP8): FP8 weights with one fp32 scale per output
    channel, activations quantized per token at run time, `modules_to_not_convert` left in 16-bit by exact name
    (vLLM 0.28.0 fbgemm_fp8.py: FBGEMMFp8Config.from_config, is_layer_skipped). vLLM quantizes its linear
    layers only -- get_quant_method returns None for a fused-MoE layer -- so an MoE checkpoint would keep
    16-bit experts the memory model would size in FP8: refused rather than mis-sized."""
    nested = config.get("text_config")
    for holder in (config, nested if isinstance(nested, dict) else {}):
        moe = next((k for k in _MOE_KEYS if isinstance(holder.get(k), int) and holder[k] > 0), None)
        if moe is not None:
            raise ConfigError(f"{source}: quant_method 'fbgemm_fp8' on an MoE model ({moe} {holder[moe]}) is not "
                              "modelled: vLLM's fbgemm_fp8 quantizes linear layers only, not fused experts")
    return Quantization(method="fbgemm_fp8", scheme="fp8-channel", weight_bits=8, activation_bits=8,
                        group_size=-1, bytes_per_weight=1.0, weight_format="fp8",
                        excluded_modules=_names_field(q, source, ("modules_to_not_convert",)))


def _modelopt(q: dict[str, Any], source: str) -> Quantization:
    nested = q.get("quantization")
    inner: dict[str, Any] = nested if isinstance(nested, dict) else q
    algo = str(inner.get("quant_algo", "")).upper()
    excluded = _names_field(inner, source, ("exclude_modules", "ignore"))
    kv_scheme = _dict_field(inner, source, "kv_cache_scheme")
    kv_fp8 = str(inner.get("kv_cache_quant_algo") or "").upper() == "FP8" or (
        kv_scheme is not None and kv_scheme.get("num_bits") == 8)
    if algo == "FP8":
        return Quantization(method="modelopt", scheme="modelopt-fp8", weight_bits=8, activation_bits=8,
                            bytes_per_weight=1.0, weight_format="fp8", excluded_modules=excluded, kv_cache_fp8=kv_fp8,
                            source=source)
    if algo == "NVFP4":
        group = _group_field(inner, source, ("group_size",), 16)
        if group == -1:
            raise ConfigError(f"{source}: field 'group_size' must be a positive group size for NVFP4 (got -1)")
        # E2M1 values + one FP8 (E4M3) scale per 16, plus a per-tensor fp32 scale (negligible)
        return Quantization(method="modelopt", scheme="nvfp4", weight_bits=4, activation_bits=4, group_size=group,
                            bytes_per_weight=0.5 + 1 / group, weight_format="int4", excluded_modules=excluded,
                            kv_cache_fp8=kv_fp8, source=source)
    raise ConfigError(f"{source}: ModelOpt quant_algo '{inner.get('quant_algo')}' is not modelled "
                      "(FP8 and NVFP4 are)")


def _compressed_tensors(q: dict[str, Any], source: str) -> Quantization:
    groups = q.get("config_groups")
    if not isinstance(groups, dict) or not groups:
        raise ConfigError(f"{source}: field 'config_groups' must be a non-empty JSON object of quantization "
                          f"groups (got {json.dumps(groups)})")
    name, group = next(iter(groups.items()))
    where = f"{source} config_groups.{name}"
    if not isinstance(group, dict):
        raise ConfigError(f"{source}: field 'config_groups.{name}' must be a JSON object with 'weights' "
                          f"(got {json.dumps(group)})")
    weights = _dict_field(group, where, "weights") or {}
    acts = _dict_field(group, where, "input_activations")
    bits = _int_field(weights, f"{where}.weights", ("num_bits",), 8) or 0
    float_w = str(weights.get("type", "int")) == "float"
    strategy = str(weights.get("strategy", "tensor"))
    group_size = _int_field(weights, f"{where}.weights", ("group_size",), None, nullable=True)
    if group_size is not None and group_size <= 0 and group_size != -1:
        raise ConfigError(f"{where}.weights: field 'group_size' must be a positive group size or -1 "
                          f"(got {group_size})")
    sym = bool(weights.get("symmetric", True))
    excluded = _names_field(q, source, ("ignore",))
    kv = _dict_field(q, source, "kv_cache_scheme")
    kv_fp8 = kv is not None and kv.get("num_bits") == 8
    act_bits = (_int_field(acts, f"{where}.input_activations", ("num_bits",), 16) or 16) if acts else 16
    if float_w and bits == 4:
        # compressed-tensors NVFP4: FP8 scale per 16 (group_size)
        g = group_size if group_size and group_size > 0 else 16
        return Quantization(method="compressed-tensors", scheme="nvfp4" if act_bits == 4 else "nvfp4-w4a16",
                            weight_bits=4, activation_bits=act_bits, group_size=g, bytes_per_weight=0.5 + 1 / g,
                            weight_format="int4", excluded_modules=excluded, kv_cache_fp8=kv_fp8)
    if strategy == "block":
        rows, cols = _block_field(weights, f"{where}.weights", "block_structure") or (128, 128)
        per = bits / 8 + 4 / (rows * cols)
    elif strategy == "group":
        per = _grouped_bytes(bits, group_size or 128, 2, not sym)
    else:
        per = bits / 8
    kind = "fp8" if float_w else "int"
    scheme = f"w{bits}a{act_bits}" + (f"-{kind}" if bits == 8 else "")
    return Quantization(method="compressed-tensors", scheme=scheme, weight_bits=bits, activation_bits=act_bits,
                        group_size=group_size if group_size else (128 if strategy == "block" else None),
                        symmetric=sym, desc_act=bool(weights.get("actorder")), bytes_per_weight=per,
                        weight_format=_format_for(bits, float_w, f"{where}.weights"), excluded_modules=excluded,
                        kv_cache_fp8=kv_fp8)


def read_quantization(config: dict[str, Any], hf_quant_config: dict[str, Any] | None = None,
                      quantize_config: dict[str, Any] | None = None, where: str = "config.json") -> Quantization | None:
    """The checkpoint's quantization, from whichever file holds it (None: an unquantized checkpoint).

    Order as vLLM reads it: config.json `quantization_config` (or `compression_config`), then ModelOpt's
    hf_quant_config.json, then AutoGPTQ's quantize_config.json. An unknown method is an error (exit 2).
    """
    nested = config.get("text_config")
    text: dict[str, Any] = nested if isinstance(nested, dict) else {}
    for key, holder in (("quantization_config", config), ("compression_config", config),
                        ("quantization_config", text)):
        value = holder.get(key)
        if value is not None and (not isinstance(value, dict) or not value):
            # transformers and vLLM read it as a dict (`quant_method` key): a string cannot say the method, and
            # an empty object was planned as an unquantized model (QA) where vLLM finds no method in it
            raise ConfigError(f"{where}: field '{key}' must be a JSON object with a quant_method "
                              f"(got {json.dumps(value)})")
    q = (config.get("quantization_config") or config.get("compression_config") or text.get("quantization_config"))
    source = f"{where} quantization_config"
    label = source  # where errors point: the side file's path when the quantization comes from one
    if not isinstance(q, dict):
        side = str(Path(where).parent / "{}") if where.endswith("config.json") else "{}"
        if hf_quant_config:
            q, source, label = hf_quant_config, "hf_quant_config.json", side.format("hf_quant_config.json")
            q = {"quant_method": "modelopt", **q}
        elif quantize_config:
            q, source, label = quantize_config, "quantize_config.json", side.format("quantize_config.json")
            q = {"quant_method": "gptq", **q}
        else:
            return None
    method = str(q.get("quant_method", "")).lower()
    result: Quantization
    if method == "fp8":
        result = _fp8(q, label)
    elif method in ("compressed-tensors", "compressed_tensors"):
        result = _compressed_tensors(q, label)
    elif method == "awq":
        result = _awq(q, label)
    elif method == "gptq":
        result = _gptq(q, label)
    elif method == "bitsandbytes":
        result = _bitsandbytes(q, label)
    elif method == "mxfp4":
        result = _mxfp4(q, label)
    elif method in ("modelopt", "modelopt_fp4"):
        result = _modelopt(q, label)
    elif method == "fbgemm_fp8":
        result = _fbgemm_fp8(q, label, config)
    elif "quant_method" not in q:
        # vLLM reads the method from this key alone (ModelConfig._parse_quant_hf_config) and refuses a
        # quantization_config without it, e.g. Paddle/FastDeploy's {"quantization": "mix_quant", ...}
        raise ConfigError(f"{label}: no quant_method, so vLLM cannot tell how the "
                          f"checkpoint is quantized (keys: {', '.join(sorted(q)) or 'none'}; known methods: "
                          f"{', '.join(QUANT_METHODS)})")
    else:
        raise ConfigError(f"{label}: unknown quant_method '{q.get('quant_method')}' "
                          f"(known: {', '.join(QUANT_METHODS)})")
    left = excluded_layers(result.method, result.excluded_modules, _decoder_layers(config), label)
    return result.model_copy(update={
        "source": source, "attention_excluded": left.every_mixer,
        "excluded_mixer_layers": () if left.every_mixer else left.mixers,
        "excluded_ffn_layers": () if left.every_mixer and left.every_ffn else left.ffns,
        "experts_only": result.experts_only or (left.every_mixer and left.every_ffn)})


# ---- the modules a checkpoint leaves in 16-bit -------------------------------------------------------
# vLLM asks its quantization config, for each linear module it builds, whether the module is left unquantized,
# by the module's full name ("model.layers.3.self_attn.q_proj"; a fused qkv_proj / gate_up_proj by each of its
# shards) against the checkpoint's list, each format by its own rule (read in the 0.11.0-0.34.0 sources):
#   fp8, mxfp4, gptq   exact names: utils/quant_utils.py is_layer_skipped (match_mode "exact" in Fp8Config)
#   compressed-tensors exact names, or "re:<regex>" by re.match: compressed_tensors/utils.py should_ignore_layer
#                      -> utils/config_utils.py is_equal_or_regex_match (use_fnmatch off)
#   modelopt           exact names, substrings (also of the name without "language_model."), and shell
#                      wildcards by fnmatch: modelopt.py ModelOptQuantConfigBase.is_layer_excluded (0.13.0+;
#                      0.33.0's apply_vllm_mapper also splits "X*" into "X" and "X.*")
#   awq                substrings: awq_marlin.py is_layer_skipped_awq (0.11.0), auto_awq.py
#                      is_layer_skipped(match_mode="substring") (0.33.0)
#   bitsandbytes       a dotted component or a leading dotted path: bitsandbytes.py is_layer_skipped_bnb
# A decoder layer's token mixer counts as 16-bit when one of its projections is left so (the checkpoints read
# leave all of a mixer's projections together); its dense MLP or shared expert when both its up (or fused
# gate_up) and its down projection are. The names are probed under the language model's prefix as the list
# spells it (vision towers are 16-bit in the memory model anyway).

_MIXER_CONTAINERS = ("self_attn", "mixer", "linear_attn", "attention")
_MIXER_PROJECTIONS = ("q_proj", "k_proj", "v_proj", "o_proj", "qkv_proj", "q_a_proj", "q_b_proj",
                      "kv_a_proj_with_mqa", "kv_b_proj", "in_proj", "out_proj", "in_proj_qkvz", "in_proj_ba",
                      "in_proj_qkv", "in_proj_z", "in_proj_b", "in_proj_a")
# dense MLPs (mlp / Llama-4 feed_forward / Nemotron-H's MLP mixer) and shared experts (DeepSeek/Kimi
# shared_experts, Qwen/Llama-4 shared_expert)
_FFN_CONTAINERS = ("mlp", "feed_forward", "mixer", "mlp.shared_experts", "mlp.shared_expert",
                   "feed_forward.shared_expert", "mixer.shared_experts")
_DEFAULT_PREFIXES = ("model.", "language_model.model.", "model.language_model.", "backbone.")
_NOT_LANGUAGE_MODEL = re.compile(r"vision|visual|image|audio|mm_|multi_modal|tower|encoder|vit\b")
_NUMBERED = re.compile(r"layers\.(\d+)\.")
_LITERAL_MIXER = re.compile(r"^(.*?)layers\.(\d+)\.(?:self_attn|mixer|linear_attn|attention)\.(\w*proj\w*)$")


class LeftUnquantized(BaseModel):
    """Which decoder layers' token mixers and dense MLPs / shared experts an exclusion list leaves in 16-bit."""

    model_config = ConfigDict(frozen=True)

    mixers: tuple[int, ...] = ()
    ffns: tuple[int, ...] = ()
    every_mixer: bool = False
    every_ffn: bool = False


def _decoder_layers(config: dict[str, Any]) -> int | None:
    """The decoder layer count the config states (text_config first: a multimodal model's language model)."""
    nested = config.get("text_config")
    for holder in ((nested if isinstance(nested, dict) else {}), config):
        for key in ("num_hidden_layers", "n_layer", "num_layers"):
            value = holder.get(key)
            if isinstance(value, int) and not isinstance(value, bool) and value > 0:
                return value
    return None


def _matcher(method: str, entries: list[str], where: str) -> Callable[[str], bool]:
    """A test of a module name against these entries of the list, by the format's rule (see above)."""
    if not entries:
        return lambda name: False
    if method == "compressed-tensors":
        exact = frozenset(e for e in entries if not e.startswith("re:"))
        patterns = []
        for e in entries:
            if e.startswith("re:"):
                try:
                    patterns.append(re.compile(e[3:]))
                except re.error as exc:
                    raise ConfigError(f"{where}: ignore entry {json.dumps(e)} is not a regular expression "
                                      f"({exc})") from None
        return lambda name: name in exact or any(p.match(name) for p in patterns)
    if method in ("modelopt", "awq"):
        # a substring (an exact name is one; so is a name without "language_model."'s prefix); ModelOpt's "X*"
        # also as "X", and its shell wildcards by fnmatch
        subs = entries + ([e[:-1] for e in entries if len(e) >= 2 and e[-1] == "*" and e[-2] != "."]
                          if method == "modelopt" else [])
        substring = re.compile("|".join(re.escape(e) for e in subs))
        wild = [e for e in entries if any(c in e for c in "*?[")] if method == "modelopt" else []
        shell = re.compile("|".join(f"(?:{translate(e)})" for e in wild)) if wild else None
        return lambda name: substring.search(name) is not None or (shell is not None and shell.match(name) is not None)
    if method == "bitsandbytes":
        skip = frozenset(entries)

        def bnb(name: str) -> bool:
            parts = name.split(".")
            return any(p in skip for p in parts) or any(".".join(parts[:i + 1]) in skip for i in range(len(parts)))
        return bnb
    exact = frozenset(entries)
    return lambda name: name in exact


def excluded_layers(method: str, names: tuple[str, ...], layers: int | None,
                    where: str = "the exclusion list") -> LeftUnquantized:
    """The decoder layers (of `layers`; None: as many as the list numbers) whose token mixer, and whose dense MLP
    or shared expert, `names` leaves in 16-bit under `method`'s matching rule (the comment above)."""
    if not names:
        return LeftUnquantized()
    language = [n for n in names if not n.startswith("re:") and not _NOT_LANGUAGE_MODEL.search(n.split("layers.")[0])]
    prefixes = tuple(dict.fromkeys(m.group(1) for n in language if (m := re.match(r"^([\w.]*?)layers\.", n))
                                   and not any(c in m.group(1) for c in "*?[")))
    prefixes = prefixes or _DEFAULT_PREFIXES
    # an entry naming a layer number ("...layers.7.") can only match that layer's modules; the rest are tried on all
    by_layer: dict[int, list[str]] = {}
    anywhere: list[str] = []
    for entry in names:
        m = None if entry.startswith("re:") else _NUMBERED.search(entry)
        if m is None:
            anywhere.append(entry)
        else:
            by_layer.setdefault(int(m.group(1)), []).append(entry)
    numbered = [int(m.group(1)) for n in language if (m := _NUMBERED.search(n))]
    count = layers if layers is not None else max(numbered, default=0) + 1
    # a literal name of a mixer projection is one whatever the format's rule (the name matches itself)
    literal = {int(m.group(2)) for n in language if (m := _LITERAL_MIXER.match(n)) and m.group(1) in prefixes
               and "indexer" not in m.group(3)}
    mixers: list[int] = []
    ffns: list[int] = []
    for i in range(count):
        entries = by_layer.get(i, []) + anywhere
        if not entries:
            continue
        test = _matcher(method, entries, where)

        def left(module: str, test: Callable[[str], bool] = test, i: int = i) -> bool:
            return any(test(f"{p}layers.{i}.{module}") for p in prefixes)

        if i in literal or any(left(f"{c}.{proj}") for c in _MIXER_CONTAINERS for proj in _MIXER_PROJECTIONS):
            mixers.append(i)
        if any((left(f"{c}.up_proj") or left(f"{c}.gate_up_proj")) and left(f"{c}.down_proj")
               for c in _FFN_CONTAINERS):
            ffns.append(i)
    return LeftUnquantized(mixers=tuple(mixers), ffns=tuple(ffns), every_mixer=len(mixers) == count,
                           every_ffn=len(ffns) == count)


def described(method: str, weight_bits: int | None, vllm_quantization: str,
              group_size: str = "") -> tuple[Quantization, list[str]] | None:
    """The quantization of a known checkpoint that only a table row describes (physics/checkpoint_table.py):
    the `quantization_config` such a checkpoint carries, rebuilt from the row's format, bits and the method
    vLLM detects, and read by `read_quantization` like a real one; with the assumptions it took for what
    the row does not state. None when the row cannot say it (the vLLM method unconfirmed, mixed bits, a
    format whose 16-bit modules only the checkpoint's config lists: FBGEMM FP8, read by read_quantization from a
    config; Quark)."""
    vq = vllm_quantization.strip()
    if not vq or weight_bits is None:
        return None
    assumed: list[str] = []
    config: dict[str, Any]
    if method == "awq" and vq == "awq_marlin":
        config = {"quant_method": "awq", "bits": weight_bits, "group_size": 128, "zero_point": True}
        assumed.append("group size 128 with zero points (AutoAWQ's default; the table does not state it)")
    elif method == "gptq" and vq == "gptq_marlin":
        config = {"quant_method": "gptq", "bits": weight_bits, "group_size": 128, "sym": True, "desc_act": False}
        assumed.append("group size 128, symmetric, no act-order (the table does not state them)")
    elif method == "bnb" and vq == "bitsandbytes" and weight_bits == 4:
        config = {"quant_method": "bitsandbytes", "load_in_4bit": True, "bnb_4bit_quant_type": "nf4"}
        assumed.append("NF4 without double quantization")
    elif method == "fp8" and vq == "fp8":
        config = {"quant_method": "fp8", "activation_scheme": "dynamic", "weight_block_size": [128, 128]}
        if "128x128" not in group_size:
            assumed.append("blocks of 128 x 128 (the table says block-wise)")
    elif method == "fp8" and vq == "modelopt":
        config = {"quant_method": "modelopt", "quant_algo": "FP8"}
    elif method == "nvfp4" and vq == "modelopt_fp4":
        config = {"quant_method": "modelopt", "quant_algo": "NVFP4", "group_size": 16}
    elif vq == "compressed-tensors" and method in ("fp8", "int8-w8a8", "w4a16", "nvfp4"):
        kind = "float" if method in ("fp8", "nvfp4") else "int"
        weights: dict[str, Any] = {"num_bits": weight_bits, "type": kind, "symmetric": True,
                                   "strategy": "channel"}
        group: dict[str, Any] = {"weights": weights}
        if method == "w4a16":
            weights.update(strategy="group", group_size=128)
            assumed.append("group size 128 (llm-compressor's W4A16 default; the table does not state it)")
        elif method == "nvfp4":
            weights.update(strategy="tensor_group", group_size=16)
            group["input_activations"] = {"num_bits": 4, "type": "float", "dynamic": "local"}
        else:
            group["input_activations"] = {"num_bits": 8, "type": kind, "dynamic": True, "strategy": "token"}
        config = {"quant_method": "compressed-tensors", "config_groups": {"group_0": group}, "ignore": ["lm_head"]}
    elif method == "mxfp4" and vq == "mxfp4":
        config = {"quant_method": "mxfp4"}
    else:
        return None
    quant = read_quantization({"quantization_config": config}, where="quantized_checkpoints.csv")
    return (quant, assumed) if quant is not None else None


# ---- kernel selection ------------------------------------------------------------------------------


def kernel_on(quantization: Quantization | None, gpu: GpuSpec, vllm_version: str | None = None) -> KernelPath | None:
    """The kernels a checkpoint runs with on this GPU in this release (None: the default one); None for an
    unquantized checkpoint.

    The interface for the latency model and simulator: `activation_bits` says whether GEMMs run on 16-bit
    math after dequantizing (weight-only Marlin/Machete) or on FP8/INT8/FP4 tensor cores.
    """
    return None if quantization is None else quantization.kernel_path(gpu.compute_capability, vllm_version)


def modelopt_fp8_runs(capability: int | None, vllm_version: str | None = None) -> bool:
    """Whether vLLM `vllm_version` (None: the default release) loads a ModelOpt FP8 checkpoint on a GPU of
    this capability (select_kernel: FP8 tensor cores up to 0.25, FP8 Marlin from sm80 from 0.27; None, ROCm:
    from 0.21, ROCM_FROM); what decides whether a plan may name one of the table's ModelOpt FP8 checkpoints
    (checkpoint_table.NEEDS_NATIVE_FP8)."""
    return select_kernel(_modelopt({"quant_algo": "FP8"}, "a ModelOpt FP8 checkpoint"), capability,
                         vllm_version).supported


@cache
def representative(weight_format: str) -> Quantization | None:
    """The checkpoint a plan's weight format stands for when the model's own files do not say how it is
    quantized (a registry model planned at fp8 or int4): what the known quantized checkpoints of that format
    mostly are (../shared/data/quantized_checkpoints.csv): block FP8 (Qwen3/DeepSeek/GLM FP8 releases), AWQ
    W4 group 128, MXFP4 experts, INT8 W8A8. None for 16/32-bit weights. Cached (frozen models): every replica
    the planner builds asks for its format's."""
    where = f"representative {weight_format} checkpoint"
    if weight_format == "fp8":
        return _fp8({"activation_scheme": "dynamic", "weight_block_size": [128, 128]}, where)
    if weight_format == "int4":
        return _awq({"bits": 4, "group_size": 128, "zero_point": True}, where)
    if weight_format == "mxfp4":
        return _mxfp4({}, where)
    if weight_format == "int8":
        return _compressed_tensors({"config_groups": {"group_0": {
            "weights": {"num_bits": 8, "type": "int", "strategy": "channel"},
            "input_activations": {"num_bits": 8, "type": "int", "dynamic": True}}}}, where)
    return None


MARLIN_SM75_FROM = (0, 14)
"""Marlin runs on sm75 from vLLM 0.14.0, on sm80 before: utils/marlin_utils.py query_marlin_supported_quant_types
returns no types below 80 in the 0.11.0-0.13.0 sources and below 75 from 0.14.0, is_fp8_marlin_supported and
is_fp4_marlin_supported (marlin_utils_fp8.py, marlin_utils_fp4.py) went from 80 to 75 in the same release, and
with them the get_min_capability of Fp8Config (fp8.py), AWQMarlinConfig, GPTQMarlinConfig and ModelOpt's NVFP4
config (80 -> 75). Read in the 0.11.0, 0.12.0, 0.13.0, 0.14.0, 0.17.0 ... 0.34.0 sources."""

CT_MARLIN_SM75_FROM = (0, 17)
"""compressed-tensors' FP8 W8A16 and NVFP4 schemes (compressed_tensors_w8a16_fp8.py, _w4a4_nvfp4.py,
_w4a16_nvfp4.py get_min_capability) need sm80 in the 0.14.0 source and sm75 in 0.17.0; the 0.15 and 0.16
sources read have no quantization package, so those two keep the older rule here (not settled)."""

MODELOPT_FP8_SM80_FROM = (0, 27)
"""ModelOptFp8Config.get_min_capability is 89 up to the 0.25.0 source and 80 from 0.27.1 (modelopt.py; 0.26
not read: it keeps the older rule here), which then runs below sm89 on FP8 Marlin (kernels/linear's
MarlinFP8ScaledMMLinearKernel)."""

BITSANDBYTES_UNTIL = (0, 28)
"""bitsandbytes.py is in the quantization package up to 0.27.1 and gone from 0.28.0 (QUANTIZATION_METHODS has
no "bitsandbytes": "Unknown quantization method")."""

ROCM_FROM: dict[str, tuple[int, ...]] = {
    "fp8": (0, 8), "compressed-tensors": (0, 8), "awq": (0, 8), "gptq": (0, 8), "mxfp4": (0, 10, 1),
    "bitsandbytes": (0, 17), "modelopt_fp4": (0, 20), "modelopt": (0, 21), "fbgemm_fp8": (0, 28)}
"""The first release whose ROCm platform loads each method: vLLM refuses any other at start-up
(ModelConfig._verify_quantization -> Platform.verify_quantization: "... quantization is currently not supported
in ROCm") unless it is in RocmPlatform.supported_quantization (platforms/rocm.py). Read in the 0.8.0, 0.8.5,
0.10.1.1, 0.11.0, 0.13.0, 0.15.0, 0.16.0, 0.17.0, 0.19.0, 0.20.0, 0.21.0, 0.23.0, 0.26.0, 0.27.1, 0.33.0 and 0.34.0
wheels: fp8, compressed-tensors, awq and gptq in every one; mxfp4 from 0.10.1.1 (not in 0.8.5; 0.9-0.10.0 not
read: they keep the older rule here); bitsandbytes not in 0.8.0-0.11.0, only off gfx9 in 0.13.0-0.16.0 ("not
supported on gfx9 (warp size 64 limitation)"; every AMD GPU gpuopt lists is an MI3xx, gfx942/gfx950 -- "gfx9
family: gfx90a (MI200), gfx942/gfx950 (MI3xx)", 0.33.0 gpt_oss_triton_kernels_moe.py), listed from 0.17.0 and
gone with the method from 0.28 (BITSANDBYTES_UNTIL); ModelOpt NVFP4 (modelopt_fp4) from 0.20.0 (not in 0.19.0),
ModelOpt FP8 (modelopt) from 0.21.0 (not in 0.20.0). fbgemm_fp8 was read in 0.28.0 only (listed there): earlier
releases are refused on ROCm here until one is read."""

FBGEMM_FP8_MIN_CAPABILITY = 80
"""FBGEMMFp8Config.get_min_capability (0.28.0 fbgemm_fp8.py): 80, with FP8 Marlin (weight-only) below sm89
(`use_marlin = not has_device_capability(89)`) and per-token dynamic FP8 activations from sm89. Read in 0.28.0;
the same rule is assumed for the other releases modelled."""


def vllm_method_name(q: Quantization) -> str:
    """The name vLLM registers the checkpoint's config under (ModelOpt NVFP4 is `modelopt_fp4`, FP8 `modelopt`)."""
    return "modelopt_fp4" if q.method == "modelopt" and q.scheme == "nvfp4" else q.method


def select_kernel(q: Quantization, capability: int | None, vllm_version: str | None = None) -> KernelPath:
    """The kernels vLLM `vllm_version` (None: the default release) picks for this checkpoint on a GPU of
    `capability` (e.g. 89 for Ada). The rules were read in 0.11.0 (module docstring); what later releases
    changed is in MARLIN_SM75_FROM, CT_MARLIN_SM75_FROM, MODELOPT_FP8_SM80_FROM and BITSANDBYTES_UNTIL.

    None means no CUDA capability (ROCm): the CUDA-only kernels below do not apply and vLLM uses its
    ROCm/Triton paths, reported as such rather than guessed -- for the methods the release's ROCm platform
    loads (ROCM_FROM); the release rules of every platform (BITSANDBYTES_UNTIL, AWQ's 4 bits) apply first.
    """
    wb, ab = q.weight_bits, q.activation_bits
    release = release_or_default(vllm_version)
    key = release_key(release)

    def unsupported(why: str, removed_in: tuple[int, int] | None = None) -> KernelPath:
        return KernelPath(vllm_method=q.method, linear="none", moe=None, weight_bits=wb, activation_bits=ab,
                          supported=False, note=why, removed_in=removed_in)

    # what a release refuses on every platform, before the GPU is asked
    if q.method == "bitsandbytes" and key >= BITSANDBYTES_UNTIL:
        gone = ".".join(map(str, BITSANDBYTES_UNTIL))
        return unsupported(f"vLLM {release} has no bitsandbytes support (removed in {gone})", BITSANDBYTES_UNTIL)
    if q.method == "awq" and wb != 4:
        # AWQ Marlin takes uint4 with zero points only (marlin_utils.py: has_zp -> [uint4]) and the AWQ GEMM
        # kernel refuses any other width (awq.py "only 4-bit"; 0.24+ AutoAWQConfig TYPE_MAP {4}): every
        # release read, 0.11.0-0.34.0
        return unsupported(f"vLLM {release} runs AWQ with 4-bit weights only (got {wb}-bit)")
    if capability is None:
        name = vllm_method_name(q)
        first = ROCM_FROM.get(name)
        if first is None or key < first:
            since = "" if first is None else f" before {'.'.join(map(str, first))}"
            return unsupported(f"vLLM {release} does not load {name} checkpoints on ROCm (not in "
                               f"RocmPlatform.supported_quantization{since})")
        return KernelPath(vllm_method=q.method, linear="rocm/triton", moe="rocm/triton" if ab else None,
                          weight_bits=wb, activation_bits=ab, note="non-CUDA GPU: ROCm kernels, not modelled")
    cc = capability
    marlin_cc = 75 if key >= MARLIN_SM75_FROM else 80
    ct_marlin_cc = 75 if key >= CT_MARLIN_SM75_FROM else 80

    if q.method == "awq":
        # AWQ without zero points is not a Marlin type either (has_zp False lists uint4b8/uint8b128 only)
        marlin_ok = not q.symmetric and (q.group_size or -1) in MARLIN_GROUP_SIZES
        if marlin_ok and cc >= marlin_cc:
            return KernelPath(vllm_method="awq_marlin", linear="marlin", moe="marlin-moe", weight_bits=wb,
                              activation_bits=16)
        if cc >= 75:
            why = "not a Marlin layout" if not marlin_ok else f"Marlin needs sm{marlin_cc} in vLLM {release}"
            return KernelPath(vllm_method="awq", linear="awq-gemm", moe="moe-wna16", weight_bits=wb,
                              activation_bits=16, note=f"{why}: the slower AWQ GEMM kernel")
        return unsupported("AWQ needs compute capability 7.5 or newer")
    if q.method == "gptq" or (q.method == "compressed-tensors" and ab == 16 and q.scheme.startswith("w")
                              and q.weight_format in ("int4", "int8")):
        # GPTQ-Marlin takes symmetric GPTQ only (gptq_marlin.py TYPE_MAP (4, True) / (8, True); 0.11's
        # is_gptq_marlin_compatible); asymmetric GPTQ stays on the exllama kernel
        marlin_ok = (wb in (4, 8) and (q.group_size or -1) in MARLIN_GROUP_SIZES
                     and (q.symmetric or q.method != "gptq"))
        name = "gptq_marlin" if q.method == "gptq" else "compressed-tensors"
        if marlin_ok and cc >= marlin_cc:
            machete = cc == 90 and not q.desc_act and (q.group_size or -1) in MACHETE_GROUP_SIZES
            return KernelPath(vllm_method=name, linear="machete" if machete else "marlin", moe="marlin-moe",
                              weight_bits=wb, activation_bits=16)
        if q.method == "gptq" and cc >= 60:
            return KernelPath(vllm_method="gptq", linear="exllama", moe="moe-wna16", weight_bits=wb,
                              activation_bits=16, note=f"Marlin needs sm{marlin_cc} in vLLM {release}: GPTQ's "
                                                       "exllama kernel")
        return unsupported(f"{q.scheme} needs Marlin (compute capability {marlin_cc / 10:.1f} or newer in vLLM "
                           f"{release})")
    if q.method == "bitsandbytes":
        if cc >= 70:
            return KernelPath(vllm_method="bitsandbytes", linear="bitsandbytes", moe="bitsandbytes",
                              weight_bits=wb, activation_bits=16, note="dequantizes on the fly: slow")
        return unsupported("bitsandbytes needs compute capability 7.0 or newer")
    if q.method == "mxfp4":
        # mxfp4.py get_mxfp4_backend: FlashInfer on sm100; OpenAI's triton_kernels (matmul_ogs) on sm90 (0.11
        # and 0.13 alike); Marlin below sm90 and, from 0.13 (triton_kernels limited to sm90-sm10x), on sm120.
        # Mxfp4Config.get_min_capability is 80 in every release read (0.11.0-0.34.0)
        if 100 <= cc < 110:
            moe = "flashinfer-mxfp4"
        elif cc == 90:
            moe = "triton-mxfp4"
        elif cc >= 80:
            moe = "marlin-mxfp4"
        else:
            return unsupported("MXFP4 needs compute capability 8.0 or newer")
        return KernelPath(vllm_method="mxfp4", linear="unquantized", moe=moe, weight_bits=4, activation_bits=16)
    if q.scheme in ("nvfp4", "nvfp4-w4a16"):
        if cc >= 120:  # GeForce / RTX PRO Blackwell: CUTLASS FP4 GEMMs, no sm100 FlashInfer TRT-LLM kernels
            return KernelPath(vllm_method=q.method, linear="cutlass-fp4", moe="cutlass-fp4-moe", weight_bits=4,
                              activation_bits=4)
        if cc >= 100:
            linear = "flashinfer-cutlass-fp4" if q.method == "modelopt" else "cutlass-fp4"
            return KernelPath(vllm_method=q.method, linear=linear, moe="flashinfer-cutlass-fp4-moe", weight_bits=4,
                              activation_bits=4)
        fp4_cc = marlin_cc if q.method == "modelopt" else ct_marlin_cc
        if cc >= fp4_cc:
            return KernelPath(vllm_method=q.method, linear="marlin-fp4", moe="marlin-fp4-moe", weight_bits=4,
                              activation_bits=16, note="no FP4 tensor cores before Blackwell: weight-only Marlin")
        return unsupported(f"NVFP4 needs compute capability {fp4_cc / 10:.1f} or newer in vLLM {release}")
    if q.weight_format == "fp8":
        block = q.scheme in ("fp8-block",) or (q.method == "compressed-tensors" and q.group_size == 128
                                              and q.bytes_per_weight > 1)
        if q.method == "modelopt":
            fp8_cc = 80 if key >= MODELOPT_FP8_SM80_FROM else 89
        elif q.method == "fbgemm_fp8":
            fp8_cc = FBGEMM_FP8_MIN_CAPABILITY
        else:
            fp8_cc = ct_marlin_cc if q.method == "compressed-tensors" else marlin_cc
        if cc < fp8_cc:
            label = {"modelopt": "ModelOpt FP8", "fbgemm_fp8": "FBGEMM FP8"}.get(q.method, "FP8")
            return unsupported(f"{label} needs compute capability {fp8_cc / 10:.1f} or newer in vLLM {release}")
        if cc >= 89:
            block_kernel = "cutlass-block-fp8" if cc in (90, 100, 103) else "triton-block-fp8"
            linear = block_kernel if block else "cutlass-fp8"
            # FlashInfer FP8 MoE only with VLLM_USE_FLASHINFER_MOE_FP8=1 (off by default): Triton fused MoE
            return KernelPath(vllm_method=q.method, linear=linear, moe="triton-fp8-moe", weight_bits=8,
                              activation_bits=8)
        return KernelPath(vllm_method=q.method, linear="marlin-fp8", moe="marlin-fp8-moe", weight_bits=8,
                          activation_bits=16, note="no FP8 tensor cores before Ada: weight-only FP8 Marlin")
    if q.weight_format == "int8" and ab == 8:
        if cc >= 75:
            return KernelPath(vllm_method=q.method, linear="cutlass-int8", moe="triton-int8-moe", weight_bits=8,
                              activation_bits=8)
        return unsupported("INT8 W8A8 needs compute capability 7.5 or newer")
    return unsupported(f"no vLLM kernel known for {q.label}")
