"""Latency and throughput of one vLLM replica (TP x PP GPUs): a roofline with a small calibration.

Decode is memory-bandwidth-bound: every step reads this rank's weights (for MoE, the experts the batch
touches) plus the KV cache of every running sequence, so

    t_mem     = (weight bytes read + batch x context x KV bytes/token) / (HBM bandwidth x eff_bw)
    t_compute = 2 x active params per rank x tokens / (peak tensor FLOPs x eff_compute)   (+ attention)
    step      = max(t_mem, t_compute) + step overhead + 2 all-reduces per layer (TP > 1)

Prefill is compute-bound: 2 x active params x L plus causal attention 2 x L^2 x heads x head_dim per layer,
over peak x eff_prefill. FP8 uses FP8 tensor throughput only where the GPU has it (W8A16 otherwise);
INT4 W4A16 cuts bytes, not FLOPs.

The replica under load (steady state at a rate or a number of clients) is analytic_load's; the
simulator steps the same cost (engine_step_s) one step at a time.

Calibration factors are data (gpuopt/data/latency_calibration.yaml, serving_calibration.yaml: latency_factors),
each with the rows it was fitted on. Nothing here imports pricing, the solver or any renderer.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cache
from statistics import NormalDist
from typing import Any

import numpy as np
from numpy.typing import NDArray

from gpuopt.errors import InputError
from gpuopt.hardware import GpuSpec
from gpuopt.physics.architecture import ModelArchitecture
from gpuopt.physics.kv_cache import (
    KvPool,
    dsa_format,
    indexer_bytes_per_token,
    kv_bytes_per_token_per_layer,
    kv_dtype_bytes,
)
from gpuopt.physics.latency_factors import (
    ArchCalibration,
    LatencyCalibration,
    MoePath,
    ServingCalibration,
    calibration,
    serving_calibration,
)
from gpuopt.physics.memory import MemoryEstimate
from gpuopt.physics.quantization import Quantization, representative
from gpuopt.physics.serving_config import ResolvedConfig
from gpuopt.physics.vllm_profile import get_profile, release_key
from gpuopt.physics.weights import (
    activation_dtype_bytes,
    expert_layout,
    indexer_layers,
    layer_weight_bytes,
    replicated_params,
)
from gpuopt.vocabulary import KV_LAYER_KINDS, STATE_LAYER_KINDS, WINDOWED_LAYER_KINDS


def attention_backend(gpu: GpuSpec, arch: ModelArchitecture, kv_cache_dtype: str) -> str:
    """The attention kernel family vLLM's V1 engine runs this model with on this GPU.

    vllm/platforms/cuda.py (read in the 0.11.0 wheel): MLA models take their own kernels; Hopper (sm90) runs
    FlashAttention 3, which has attention sinks and FP8 KV; sm100 Blackwell defaults to FlashInfer; other
    GPUs from sm80 (Ampere, Ada, consumer Blackwell sm120) run FlashAttention 2 unless the model has
    attention sinks (gpt-oss) or the KV cache is FP8, which FlashAttention 2 lacks -- then Triton attention
    ("Using Triton backend on V1 engine"). 0.16-0.29 reach the same outcome through a priority list
    (FLASH_ATTN, FLASHINFER, TRITON_ATTN) and `flash_attn_supports_sinks` (FA3+ only); there an FP8 KV cache
    below sm90 may take FlashInfer when it is installed, which is counted as Triton here (no rows tell the
    two apart). Before sm80: FlexAttention (the Turing factors were fitted on it). AMD GPUs: ROCm's own
    backends, priced at their borrowed factors."""
    cc = gpu.compute_capability
    if arch.is_mla:
        return "mla"
    if cc is None:
        return "rocm"
    if cc == 90:
        return "flash_attn_3"
    if 100 <= cc < 120:
        return "flashinfer"
    if cc >= 80:
        return "triton" if arch.attention_sinks or kv_cache_dtype.startswith("fp8") else "flash_attn_2"
    return "flex_attention"


# quantization.select_kernel's MoE kernels -> the calibrated path whose factors they run at (serving_calibration
# moe_paths). Kernels with no load rows of their own share the nearest measured path: AWQ's pre-Marlin
# moe-wna16 and bitsandbytes the W4A16 Marlin one, INT8 W8A8 the Triton fused_moe one.
MOE_PATH_OF_KERNEL = {
    "marlin-moe": "marlin_w4a16", "marlin-mxfp4": "marlin_w4a16", "marlin-fp4-moe": "marlin_w4a16",
    "moe-wna16": "marlin_w4a16", "bitsandbytes": "marlin_w4a16",
    "marlin-fp8-moe": "marlin_w8a16",
    "triton-fp8-moe": "fp8_block",
    "triton-mxfp4": "triton_mxfp4",
    "triton-int8-moe": "triton_fused_moe",
    "flashinfer-mxfp4": "flashinfer_cutlass", "flashinfer-cutlass-fp4-moe": "flashinfer_cutlass",
    "cutlass-fp4-moe": "flashinfer_cutlass",
}


def moe_kernel_path(gpu: GpuSpec, precision: str, vllm_version: str = "0.11",
                    checkpoint: Quantization | None = None) -> str:
    """The calibrated fused-MoE path this replica's experts run on: the kernel vLLM picks for the checkpoint on
    this GPU (quantization.select_kernel, one rule set for memory, commands and speed) -- the served
    checkpoint's own quantization when it is in that format, else the representative checkpoint of the plan's
    weight format -- mapped by MOE_PATH_OF_KERNEL; 16-bit experts run Triton fused_moe. 8-bit Marlin
    experts take the W8A16 path (marlin-moe serves AWQ/GPTQ 8-bit too).

    Blackwell (sm100 and consumer sm120) is one path for every quantised format: the load data has no
    Blackwell MoE rows, so its kernels cannot be told apart and keep one starting value.

    Block-FP8 experts before vLLM 0.8 (`fp8_block_v0`) are a path of their own: those releases ran them
    through Triton's fused_moe kernel with block scales, mostly on untuned default configurations (vLLM 0.7
    logs "Using default MoE config. Performance might be sub-optimal!" for H200), before the grouped
    block-FP8 GEMMs later releases use. The load data has block-FP8 MoE runs on 0.7.4 and on 0.11-0.13 only,
    so the cut sits at the V1 engine's release; releases in between are not observed."""
    if precision in ("bf16", "fp16", "fp32"):
        return "triton_fused_moe"
    if gpu.architecture == "Blackwell":
        return "flashinfer_cutlass"
    quant = checkpoint if checkpoint is not None and checkpoint.weight_format == precision \
        else representative(precision)
    kernel = quant.kernel_path(gpu.compute_capability, vllm_version) if quant is not None else None
    if kernel is None or kernel.moe is None or not kernel.supported:
        return "triton_fused_moe"
    path = MOE_PATH_OF_KERNEL.get(kernel.moe, "triton_fused_moe")
    if path == "marlin_w4a16" and kernel.weight_bits == 8:
        return "marlin_w8a16"
    if path == "fp8_block" and release_key(vllm_version) < (0, 8):
        return "fp8_block_v0"
    return path



