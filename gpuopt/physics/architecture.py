"""Model architectures: the registry shipped as data, local Hugging Face config.json files, parameter counts.

Everything the memory and latency models know about a model comes from a `ModelArchitecture`. Parameter
counts are derived from the architecture (never typed in), split into the components that vLLM places
differently under tensor and pipeline parallelism: vocab-parallel embedding and LM head, per-layer linear
weights (sharded by TP), MoE experts (sharded by TP, quantisable separately, e.g. gpt-oss MXFP4), and small
replicated tensors (norms, routers, MLA down-projections).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache, cached_property
from pathlib import Path
from typing import Any, Literal, NamedTuple

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from gpuopt.datafiles import data_csv
from gpuopt.errors import ConfigError, UnknownNameError
from gpuopt.files_read import NotText, read_text_bytes
from gpuopt.physics.quantization import Quantization, read_quantization
from gpuopt.physics.vision import vision_params
from gpuopt.vocabulary import AttentionKind, LayerKind

DTYPE_BYTES: dict[str, float] = {"float32": 4, "bfloat16": 2, "float16": 2}
TORCH_DTYPES = frozenset({"bfloat16", "float16", "float32", "float64", "double", "float8_e4m3fn", "float8_e4m3fnuz",
                          "float8_e5m2", "float8_e5m2fnuz", "int8", "uint8"})
"""torch dtype names a config's torch_dtype may hold (the others of DTYPE_BYTES' are planned as bfloat16, the
type these checkpoints are served in unless --dtype says otherwise)."""


@dataclass(frozen=True)
class AttentionLayers:
    """How a registry `attention_kind` marks some decoder layers as another layer kind: `count_field` names the
    architecture field that counts them (`default_all`: every layer when it is blank; `needs_window`: only with
    a sliding_window). A new attention kind is one row of ATTENTION_LAYERS, not another branch."""

    kind: LayerKind
    count_field: str
    default_all: bool = False
    needs_window: bool = False


ATTENTION_LAYERS: dict[str, AttentionLayers] = {
    "sliding-window": AttentionLayers("sliding", "sliding_layers", default_all=True, needs_window=True),
    "sliding-window mix": AttentionLayers("sliding", "sliding_layers"),
    "chunked-local mix": AttentionLayers("chunked", "sliding_layers"),
    "gqa + cross-attn": AttentionLayers("cross", "cross_attention_layers"),
    "linear-attention hybrid": AttentionLayers("linear", "linear_attention_layers"),
}
"""Attention kinds whose models mix layer kinds (mha, gqa, mla: one kind throughout)."""


class ModelArchitecture(BaseModel):
    """One decoder-only (or decoder + vision) model, with the units in the field names where they matter."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    hf_id: str
    # sizes a model cannot have zero (or fewer) of: every shape and the KV cache divide by or multiply with them
    num_hidden_layers: int = Field(gt=0)
    hidden_size: int = Field(gt=0)
    intermediate_size: int | None = None
    moe_intermediate_size: int | None = None
    num_attention_heads: int = Field(gt=0)
    num_key_value_heads: int = Field(gt=0)
    head_dim: int | None = None
    vocab_size: int | None = Field(default=None, gt=0)
    max_position_embeddings: int | None = None
    # rope scaling (physics/context_limit.py: the length limit and vLLM's cos/sin caches); None: unscaled
    model_type: str | None = None  # config.json model_type, where a vLLM rule depends on it (gemma3)
    # config.json `architectures[0]`: the class vLLM's registry looks up (physics/vllm_support.py); None where
    # no source in ../shared/data states a registry model's class
    hf_architecture: str | None = None
    rope_type: str | None = None
    rope_factor: float | None = None
    rope_original_max_position_embeddings: int | None = None
    rope_local_base_freq: float | None = None  # sliding layers' own unscaled rope (Gemma 3): a second cache
    tie_word_embeddings: bool = False
    num_experts: int | None = None
    experts_per_token: int | None = None
    n_shared_experts: int | None = None
    shared_expert_intermediate_size: int | None = None
    shared_expert_gate: bool = False
    first_k_dense_layers: int | None = None
    moe_layer_step: int | None = None  # MoE in every n-th layer only (Llama-4 interleave_moe_layer_step)
    attention_kind: AttentionKind = "gqa"
    sliding_window: int | None = None
    sliding_layers: int | None = None
    cross_attention_layers: int | None = None
    linear_attention_layers: int | None = None
    kv_lora_rank: int | None = None
    q_lora_rank: int | None = None
    qk_rope_head_dim: int | None = None
    qk_nope_head_dim: int | None = None
    v_head_dim: int | None = None
    attention_bias: Literal["none", "qkv", "all"] = "none"
    mlp_kind: Literal["gated", "plain"] = "gated"
    mlp_bias: bool = False
    router_bias: bool = False
    attention_sinks: bool = False
    lm_head_bias: bool = False
    norm_kind: Literal["rmsnorm", "layernorm"] = "rmsnorm"
    norms_per_layer: int = 2
    torch_dtype: Literal["bfloat16", "float16", "float32"] = "bfloat16"
    native_quantization: Literal["mxfp4-experts", "fp8-block"] | None = None
    multimodal: bool = False
    vision_params_b: float | None = None
    # hybrids: one character per decoder layer (F full attention, C chunked-local attention, L linear
    # attention, M Mamba-2, E MoE-only block, - MLP-only block; Nemotron-H's '*' is read as F).
    # Blocks-per-layer models (Nemotron-H) hold ONE block per layer (a mixer or an FFN), the others a mixer
    # and an FFN in every layer.
    layer_pattern: str | None = None
    block_per_layer: bool = False
    attn_output_gate: bool = False
    # Gated DeltaNet (Qwen3-Next, Qwen3.5)
    linear_num_key_heads: int | None = None
    linear_num_value_heads: int | None = None
    linear_key_head_dim: int | None = None
    linear_value_head_dim: int | None = None
    linear_conv_kernel_dim: int | None = None
    # Mamba-2 (Nemotron-H)
    mamba_num_heads: int | None = None
    mamba_head_dim: int | None = None
    ssm_state_size: int | None = None
    mamba_n_groups: int | None = None
    mamba_conv_kernel: int | None = None
    mamba_ssm_dtype: Literal["bfloat16", "float16", "float32"] | None = None
    # DeepSeek sparse attention (DSA) lightning indexer (DeepSeek-V3.2, GLM-5)
    index_n_heads: int | None = None
    index_head_dim: int | None = None
    index_topk: int | None = None  # tokens each query attends to, chosen by the indexer (config `index_topk`)
    # IndexCache (GLM-5.2): only some layers build an indexer, the others reuse the previous one's top-k
    # (config index_topk_freq / index_skip_topk_offset / index_topk_pattern; see indexer_skipped)
    index_topk_freq: int | None = None
    index_skip_topk_offset: int | None = None
    index_topk_pattern: str | None = None  # one letter a layer, "S": skipped (reuses the top-k)
    quantization: Quantization | None = None  # read from the checkpoint (None: unquantized or registry base)
    checkpoint_bytes: int | None = None  # safetensors index total_size, when read
    checkpoint_params: int | None = None  # safetensors metadata total_parameters, when given
    published_params_b: float | None = None
    total_params_b_reference: float | None = None
    active_params_b_reference: float | None = None
    source: str = ""
    notes: str = ""
    # the checkpoint directory a local model was read from, which `vllm serve` loads (hf_id is then its folder
    # name, what reports call it); None for registry, cached and Hub models
    local_path: str | None = None

    # ---- consistency ----------------------------------------------------------------------------
    def inconsistencies(self) -> list[tuple[str, str]]:
        """(field, why) for every pair of fields no model can have together -- what vLLM would refuse or
        crash on when building the model. The registry's rows are held to it by its tests, and a config.json
        is refused with it (from_hf_dict), so the two paths check one rule set."""
        problems: list[tuple[str, str]] = []
        if not self.is_mla and self.num_attention_heads % self.num_key_value_heads:
            # vLLM's Attention asserts num_heads % num_kv_heads == 0: each KV head serves a whole group of queries
            problems.append(("num_key_value_heads", f"the {self.num_attention_heads} attention heads do not divide "
                                                    f"into groups over {self.num_key_value_heads} KV heads"))
        if self.is_moe and not self.experts_per_token:
            problems.append(("experts_per_token", f"an MoE model ({self.num_experts} experts) needs the number of "
                                                  "experts each token is routed to"))
        elif self.is_moe and (self.experts_per_token or 0) > (self.num_experts or 0):
            problems.append(("experts_per_token", f"{self.experts_per_token} experts per token but only "
                                                  f"{self.num_experts} experts"))
        if self.layer_pattern is not None:
            if len(self.layer_pattern) != self.num_hidden_layers:
                problems.append(("layer_pattern", f"{len(self.layer_pattern)} layers but num_hidden_layers is "
                                                  f"{self.num_hidden_layers}"))
            unknown = sorted(set(self.layer_pattern) - set(_PATTERN_KINDS))
            if unknown:
                problems.append(("layer_pattern", f"unknown layer kind(s) {', '.join(map(repr, unknown))} "
                                                  f"(known: {' '.join(_PATTERN_KINDS)})"))
        return problems

    # ---- derived shapes -------------------------------------------------------------------------
    def missing_fields(self) -> list[str]:
        """Fields the memory model needs that the source did not give (the model cannot be fitted)."""
        missing = [] if self.vocab_size else ["vocab_size"]
        if self.is_moe and not self.moe_intermediate_size:
            missing.append("moe_intermediate_size")
        if not self.is_moe and not self.intermediate_size:
            missing.append("intermediate_size")
        if self.is_mla and not (self.kv_lora_rank and self.qk_rope_head_dim):
            missing.append("kv_lora_rank/qk_rope_head_dim")
        kinds = self.pattern_kinds()
        if "mamba" in kinds:
            missing += [f for f in ("mamba_num_heads", "mamba_head_dim", "ssm_state_size") if not getattr(self, f)]
        if "linear" in kinds:
            missing += [f for f in ("linear_num_value_heads", "linear_key_head_dim", "linear_value_head_dim")
                        if not getattr(self, f)]
        return missing

    @property
    def vocab(self) -> int:
        return self.vocab_size or 0

    @property
    def is_moe(self) -> bool:
        return bool(self.num_experts)

    @property
    def is_mla(self) -> bool:
        return self.attention_kind == "mla"

    @property
    def attn_head_dim(self) -> int:
        if self.head_dim:
            return self.head_dim
        return self.hidden_size // self.num_attention_heads

    @property
    def checkpoint_dtype_bytes(self) -> float:
        return DTYPE_BYTES[self.torch_dtype]

    @property
    def rotary_dim(self) -> int:
        return self.qk_rope_head_dim if self.is_mla and self.qk_rope_head_dim else self.attn_head_dim

    def pattern_kinds(self) -> set[LayerKind]:
        """The layer kinds the config's layer pattern names -- the only source of recurrent (Mamba, linear
        attention) layers; empty without a pattern, where layer_kinds derives attention kinds alone."""
        return {_PATTERN_KINDS[c] for c in self.layer_pattern} if self.layer_pattern else set()

    def layer_kinds(self) -> list[LayerKind]:
        """Attention kind of each decoder layer, in order (what vLLM builds a KV spec from).

        Interleaving patterns are not all in the registry; the order only matters for uneven PP stages,
        so layers of the minority kind are spread evenly (the 1:1 and 5:1 patterns of Gemma are even).
        """
        n = self.num_hidden_layers
        if self.layer_pattern:
            return [_PATTERN_KINDS[c] for c in self.layer_pattern]
        if self.is_mla:
            return ["mla"] * n
        rule = ATTENTION_LAYERS.get(self.attention_kind)
        count = None if rule is None else getattr(self, rule.count_field) or (n if rule.default_all else None)
        if rule is None or not count or (rule.needs_window and not self.sliding_window):
            return ["full"] * n
        kind = rule.kind
        kinds: list[LayerKind] = ["full"] * n
        # place `count` special layers evenly (Bresenham), so every stage gets its fair share
        for i in range(n):
            if (i + 1) * count // n > i * count // n:
                kinds[i] = kind
        return kinds

    def _layer_kind(self, index: int) -> LayerKind:
        if not self.linear_attention_layers and not self.layer_pattern:
            return "mla" if self.is_mla else "full"
        return self.layer_kinds()[index]

    def is_dense_layer(self, index: int) -> bool:
        if self.block_per_layer and self.layer_pattern:
            return self.layer_pattern[index] != "E"
        if self.moe_layer_step and self.moe_layer_step > 1 and (index + 1) % self.moe_layer_step:
            return True
        return not self.is_moe or index < (self.first_k_dense_layers or 0)

    # ---- per-sequence state (linear attention, Mamba) -----------------------------------------------
    def state_bytes_per_layer(self, kind: LayerKind, tensor_parallel: int, act_bytes: float) -> float:
        """Bytes of constant per-sequence state one layer keeps on one TP rank (vLLM's MambaSpec page).

        Gated DeltaNet: conv state (kernel - 1) x conv_dim, conv_dim = 2 x key heads x key dim + value heads
        x value dim, plus the recurrent state value heads x key dim x value dim. Mamba-2: conv state
        (kernel - 1) x (inner + 2 x groups x state) and SSM state heads x head_dim x state. Heads and
        channels are split by TP. The conv state is in the model dtype; the recurrent/SSM state in the
        dtype the config asks the engine for (mamba_ssm_dtype / mamba_ssm_cache_dtype: float32 in Qwen3.5
        and Nemotron-3), else the model dtype -- vLLM v0.11's default (`--mamba-ssm-cache-dtype auto`,
        mamba_utils.py) is the model dtype, so for those configs this is the larger, conservative figure.
        Lightning attention (MiniMax-M1): a heads x head_dim x head_dim state in the model dtype
        (vLLM: fp32 not supported for it).
        """
        tp = tensor_parallel
        ssm_bytes = DTYPE_BYTES[self.mamba_ssm_dtype] if self.mamba_ssm_dtype else act_bytes
        if kind == "mamba":
            inner = (self.mamba_num_heads or 0) * (self.mamba_head_dim or 0)
            conv_dim = inner + 2 * (self.mamba_n_groups or 1) * (self.ssm_state_size or 0)
            conv = ((self.mamba_conv_kernel or 4) - 1) * conv_dim / tp * act_bytes
            ssm = (self.mamba_num_heads or 0) / tp * (self.mamba_head_dim or 0) * (self.ssm_state_size or 0)
            return conv + ssm * ssm_bytes
        if kind == "linear" and self.linear_num_value_heads:
            nk, nv = self.linear_num_key_heads or 0, self.linear_num_value_heads
            dk, dv = self.linear_key_head_dim or 0, self.linear_value_head_dim or 0
            conv_dim = 2 * nk * dk + nv * dv
            conv = ((self.linear_conv_kernel_dim or 4) - 1) * conv_dim / tp * act_bytes
            return conv + nv / tp * dk * dv * ssm_bytes
        if kind == "linear":
            return self.num_attention_heads / tp * self.attn_head_dim ** 2 * act_bytes
        return 0.0

    # ---- parameter counts -----------------------------------------------------------------------
    def layer_params(self, index: int) -> LayerParams:
        """Parameters of decoder layer `index`, split by how vLLM shards and quantises them."""
        return self.layer_table[index][0]

    def layer_active_params(self, index: int) -> int:
        """Parameters one token touches in this layer (MoE: only its top-k experts)."""
        return self.layer_table[index][1]

    def layer_sums(self, layers: range) -> LayerSums:
        """Totals over a contiguous range of layers (a PP stage), from prefix sums: O(1) per call."""
        prefix = self.layer_prefix
        lo, hi = prefix[layers.start], prefix[layers.stop]
        return LayerSums(*(b - a for a, b in zip(lo, hi, strict=True)))

    def layer_kind_counts(self, layers: range) -> dict[LayerKind, int]:
        """Layers of each kind in a contiguous range (kinds with none are left out), from prefix counts."""
        return {kind: n for kind, prefix in self.layer_kind_prefix.items()
                if (n := prefix[layers.stop] - prefix[layers.start])}

    # Per-layer tables, computed once per architecture: the memory and latency models ask for them per
    # shape, thousands of times in one solve. cached_property keeps them on the instance (pydantic compares
    # and hashes fields only), so no global cache has to hash the model on every call.
    @cached_property
    def layer_table(self) -> tuple[tuple[LayerParams, int], ...]:
        """(params, active params) of every layer."""
        return tuple((self._compute_layer_params(i), self._compute_layer_active_params(i))
                     for i in range(self.num_hidden_layers))

    @cached_property
    def layer_prefix(self) -> tuple[tuple[int, int, int, int, int, int, int], ...]:
        """Prefix sums of (linear, experts, bias, replicated, active, attention, replicated_linear) over the
        layers."""
        out = [(0, 0, 0, 0, 0, 0, 0)]
        for p, active in self.layer_table:
            last = out[-1]
            out.append((last[0] + p.linear, last[1] + p.experts, last[2] + p.bias, last[3] + p.replicated,
                        last[4] + active, last[5] + p.attention, last[6] + p.replicated_linear))
        return tuple(out)

    @cached_property
    def layer_kind_prefix(self) -> dict[LayerKind, tuple[int, ...]]:
        """Per layer kind, prefix counts over the layers (in first-seen order, so counts are too)."""
        kinds = self.layer_kinds()
        out: dict[LayerKind, tuple[int, ...]] = {}
        for kind in dict.fromkeys(kinds):
            counts = [0]
            for k in kinds:
                counts.append(counts[-1] + (k == kind))
            out[kind] = tuple(counts)
        return out

    @property
    def indexer_modules(self) -> IndexerParams:
        """One DSA indexer's parameters by module (replicated on every GPU): wq_b (q_lora -> heads x dim), wk
        (h -> dim), its k_norm LayerNorm (weight and bias), weights_proj (h -> heads); all 0 without one."""
        if not (self.is_mla and self.index_n_heads and self.index_head_dim):
            return IndexerParams(0, 0, 0, 0)
        ih, idim, h = self.index_n_heads, self.index_head_dim, self.hidden_size
        return IndexerParams(wq_b=(self.q_lora_rank or h) * ih * idim, wk=h * idim, k_norm=2 * idim,
                             weights_proj=h * ih)

    @property
    def indexer_params(self) -> int:
        """One DSA indexer's parameters (indexer_modules summed); 0 without one."""
        return sum(self.indexer_modules)

    def indexer_skipped(self, index: int) -> bool:
        """Whether decoder layer `index` reuses an earlier layer's top-k instead of building an indexer
        (IndexCache, https://arxiv.org/abs/2603.12201), as vLLM 0.24-0.34 decide it when constructing the
        layer (vllm/models/deepseek_v32/attention.py in 0.33.0): with `index_topk_pattern`, its letter is
        "S"; otherwise max(index - offset + 1, 0) % freq != 0 (freq 1 and offset 2 by default). GLM-5.2 (freq
        4, offset 3) builds 21 of its 78."""
        if self.index_topk_pattern is not None:
            return 0 <= index < len(self.index_topk_pattern) and self.index_topk_pattern[index] == "S"
        freq, offset = self.index_topk_freq or 1, self.index_skip_topk_offset
        return max(index - (2 if offset is None else offset) + 1, 0) % freq != 0

    def _compute_layer_params(self, index: int) -> LayerParams:
        h = self.hidden_size
        nh, hd = self.num_attention_heads, self.attn_head_dim
        linear = 0  # TP-sharded, quantisable
        replicated = 0  # norms, routers, MLA down-projections: every TP rank holds a copy
        replicated_linear = 0  # the part of `replicated` that is a linear layer a checkpoint quantises
        bias = 0  # TP-sharded, never quantised
        if self.is_mla:
            rope, nope = self.qk_rope_head_dim or 0, self.qk_nope_head_dim or 0
            vhd, kvr = self.v_head_dim or hd, self.kv_lora_rank or 0
            if self.q_lora_rank:
                replicated += h * self.q_lora_rank + self.q_lora_rank  # q_a_proj + q_a_layernorm
                replicated_linear += h * self.q_lora_rank
                linear += self.q_lora_rank * nh * (nope + rope)  # q_b_proj
            else:
                linear += h * nh * (nope + rope)
            replicated += h * (kvr + rope) + kvr  # kv_a_proj_with_mqa + kv_a_layernorm
            # vLLM builds both down-projections with the model's quant_config (ReplicatedLinear, or the fused
            # DeepSeekV2FusedQkvAProjLinear with disable_tp; deepseek_v2.py, 0.34.0 wheel): an FP8 checkpoint
            # stores them in FP8 like every other linear layer
            replicated_linear += h * (kvr + rope)
            linear += kvr * nh * (nope + vhd) + nh * vhd * h  # kv_b_proj + o_proj
            replicated += self.indexer_params  # on every layer: weights.indexer_layers takes the skipped off
        elif (kind := self._layer_kind(index)) == "linear" and self.linear_num_value_heads:
            # Gated DeltaNet: in_proj_qkvz, in_proj_ba, depthwise conv, dt_bias/A_log, gated norm, out_proj
            nk, nv = self.linear_num_key_heads or 0, self.linear_num_value_heads
            dk, dv = self.linear_key_head_dim or 0, self.linear_value_head_dim or 0
            conv_dim = 2 * nk * dk + nv * dv
            linear += h * (2 * nk * dk + 2 * nv * dv) + h * 2 * nv + nv * dv * h
            linear += conv_dim * (self.linear_conv_kernel_dim or 4)
            replicated += 2 * nv + dv
        elif kind == "linear":
            # lightning (linear) attention: fused qkv over all heads, output projection, output gate
            q = nh * hd
            linear += h * 3 * q + q * h + h * q
            replicated += q  # its own norm over the attention output
        elif kind == "mamba":
            # Mamba-2 mixer: in_proj (z, x, B, C, dt), conv1d with bias, dt_bias/A_log/D, gated norm, out_proj
            heads, inner = self.mamba_num_heads or 0, (self.mamba_num_heads or 0) * (self.mamba_head_dim or 0)
            bc = 2 * (self.mamba_n_groups or 1) * (self.ssm_state_size or 0)
            linear += h * (2 * inner + bc + heads) + inner * h
            linear += (inner + bc) * ((self.mamba_conv_kernel or 4) + 1)
            replicated += 3 * heads + inner
        elif kind == "ffn":
            pass  # an MoE/MLP-only block: no token mixer
        else:
            nkv = self.num_key_value_heads
            q, kv = nh * hd, nkv * hd
            linear += h * q * (2 if self.attn_output_gate else 1) + 2 * h * kv + q * h
            if self.attention_bias in ("qkv", "all"):
                bias += q + 2 * kv
            if self.attention_bias == "all":
                bias += h
            if self.attention_sinks:
                bias += nh
        mixer = linear
        norm_w = 2 if self.norm_kind == "layernorm" else 1
        replicated += self.norms_per_layer * norm_w * h
        experts = 0
        mlp_mats = 3 if self.mlp_kind == "gated" else 2
        if self.block_per_layer and self._layer_kind(index) != "ffn":
            return LayerParams(linear=linear, experts=0, bias=bias, replicated=replicated, attention=mixer,
                               replicated_linear=replicated_linear)
        if self.is_dense_layer(index):
            inter = self.intermediate_size or 0
            linear += mlp_mats * h * inter
            if self.mlp_bias:
                bias += (mlp_mats - 1) * inter + h
        else:
            e, mi = self.num_experts or 0, self.moe_intermediate_size or 0
            experts += e * mlp_mats * h * mi
            if self.mlp_bias:
                experts += e * ((mlp_mats - 1) * mi + h)
            replicated += h * e + (e if self.router_bias else 0)
            if self.shared_expert_intermediate_size:
                linear += mlp_mats * h * self.shared_expert_intermediate_size
            if self.shared_expert_gate:
                replicated += h
        return LayerParams(linear=linear, experts=experts, bias=bias, replicated=replicated, attention=mixer,
                           replicated_linear=replicated_linear)

    def _compute_layer_active_params(self, index: int) -> int:
        p = self._compute_layer_params(index)
        if self.is_dense_layer(index) or not self.num_experts:
            return p.total
        share = (self.experts_per_token or 1) / self.num_experts
        return p.linear + p.bias + p.replicated + round(p.experts * share)

    @property
    def embedding_params(self) -> int:
        return self.vocab * self.hidden_size

    @property
    def lm_head_params(self) -> int:
        """Parameters of the output projection (a separate tensor even when tied, on the last PP stage)."""
        return self.vocab * self.hidden_size + (self.vocab if self.lm_head_bias else 0)

    @property
    def final_norm_params(self) -> int:
        return self.hidden_size * (2 if self.norm_kind == "layernorm" else 1)

    def total_params(self) -> int:
        """Text-model parameters as the checkpoint stores them (tied embeddings counted once)."""
        layers = sum(self.layer_params(i).total for i in range(self.num_hidden_layers))
        head = 0 if self.tie_word_embeddings else self.lm_head_params
        return self.embedding_params + layers + head + self.final_norm_params

    def active_params(self) -> int:
        layers = sum(self.layer_active_params(i) for i in range(self.num_hidden_layers))
        head = 0 if self.tie_word_embeddings else self.lm_head_params
        return self.embedding_params + layers + head + self.final_norm_params

    def vision_params(self) -> int:
        return round((self.vision_params_b or 0.0) * 1e9)

    # ---- KV cache ---------------------------------------------------------------------------------
    def kv_values_per_token_per_layer(self, tensor_parallel: int) -> int:
        """Values one token stores in one attention layer on one TP rank (K and V together).

        GQA/MHA: 2 x max(1, kv_heads // TP) x head_dim -- heads are replicated once TP exceeds them.
        MLA: one latent of kv_lora_rank + qk_rope_head_dim values, the same on every rank.
        """
        if self.is_mla:
            return (self.kv_lora_rank or 0) + (self.qk_rope_head_dim or 0)
        heads = max(1, self.num_key_value_heads // tensor_parallel)
        return 2 * heads * self.attn_head_dim


_PATTERN_KINDS: dict[str, LayerKind] = {"F": "full", "*": "full", "C": "chunked", "L": "linear", "M": "mamba",
                                         "E": "ffn", "-": "ffn"}


class IndexerParams(NamedTuple):
    """A DSA indexer's parameters by module (ModelArchitecture.indexer_modules)."""

    wq_b: int
    wk: int
    k_norm: int
    weights_proj: int


@dataclass(frozen=True)
class LayerSums:
    linear: int
    experts: int
    bias: int
    replicated: int
    active: int
    attention: int = 0  # the token-mixer part of `linear` (checkpoints may leave it unquantized)
    replicated_linear: int = 0  # the quantisable part of `replicated` (MLA down-projections)


@dataclass(frozen=True)
class LayerParams:
    linear: int
    experts: int
    bias: int
    replicated: int
    attention: int = 0  # the token-mixer part of `linear` (attention, linear attention or Mamba projections)
    replicated_linear: int = 0  # the quantisable part of `replicated`: MLA's q_a_proj and kv_a_proj_with_mqa

    @property
    def total(self) -> int:
        return self.linear + self.experts + self.bias + self.replicated


# ---- the registry --------------------------------------------------------------------------------

_INT_FIELDS = {
    name for name, f in ModelArchitecture.model_fields.items() if f.annotation in (int, int | None)
}


def _parse_row(row: dict[str, str]) -> ModelArchitecture:
    data: dict[str, Any] = {}
    for key, raw in row.items():
        value = raw.strip()
        if value == "":
            continue
        data[key] = value
    for key in ("tie_word_embeddings", "shared_expert_gate", "mlp_bias", "router_bias", "attention_sinks",
                "lm_head_bias", "multimodal", "block_per_layer", "attn_output_gate"):
        if key in data:
            data[key] = data[key].lower() == "true"
    return ModelArchitecture.model_validate(data)


def _layer_rows() -> dict[str, dict[str, str]]:
    """gpuopt/data/model_layers.csv: per-model layer facts models.csv has no columns for (hybrid layer
    patterns, Gated DeltaNet / Mamba-2 state geometry, DSA indexer, interleaved MoE), keyed by hf_id, each
    with the config it was read from. Kept apart so models.csv rows stay one flat record per model."""
    return {r["hf_id"]: {k: v for k, v in r.items() if k not in ("hf_id", "source")}
            for r in data_csv("model_layers.csv")}


def _rope_rows() -> dict[str, dict[str, str]]:
    """gpuopt/data/model_rope.csv: rope scaling (type, factor, original length, Gemma 3's local rope and
    model_type) of the registry models whose config gives one, each with the config it was read from."""
    return {r["hf_id"]: {k: v for k, v in r.items() if k not in ("hf_id", "source")}
            for r in data_csv("model_rope.csv")}


def _class_rows() -> dict[str, dict[str, str]]:
    """gpuopt/data/model_hf_architectures.csv: the config.json class of the registry models whose class a
    source in ../shared/data states (a config in model_configs/, or the config a models.csv row cites)."""
    return {r["hf_id"]: {"hf_architecture": r["hf_architecture"]} for r in data_csv("model_hf_architectures.csv")}


@cache
def registry() -> dict[str, ModelArchitecture]:
    """All shipped architectures by Hugging Face id (package data gpuopt/data/models.csv + model_layers.csv
    + model_rope.csv + model_hf_architectures.csv)."""
    layers, rope, classes = _layer_rows(), _rope_rows(), _class_rows()
    models = [_parse_row({**r, **layers.get(r["hf_id"], {}), **rope.get(r["hf_id"], {}),
                          **classes.get(r["hf_id"], {})})
              for r in data_csv("models.csv")]
    return {m.hf_id: m for m in models}


def iter_models() -> Iterator[ModelArchitecture]:
    yield from registry().values()


def registry_model(hf_id: str) -> ModelArchitecture | None:
    """The registry's model of this Hugging Face id, case-insensitively (None when it has none)."""
    reg = registry()
    return reg.get(hf_id) or next((v for k, v in reg.items() if k.lower() == hf_id.lower()), None)


def get_model(name: str) -> ModelArchitecture:
    """Look a model up by HF id, case-insensitively, also without the organisation prefix."""
    reg = registry()
    if (found := registry_model(name)) is not None:
        return found
    by_short = [v for k, v in reg.items() if k.split("/", 1)[-1].lower() == name.lower()]
    if len(by_short) == 1:
        return by_short[0]
    raise UnknownNameError("model", name, reg.keys())


# ---- Hugging Face config.json ------------------------------------------------------------------

_ALIASES: dict[str, tuple[str, ...]] = {
    "num_hidden_layers": ("num_hidden_layers", "n_layer", "num_layers", "n_layers"),
    "hidden_size": ("hidden_size", "n_embd", "d_model", "dim"),
    "intermediate_size": ("intermediate_size", "ffn_hidden_size", "n_inner", "ffn_dim"),
    "num_attention_heads": ("num_attention_heads", "n_head", "n_heads", "num_heads"),
    "num_key_value_heads": ("num_key_value_heads", "num_kv_heads", "n_head_kv", "multi_query_group_num",
                            "n_kv_heads"),
    "head_dim": ("head_dim", "kv_channels"),
    "vocab_size": ("vocab_size", "padded_vocab_size", "n_vocab"),
    "max_position_embeddings": ("max_position_embeddings", "seq_length", "n_positions", "max_seq_len"),
    "num_experts": ("num_local_experts", "num_experts", "n_routed_experts", "moe_num_experts"),
    "experts_per_token": ("num_experts_per_tok", "num_experts_per_token", "moe_top_k", "top_k", "moe_k"),
    "n_shared_experts": ("n_shared_experts", "num_shared_experts", "moe_num_shared_experts", "num_shared_expert"),
    "moe_intermediate_size": ("moe_intermediate_size", "expert_intermediate_size"),
    "shared_expert_intermediate_size": ("shared_expert_intermediate_size",),
    "first_k_dense_layers": ("first_k_dense_replace", "moe_layer_start_index"),
    "moe_layer_step": ("interleave_moe_layer_step",),
    "sliding_window": ("sliding_window", "attention_chunk_size"),
    "kv_lora_rank": ("kv_lora_rank",),
    "q_lora_rank": ("q_lora_rank",),
    "qk_rope_head_dim": ("qk_rope_head_dim",),
    "qk_nope_head_dim": ("qk_nope_head_dim",),
    "v_head_dim": ("v_head_dim",),
}
_REQUIRED = ("num_hidden_layers", "hidden_size", "num_attention_heads", "vocab_size")


# no model comes near these; past them the memory model's per-layer work (10^6 layers took 14 s and 384 MB, 10^20
# never ended) or an index-sized integer (OverflowError) fails instead of the config
MAX_LAYERS = 10_000
MAX_CONFIG_INT = 2**31 - 1
MAX_ROPE_FACTOR = 1024.0  # rope scaling factors in use are 2-64 (YaRN 4, Llama-3 8, LongRoPE 32)
# sizes a model cannot have zero of; the other integer fields may be 0 (first_k_dense_replace, n_shared_experts)
_POSITIVE = ("num_hidden_layers", "hidden_size", "num_attention_heads", "num_key_value_heads", "head_dim",
             "vocab_size", "max_position_embeddings")


def _integer_problem(cfg: dict[str, Any], field: str, path: str) -> str | None:
    """What is wrong with an integer field of config.json, or None. JSON's `true` is not a count (Python
    would take it for 1 -- a vocabulary of one -- or, skipped, for a missing field: MHA where the config states
    GQA), nor is a negative size: a max_position_embeddings of -1 planned negative KV tokens as fitting."""
    value = _pick(cfg, field)
    if value is None:
        return None
    key = _config_key(cfg, field)
    if isinstance(value, bool) or not (isinstance(value, int) or (isinstance(value, float) and value.is_integer())):
        return f"{path}: field '{key}' must be an integer (got {json.dumps(value)})"
    least = 1 if field in _POSITIVE else 0
    if value < least:
        return f"{path}: field '{key}' must be {'a positive' if least else 'a non-negative'} integer (got {int(value)})"
    most = MAX_LAYERS if field == "num_hidden_layers" else MAX_CONFIG_INT
    if value > most:
        return f"{path}: field '{key}' must be at most {most:,} (got {value:.6g})"
    return None


VLLM_LENGTH_KEYS = ("max_position_embeddings", "n_positions", "max_seq_len", "seq_length", "max_target_positions",
                    "max_sequence_length", "max_seq_length", "seq_len")
"""The config keys vLLM reads a model's length from, in its order (transformers_utils/
model_arch_config_convertor.py derive_max_model_len_and_key, v0.28)."""


def vllm_length_limit(cfg: dict[str, Any]) -> int | None:
    """The length vLLM derives from a config before rope scaling: the smallest of VLLM_LENGTH_KEYS present, or
    `model_max_length` when the config has one (Command-R's 8,192 max_position_embeddings beside a 131,072
    model_max_length: vLLM takes the latter). Taking the first key found instead read a config with
    max_position_embeddings 40,960 and seq_length 8,192 as 40,960, where vLLM refuses past 8,192 (QA).
    Keys that are not positive integers are left to _integer_problem (max_position_embeddings' aliases) or
    ignored, as getattr of a non-number would fail vLLM's own comparison."""
    def whole(value: object) -> int | None:
        if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
            return None
        return int(value) if float(value).is_integer() else None
    if (override := whole(cfg.get("model_max_length"))) is not None:
        return override
    found = [v for v in (whole(cfg.get(k)) for k in VLLM_LENGTH_KEYS) if v is not None]
    return min(found) if found else None


def _pick(cfg: dict[str, Any], field: str) -> Any:
    for key in _ALIASES[field]:
        if cfg.get(key) is not None:
            return cfg[key]
    return None


def read_json_object(path: Path, what: str = "a config.json") -> dict[str, Any]:
    """A checkpoint's JSON file (config.json and its side files) as a dict, or one ConfigError line saying why
    not; `what` names the file in the messages."""
    try:
        raw = json.loads(read_text_bytes(path).decode("utf-8"))
    except NotText as exc:
        raise ConfigError(f"{path}: {exc}, not {what}") from None
    except FileNotFoundError:
        raise ConfigError(f"{path}: file not found") from None
    except IsADirectoryError:
        raise ConfigError(f"{path}: is a directory (expected {what})") from None
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path}: not valid JSON (line {exc.lineno}: {exc.msg})") from None
    except RecursionError:  # found by QA: 100,000 nested brackets
        raise ConfigError(f"{path}: not {what} (nested deeper than a JSON reader goes)") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not a text file") from None
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: expected a JSON object")
    return raw


