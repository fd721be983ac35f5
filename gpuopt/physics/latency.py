"""Latency and throughput of one vLLM replica (TP x PP GPUs): a roofline with a small calibration.

Decode is memory-bandwidth-bound: every step reads this rank's weights (for MoE, the experts the batch
touches) plus the KV cache of every running sequence, so

    t_mem     = (weight bytes read + batch x context x KV bytes/token) / (HBM bandwidth x eff_bw)
    t_compute = 2 x active params per rank x tokens / (peak tensor FLOPs x eff_compute)   (+ attention)
    step      = max(t_mem, t_compute) + step overhead + 2 all-reduces per layer (TP > 1)

Prefill is compute-bound: 2 x active params x L plus causal attention 2 x L^2 x heads x head_dim per layer,
over peak x eff_prefill. FP8 uses FP8 tensor throughput only where the GPU has it (W8A16 otherwise);
INT4 W4A16 cuts bytes, not FLOPs.

Under load vLLM's scheduler mixes decode tokens and prompts in a step (chunked prefill, up to
max_num_batched_tokens per step). In steady state at request rate lambda with mean prompt L and output O
tokens, y = lambda x T prompts arrive per step of mean length T: every step decodes b = O y sequences, and a
Poisson share of the steps also carries the prompts that arrived during the last one (_StepMix), so T is
the fixed point T = E(step); TPOT = T for a closed loop and, for Poisson arrivals, the mean batch of the
decode phase's birth-death chain over rate x O (_StepMix.request_step: the batch swings and a request decodes
in the steps where more sequences run); TTFT = server overhead + the steps that prefill one prompt,
stretched by queueing as the prefill share of the step fills up. A closed loop of n
clients is the same with lambda = n / (TTFT + (O - 1) x TPOT) (Little's law).

Calibration factors are data (gpuopt/data/latency_calibration.yaml), each with the rows it was fitted on.
Nothing here imports pricing, the solver or any renderer.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from functools import cache
from statistics import NormalDist
from typing import Any

import numpy as np
from numpy.typing import NDArray
from pydantic import BaseModel, ConfigDict, model_validator

from gpuopt.datafiles import data_yaml
from gpuopt.errors import InputError, SloUnreachableError
from gpuopt.hardware import GpuSpec, get_gpu
from gpuopt.physics import queueing
from gpuopt.physics.architecture import ModelArchitecture
from gpuopt.physics.memory import (
    KvPool,
    MemoryEstimate,
    ResolvedConfig,
    activation_dtype_bytes,
    dsa_format,
    expert_layout,
    indexer_bytes_per_token,
    indexer_layers,
    kv_bytes_per_token_per_layer,
    kv_dtype_bytes,
    layer_weight_bytes,
    replicated_params,
)
from gpuopt.physics.quantization import Quantization, representative
from gpuopt.physics.vllm_profile import get_profile, release_key
from gpuopt.vocabulary import KV_LAYER_KINDS, STATE_LAYER_KINDS, WINDOWED_LAYER_KINDS


class ArchCalibration(BaseModel):
    model_config = ConfigDict(frozen=True)

    eff_bw: float  # fraction of HBM bandwidth a decode step achieves
    eff_compute: float  # fraction of peak tensor FLOPs in mixed decode/prefill steps
    eff_prefill: float  # fraction of peak tensor FLOPs in prefill


class Borrowing(BaseModel):
    """An architecture with no fitted factors of its own uses another's; `why` says why that one."""

    model_config = ConfigDict(frozen=True)

    uses: str  # a key of `architectures`
    why: str


class BorrowedCalibration(BaseModel):
    """What a plan or `gpuopt fit` reports when a GPU's latency uses another architecture's calibration."""

    model_config = ConfigDict(frozen=True)

    gpu: str
    architecture: str
    borrowed_from: str
    why: str

    @property
    def note(self) -> str:
        return (f"{self.gpu} ({self.architecture}): latency predicted with the {self.borrowed_from} calibration "
                f"({self.why})")


class LatencyCalibration(BaseModel):
    model_config = ConfigDict(frozen=True)

    step_overhead_ms: float  # scheduler + sampler + launch per engine step
    server_overhead_ms: float  # API server, tokenisation, first scheduling: added to TTFT
    allreduce_latency_us: dict[str, float]  # per all-reduce call, by link (nvlink / pcie)
    pcie_gb_s: dict[str, float]  # x16 link bandwidth per direction, by PCIe generation
    architectures: dict[str, ArchCalibration]  # fitted: by architecture, or by GPU where its rows differ
    borrowed: dict[str, Borrowing] = {}  # architecture -> whose fitted factors it uses, and why
    default_architecture: str  # for an architecture in neither map (a GPU row added without a rule)
    fitted_on: str
    source: str

    @model_validator(mode="after")
    def _borrow_only_fitted(self) -> LatencyCalibration:
        """A borrowing names a fitted entry, and no architecture is both fitted and borrowing."""
        lenders = {b.uses for b in self.borrowed.values()} | {self.default_architecture}
        unknown = sorted(lenders - set(self.architectures))
        both = sorted(set(self.borrowed) & set(self.architectures))
        if unknown or both:
            raise ValueError(f"latency calibration: borrows from unfitted {unknown}; both fitted and borrowing {both}")
        return self

    def lookup(self, gpu: GpuSpec) -> tuple[ArchCalibration, BorrowedCalibration | None]:
        """A GPU's own entry where the evidence supports one (H200), else its architecture's, else the one its
        architecture borrows (data: `borrowed`), else the default; the second value says when it is borrowed."""
        if gpu.gpu in self.architectures:
            return self.architectures[gpu.gpu], None
        if gpu.architecture in self.architectures:
            return self.architectures[gpu.architecture], None
        rule = self.borrowed.get(gpu.architecture)
        if rule is None:
            rule = Borrowing(uses=self.default_architecture,
                             why=f"no calibration and no borrowing rule for {gpu.architecture}: the default")
        return self.architectures[rule.uses], BorrowedCalibration(
            gpu=gpu.gpu, architecture=gpu.architecture, borrowed_from=rule.uses, why=rule.why)

    def for_gpu(self, gpu: GpuSpec) -> ArchCalibration:
        return self.lookup(gpu)[0]