@dataclass(frozen=True)
class Replica:
    """What the latency model needs to know about one replica, precomputed once."""

    arch: ModelArchitecture
    gpu: GpuSpec
    config: ResolvedConfig
    interconnect: str  # nvlink | pcie
    cal: LatencyCalibration
    weight_bytes_per_gpu: float  # everything but routed experts, largest stage
    expert_bytes_per_gpu: float  # routed experts of the largest stage (all of them)
    kv_bytes_per_token_per_gpu: float
    active_params_per_gpu: float  # per token, largest stage
    # heads x head_dim per rank, summed over the stage's self-attention layers (for attention FLOPs): linear-
    # attention, Mamba, FFN-only and cross-attention layers do not attend over the context
    attn_dim_per_gpu: float
    layers_per_stage: int
    sliding_fraction: float  # share of KV layers whose context is capped at the window
    window: int | None
    kv_capacity_tokens: int
    expert_params_per_gpu: float = 0.0  # routed-expert parameters of the largest stage on one GPU (all experts)
    expert_parallel: bool = False  # experts placed whole on ranks (EP) instead of sliced (TP)
    moe_layers_per_stage: int = 0  # decoder layers of the largest stage with routed experts
    attention_layers_per_stage: int = 0  # layers of the largest stage that hold a paged KV cache (KV_LAYER_KINDS)
    # the same sum for prompt tokens where vLLM attends differently in prefill: MLA runs its prompts un-absorbed
    # (heads of qk_nope + qk_rope against v_head_dim) and its decode in the latent space (_attention_width);
    # None: as attn_dim_per_gpu
    attn_dim_prefill_per_gpu: float | None = None
    lm_head_params_per_gpu: float = 0.0  # inside active_params_per_gpu; prompt tokens do not run it (below)
    # data-parallel engines whose tokens a MoE layer sees (0: all config.data_parallel; fewer when the load
    # keeps only some busy -- simulator.simulate_dp)
    moe_peer_engines: int = 0
    # linear-attention / Mamba layers of the largest stage: the recurrent state one sequence keeps on one GPU,
    # read and written back by every decode step (its size does not grow with the context)
    state_bytes_per_seq_per_gpu: float = 0.0
    # DeepSeek sparse attention (DeepSeek-V3.2, GLM-5): each query attends to the index_topk tokens its
    # lightning indexer picks, so the attention (and a decode step's KV read) stops growing past that many
    # tokens; the indexer itself scores every context token, on every rank (vLLM replicates it)
    attend_cap: int | None = None
    index_flops_per_context_token: float = 0.0  # per query token and context token, all layers of the stage
    index_bytes_per_context_token: float = 0.0  # indexer keys a decode step reads per context token, all layers
    serving: ServingCalibration = field(default_factory=serving_calibration)
    # vLLM's async scheduling: the engine schedules step n+1 while step n runs on the GPU, so a step's host
    # work hides under its GPU work (combined_step_s). The release's default unless `vllm serve` says otherwise
    async_scheduling: bool = False
    # the KV blocks and what a request takes from them (hybrids: state pages; sliding windows: the window);
    # None: one full-attention group over kv_capacity_tokens (KvPool.plain)
    kv_pool: KvPool | None = None

    # derived once in __post_init__ (plain attributes: step_parts_s reads them ~10^5 times per solve);
    # dataclasses.replace recomputes them, which the calibration scripts rely on
    arch_cal: ArchCalibration = field(init=False, repr=False)
    act_bytes: float = field(init=False, repr=False)
    peak_flops: float = field(init=False, repr=False)  # tensor FLOP/s per GPU for this weight format
    hbm_bytes_per_s: float = field(init=False, repr=False)
    link_bytes_per_s: float = field(init=False, repr=False)
    allreduce_fixed_s: float = field(init=False, repr=False)  # latency part of a step's all-reduces
    allreduce_s_per_token: float = field(init=False, repr=False)  # bandwidth part, per token in the step
    # data parallelism of a MoE model (ResolvedConfig.moe_shards): the expert layers run in lockstep over the
    # dp engines, each on the tokens of all of them (dp x its own: the coordinator balances the engines),
    # gathered and scattered back over the link in every MoE layer
    moe_token_scale: float = field(init=False, repr=False)
    dp_fixed_s: float = field(init=False, repr=False)  # latency part of a step's MoE gathers and scatters
    dp_s_per_token: float = field(init=False, repr=False)  # bandwidth part, per token of this engine's step
    moe: MoePath | None = field(init=False, repr=False)  # this replica's MoE kernel path (None: dense)
    moe_peak_flops: float = field(init=False, repr=False)
    dense_active_params_per_gpu: float = field(init=False, repr=False)  # per token, outside routed experts
    v0_engine: bool = field(init=False, repr=False)  # vLLM < 0.8 ran the V0 engine
    index_peak_flops: float = field(init=False, repr=False)  # the DSA indexer's FP8 logits GEMM peak
    attention_backend: str = field(init=False, repr=False)  # attention_backend(): the kernel family
    attn_peak_flops: float = field(init=False, repr=False)  # attention_peak_flops(): the math attention runs in
    attn_time_scale: float = field(init=False, repr=False)  # its attention FLOPs' time over FlashAttention's

    def __post_init__(self) -> None:
        tp = self.config.tensor_parallel
        act = activation_dtype_bytes(self.arch, self.config.precision)
        link = self._link_bytes_per_s()
        derived = {
            "arch_cal": self.cal.for_gpu(self.gpu),
            "act_bytes": act,
            "peak_flops": tensor_peak_flops(self.gpu, self.config.precision),
            "hbm_bytes_per_s": (self.gpu.hbm_tb_s or 0.0) * 1e12,
            "link_bytes_per_s": link,
            # 2 all-reduces per layer (0 without TP); ring all-reduce moves 2 (tp - 1) / tp of the hidden state
            "allreduce_fixed_s": (0.0 if tp == 1 else
                                  2 * self.layers_per_stage * self.cal.allreduce_latency_us[self.interconnect] * 1e-6),
            "allreduce_s_per_token": (0.0 if tp == 1 else 2 * self.layers_per_stage * 2 * (tp - 1) / tp
                                      * self.arch.hidden_size * act / link),
        }
        # vLLM's default MoE communication with data parallelism (all2all_backend allgather_reducescatter in
        # the 0.16.0 wheel): every MoE layer all-gathers the dp engines' hidden states before the experts and
        # reduce-scatters the result after them; each GPU receives (dp - 1) of its peers' shares per collective.
        # Each collective costs the link's all-reduce latency (no data-parallel load rows to fit one of its own)
        dp = self.config.data_parallel if self.expert_params_per_gpu else 1
        peers = min(self.moe_peer_engines or dp, dp)  # engines that bring tokens (idle ones bring none)
        moe_layers = self.moe_layers_per_stage
        derived["moe_token_scale"] = float(peers)
        derived["dp_fixed_s"] = (0.0 if dp == 1 else
                                 2 * moe_layers * self.cal.allreduce_latency_us[self.interconnect] * 1e-6)
        derived["dp_s_per_token"] = (0.0 if dp == 1 else
                                     2 * moe_layers * (peers - 1) * self.arch.hidden_size * act / link)
        path = (moe_kernel_path(self.gpu, self.config.precision, self.config.vllm_version, self.arch.quantization)
                if self.expert_params_per_gpu else None)
        k, e = self.arch.experts_per_token or 1, self.arch.num_experts or 1
        derived["moe"] = self.serving.moe_path(path) if path else None
        # Marlin and Triton dequantise to 16-bit tensor math; block-FP8 and Blackwell kernels run the FP8 peak
        fp8_paths = ("fp8_block", "fp8_block_v0", "flashinfer_cutlass")
        derived["moe_peak_flops"] = (derived["peak_flops"] if path in fp8_paths
                                     else tensor_peak_flops(self.gpu, "bf16"))
        derived["v0_engine"] = release_key(self.config.vllm_version) < (0, 8)
        # the indexer quantises its queries and keys to FP8 (DeepGEMM fp8_mqa_logits) whatever the weights
        derived["index_peak_flops"] = tensor_peak_flops(self.gpu, "fp8")
        derived["dense_active_params_per_gpu"] = self.active_params_per_gpu - self.expert_params_per_gpu * k / e
        backend = attention_backend(self.gpu, self.arch, self.config.kv_cache_dtype)
        derived["attention_backend"] = backend
        derived["attn_peak_flops"] = attention_peak_flops(self.gpu, self.config.precision,
                                                          self.config.kv_cache_dtype, backend)
        derived["attn_time_scale"] = self.serving.triton_attention_factor if backend == "triton" else 1.0
        for name, value in derived.items():
            object.__setattr__(self, name, value)

    def _link_bytes_per_s(self) -> float:
        if self.interconnect == "nvlink" and self.gpu.nvlink_gb_s:
            per_direction = self.gpu.nvlink_gb_s * 1e9 / 2  # datasheet NVLink figure is bidirectional
            if self.gpu.is_rocm:
                # AMD's Infinity Fabric is a full mesh of point-to-point links, not a switch: the table's figure
                # is 7 links to the 7 peers of an 8-GPU baseboard (gpus.csv notes), and a TP group of k GPUs
                # uses the k - 1 that reach its members
                tp = self.config.tensor_parallel
                return per_direction * min(max(tp - 1, 1), INFINITY_FABRIC_PEER_LINKS) / INFINITY_FABRIC_PEER_LINKS
            return per_direction
        gen = str(self.gpu.pcie_gen or 4)
        return self.cal.pcie_gb_s.get(gen, min(self.cal.pcie_gb_s.values())) * 1e9