def from_hf_config(path: Path, name: str | None = None) -> ModelArchitecture:
    """Read a local Hugging Face config.json (never the network). Missing fields are named in the error."""
    raw = read_json_object(path)
    default = str(raw.get("_name_or_path") or path.parent.name or path.stem)
    return from_hf_dict(raw, name=name or default, where=str(path))


@dataclass(frozen=True)
class DeclaredKind:
    """Layers a config.json declares -- by its model_type, its class (`architectures`), a `layer_types` entry or
    one of the kind's own fields -- and the fields they are built from. A declared kind whose field is missing
    is refused (one line naming the field and the file), never read as another architecture: a Qwen3.5 config
    without linear_num_value_heads used to be planned as plain GQA (4x the KV, no state), a Nemotron-H one
    without hybrid_override_pattern as 52 attention + MoE layers (69.4 B parameters), a DeepSeek-V3.2 one
    without kv_lora_rank as MHA (1,748,992 B a token) and without index_head_dim with no indexer."""

    layers: str  # what the config declares, in the message
    model_types: tuple[str, ...]
    architectures: tuple[str, ...]
    fields: tuple[tuple[str, ...], ...]  # each needed; a tuple of several keys: any one of them will do
    siblings: tuple[str, ...]  # a key here with a value declares the kind too
    layer_type: str | None = None  # a `layer_types` entry that declares it
    named_fields: tuple[str, ...] = ()  # needed only when the model_type or class declares the kind
    modelled_state: bool = False  # the classes are hybrids vLLM builds with state layers that gpuopt models