@cache
def calibration() -> LatencyCalibration:
    return LatencyCalibration.model_validate(data_yaml("latency_calibration.yaml"))


def borrowed_calibration(gpu: GpuSpec) -> BorrowedCalibration | None:
    """Whether `gpu`'s latency uses another architecture's calibration (None: its own)."""
    return calibration().lookup(gpu)[1]


def borrowed_notes(gpu_names: Iterable[str]) -> list[str]:
    """One sorted note per distinct GPU (by table name) whose latency uses a borrowed calibration: what a plan
    warns about for the GPUs it chose."""
    return sorted({b.note for name in set(gpu_names) if name and (b := borrowed_calibration(get_gpu(name)))})


class MoePath(BaseModel):
    """One MoE kernel path: the share of its peak the expert GEMMs reach, and of HBM bandwidth their reads."""

    model_config = ConfigDict(frozen=True)

    eff_compute: float  # of the path's tensor peak (16-bit for Marlin/Triton, FP8 for block-FP8)
    eff_bw: float  # multiplies the architecture's eff_bw for expert weight reads
    fitted_on: str
    # a path with no rows of its own runs at this fitted path's factors (ServingCalibration.moe_path), so a
    # kernel nobody measured is not priced above the measured ones on a faster GPU
    borrows: str | None = None


class ServingCalibration(BaseModel):
    """What the load data adds to the step cost (gpuopt/data/serving_calibration.yaml)."""

    model_config = ConfigDict(frozen=True)

    cpu_per_seq_us: float  # host work per scheduled request per step (input prep, sampling, output)
    frontend_ms_per_request: float  # API server work per request, one request at a time (parse, template)
    # work per prompt token before the scheduler sees a request, one request at a time: the API server
    # tokenises in one thread (AsyncMicrobatchTokenizer) and the engine core hashes the prompt's blocks for
    # the prefix cache in its one input thread (SHA-256 by default; both read in the 0.11.0 wheel), so long
    # prompts reach the engine later and a burst of them queues
    frontend_us_per_prompt_token: float = 0.0
    layer_fixed_us: float  # GPU time floor per decoder layer per step (kernel gaps and small-kernel tails)
    v0_host_factor: float  # host work of the V0 engine (vLLM < 0.8: synchronous Python loop) over V1's
    gemm_tile_tokens: float  # a step's GEMMs cost as if they had this many more tokens (under-filled tiles)
    moe_tile_tokens: float  # each touched expert's GEMM costs at least this many rows
    moe_paths: dict[str, MoePath]
    source: str
    fitted_on: str
    # DeepSeek sparse attention's per-token pipeline around the FLOPs step_parts_s prices: the indexer's
    # projections, FP8 quantisation of its queries, key insertion, top-k selection and the sparse gather run
    # as a chain of small kernels in every layer, a GPU time per token per layer (0: no DSA rows to fit)
    dsa_token_layer_us: float = 0.0
    dsa_fitted_on: str = ""
    # Triton attention (attention_backend): its attention FLOPs take this many times as long as the
    # FlashAttention kernels the architectures' efficiencies were fitted on (1: no rows to fit)
    triton_attention_factor: float = 1.0
    triton_attention_fitted_on: str = ""
    # GPU time per decoding sequence per attention layer of a stage: the paged-attention decode kernels'
    # per-sequence work that does not scale with its context (block-table walk, split-KV partial results and
    # their combine, the per-sequence KV-cache write and rotary), serial with the step on the GPU -- unlike
    # cpu_per_seq_us, async scheduling does not hide it. Linear-attention and Mamba layers have no paged
    # context to walk (their state traffic is priced by bandwidth). 0: not fitted
    seq_layer_us: float = 0.0


    def moe_path(self, name: str) -> MoePath:
        """The factors `name` runs at: its own, or those of the path it borrows."""
        path = self.moe_paths[name]
        return self.moe_paths[path.borrows] if path.borrows else path


@cache
def serving_calibration() -> ServingCalibration:
    return ServingCalibration.model_validate(data_yaml("serving_calibration.yaml"))


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