INFINITY_FABRIC_PEER_LINKS = 7  # MI300X / MI355X: 7 of 8 links reach the peers on an 8-GPU UBB (gpus.csv notes)


def tensor_peak_flops(gpu: GpuSpec, precision: str) -> float:
    """Tensor FLOP/s of one GPU for a math format: FP8 only with native FP8, INT8 where listed, TF32-class
    for fp32, otherwise 16-bit."""
    bf16 = (gpu.bf16_tflops or 0.0) * 1e12
    if precision == "fp8" and gpu.fp8_native and gpu.fp8_tflops:
        return gpu.fp8_tflops * 1e12
    if precision == "int8" and gpu.int8_tops:
        return gpu.int8_tops * 1e12
    if precision == "fp32":
        return bf16 / 2  # TF32-class tensor math: half the 16-bit rate on every listed GPU
    return bf16


def attention_peak_flops(gpu: GpuSpec, precision: str, kv_cache_dtype: str, backend: str) -> float:
    """Tensor FLOP/s the attention kernels run at. Attention multiplies activations (queries) by the KV cache,
    not by weights, so the weight format does not set its math: 16-bit for a 16-bit KV cache whatever the
    weights (an INT8 or FP8 checkpoint still attends in bf16), FP8 only where FlashAttention 3 runs an FP8 KV
    cache (Hopper: vLLM quantises the queries and attends in FP8), TF32-class for fp32 models."""
    if precision == "fp32":
        return tensor_peak_flops(gpu, "fp32")
    if backend == "flash_attn_3" and kv_cache_dtype.startswith("fp8"):
        return tensor_peak_flops(gpu, "fp8")
    return tensor_peak_flops(gpu, "bf16")