DECLARED_KINDS = (
    # vLLM's qwen3_next.py / qwen3_5.py read every one of them from the config (transformers' defaults are not
    # assumed, as for Llama-4 below); layer_types, or the interval transformers derives it from
    DeclaredKind("Gated DeltaNet linear-attention layers",
                 ("qwen3_next", "qwen3_5", "qwen3_5_text", "qwen3_5_moe", "qwen3_5_moe_text"),
                 ("Qwen3NextForCausalLM", "Qwen3_5ForCausalLM", "Qwen3_5ForConditionalGeneration",
                  "Qwen3_5MoeForCausalLM", "Qwen3_5MoeForConditionalGeneration"),
                 (("linear_num_value_heads",), ("linear_num_key_heads",), ("linear_key_head_dim",),
                  ("linear_value_head_dim",), ("linear_conv_kernel_dim",), ("layer_types", "full_attention_interval")),
                 ("linear_num_value_heads", "linear_num_key_heads", "linear_key_head_dim", "linear_value_head_dim",
                  "linear_conv_kernel_dim"), layer_type="linear_attention", modelled_state=True),
    # vLLM's nemotron_h.py: the block pattern, and MambaMixer2's heads, head_dim, state, groups and conv kernel
    DeclaredKind("Mamba-2 hybrid layers (Nemotron-H)", ("nemotron_h",), ("NemotronHForCausalLM",),
                 (("hybrid_override_pattern",), ("mamba_num_heads",), ("mamba_head_dim",), ("ssm_state_size",),
                  ("n_groups",), ("conv_kernel",)),
                 ("hybrid_override_pattern", "mamba_num_heads", "mamba_head_dim", "ssm_state_size"),
                 modelled_state=True),
    # vLLM's deepseek_v2.py (DeepSeek-V2/V3/V3.2, Kimi-K2, GLM-5): the latent and the head split; v_head_dim
    # only for that family -- MiniCPM3 builds its values hidden_size / heads wide and states no v_head_dim
    DeclaredKind("multi-head latent attention (MLA)",
                 ("deepseek_v2", "deepseek_v3", "deepseek_v32", "kimi_k2", "glm_moe_dsa"),
                 ("DeepseekV2ForCausalLM", "DeepseekV3ForCausalLM", "DeepseekV32ForCausalLM", "GlmMoeDsaForCausalLM",
                  "KimiK25ForConditionalGeneration"),
                 (("kv_lora_rank",), ("qk_rope_head_dim",), ("qk_nope_head_dim",)),
                 ("kv_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim"), named_fields=("v_head_dim",)),
    # the DSA lightning indexer (vLLM builds it when the config has index_topk)
    DeclaredKind("a DeepSeek sparse attention (DSA) indexer", ("deepseek_v32", "glm_moe_dsa"),
                 ("DeepseekV32ForCausalLM", "GlmMoeDsaForCausalLM"),
                 (("index_n_heads",), ("index_head_dim",), ("index_topk",)),
                 ("index_n_heads", "index_head_dim", "index_topk")),
    # routed experts: without their count a DeepSeek-V3.2 was planned as a dense 38 B model
    DeclaredKind("routed experts (MoE)",
                 ("mixtral", "qwen2_moe", "qwen3_moe", "qwen3_next", "qwen3_5_moe", "qwen3_5_moe_text", "deepseek_v2",
                  "deepseek_v3", "deepseek_v32", "kimi_k2", "glm4_moe", "glm_moe_dsa", "minimax_m2", "ernie4_5_moe"),
                 (), (("num_local_experts", "num_experts", "n_routed_experts", "moe_num_experts"),),
                 ("num_experts_per_tok", "num_experts_per_token", "moe_top_k", "moe_k")),
)
"""The layer kinds a config.json can declare that need fields of their own (docs/memory.md "Fields a declared
layer kind needs"). A new hybrid or attention kind read from configs is one row here."""