CONCURRENCY_TOLERANCE = 1e-3  # closed loops: concurrency is steep in the rate near saturation
RATE_TOLERANCE = 5e-3  # relative precision of the searched request rates (0.5 %, well inside the model error)


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
    # a step streams what the GPU stores (memory.layer_weight_bytes: the checkpoint's own bytes per weight, the
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
    `kv_layers`: the indexer layers of a stage (fewer than its layers with IndexCache: memory.indexer_layers).
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


# ---- under load -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class LoadPoint:
    """Predicted steady state of one replica at one load."""

    requests_per_second: float
    concurrency: float  # requests in the system (Little's law)
    decode_batch: float
    step_ms: float
    tpot_ms: float
    ttft_ms: float
    output_tokens_per_second: float
    stable: bool
    limit: str | None  # what makes it unstable (prefill budget, max_num_seqs, KV cache)


def _prefill_steps_s(r: Replica, decode_seqs: float, context: float, prompt_tokens: int, room: float) -> float:
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
    return _prefill_steps_s(r, 0, 0, prompt_tokens, r.config.max_num_batched_tokens)


MAX_PREFILL_BUSY = 0.999  # the prefill queue's utilisation is clamped here, as the budget's (queueing.MAX_LOAD)


class _StepMix:
    """The mean engine step in steady state as a function of y, the prompts arriving per step (y = rate x T).

    Prompts arrive at random, so in a steady state most steps carry no prefill at all and some carry a whole
    prompt: vLLM runs a prompt of L tokens in the first step after it arrives, whole when it fits the step's
    budget (chunked at max_num_batched_tokens otherwise). With k ~ Poisson(y) prompts per step, a step carries
    no prompt with probability e^-y, and k1 = y / (1 - e^-y) prompts (x1 = k1 L tokens, at most the budget
    left by the decodes) otherwise; every step also decodes b = O y sequences (Little's law on the decode
    phase). The mean step is then

        E(y) = (1 - q) step(b, 0) + q step(b, x1),   q = y L / x1 (the share of steps carrying prompt tokens)

    Spreading y L prompt tokens evenly over every step instead (the model before 2026-12) lets each step's
    share of prefill hide under its memory-bound decode (max(memory, compute)) and charges every step of an
    MoE model the experts a prompt touches: mean TPOT was 1.5-3.5x optimistic for long prompts on dense
    models and 3-6x pessimistic for MoE models against the simulator (benchmarks/surrogate_capacity.py).
    (Jensen's gap inside the k >= 1 steps, one mean step for k1 prompts, is left: a few % where y ~ 1.)

    Dense models: every part of step_parts_s is affine in the decode batch and the prompt tokens at a fixed
    context, so three evaluations give all steps; MoE models evaluate each step (the experts a step touches
    depend on its own tokens)."""

    def __init__(self, r: Replica, input_tokens: int, output_tokens: int) -> None:
        self.r, self.L, self.O = r, input_tokens, output_tokens
        self.context = input_tokens + output_tokens / 2
        self.budget = r.config.max_num_batched_tokens
        self.affine: tuple[tuple[float, float, float], ...] | None = None
        if not r.expert_bytes_per_gpu:
            zero = step_parts_s(r, 0.0, self.context, 0.0, input_tokens / 2)
            one_b = step_parts_s(r, 1.0, self.context, 0.0, input_tokens / 2)
            one_x = step_parts_s(r, 0.0, self.context, 1.0, input_tokens / 2)
            self.affine = tuple((zero[i], one_b[i] - zero[i], one_x[i] - zero[i]) for i in range(3))

    def step(self, b: float, x: float) -> float:
        if self.affine is None:
            mem, comp, rest = step_parts_s(self.r, b, self.context, x, self.L / 2)
        else:
            (m0, mb, mx), (c0, cb, cx), (r0, rb, rx) = self.affine
            mem, comp, rest = m0 + mb * b + mx * x, c0 + cb * b + cx * x, r0 + rb * b + rx * x
        return combined_step_s(self.r, mem, comp, rest, b, self.r.async_scheduling)

    def prompt_tokens(self, y: float) -> float:
        """x1: the prompt tokens a step that carries prompts carries (k1 prompts, at most the decodes' room)."""
        k1 = y / -math.expm1(-y) if y > 1e-12 else 1.0
        return min(max(k1 * self.L, self.L * y), max(self.budget - self.O * y, 1.0))

    def steps(self, y: float) -> tuple[float, float, float]:
        """(q, the step without a prompt, the step with one): the two kinds of step and the share of the second."""
        b = self.O * y
        p = self.L * y
        if p <= 0.0:
            return 0.0, self.step(b, 0.0), 0.0
        x1 = self.prompt_tokens(y)
        return min(p / x1, 1.0), self.step(b, 0.0), self.step(b, x1)

    @staticmethod
    def _mean(q: float, plain: float, prompt: float) -> float:
        """The mean of the two kinds of step, a share q of them carrying prompts."""
        return (1.0 - q) * plain + q * prompt

    def mean_step(self, y: float) -> float:
        return self._mean(*self.steps(y))

    def residual_step(self, y: float) -> float:
        """What is left of the step in progress when a request arrives: E(T^2) / 2 E(T) over the steps (an arrival
        at a random instant lands in a long step more often than the steps' share says: a step carrying a
        3,000-token prompt is 5 to 10 decode steps long). Half the mean step where all steps are alike."""
        q, plain, prompt = self.steps(y)
        mean = self._mean(q, plain, prompt)
        return ((1.0 - q) * plain**2 + q * prompt**2) / (2 * mean) if mean > 0 else 0.0

    def request_step(self, y: float) -> float:
        """The mean step a Poisson request decodes in (its TPOT): longer than the mean step E(y), because the
        decode batch swings and a request spends more of its decode in the steps where more sequences run --
        and always runs with itself (E(y) at a mean batch below one averages in the empty engine).

        Each sequence gets one token a step and the step grows with the batch, so the decode phase is a
        symmetric queue (processor sharing at a total rate of j / T(j) tokens/s with j sequences), whose
        stationary batch is insensitive to the output lengths:

            pi(j) ~ prod_{i <= j} rate O T(i) / i,    TPOT = E[j] / (rate O)   (Little's law on the decode)

        T(j) is the mean step with j decoding, its share of prompt steps included: T(j) = P(j) / (1 - e (Q(j) -
        P(j))), P and Q the steps without and with x1 prompt tokens, e the prompt steps a second. Taken as
        a + c j over the batches the chain visits (the secant through the mean-field batch b -+ sqrt(b), j >= 1),
        pi is negative binomial and

            TPOT = (a + c) / (1 - beta),   beta = rate O c

        (T(b) + c / (1 - beta) where T is affine: the mean step plus the swing). Summing the chain itself over
        T(j) at 24 batches agreed within 0.1 % on dense models and was 0-5 % lower on MoE ones, whose step is
        concave in the batch (the experts touched saturate), but made `solve` 4x slower; the secant stays.

        Against 3,000 simulated Poisson requests at the same rate (dense Llama-3.x, Qwen3-32B FP8 on H100 /
        L40S; gpt-oss-20b / -120b, Qwen3-30B-A3B on H100 / A100 / A40) the mean step was 0.1-1.5 % fast on the
        dense models and 0.2 % slow to 66 % fast on the MoE ones (Qwen3-30B-A3B FP8 on an A40 at 0.25
        requests/s: 8.06 ms, simulated 13.37: a lone sequence's step is 12 ms, the empty engine's 4); this is
        0.0-0.8 % fast on the dense ones and 2.5 % slow to 11 % fast on the MoE ones (gpt-oss-120b on an A100
        at 3,000/300: its long prompt steps stall every decode at once, a swing T(j) smears)."""
        q, plain, prompt = self.steps(y)
        mean = self._mean(q, plain, prompt)  # mean_step(y), without evaluating the steps again
        if y <= 0.0 or mean <= 0.0:
            return mean
        prompts_per_s = q / mean
        x1 = self.prompt_tokens(y)

        def t(j: float) -> float:  # the mean step with j decoding, its share of prompt steps included
            p_j = self.step(j, 0.0)
            stall = 1.0 - prompts_per_s * (self.step(j, x1) - p_j) if q > 0 else 1.0
            return p_j / stall if stall > 0 else math.inf

        b = self.O * y
        lo = max(b - math.sqrt(b), 1.0)
        hi = lo + max(2 * math.sqrt(b), 1.0)
        t_lo, t_hi = t(lo), t(hi)
        if not math.isfinite(t_hi):
            return math.inf
        c = max((t_hi - t_lo) / (hi - lo), 0.0)
        beta = y / mean * self.O * c
        if beta >= 1.0:
            return math.inf
        return (t_lo - c * lo + c) / (1.0 - beta)

    def y_at_request_step(self, target_s: float) -> float:
        """The y whose request step (TPOT under Poisson arrivals) is `target_s`: 0 when even an empty step is
        longer."""
        return self._y_at(self.request_step, target_s)

    def y_at_rate(self, rate: float) -> float:
        """The steady state's y at `rate`: the root of rate E(y) = y (inf when steps outgrow arrivals)."""
        if rate <= 0.0:
            return 0.0

        def f(y: float) -> float:  # positive at 0, negative past the root
            return rate * self.mean_step(y) - y

        hi = max(rate * self.mean_step(0.0) * 2, 1e-9)
        while f(hi) > 0.0:
            hi *= 4
            if hi > 1e9:
                return math.inf
        return _crossing(f, 0.0, hi, 1e-10)[1]

    def y_at_step(self, target_s: float) -> float:
        """The y whose mean step is `target_s` (E is increasing): 0 when even an empty step is longer."""
        return self._y_at(self.mean_step, target_s)

    @staticmethod
    def _y_at(step: Callable[[float], float], target_s: float) -> float:
        if step(0.0) >= target_s:
            return 0.0
        hi = 1.0
        while step(hi) < target_s:
            hi *= 4
            if hi > 1e9:
                return math.inf
        return _crossing(lambda y: target_s - step(y), 0.0, hi, 1e-10)[0]