def missing_specs(gpu: GpuSpec) -> list[str]:
    """GPU figures the latency model needs that the GPU table lacks."""
    return [name for name, value in (("hbm_tb_s", gpu.hbm_tb_s), ("bf16_tflops", gpu.bf16_tflops)) if not value]


def build_replica(arch: ModelArchitecture, gpu: GpuSpec, memory: MemoryEstimate,
                  interconnect: str | None = None, *, expert_parallel: bool = False,
                  async_scheduling: bool | None = None) -> Replica:
    """The replica's precomputed step terms. `async_scheduling` None: the release's default
    (vllm_profile.VllmProfile.async_scheduling_default)."""
    missing = missing_specs(gpu)
    if missing:
        raise InputError(f"{gpu.gpu}: the GPU table has no {', '.join(missing)}, so latency cannot be predicted")
    cfg = memory.config
    cal = calibration()
    tp = cfg.tensor_parallel
    largest = max(memory.ranks, key=lambda r: r.layers)
    layers = range(0, largest.layers)  # a stage's worth of layers (shapes repeat; first layers for MoE dense)
    act = activation_dtype_bytes(arch, cfg.precision)
    p = arch.layer_sums(layers)
    shards = cfg.moe_shards(arch)  # data parallelism splits a MoE model's experts further (memory.py)
    indexers = indexer_layers(arch, layers, cfg.vllm_version)
    # a step streams what the GPU stores (weights.layer_weight_bytes: the checkpoint's own bytes per weight, the
    # modules it leaves in 16-bit, the kernel's padding of MXFP4 experts); experts are the mean GPU's share
    # here, the busiest GPU's excess is _expert_parallel_imbalance's
    stored = layer_weight_bytes(arch, cfg.precision, tp, layers, expert_layout(arch, gpu, cfg).scale, shards,
                                cfg.vllm_version)
    weights = stored.dense
    experts = stored.experts
    expert_params = p.experts / shards
    replicated = replicated_params(arch, layers, indexers)  # IndexCache's skipped layers build no indexer
    routed_active = p.experts * (arch.experts_per_token or 1) / (arch.num_experts or 1)
    active = (p.active - p.replicated - routed_active) / tp + replicated + routed_active / shards
    # the LM head is read every step on the last stage (embedding lookups read only the rows they need)
    weights += arch.lm_head_params / tp * act
    active += arch.lm_head_params / tp
    counts = arch.layer_kind_counts(layers)
    kv_layers = sum(counts.get(k, 0) for k in KV_LAYER_KINDS)
    sliding = sum(counts.get(k, 0) for k in WINDOWED_LAYER_KINDS)
    per_layer_kv = kv_bytes_per_token_per_layer(arch, tp, kv_dtype_bytes(arch, cfg.precision, cfg.kv_cache_dtype),
                                                dsa_format(arch, gpu, cfg))
    state = sum(counts.get(k, 0) * arch.state_bytes_per_layer(k, tp, act) for k in STATE_LAYER_KINDS)
    link = interconnect or cfg.interconnect
    return Replica(
        arch=arch, gpu=gpu, config=cfg, interconnect=link, cal=cal,
        weight_bytes_per_gpu=weights, expert_bytes_per_gpu=experts,
        kv_bytes_per_token_per_gpu=per_layer_kv * kv_layers, active_params_per_gpu=active,
        attn_dim_per_gpu=arch.num_attention_heads * _attention_width(arch) / tp * kv_layers,
        layers_per_stage=largest.layers, sliding_fraction=sliding / kv_layers if kv_layers else 0.0,
        window=arch.sliding_window, kv_capacity_tokens=memory.effective_kv_tokens, kv_pool=memory.kv_pool,
        expert_params_per_gpu=expert_params, expert_parallel=expert_parallel, state_bytes_per_seq_per_gpu=state,
        moe_layers_per_stage=sum(1 for i in layers if not arch.is_dense_layer(i)) if arch.is_moe else 0,
        attention_layers_per_stage=kv_layers,
        attn_dim_prefill_per_gpu=(arch.num_attention_heads * _prefill_attention_width(arch) / tp * kv_layers
                                  if arch.is_mla and not indexers else None),
        lm_head_params_per_gpu=arch.lm_head_params / tp,
        **_sparse_attention(arch, indexers),
        async_scheduling=(get_profile(cfg.vllm_version).async_scheduling_default if async_scheduling is None
                          else async_scheduling),
    )