MODELLED_STATE_CLASSES = frozenset(a for kind in DECLARED_KINDS if kind.modelled_state for a in kind.architectures)
"""The classes vLLM builds as hybrids (IsHybrid) whose state layers gpuopt reads from a config.json: Qwen3-Next and
Qwen3.5's Gated DeltaNet, Nemotron-H's Mamba-2."""


@cache
def vllm_layer_kinds() -> dict[str, tuple[str, str]]:
    """gpuopt/data/vllm_layer_kinds.csv: config.json class -> ("hybrid" or "attention-free", the state layers its
    vLLM module builds, e.g. "Mamba-2"; "" where the module does not say), for every class some scanned vLLM
    release marks IsHybrid or IsAttentionFree (read from the wheels by tools/extract_vllm_layer_kinds.py)."""
    return {r["architecture"]: (r["kind"], r["layers"]) for r in data_csv("vllm_layer_kinds.csv")}


def unmodelled_class_problem(raw: dict[str, Any], path: str) -> str | None:
    """The error line for a config whose class (`architectures[0]`) vLLM builds as a hybrid or attention-free model
    with layers gpuopt does not model (Jamba, Bamba, Falcon-H1, Mamba, MiniMax-Text-01, Kimi-Linear, LFM2 ...);
    None for any other class. Read as attention, such a config got a plain-GQA plan: KV for every layer, no state.
    Registry rows are curated and never come here (MiniMax-M1's lightning attention is modelled in its row)."""
    classes = raw.get("architectures")
    if not (isinstance(classes, list) and classes and isinstance(classes[0], str)):
        return None
    cls = classes[0]
    found = vllm_layer_kinds().get(cls)
    if found is None or cls in MODELLED_STATE_CLASSES:
        return None
    kind, layers = found
    what = f"{layers.replace(' + ', ' and ')} layers" if layers else "non-attention layers"
    shape = (f"an attention-free model in vLLM ({what} only)" if kind == "attention-free"
             else f"a hybrid in vLLM ({what} next to attention)")
    curated = sorted(m.hf_id for m in registry().values() if m.hf_architecture == cls)
    if curated:
        return (f"{path}: architectures '{cls}' is {shape}; gpuopt does not model its {what} from a config.json, "
                f"only in its registry model {', '.join(curated)} (name that id instead)")
    return (f"{path}: architectures '{cls}' is {shape}; gpuopt does not model its {what}, so its KV cache and "
            "memory cannot be planned (the hybrids gpuopt models: Qwen3-Next, Qwen3.5, Nemotron-H)")