def _crossing(f: Callable[[float], float], lo: float, hi: float, rel_tol: float) -> tuple[float, float]:
    """A bracket [lo, hi] no wider than rel_tol x hi around the one zero of a decreasing-through-zero f, with
    f(lo) >= 0 >= f(hi) kept throughout (the Illinois variant of regula falsi: a few steps where bisection
    takes dozens). Callers choose the safe end."""
    f_lo, f_hi = f(lo), f(hi)
    if f_lo <= 0.0:
        return lo, lo
    if f_hi >= 0.0:
        return hi, hi
    side = 0
    for _ in range(200):
        if hi - lo <= rel_tol * abs(hi):
            break
        t = (lo * f_hi - hi * f_lo) / (f_hi - f_lo)
        if not lo < t < hi:
            t = (lo + hi) / 2  # rounding pushed the secant point out: bisect once
        value = f(t)
        if value > 0:
            lo, f_lo = t, value
            if side == -1:
                f_hi /= 2  # halve the stale end so the bracket shrinks from both sides
            side = -1
        elif value < 0:
            hi, f_hi = t, value
            if side == 1:
                f_lo /= 2
            side = 1
        else:
            return t, t
    return lo, hi


def held_kv_tokens(input_tokens: float, output_tokens: float, block_size: int) -> float:
    """KV tokens a running sequence holds on average in steady state. vLLM allocates blocks as a sequence
    grows (KVCacheManager.allocate_slots each step), not for its whole length up front, and the running
    sequences are spread evenly over their decode: a sequence holds its prompt, half its output and half a
    block of rounding. (Before 2026-12-02 the limit charged prompt + whole output: 200/800-token requests of
    Qwen3-30B-A3B on an H100 got 6.1 requests/s where the simulator sustains 10.3.)"""
    return input_tokens + output_tokens / 2 + block_size / 2