def _sparse_attention(arch: ModelArchitecture, kv_layers: int) -> dict[str, Any]:
    """The DSA fields of a Replica: the attended-token cap and the indexer's work per context token.

    The lightning indexer (vLLM's Indexer, read in the v0.11.0 wheel: ReplicatedLinear projections) scores
    each query against every earlier token's index key: 2 x index_n_heads x index_head_dim FLOPs per
    (query, context token) pair per layer, and a decode step reads each context token's fp8 key and scale.
    `kv_layers`: the indexer layers of a stage (fewer than its layers with IndexCache: weights.indexer_layers).
    A model without an indexer, or whose config gives no index_topk, attends to its whole context."""
    if not (arch.is_mla and arch.index_n_heads and arch.index_head_dim and arch.index_topk):
        return {}
    return {"attend_cap": arch.index_topk,
            "index_flops_per_context_token": 2.0 * arch.index_n_heads * arch.index_head_dim * kv_layers,
            "index_bytes_per_context_token": float(indexer_bytes_per_token(arch) * kv_layers)}


def _prefill_attention_width(arch: ModelArchitecture) -> float:
    """_attention_width of a prompt token. MLA without a sparse indexer runs prompts un-absorbed (vLLM's
    MLACommonImpl._forward_prefill: the latent is up-projected to per-head keys of qk_nope + qk_rope and values
    of v_head_dim, then a FlashAttention varlen kernel), so a (query, context token) pair costs
    2 x (qk_nope + qk_rope) + 2 x v_head_dim FLOPs a head -- 640 for DeepSeek-V3, where the absorbed decode form
    costs 2,176. DSA models (FlashMLA sparse) stay in the latent space in both phases."""
    if arch.is_mla and arch.kv_lora_rank and arch.qk_nope_head_dim:
        qk = arch.qk_nope_head_dim + (arch.qk_rope_head_dim or 0)
        return (qk + (arch.v_head_dim or arch.qk_nope_head_dim)) / 2
    return _attention_width(arch)