def _declared_by(kind: DeclaredKind, raw: dict[str, Any], cfg: dict[str, Any]) -> tuple[str, bool] | None:
    """What in the config declares `kind` (for the message), and whether it is the model_type or the class;
    None when nothing does."""
    for source in (cfg, raw):
        if source.get("model_type") in kind.model_types:
            return f"model_type '{source['model_type']}'", True
    classes = raw.get("architectures")
    if isinstance(classes, list) and classes and classes[0] in kind.architectures:
        return f"architectures '{classes[0]}'", True
    types = cfg.get("layer_types")
    if kind.layer_type and isinstance(types, list) and kind.layer_type in types:
        return f"layer_types '{kind.layer_type}'", False
    given = next((key for key in kind.siblings if cfg.get(key)), None)  # 0, "" and null declare nothing
    if given is not None:
        return f"field '{given}'", False
    return None


def declared_field_problems(raw: dict[str, Any], cfg: dict[str, Any], path: str) -> list[str]:
    """One line per field a declared layer kind needs that the config lacks (or gives as no positive
    integer / no pattern string): DECLARED_KINDS. `cfg` is `raw` with its text_config merged in."""
    wrapped = isinstance(raw.get("text_config"), dict)

    def key_name(key: str) -> str:  # where the user finds (or should put) it
        if wrapped and (key in raw["text_config"] or key not in raw):
            return f"text_config.{key}"
        return key

    problems: list[str] = []
    for kind in DECLARED_KINDS:
        declared = _declared_by(kind, raw, cfg)
        if declared is None:
            continue
        evidence, by_name = declared
        why = f"{evidence} declares {kind.layers}"
        needed = kind.fields + tuple((f,) for f in kind.named_fields if by_name)
        for keys in needed:
            key = next((k for k in keys if cfg.get(k) is not None), None)
            if key is None:
                named = " or ".join(f"'{key_name(k)}'" for k in keys)
                problems.append(f"{path}: missing field {named} (needed for the memory model: {why})")
                continue
            value = cfg[key]
            if key == "hybrid_override_pattern":
                ok = isinstance(value, str)
                want = "a string of block kinds, one per layer"
            elif key == "layer_types":
                ok = isinstance(value, list)
                want = "a list of layer types, one per layer"
            else:
                ok = isinstance(value, int) and not isinstance(value, bool) and value > 0
                want = "a positive integer"
            if not ok:
                problems.append(f"{path}: field '{key_name(key)}' must be {want} (got {json.dumps(value)[:60]}; "
                                f"{why})")
    return problems