def held_cache_tokens(pool: KvPool | None, capacity_tokens: int, block_size: int, input_tokens: float,
                      output_tokens: float) -> float:
    """What a running sequence holds on average, in the units of `capacity_tokens` (the KV tokens of requests
    of max_model_len: MemoryEstimate.effective_kv_tokens): its blocks in every group of `pool`
    (KvPool.blocks_held over held_kv_tokens) as a share of the pool. For a model with one full-attention
    group (or no pool: `block_size` is then its block) this is held_kv_tokens; a hybrid's short request holds
    its state pages besides, a sliding-window model's its tokens in the window groups too."""
    if pool is None or (pool.window_groups == 0 and pool.state_groups == 0):
        return held_kv_tokens(input_tokens, output_tokens, pool.block_size if pool else block_size)
    held = held_kv_tokens(input_tokens, output_tokens, pool.block_size)
    return pool.blocks_held(held) / pool.num_blocks * capacity_tokens


def run_places(r: Replica, input_tokens: float, output_tokens: float) -> float:
    """Requests of this size that run at once: what the KV cache holds without preempting (kv_places), at most
    max_num_seqs."""
    return min(kv_places(r, input_tokens, output_tokens), r.config.max_num_seqs)


def kv_places(r: Replica, input_tokens: float, output_tokens: float) -> float:
    """Requests of this size the KV cache runs at once without one outgrowing it.

    vLLM admits a prompt while its blocks are free and does not reserve the output (a request grows a block at
    a time; when none is free the newest running request is preempted and recomputed). The running requests'
    ages are independent and uniform over the output, so n of them hold n x held on average (held: prompt,
    half the output and half a block, replica_held_tokens) swinging by sqrt(n) x O / sqrt(12); the cache runs
    them without preempting while the mean plus queueing.KV_SWING_SD such deviations fit: n is the positive
    root of n held + k sqrt(n) s = KV (s one request's swing in the pool's units), and never below the
    requests whose whole length fits at once (the normal approximation overstates the swing of a few).

    Counting n at the mean (KV / held, until 2026-12-03) was optimistic where outputs dwarf prompts: 200/800
    requests of Qwen3-30B-A3B on an H100 were 6.48 requests/s within 2 s / 40 ms where 4,000 simulated ones
    hold 6.1 and collapse at 6.3 (now 6.16); 64 clients of Llama-3.1-8B 200/800 were planned on one RTX 4090,
    whose closed loop collapses at 68 clients (393 preemptions, mean TTFT 1.5 s; the places are 61.5)."""
    held = replica_held_tokens(r, input_tokens, output_tokens)
    spread = held / held_kv_tokens(input_tokens, output_tokens, r.config.block_size)  # the pool's units
    k = queueing.KV_SWING_SD * output_tokens / math.sqrt(12) * spread
    kv = float(r.kv_capacity_tokens)
    root = (-k + math.sqrt(k * k + 4 * held * kv)) / (2 * held)
    return max(root * root, kv / replica_held_tokens(r, input_tokens + output_tokens, 0))


def replica_held_tokens(r: Replica, input_tokens: float, output_tokens: float) -> float:
    """held_cache_tokens for a replica's pool."""
    return held_cache_tokens(r.kv_pool, r.kv_capacity_tokens, r.config.block_size, input_tokens, output_tokens)