def _attention_width(arch: ModelArchitecture) -> float:
    """Per-head width that makes 4 x heads x width the attention FLOPs per attended token.

    Standard attention: head_dim (QK^T and PV, 2 FLOPs each per dimension). MLA as vLLM runs it in decode
    (FlashMLA / absorbed weights): scores over the kv_lora_rank + rope latent and values over the
    kv_lora_rank latent, so 2 x (2 x kv_lora_rank + rope) FLOPs per head per attended token."""
    if arch.is_mla and arch.kv_lora_rank:
        return (2 * arch.kv_lora_rank + (arch.qk_rope_head_dim or 0)) / 2
    return float(arch.attn_head_dim)


# ---- one engine step ---------------------------------------------------------------------------------


def _experts_touched_fraction(arch: ModelArchitecture, tokens: float) -> float:
    """Expected share of routed experts a batch of `tokens` touches (uniform routing, top-k of E)."""
    if not arch.num_experts:
        return 0.0
    k, e = arch.experts_per_token or 1, arch.num_experts
    return float(1.0 - (1.0 - k / e) ** max(tokens, 0.0))


@cache
def _expected_max_of_normals(n: int) -> float:
    """Blom's approximation of the expected maximum of n standard normals (cached: the simulator asks once per
    engine step of an expert-parallel replica, always for the same n)."""
    return NormalDist().inv_cdf((n - 0.375) / (n + 0.25))


def _expert_parallel_imbalance(r: Replica, routed_tokens: float, touched: float) -> tuple[float, float]:
    """(routed pairs, touched experts) on the busiest rank over the mean rank, with expert parallelism.

    Tensor parallelism slices every expert across the ranks, so each rank does 1/tp of every touched
    expert: no imbalance (1, 1). Expert parallelism places E/ep whole experts on each rank (ep = tp x dp, the
    GPUs the experts are split across: ResolvedConfig.moe_shards), and a step waits for the busiest rank.
    With uniform routing a rank receives Binomial(n, 1/ep) of the n = tokens x top_k routed pairs and
    touches Binomial(E/ep, f) of its experts (f: the touched share); the expected maximum of ep such ranks is
    the mean plus z_ep standard deviations, z_ep = Blom's approximation of the expected maximum of ep
    standard normals. Real routing is skewed, so this is the least imbalance EP can have."""
    if not r.expert_parallel:
        return 1.0, 1.0
    ep = r.config.moe_shards(r.arch)
    if ep <= 1:
        return 1.0, 1.0
    z = _expected_max_of_normals(ep)
    pairs = max(routed_tokens * (r.arch.experts_per_token or 1), 1.0)
    per_rank = (r.arch.num_experts or 1) / ep
    f = min(max(touched, 1e-9), 1.0)
    return (1 + z * math.sqrt((ep - 1) / pairs),
            min(1 + z * math.sqrt((1 - f) / (per_rank * f)), 1 / f))