NEMOTRON_H_BLOCKS = "M*-E"
"""hybrid_override_pattern's block kinds (vLLM nemotron_h.py ALL_DECODER_LAYER_TYPES): Mamba-2, attention,
MLP, MoE."""


def _layer_pattern_problems(cfg: dict[str, Any], n_layers: Any, where: str) -> list[str]:
    """What no model can be built from: a per-layer list or pattern of another length than the layers, a
    block kind vLLM does not know (vLLM's nemotron_h.py looks each character up in ALL_DECODER_LAYER_TYPES:
    any other is a KeyError; transformers' layer_type_validation refuses a layer_types of another length)."""
    if not isinstance(n_layers, int | float) or isinstance(n_layers, bool):
        return []  # refused as a field of its own
    problems: list[str] = []
    layer_types = cfg.get("layer_types")
    if isinstance(layer_types, list) and len(layer_types) != n_layers:
        problems.append(f"{where}: field 'layer_types' has {len(layer_types)} entries but num_hidden_layers is "
                        f"{n_layers:g}")
    pattern = cfg.get("hybrid_override_pattern")
    if isinstance(pattern, str) and len(pattern) != n_layers:
        problems.append(f"{where}: field 'hybrid_override_pattern' has {len(pattern)} entries but "
                        f"num_hidden_layers is {n_layers:g}")
    if isinstance(pattern, str) and (unknown := sorted(set(pattern) - set(NEMOTRON_H_BLOCKS))):
        problems.append(f"{where}: field 'hybrid_override_pattern' has unknown block kind(s) "
                        f"{', '.join(map(repr, unknown))} (known: {' '.join(NEMOTRON_H_BLOCKS)})")
    return problems