def at_rate(r: Replica, rate: float, input_tokens: int, output_tokens: int,
            mix: _StepMix | None = None, poisson: bool = True) -> LoadPoint:
    """Steady state at `rate` requests/s. `mix`: the shape's _StepMix when the caller has one. `poisson`: the
    arrivals are an open loop's (Poisson), whose swings make requests wait for KV room near the cache's limit
    (queueing.kv_wait_s, in TTFT); a closed loop's population is its clients, which never swings (at_concurrency
    passes False)."""
    cfg = r.config
    context = input_tokens + output_tokens / 2
    budget = cfg.max_num_batched_tokens
    # the mean engine step T at `rate`: T = E(y) at the y with y = rate E(y) (_StepMix, built once per replica
    # and request shape by callers that ask for many rates); infinite when the replica cannot keep up
    mix = mix or _StepMix(r, input_tokens, output_tokens)
    y = mix.y_at_rate(rate)
    t = mix.mean_step(y) if math.isfinite(y) else math.inf
    if not math.isfinite(t):
        return LoadPoint(requests_per_second=rate, concurrency=math.inf, decode_batch=math.inf, step_ms=math.inf,
                         tpot_ms=math.inf, ttft_ms=math.inf, output_tokens_per_second=rate * output_tokens,
                         stable=False, limit="steps grow without bound: the replica cannot keep up")
    b = rate * output_tokens * t
    p = rate * input_tokens * t
    held = replica_held_tokens(r, input_tokens, output_tokens)
    front = frontend_s(r, input_tokens)
    places = run_places(r, input_tokens, output_tokens)
    limit = None
    if rate * front >= 1.0:
        limit = (f"the API server handles one request at a time, {front * 1e3:.2f} ms each: at most "
                 f"{1 / front:,.1f} requests/s")
    elif b + p > budget:
        limit = f"needs {b + p:,.0f} tokens per step, above max_num_batched_tokens {budget:,}"
    elif b > cfg.max_num_seqs:
        limit = f"needs {b:,.0f} running sequences, above max_num_seqs {cfg.max_num_seqs}"
    elif b * held > r.kv_capacity_tokens:
        limit = f"needs {b * held:,.0f} KV tokens, above the cache's {r.kv_capacity_tokens:,}"
    elif b > places:
        limit = (f"needs {b:,.1f} running sequences, above the {places:,.1f} whose KV the cache holds without "
                 f"preempting as their ages swing ({queueing.KV_SWING_SD:g} standard deviations)")
    elif poisson and places >= 2 * queueing.SPARE_PLACES and b > places - queueing.SPARE_PLACES:
        limit = (f"Poisson arrivals keep {b:,.1f} of the {places:,.1f} requests the KV cache and max_num_seqs run "
                 f"at once busy: less than one place free on average, so a request waits about a decode for room")
    room = max(budget - b, 1.0)
    service = _prefill_steps_s(r, b, context, input_tokens, room)
    rho = min(p / room, 0.999)
    # an open loop's arrivals land at random instants, so in the long steps that carry prompts more often than
    # their share (the residual E(T^2) / 2 E(T)); a closed loop's next request follows its last one's final step
    residual = mix.residual_step(y) if poisson else None
    # a Poisson request decodes in more than the mean step (the batch swings: _StepMix.request_step); a closed
    # loop's batch is its clients less those in prefill, which does not swing that way
    tpot = mix.request_step(y) if poisson else t
    if not math.isfinite(tpot) and limit is None:
        limit = ("the decode batch's swings grow without bound: each sequence a step adds costs the others more "
                 "than the arrivals leave room for")
    ttft = (r.cal.server_overhead_ms * 1e-3 + front + step_wait_s(r, b, t, residual) + service
            + prompt_queue_s(r, rate, b, context, input_tokens, room, service, rho, poisson))
    if poisson:
        # Poisson arrivals queue at the API server (one at a time, M/D/1) and for room to run: the cache holds
        # kv_capacity / held such requests, max_num_seqs caps them, each holds its place for its decode (vLLM
        # admits the head of its waiting queue only when its prompt's blocks are free and a sequence slot is)
        busy = min(rate * front, 0.999)
        ttft += front * busy / (2 * (1 - busy))
        hold = max(output_tokens, 1) * tpot  # a request holds its place for its decode, in the request step
        ttft += queueing.kv_wait_s(places, rate * hold, hold)
    concurrency = rate * (ttft + max(output_tokens - 1, 0) * tpot)
    return LoadPoint(requests_per_second=rate, concurrency=concurrency, decode_batch=b, step_ms=t * 1e3,
                     tpot_ms=tpot * 1e3, ttft_ms=ttft * 1e3, output_tokens_per_second=rate * output_tokens,
                     stable=limit is None, limit=limit)


def prompt_queue_s(r: Replica, rate: float, decode_seqs: float, context: float, prompt_tokens: int, room: float,
                   service: float, budget_share: float, poisson: bool) -> float:
    """Mean wait of a prompt for the prompts ahead of it (vLLM runs waiting prompts first come, first served,
    `room` tokens a step beside the decodes). Two resources can make it wait, and the busier decides:

    - the step budget: prompt tokens take `budget_share` of it (rho = p / room), so with steps of fixed length
      a prompt waits M/D/1's rho / 2 (1 - rho) of its service -- where the prompt hides under a memory-bound
      decode step;
    - the GPU's time: where a prompt makes its steps compute-bound, the steps stretch with the prompt tokens
      they carry, so a prompt waits for the prefill work ahead of it, its marginal time S_m = `service` less
      the decode steps its chunks replace; the prefill is busy rho_m = rate S_m of the time and, for Poisson
      arrivals, the wait is M/D/1's rho_m S_m / 2 (1 - rho_m). A closed loop's next prompt follows its last
      request's end instead of arriving at random, so it keeps the budget term alone.

    Against 2,000 simulated Poisson requests at the same rate the budget term alone left mean TTFT 5-22 % low
    wherever 1,000-3,000-token prompts load the GPU (Llama-3.3-70B TP4 on H100s at 3,000/300 and 2.4 requests/s:
    438 ms, simulated 575; the prefill busy 49 % of the time, the budget 5 %); with the busier one it is 558
    (gpt-oss-120b on an A100 at 1.3: 411 -> 478, simulated 470; gemma-3-27b at 0.8: 443 -> 486, simulated 476)."""
    budget_wait = service * budget_share / (2 * (1 - budget_share))
    if not poisson:
        return budget_wait
    chunks = math.ceil(prompt_tokens / max(room, 1.0))
    marginal = max(service - chunks * step_time_s(r, decode_seqs, context), 0.0)
    busy = min(rate * marginal, MAX_PREFILL_BUSY)
    return max(budget_wait, marginal * busy / (2 * (1 - busy)))