def step_parts_s(r: Replica, decode_seqs: float, context: float, prefill_tokens: float = 0.0,
                 prefill_context: float = 0.0) -> tuple[float, float, float]:
    """(memory time, compute time, fixed + communication + host time) of one engine step; the step takes
    max(memory, compute) + the rest.

    Compute: dense GEMMs cost 2 x active params x (tokens + gemm_tile_tokens) at the architecture's
    efficiency (a GEMM of M rows runs at eff x M / (M + tile): under-filled tiles); routed experts cost
    2 x expert params x (tokens x top_k + touched experts x moe_tile_tokens) / E at their kernel path's
    efficiency (each touched expert is a small GEMM of its own tokens, at least a tile); attention
    4 x heads x head_dim x attended tokens. Memory: weights, the touched experts (at the path's
    bandwidth share) and the KV cache of the decoding sequences. Host: the calibrated overhead per step
    plus cpu_per_seq_us per sequence in the step."""
    ac = r.arch_cal
    sc = r.serving
    tokens = decode_seqs + prefill_tokens
    kv_context = context
    attended_prefill = prefill_context
    if r.window and r.sliding_fraction:
        kv_context = (1 - r.sliding_fraction) * context + r.sliding_fraction * min(context, r.window)
        # a prompt token of a windowed layer attends to the window too (min of the mean: at most the mean of
        # the min, so never cheaper than the kernel's work)
        attended_prefill = ((1 - r.sliding_fraction) * prefill_context
                            + r.sliding_fraction * min(prefill_context, r.window))
    if r.attend_cap:
        kv_context = min(context, r.attend_cap)
        attended_prefill = min(prefill_context, r.attend_cap)
    kv_read = decode_seqs * (kv_context * r.kv_bytes_per_token_per_gpu + 2 * r.state_bytes_per_seq_per_gpu
                             + context * r.index_bytes_per_context_token)
    t_mem = (r.weight_bytes_per_gpu + kv_read) / (r.hbm_bytes_per_s * ac.eff_bw)
    # decode tokens (and the tile padding) run at the mixed-step efficiency, prompt tokens at the prefill one:
    # a step's compute time is then affine in both, which the analytic steady state relies on
    attn = 4 * r.attn_dim_per_gpu * r.attn_time_scale  # attention FLOPs per (query, context token) pair, priced
    attn_prefill = attn if r.attn_dim_prefill_per_gpu is None else 4 * r.attn_dim_prefill_per_gpu * r.attn_time_scale
    # GEMMs at the weight format's peak; attention at its own (attention_peak_flops). Prompt tokens skip the
    # LM head: vLLM computes logits only at the positions it samples (a finishing prompt's last token)
    decode_gemm = 2 * r.dense_active_params_per_gpu * (decode_seqs + sc.gemm_tile_tokens)
    prefill_gemm = 2 * (r.dense_active_params_per_gpu - r.lm_head_params_per_gpu) * prefill_tokens
    decode_attn = attn * decode_seqs * kv_context
    prefill_attn = attn_prefill * prefill_tokens * attended_prefill
    t_compute = ((decode_gemm / ac.eff_compute + prefill_gemm / ac.eff_prefill) / r.peak_flops
                 + (decode_attn / ac.eff_compute + prefill_attn / ac.eff_prefill) / r.attn_peak_flops)
    if r.index_flops_per_context_token:
        t_compute += r.index_flops_per_context_token * (
            decode_seqs * context / ac.eff_compute + prefill_tokens * prefill_context / ac.eff_prefill
        ) / r.index_peak_flops
    if r.moe is not None:
        moe_tokens = tokens * r.moe_token_scale  # data parallelism: the experts see every engine's tokens
        touched = _experts_touched_fraction(r.arch, moe_tokens)
        e = r.arch.num_experts or 1
        pair_load, expert_load = _expert_parallel_imbalance(r, moe_tokens, touched)
        t_mem += r.expert_bytes_per_gpu * touched * expert_load / (r.hbm_bytes_per_s * ac.eff_bw * r.moe.eff_bw)
        pairs = (moe_tokens * (r.arch.experts_per_token or 1) * pair_load
                 + e * touched * expert_load * sc.moe_tile_tokens)
        t_compute += 2 * r.expert_params_per_gpu / e * pairs / (r.moe_peak_flops * r.moe.eff_compute)
    t_rest = step_cpu_s(r, decode_seqs) + r.allreduce_fixed_s + r.layers_per_stage * sc.layer_fixed_us * 1e-6 \
        + r.allreduce_s_per_token * tokens + r.attention_layers_per_stage * sc.seq_layer_us * 1e-6 * decode_seqs
    if r.dp_fixed_s:
        t_rest += r.dp_fixed_s + r.dp_s_per_token * tokens
    if r.attend_cap:
        t_rest += sc.dsa_token_layer_us * 1e-6 * tokens * r.layers_per_stage
    # pipeline stages run one after another for every token: a step takes PP stage-steps (vLLM's overlapping
    # of micro-batches across stages is not credited, and the hop between instances is not modelled)
    pp = r.config.pipeline_parallel
    return t_mem * pp, t_compute * pp, t_rest * pp


def step_time_s(r: Replica, decode_seqs: float, context: float, prefill_tokens: float = 0.0,
                prefill_context: float = 0.0) -> float:
    """One engine step: `decode_seqs` sequences at mean context `context` plus `prefill_tokens` of prompt
    (attending to `prefill_context` tokens on average)."""
    t_mem, t_compute, t_rest = step_parts_s(r, decode_seqs, context, prefill_tokens, prefill_context)
    return combined_step_s(r, t_mem, t_compute, t_rest, decode_seqs, r.async_scheduling)


def combined_step_s(r: Replica, t_mem: float, t_compute: float, t_rest: float, decode_seqs: float,
                    async_scheduling: bool) -> float:
    """A step from its parts: max(memory, compute) + the rest; with async scheduling the host part
    (step_cpu_s, inside the rest) runs beside the GPU part instead of after it, so the step is the longer of
    the two (vLLM schedules step n+1 while step n runs)."""
    if not async_scheduling:
        return max(t_mem, t_compute) + t_rest
    cpu = step_cpu_s(r, decode_seqs) * r.config.pipeline_parallel
    return max(max(t_mem, t_compute) + t_rest - cpu, cpu)


def host_part_s(r: Replica, decode_seqs: float, async_scheduling: bool) -> float | None:
    """The host part a step runs beside its GPU part with async scheduling (step_cpu_s, x the pipeline stages);
    None when the scheduling is synchronous and the host part is inside the rest."""
    return step_cpu_s(r, decode_seqs) * r.config.pipeline_parallel if async_scheduling else None