def _hybrid_fields(cfg: dict[str, Any], n_layers: int) -> dict[str, Any]:
    """Layer pattern and state geometry of linear-attention and Mamba hybrids, as their configs state them."""
    data: dict[str, Any] = {}
    pattern = cfg.get("hybrid_override_pattern")  # checked by _layer_pattern_problems
    if isinstance(pattern, str):  # Nemotron-H: one block per layer
        data.update(layer_pattern=pattern.replace("*", "F"), block_per_layer=True,
                    mamba_num_heads=cfg.get("mamba_num_heads"), mamba_head_dim=cfg.get("mamba_head_dim"),
                    ssm_state_size=cfg.get("ssm_state_size"), mamba_n_groups=cfg.get("n_groups"),
                    mamba_conv_kernel=cfg.get("conv_kernel"), attention_kind="linear-attention hybrid",
                    norms_per_layer=1)
        ssm = cfg.get("mamba_ssm_cache_dtype")
        if ssm in DTYPE_BYTES:
            data["mamba_ssm_dtype"] = ssm
        return data
    if cfg.get("linear_num_value_heads"):  # Gated DeltaNet hybrids (Qwen3-Next, Qwen3.5)
        types = cfg.get("layer_types")
        if isinstance(types, list) and len(types) == n_layers:
            pattern = "".join("L" if t == "linear_attention" else "F" for t in types)
        else:  # transformers derives layer_types from the interval (declared_field_problems: one is given)
            interval = int(cfg["full_attention_interval"])
            pattern = "".join("F" if (i + 1) % interval == 0 else "L" for i in range(n_layers))
        data.update(layer_pattern=pattern, attention_kind="linear-attention hybrid",
                    linear_num_key_heads=cfg.get("linear_num_key_heads"),
                    linear_num_value_heads=cfg.get("linear_num_value_heads"),
                    linear_key_head_dim=cfg.get("linear_key_head_dim"),
                    linear_value_head_dim=cfg.get("linear_value_head_dim"),
                    linear_conv_kernel_dim=cfg.get("linear_conv_kernel_dim"),
                    # Qwen3-Next gates attention inside q_proj without stating it; Qwen3.5 states it
                    attn_output_gate=bool(cfg.get("attn_output_gate", True)))
        ssm = cfg.get("mamba_ssm_dtype")
        if ssm in DTYPE_BYTES:
            data["mamba_ssm_dtype"] = ssm
    return data


LLAMA4_MODEL_TYPES = ("llama4", "llama4_text")
"""config.json model_type of Llama-4 (the wrapper, and its text_config): the only models vLLM builds with
ChunkedLocalAttention (model_executor/models/llama4.py, 0.11.0-0.34.0)."""


def _llama4_fields(cfg: dict[str, Any], n_layers: int, where: str) -> dict[str, Any]:
    """What vLLM's llama4.py builds that the generic keys miss (read in the 0.33.0 source):

    * every MoE layer (`(i + 1) % interleave_moe_layer_step == 0`) has one shared expert as wide as the
      routed ones (Llama4MoE: `shared_expert = LlamaMLP(intermediate_size=config.intermediate_size)`), and
      `intermediate_size` is that expert width;
    * the other layers are dense MLPs of `intermediate_size_mlp` (Llama4DecoderLayer);
    * a layer with rope (`no_rope_layers[i] != 0`) uses ChunkedLocalAttention of `attention_chunk_size`, a
      NoPE layer full attention. transformers' Llama4TextConfig (5.25.0) fills an absent or empty
      `no_rope_layers` with `int((i + 1) % no_rope_layer_interval != 0)`, interval 4 by default: every 4th
      layer global, so 36 chunked + 12 full of Scout's and Maverick's 48.

    Read only for keys the config states (transformers' defaults for absent ones are not assumed)."""
    data: dict[str, Any] = {"n_shared_experts": 1}
    if cfg.get("num_local_experts") and isinstance(cfg.get("intermediate_size"), int):
        data["moe_intermediate_size"] = cfg["intermediate_size"]
        data["shared_expert_intermediate_size"] = cfg["intermediate_size"]
    dense = cfg.get("intermediate_size_mlp")
    if dense is not None:
        if not isinstance(dense, int) or isinstance(dense, bool) or dense <= 0:
            raise ConfigError(f"{where}: field 'intermediate_size_mlp' must be a positive integer "
                              f"(got {json.dumps(dense)})")
        data["intermediate_size"] = dense
    chunk = cfg.get("attention_chunk_size")
    if chunk is None:
        return data  # vLLM: every layer plain Attention
    if not isinstance(chunk, int) or isinstance(chunk, bool) or chunk <= 0:
        raise ConfigError(f"{where}: field 'attention_chunk_size' must be a positive integer "
                          f"(got {json.dumps(chunk)})")
    no_rope = cfg.get("no_rope_layers")
    if no_rope:
        if not isinstance(no_rope, list) or not all(isinstance(v, int) for v in no_rope):
            raise ConfigError(f"{where}: field 'no_rope_layers' must be a list of 0/1 per layer")
        if len(no_rope) < n_layers:  # vLLM indexes it by layer: a shorter list is an IndexError
            raise ConfigError(f"{where}: field 'no_rope_layers' has {len(no_rope)} entries but "
                              f"num_hidden_layers is {n_layers}")
        uses_rope = [v != 0 for v in no_rope[:n_layers]]
    else:
        interval = cfg.get("no_rope_layer_interval", 4)
        if not isinstance(interval, int) or isinstance(interval, bool) or interval <= 0:
            raise ConfigError(f"{where}: field 'no_rope_layer_interval' must be a positive integer "
                              f"(got {json.dumps(interval)})")
        uses_rope = [(i + 1) % interval != 0 for i in range(n_layers)]
    pattern = "".join("C" if rope else "F" for rope in uses_rope)
    if "C" in pattern:
        data.update(layer_pattern=pattern, attention_kind="chunked-local mix", sliding_window=chunk,
                    sliding_layers=pattern.count("C"))
    return data


def _rope_fields(cfg: dict[str, Any], where: str = "config.json") -> dict[str, Any]:
    """Rope scaling as the config states it, from `rope_scaling` or Transformers v5's `rope_parameters` (one
    dict, or one per layer type); original_max_position_embeddings inside the entry or at the top level
    (Phi-3.5's LongRoPE keeps it there).

    What vLLM makes of them is physics/context_limit.py. Of several entries (one per layer type) the last
    one wins, as "all layer types should have the same scaling" in vLLM. Gemma 3's `rope_local_base_freq`
    (the sliding layers' own rope) is kept too: vLLM builds a second cos/sin cache for it.
    """
    data: dict[str, Any] = {}
    if isinstance(cfg.get("model_type"), str):
        data["model_type"] = cfg["model_type"]
    local = cfg.get("rope_local_base_freq")
    if isinstance(local, int | float) and not isinstance(local, bool):
        data["rope_local_base_freq"] = float(local)
    for key in ("rope_parameters", "rope_scaling"):
        if cfg.get(key) is not None and not isinstance(cfg[key], dict):
            # transformers reads a dict (rope_type, factor...); a bare "yarn" says no factor and was ignored (QA)
            raise ConfigError(f"{where}: field '{key}' must be a JSON object (got {json.dumps(cfg[key])})")
    rope = cfg.get("rope_parameters") or cfg.get("rope_scaling")
    if not isinstance(rope, dict):
        return data
    entries = [v for v in rope.values() if isinstance(v, dict)] if all(
        isinstance(v, dict) for v in rope.values()) else [rope]
    for entry in entries:
        rope_type = entry.get("rope_type", entry.get("type"))
        if not isinstance(rope_type, str) or rope_type == "default":
            continue
        data["rope_type"] = rope_type
        factor = entry.get("factor")
        if factor is not None:
            # a stretch of the trained positions: a number of at least 1 (transformers' rope validation), and
            # not past MAX_ROPE_FACTOR (-4 gave "-131,072 tokens" of context, 1e308 an overflow: exit 70)
            if isinstance(factor, bool) or not isinstance(factor, int | float) or not 1 <= factor <= MAX_ROPE_FACTOR:
                raise ConfigError(f"{where}: field 'rope_scaling.factor' must be a number from 1 to "
                                  f"{MAX_ROPE_FACTOR:g} (got {json.dumps(factor)})")
            data["rope_factor"] = float(factor)
        original = entry.get("original_max_position_embeddings", cfg.get("original_max_position_embeddings"))
        if isinstance(original, int) and not isinstance(original, bool):
            data["rope_original_max_position_embeddings"] = original
    return data