def frontend_s(r: Replica, prompt_tokens: float) -> float:
    """Time of one request between the client and the scheduler, besides the fixed serving path: the API
    server's per-request work and the per-token work on its prompt (tokenisation, prefix-cache block hashes).
    It is done one request at a time, so a burst queues there (the simulator); in steady state it adds to
    TTFT once."""
    sc = r.serving
    return sc.frontend_ms_per_request * 1e-3 + sc.frontend_us_per_prompt_token * 1e-6 * prompt_tokens


def step_wait_s(r: Replica, decode_batch: float, step_s: float, residual_s: float | None = None) -> float:
    """Mean wait of an arriving request for the engine step it cannot join. The engine is in a step when at
    least one sequence runs (the running count taken as Poisson with mean `decode_batch`); the request then
    waits for the rest of that step (`residual_s`: _StepMix.residual_step, half a step where all are alike)
    and, with async scheduling, for one step more: vLLM schedules step n+1 as soon as step n is launched
    (EngineCore.step_with_batch_queue), so an arrival during step n joins step n+2. The simulator does the
    same step by step (simulator._Engine._arrive)."""
    busy = 1.0 - math.exp(-decode_batch)
    rest = step_s / 2 if residual_s is None else residual_s
    return busy * (rest + (step_s if r.async_scheduling else 0.0))


def at_concurrency(r: Replica, clients: float, input_tokens: int, output_tokens: int) -> LoadPoint:
    """Steady state of a closed loop of `clients` (each sends its next request when the last one ends).

    Past the population of its largest stable rate r* (max_rate without targets), clients wait in vLLM's
    queue when max_num_seqs binds there: the loop runs at r* with r*'s decode batch and TPOT, and the extra
    clients' wait is TTFT (Little's law on the whole loop, clients = r* x (TTFT + (output - 1) x TPOT)). When
    the KV cache binds first, vLLM admits more than it can keep and preempts; this point is then optimistic,
    and steady_state.closed_loop_point simulates the churn (steady_state.churns says when: `gpuopt fit` asks)."""
    top = max_rate(r, input_tokens, output_tokens, poisson=False)
    if clients > top.concurrency and top.requests_per_second > 0:
        decode_s = max(output_tokens - 1, 0) * top.tpot_ms * 1e-3
        ttft = max(clients / top.requests_per_second - decode_s, top.ttft_ms * 1e-3)
        queued = clients - top.concurrency
        where = ("at the API server (one request at a time)"
                 if top.requests_per_second * frontend_s(r, input_tokens) >= 1 - 1e-6 else "in vLLM's queue")
        return replace(top, concurrency=clients, ttft_ms=ttft * 1e3, limit=(
            f"{clients:,.0f} clients, {top.concurrency:,.0f} in service at the largest stable rate: {queued:,.0f} "
            f"wait {where}"))
    lo, hi = 0.0, 1.0
    below: LoadPoint | None = None  # the point at `lo` (None while lo is 0)
    above = at_rate(r, hi, input_tokens, output_tokens, poisson=False)
    while above.concurrency < clients and hi < 1e6:
        lo, below, hi = hi, above, hi * 2
        above = at_rate(r, hi, input_tokens, output_tokens, poisson=False)
    # until the rate is within CONCURRENCY_TOLERANCE and so is the population: near the knee the population is
    # steep in the rate (0.1 % of rate was 3 % of clients: 629 for 650 asked), so the second takes longer
    for _ in range(200):
        if hi - lo <= CONCURRENCY_TOLERANCE * hi and below is not None and \
                below.concurrency >= clients * (1 - CONCURRENCY_TOLERANCE):
            break
        mid = (lo + hi) / 2
        point = at_rate(r, mid, input_tokens, output_tokens, poisson=False)
        if point.concurrency < clients:
            lo, below = mid, point
        else:
            hi = mid
    return below if below is not None else at_rate(r, lo, input_tokens, output_tokens, poisson=False)