def step_piece(t_mem: float, t_compute: float, t_rest: float, host_s: float | None) -> tuple[bool, bool]:
    """Which piece of combined_step_s a step is on: (memory-bound, the GPU part longer than the host part beside
    it, host_part_s). Two steps on the same piece differ by a straight line in what they carry."""
    if host_s is None:
        return t_mem >= t_compute, True
    return t_mem >= t_compute, max(t_mem, t_compute) + t_rest - host_s >= host_s


def combined_steps_s(r: Replica, parts: Iterable[tuple[float, float, float]], decode_seqs: float,
                     async_scheduling: bool) -> list[float]:
    """combined_step_s for steps of one decode batch and different prompt tokens, the host part computed once
    (analytic_load's mean over the prompts a step carries asks for a dozen such steps at a time)."""
    cpu = host_part_s(r, decode_seqs, async_scheduling)
    if cpu is None:
        return [max(m, c) + rest for m, c, rest in parts]
    return [max(max(m, c) + rest - cpu, cpu) for m, c, rest in parts]


# ---- prefill ---------------------------------------------------------------------------------------


def prefill_steps_s(r: Replica, decode_seqs: float, context: float, prompt_tokens: int, room: float) -> float:
    """Time of the steps that carry one prompt's prefill, `room` tokens at a time, beside the decode batch."""
    room = max(1.0, room)
    chunks = math.ceil(prompt_tokens / room)
    if chunks > 8:  # many equal chunks: one representative step (attending to half the prompt on average)
        return chunks * step_time_s(r, decode_seqs, context, prompt_tokens / chunks, prompt_tokens / 2)
    done, total = 0.0, 0.0
    while done < prompt_tokens:
        size = min(room, prompt_tokens - done)
        total += step_time_s(r, decode_seqs, context, size, done + size / 2)
        done += size
    return total


def prefill_time_s(r: Replica, prompt_tokens: int) -> float:
    """A lone prompt, chunked at max_num_batched_tokens (what TTFT is at zero load, minus server overhead)."""
    return prefill_steps_s(r, 0, 0, prompt_tokens, r.config.max_num_batched_tokens)


# ---- the simulator's step (same cost model, one step at a time) -------------------------------------


def step_cpu_s(r: Replica, seqs: float) -> float:
    """Host time of one engine step: scheduling, launches and the sampler (step_overhead_ms) plus the
    per-request work that grows with the batch (input preparation, output processing: cpu_per_seq_us);
    v0_host_factor times that on the V0 engine (vLLM < 0.8)."""
    host = r.cal.step_overhead_ms * 1e-3 + r.serving.cpu_per_seq_us * 1e-6 * seqs
    return host * r.serving.v0_host_factor if r.v0_engine else host


def engine_step_s(r: Replica, decode_seqs: int, context: float, prefill_tokens: int, prefill_context: float,
                  async_scheduling: bool) -> float:
    """One step of the simulated engine: the analytic model's step_parts_s and combined_step_s for this
    step's composition (`async_scheduling`: the simulated scheduler's setting)."""
    t_mem, t_compute, t_rest = step_parts_s(r, decode_seqs, context, prefill_tokens, prefill_context)
    return combined_step_s(r, t_mem, t_compute, t_rest, decode_seqs, async_scheduling)


def engine_steps_s(r: Replica, decode_seqs: int, context: float, steps: int,
                   async_scheduling: bool) -> NDArray[Any]:
    """`steps` consecutive pure-decode steps of `decode_seqs` sequences whose mean context starts at `context`
    and grows by one token per step. Every part of a step is affine in the context (KV read, attention
    FLOPs) between the context caps -- a sliding window, a sparse indexer's top-k -- past which the capped
    layers stop growing, so two evaluations per piece give them all."""
    k = np.arange(steps, dtype=float)
    mem = np.empty(steps)
    comp = np.empty(steps)
    caps = sorted(c for c in ((r.window if r.sliding_fraction else None), r.attend_cap)
                  if c and context < c < context + steps - 1)
    starts = [context] + [float(c) for c in caps]
    rest = 0.0
    for i, start in enumerate(starts):
        a = step_parts_s(r, decode_seqs, start)
        b = step_parts_s(r, decode_seqs, start + 1.0)
        rest = a[2] if i == 0 else rest  # the rest does not depend on the context
        lo = 0 if i == 0 else math.ceil(start - context)
        hi = steps if i + 1 == len(starts) else math.ceil(starts[i + 1] - context)
        x = context + k[lo:hi] - start
        mem[lo:hi] = a[0] + (b[0] - a[0]) * x
        comp[lo:hi] = a[1] + (b[1] - a[1]) * x
    gpu = np.maximum(mem, comp) + rest
    if not async_scheduling:
        return np.asarray(gpu)
    cpu = step_cpu_s(r, decode_seqs) * r.config.pipeline_parallel  # as combined_step_s, vectorised
    return np.asarray(np.maximum(gpu - cpu, cpu))