def from_hf_dict(raw: dict[str, Any], name: str, where: str = "config.json",
                 hf_quant_config: dict[str, Any] | None = None, quantize_config: dict[str, Any] | None = None,
                 checkpoint_bytes: int | None = None, checkpoint_params: int | None = None) -> ModelArchitecture:
    """An architecture from a parsed Hugging Face config.json (and the checkpoint's quantization files)."""
    path = where
    unmodelled = unmodelled_class_problem(raw, path)
    if unmodelled is not None:  # one line: the config's fields do not matter then
        raise ConfigError(unmodelled)
    cfg: dict[str, Any] = dict(raw)
    if isinstance(cfg.get("text_config"), dict):  # multimodal wrappers keep the LLM under text_config
        cfg = {**cfg, **cfg["text_config"]}
    missing = [f"{path}: missing field '{_ALIASES[f][0]}' (needed for the memory model)"
               for f in _REQUIRED if _pick(cfg, f) is None]
    wrong = [problem for field in _ALIASES if (problem := _integer_problem(cfg, field, path))]
    classes = raw.get("architectures")
    if "architectures" in raw and not (isinstance(classes, list) and classes
                                       and all(isinstance(c, str) and c for c in classes)):
        # vLLM resolves the model class from architectures[0]: a string or an empty list starts nothing (QA)
        wrong.append(f"{path}: field 'architectures' must be a list of model class names, e.g. "
                     f"[\"LlamaForCausalLM\"] (got {json.dumps(classes)[:60]})")
    if wrong:  # refused here, before the checks and arithmetic below (layer patterns, shared-expert sizes) meet them
        raise ConfigError(*missing, *wrong)
    missing += _layer_pattern_problems(cfg, _pick(cfg, "num_hidden_layers"), path)
    missing += declared_field_problems(raw, cfg, path)  # a hybrid's, MLA's, DSA's or MoE's own fields
    if missing:
        raise ConfigError(*missing)
    data: dict[str, Any] = {"hf_id": name}
    classes = raw.get("architectures")
    if isinstance(classes, list) and classes and isinstance(classes[0], str):
        data["hf_architecture"] = classes[0]
    for field in _ALIASES:
        value = _pick(cfg, field)
        if value is not None:
            data[field] = int(value)
    data.setdefault("num_key_value_heads", data["num_attention_heads"])
    if (limit := vllm_length_limit(cfg)) is not None:
        data["max_position_embeddings"] = limit
    data["tie_word_embeddings"] = bool(cfg.get("tie_word_embeddings", False))
    dtype = str(cfg.get("torch_dtype") or cfg.get("dtype") or "bfloat16")
    dtype = {"half": "float16", "float": "float32"}.get(dtype, dtype)
    if dtype not in TORCH_DTYPES:  # vLLM reads it as getattr(torch, dtype): "float7" stops it; it was read as bf16
        raise ConfigError(f"{path}: field 'torch_dtype' must be a torch dtype such as bfloat16, float16 or float32 "
                          f"(got {json.dumps(cfg.get('torch_dtype') or cfg.get('dtype'))})")
    data["torch_dtype"] = dtype if dtype in DTYPE_BYTES else "bfloat16"
    if data.get("kv_lora_rank"):
        data["attention_kind"] = "mla"
        data.pop("head_dim", None)
        if cfg.get("index_n_heads") and cfg.get("index_head_dim"):
            data["index_n_heads"], data["index_head_dim"] = cfg["index_n_heads"], cfg["index_head_dim"]
            if cfg.get("index_topk"):
                data["index_topk"] = cfg["index_topk"]
            for key in ("index_topk_freq", "index_skip_topk_offset"):
                if isinstance(cfg.get(key), int) and not isinstance(cfg.get(key), bool):
                    data[key] = cfg[key]
            pattern = cfg.get("index_topk_pattern")
            if isinstance(pattern, str) or (isinstance(pattern, list) and all(isinstance(p, str) for p in pattern)):
                data["index_topk_pattern"] = "".join(pattern)
    elif data.get("num_key_value_heads") == data["num_attention_heads"]:
        data["attention_kind"] = "mha"
    else:
        data["attention_kind"] = "gqa"
    layer_types = cfg.get("layer_types")  # one type per decoder layer (_layer_pattern_problems)
    if isinstance(layer_types, list) and data.get("sliding_window"):
        n_sliding = sum(1 for t in layer_types if "sliding" in str(t))
        if 0 < n_sliding < len(layer_types):
            data["attention_kind"] = "sliding-window mix"
            data["sliding_layers"] = n_sliding
        elif n_sliding == len(layer_types):
            data["attention_kind"] = "sliding-window"
    elif data.get("sliding_window") and cfg.get("use_sliding_window", True) and "attention_chunk_size" not in cfg:
        data["attention_kind"] = "sliding-window"
    else:
        data.pop("sliding_window", None)
    if cfg.get("attention_bias") is True:
        data["attention_bias"] = "all"
    elif cfg.get("qkv_bias") is True or cfg.get("add_qkv_bias") is True or cfg.get("model_type") in ("qwen2",):
        data["attention_bias"] = "qkv"
    if cfg.get("model_type") in LLAMA4_MODEL_TYPES:
        data.update(_llama4_fields(cfg, int(data["num_hidden_layers"]), path))
    if cfg.get("moe_shared_expert_intermediate_size"):
        data["shared_expert_intermediate_size"] = cfg["moe_shared_expert_intermediate_size"]
    if data.get("num_experts") and not data.get("moe_intermediate_size"):
        data["moe_intermediate_size"] = data.get("intermediate_size")
    if data.get("num_experts") and data.get("n_shared_experts") and not data.get("shared_expert_intermediate_size"):
        data["shared_expert_intermediate_size"] = int(data["n_shared_experts"]) * int(data["moe_intermediate_size"])
    data.update({k: v for k, v in _hybrid_fields(cfg, int(data["num_hidden_layers"])).items() if v is not None})
    data.update(_rope_fields(cfg, path))
    if cfg.get("mlp_hidden_act") == "relu2" or cfg.get("hidden_act") == "relu2":
        data["mlp_kind"] = "plain"  # squared-ReLU MLPs have no gate projection
    if isinstance(raw.get("vision_config"), dict):
        data["multimodal"] = True
        tower = vision_params(raw)
        if tower is not None:
            data["vision_params_b"] = tower / 1e9
    quant = read_quantization(raw, hf_quant_config, quantize_config, where=path)
    if quant is not None:
        data["quantization"] = quant
        if quant.method == "mxfp4":
            data["native_quantization"] = "mxfp4-experts"
        elif quant.scheme == "fp8-block":
            data["native_quantization"] = "fp8-block"
    if not data.get("intermediate_size") and not data.get("num_experts"):
        raise ConfigError(f"{path}: missing field 'intermediate_size' (needed for the memory model)")
    data["source"] = f"config {path}"
    data["checkpoint_bytes"], data["checkpoint_params"] = checkpoint_bytes, checkpoint_params
    try:
        arch = ModelArchitecture.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(*(f"{path}: field '{_config_key(cfg, '.'.join(str(p) for p in e['loc']))}': {e['msg']}"
                            for e in exc.errors())) from None
    problems = arch.inconsistencies()
    if problems:
        raise ConfigError(*(f"{path}: field '{_config_key(cfg, field)}': {why}" for field, why in problems))
    return arch


def _config_key(cfg: dict[str, Any], field: str) -> str:
    """The config.json key a ModelArchitecture field was read from (the alias the file uses), so an error
    names what the user can find in their file."""
    if field == "layer_pattern":
        return "hybrid_override_pattern" if "hybrid_override_pattern" in cfg else "layer_types"
    return next((key for key in _ALIASES.get(field, ()) if cfg.get(key) is not None), field)