def zero_load(r: Replica, input_tokens: int, output_tokens: int) -> LoadPoint:
    """One request alone: TTFT = serving path + the API server's work on it + prefill, TPOT = a batch-1 decode
    step."""
    ttft = (r.cal.server_overhead_ms * 1e-3 + frontend_s(r, input_tokens) + prefill_time_s(r, input_tokens)) * 1e3
    tpot = step_time_s(r, 1, input_tokens + output_tokens / 2) * 1e3
    rate = 1.0 / ((ttft + tpot * max(output_tokens - 1, 0)) / 1e3)
    return LoadPoint(requests_per_second=rate, concurrency=1.0, decode_batch=1.0, step_ms=tpot, tpot_ms=tpot,
                     ttft_ms=ttft, output_tokens_per_second=output_tokens * rate, stable=True, limit=None)


def _closed_form_rate(r: Replica, input_tokens: int, output_tokens: int, target_s: float | None,
                      mix: _StepMix, poisson: bool = True) -> float | None:
    """The largest rate that meets the TPOT target and keeps the steady state within the scheduler's limits
    (max_num_batched_tokens, max_num_seqs, the KV cache) and the API server's (one request at a time,
    frontend_s each: without it a 0.5B model on a B200 was planned at 172 requests/s of 4,000-token prompts,
    3x the 56 the server passes on); None when nothing bounds it. TTFT is left to the caller: its queueing
    term is not monotone in the same way.

    Both bounds are bounds on y = rate x T (_StepMix), where the step is known: the limits bound the decode
    batch O y and the tokens per step (L + O) y by x = min(budget / (L + O), places / O), places =
    min(max_num_seqs, KV tokens / held) less queueing.SPARE_PLACES for an open loop, so rate <= x / E(x); the
    target bounds the step requests decode in (the mean step for a closed loop, _StepMix.request_step for an
    open one) at y_t, so rate <= y_t / E(y_t)."""
    cfg = r.config
    total = input_tokens + output_tokens
    places = run_places(r, input_tokens, output_tokens)  # max_num_seqs included
    if poisson and places >= 2 * queueing.SPARE_PLACES:  # at_rate: an open loop keeps one place free
        places -= queueing.SPARE_PLACES
    x = min(cfg.max_num_batched_tokens / total, places / max(output_tokens, 1))
    bound = x / mix.mean_step(x) if x > 0 else 0.0
    bound = min(bound, 1.0 / frontend_s(r, input_tokens))  # the API server, one request at a time
    if target_s is not None:  # an open loop's requests decode in the request step (at_rate)
        y_t = mix.y_at_request_step(target_s) if poisson else mix.y_at_step(target_s)
        if math.isfinite(y_t):  # inf: no step reaches the target, the limits alone bound the rate
            bound = min(bound, y_t / mix.mean_step(y_t) if y_t > 0 else 0.0)
    return None if not math.isfinite(bound) else bound * (1 - 1e-9)


def max_rate(r: Replica, input_tokens: int, output_tokens: int, ttft_slo_ms: float | None = None,
             tpot_slo_ms: float | None = None, poisson: bool = True) -> LoadPoint:
    """The largest request rate that is stable and meets both targets; raises SloUnreachableError with the
    binding target and the margin when even a lone request misses it. `poisson`: as at_rate (False for the
    rate of a closed loop)."""
    alone = zero_load(r, input_tokens, output_tokens)
    if ttft_slo_ms is not None and alone.ttft_ms > ttft_slo_ms:
        raise SloUnreachableError(
            "ttft", ttft_slo_ms, alone.ttft_ms, f"TTFT target {ttft_slo_ms:g} ms missed by "
            f"{alone.ttft_ms - ttft_slo_ms:,.0f} ms even for a lone request ({alone.ttft_ms:,.0f} ms to prefill "
            f"{input_tokens:,} tokens)")
    if tpot_slo_ms is not None and alone.tpot_ms > tpot_slo_ms:
        raise SloUnreachableError(
            "tpot", tpot_slo_ms, alone.tpot_ms, f"TPOT target {tpot_slo_ms:g} ms missed by "
            f"{alone.tpot_ms - tpot_slo_ms:.1f} ms even at batch 1 ({alone.tpot_ms:.1f} ms per token)")

    def ok(point: LoadPoint) -> bool:
        return (point.stable and (ttft_slo_ms is None or point.ttft_ms <= ttft_slo_ms)
                and (tpot_slo_ms is None or point.tpot_ms <= tpot_slo_ms))

    mix = _StepMix(r, input_tokens, output_tokens)  # one per shape: every rate below reuses its step terms

    def point(rate: float) -> LoadPoint:
        return at_rate(r, rate, input_tokens, output_tokens, mix, poisson)

    lo = 0.0
    hi = max(r.config.max_num_batched_tokens / ((input_tokens + output_tokens) * alone.tpot_ms * 1e-3),
             alone.requests_per_second)
    bound = _closed_form_rate(r, input_tokens, output_tokens, None if tpot_slo_ms is None else tpot_slo_ms * 1e-3,
                              mix, poisson)
    if bound is not None:
        first = point(bound)
        if ok(first):  # TPOT or a scheduler limit binds: the closed form is the answer
            return first
        hi = bound  # TTFT binds first: search below
    while ok(point(hi)) and hi < 1e6:
        lo, hi = hi, hi * 2
    while hi - lo > RATE_TOLERANCE * hi:
        mid = (lo + hi) / 2
        if ok(point(mid)):
            lo = mid
        else:
            hi = mid
    if lo == 0.0:
        return point(1e-9)
    return point(lo)



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
