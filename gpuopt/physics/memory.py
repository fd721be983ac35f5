"""Per-GPU memory as vLLM (V1 engine) accounts it: weights, activation peak, non-torch, CUDA graphs, KV blocks.

The budget (vllm/v1/worker/gpu_worker.py, see docs/memory.md):

    requested   = total_memory_reported x gpu_memory_utilization
    kv_cache    = requested - weights - activation_peak - non_torch - (cuda_graphs if the release counts them)
    num_blocks  = floor(kv_cache / (page_bytes x layers_per_group)),  page = block_size x bytes per token per layer
    tokens      = num_blocks x block_size (uniform models); the minimum over TP ranks and PP stages is used

Bytes per token per layer: 2 x max(1, kv_heads // TP) x head_dim x dtype bytes for MHA/GQA (heads are
replicated once TP exceeds them), kv_lora_rank + qk_rope_head_dim for MLA (not split by TP). Sliding-window
and chunked-local layers share one block pool with full-attention layers (vLLM's hybrid allocator) but need
only window-many tokens per request. Nothing here knows about prices, solvers or output formats.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from gpuopt.errors import InputError, NotModelledError
from gpuopt.hardware import GIB, GpuSpec
from gpuopt.physics import checkpoint_table, cuda_graphs, fp8_kv_backend, quant_sharding, sparse_mla, state_cache
from gpuopt.physics.architecture import DTYPE_BYTES, ModelArchitecture
from gpuopt.physics.context_limit import default_max_len, model_max_len, rope_cache_positions
from gpuopt.physics.cuda_graphs import GraphSettings
from gpuopt.physics.lora import lora_bytes, lora_problems
from gpuopt.physics.quantization import representative
from gpuopt.physics.serve_flags import block_sizes, flags
from gpuopt.physics.vllm_profile import (
    CudaGraphCalibration,
    StartupHeld,
    VllmProfile,
    canonical_release,
    get_profile,
    profiles,
    release_key,
    release_or_default,
)
from gpuopt.physics.vllm_support import builds_indexer, release_problem
from gpuopt.vocabulary import (
    KV_LAYER_KINDS,
    MAX_TOKENS,
    STATE_LAYER_KINDS,
    WINDOWED_LAYER_KINDS,
    KvCacheDtype,
    LayerKind,
    LinkKind,
    PerformanceMode,
    WeightFormat,
)

# Bytes per quantised linear weight, scales included.
#  int4 (AWQ/GPTQ W4A16, group size 128): 4-bit weight + an fp16 scale and a 4-bit zero point per group.
#  mxfp4 (OCP microscaling): 4-bit E2M1 values + one 8-bit E8M0 scale per block of 32.
#  fp8/int8: per-channel or per-tensor scales are negligible next to the weights.
WEIGHT_BYTES: dict[WeightFormat, float] = {
    "bf16": 2.0, "fp16": 2.0, "fp32": 4.0, "fp8": 1.0, "int8": 1.0,
    "int4": 0.5 + (2 + 0.5) / 128, "mxfp4": 0.5 + 1 / 32,
}
KV_BYTES: dict[str, float] = {"fp8": 1.0}

DTYPE_TO_FORMAT: dict[str, WeightFormat] = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32"}


@dataclass(frozen=True)
class ServingConfig:
    """The `vllm serve` knobs that change memory; None means "vLLM's default for this GPU and release"."""

    tensor_parallel: int = 1
    pipeline_parallel: int = 1
    precision: WeightFormat | None = None
    kv_cache_dtype: KvCacheDtype = "auto"
    max_model_len: int | None = None
    gpu_memory_utilization: float | None = None
    max_num_seqs: int | None = None
    max_num_batched_tokens: int | None = None
    block_size: int | None = None  # None: the release's default (16; 64 from 0.34)
    vllm_version: str | None = None
    interconnect: LinkKind | None = None  # None: GpuSpec.default_link (NVLink on a baseboard, else PCIe)
    enforce_eager: bool = False  # `--enforce-eager`: no CUDA graphs captured, none budgeted
    # `--compilation-config` / `-O<n>` / `--cuda-graph-sizes`: which graphs, at which sizes (cuda_graphs.py)
    cudagraphs: GraphSettings = field(default_factory=GraphSettings)
    language_model_only: bool = False  # `--language-model-only`: the vision tower is not loaded
    # `--data-parallel-size`: engines of tensor_parallel x pipeline_parallel GPUs each; a MoE model's expert
    # layers are split across all data_parallel x tensor_parallel GPUs (moe_shards)
    data_parallel: int = 1
    expert_parallel: bool = False  # `--enable-expert-parallel`: whole experts per GPU instead of slices
    # `--performance-mode` (v0.17+): "throughput" doubles the default max_num_seqs and max_num_batched_tokens
    # (EngineArgs._set_default_max_num_seqs_and_batched_tokens_args); values the user set stay as set
    performance_mode: PerformanceMode = "balanced"
    # `--no-enable-chunked-prefill`: a prompt runs whole in one step, so vLLM raises the default step budget to
    # max_model_len (0.10-0.11: exactly that; 0.12 on: max(max_model_len, the default)) and refuses a smaller
    # --max-num-batched-tokens
    chunked_prefill: bool = True
    # `--enable-lora --max-loras N --max-lora-rank R`: N adapter slots of rank R, their buffers allocated at
    # load time (physics/lora.py); 0 slots: LoRA off
    max_loras: int = 0
    max_lora_rank: int = 16
    # `--fully-sharded-loras`: A of column-parallel and B of row-parallel layers split over the TP group too
    fully_sharded_loras: bool = False
    # `--[no-]enable-extensible-kv-cache` (0.34+): None is the release's default (on from 0.34)
    extensible_kv_cache: bool | None = None
    # `--kv-cache-memory-bytes`: the KV cache of each GPU, set rather than measured (gpu_memory_utilization
    # and the extensible KV cache are then ignored; vLLM still runs the profiling pass, but checks nothing)
    kv_cache_memory_bytes: int | None = None
    # `--[no-]enable-prefix-caching`: None is vLLM's default (on; for hybrids only from 0.28). A hybrid's
    # Mamba / linear-attention layers hold 2-3 state pages a request with it, one without (state_cache)
    enable_prefix_caching: bool | None = None


@dataclass(frozen=True)
class ResolvedConfig:
    """A ServingConfig with every default filled in from the model, the GPU and the vLLM release."""

    tensor_parallel: int
    pipeline_parallel: int
    precision: WeightFormat
    kv_cache_dtype: KvCacheDtype
    max_model_len: int
    gpu_memory_utilization: float
    max_num_seqs: int
    max_num_batched_tokens: int
    block_size: int
    vllm_version: str
    interconnect: LinkKind = "pcie"
    enforce_eager: bool = False
    cudagraphs: GraphSettings = field(default_factory=GraphSettings)
    language_model_only: bool = False
    data_parallel: int = 1
    expert_parallel: bool = False
    max_loras: int = 0
    max_lora_rank: int = 16
    fully_sharded_loras: bool = False
    extensible_kv_cache: bool = False  # sized after warmup (0.34's default) rather than estimated
    kv_cache_memory_bytes: int | None = None  # `--kv-cache-memory-bytes`: the KV cache set, per GPU
    enable_prefix_caching: bool = True  # resolved: vLLM's default for the model and release when unset
    performance_mode: PerformanceMode = "balanced"  # `interactivity` captures every batch size up to 32

    @property
    def gpus(self) -> int:
        """GPUs of one engine (one data-parallel rank)."""
        return self.tensor_parallel * self.pipeline_parallel

    def moe_shards(self, arch: ModelArchitecture) -> int:
        """GPUs a routed-expert layer is split across. vLLM's FusedMoEParallelConfig.make (read in the 0.16.0
        wheel) flattens TP across DP for MoE layers: without expert parallelism each expert is tensor-sliced
        over data_parallel x tensor_parallel GPUs, with it whole experts are dealt over the same GPUs; either
        way one GPU holds 1/(dp x tp) of the routed experts. Dense layers and attention stay per engine."""
        return self.tensor_parallel * (self.data_parallel if arch.is_moe else 1)


@dataclass(frozen=True)
class KvGroup:
    """Layers of one attention kind on one stage, as vLLM's hybrid allocator groups them."""

    kind: LayerKind
    layers: int
    bytes_per_token_per_layer: float
    window: int | None = None
    state_bytes_per_layer: float = 0.0  # linear-attention / Mamba layers: constant state per request


@dataclass(frozen=True)
class RankMemory:
    """One GPU (the TP ranks of a stage are identical, so one per PP stage)."""

    pp_stage: int
    layers: int
    total_gib: float
    budget_gib: float
    weights_gib: float
    activation_gib: float
    non_torch_gib: float
    cuda_graph_gib: float
    cuda_graph_in_budget: bool
    kv_cache_gib: float
    kv_bytes_per_token: float
    num_blocks: int
    blocks_per_request: int
    kv_groups: tuple[KvGroup, ...] = field(default=())
    lora_gib: float = 0.0  # LoRA adapter slots' buffers, part of weights_gib as vLLM logs it
    # vLLM 0.34's extensible KV cache (VllmProfile.extensible_kv_cache): sized after warmup from the memory left
    extensible: bool = False
    startup_gib: float = 0.0  # held before the worker's start-up snapshot (CUDA context, NCCL)
    transient_gib: float = 0.0  # kept free for the profiled peak (activation + the CUDA-graph estimate)
    margin_gib: float = 0.0  # kept free besides: max(1 GiB, 0.75 x transient)
    # blocks a running request holds in the Mamba / linear-attention layers (state_cache: 1 page a layer group
    # without prefix caching, 2-3 with it); 0 for models without such layers
    state_blocks_per_request: int = 0
    # bytes one block id takes from the pool: a page in each of the layers that share it (kv_layout), the page
    # of a hybrid sized by hybrid_block_size -- what num_blocks divides the KV cache by
    block_bytes: float = 0.0

    @property
    def request_kv_gib(self) -> float:
        """KV cache one request of max_model_len takes from the pool: its blocks in every group, each a page in
        every layer sharing the block id. Not blocks x kv_bytes_per_token x block_size: a hybrid's block holds
        hybrid_block_size tokens and its linear-attention / Mamba groups take whole pages for their state."""
        return self.blocks_per_request * self.block_bytes / GIB

    @property
    def free_after_kv_gib(self) -> float:
        """What remains of the GPU after vLLM's budget (plus graphs when they sit outside it); with the
        extensible KV cache, what the sizing leaves uncommitted beside the activation peak: the start-up
        memory, the margin and the CUDA-graph estimate counted a second time."""
        if self.extensible:
            return (self.total_gib - self.weights_gib - self.activation_gib - self.non_torch_gib
                    - self.cuda_graph_gib - max(self.kv_cache_gib, 0.0))
        outside = 0.0 if self.cuda_graph_in_budget else self.cuda_graph_gib
        return self.total_gib - self.budget_gib - outside


@dataclass(frozen=True)
class MemoryEstimate:
    model: str
    gpu: str
    config: ResolvedConfig
    ranks: tuple[RankMemory, ...]
    kv_cache_tokens: int  # as vLLM logs "GPU KV cache size: N tokens" in this release
    max_concurrency: float  # requests of max_model_len tokens that fit at once
    fits: bool
    reason: str | None
    warnings: tuple[str, ...] = ()
    # a DSA model's MLA cache as its sparse backend stores it ("model": the model dtype, "fp8", "fp8_ds_mla");
    # None for every other model (sparse_mla.kv_format)
    dsa_kv_format: sparse_mla.KvFormat | None = None
    # the graphs vLLM captures (mode, piecewise and full sizes): what cuda_graph_gib counts
    cuda_graph_plan: cuda_graphs.CapturePlan | None = None

    @property
    def binding_rank(self) -> RankMemory:
        """The most loaded GPU: the one with the fewest KV blocks decides the capacity."""
        return min(self.ranks, key=lambda r: (r.num_blocks, -r.weights_gib))

    @property
    def effective_kv_tokens(self) -> int:
        """Tokens of context the replica can hold at once (for hybrids: in full-length requests)."""
        return int(self.max_concurrency * self.config.max_model_len)

    @property
    def kv_pool(self) -> KvPool:
        """The binding rank's block pool as vLLM's scheduler sees it (KvPool.from_estimate)."""
        return KvPool.from_estimate(self)

    @property
    def kv_gib_short(self) -> float:
        """How much KV memory is missing for one max-length request (0 when it fits)."""
        rank = self.binding_rank
        return max(0.0, rank.request_kv_gib - max(0.0, rank.kv_cache_gib))


# ---- validation --------------------------------------------------------------------------------


def default_precision(arch: ModelArchitecture) -> WeightFormat:
    if arch.quantization is not None:
        return arch.quantization.weight_format
    if arch.native_quantization == "mxfp4-experts":
        return "mxfp4"
    if arch.native_quantization == "fp8-block":
        return "fp8"
    return DTYPE_TO_FORMAT[arch.torch_dtype]


def precision_unsupported(gpu: GpuSpec, precision: WeightFormat, arch: ModelArchitecture,
                          vllm_version: str | None = None) -> str | None:
    """Why vLLM `vllm_version` (None: the default release) cannot run this weight format on this GPU (None
    when it can). A quantized checkpoint is judged by its own kernels, a model planned in a quantized format
    by those of the checkpoint that format stands for (quantization.representative: block FP8, AWQ int4,
    MXFP4 experts, INT8 W8A8), both by quantization.select_kernel's per-release rules -- so fp8 and int4 run
    on Turing from 0.14 (Marlin from sm75), and int4 already on 0.11's AWQ GEMM kernel."""
    q = arch.quantization
    if q is not None:
        if precision != q.weight_format:
            # vLLM loads a quantized checkpoint only in its own format (no re-quantizing AWQ to fp8, no bf16)
            return (f"{arch.hf_id} is a {q.method} {q.scheme} checkpoint ({q.weight_format}); it cannot be served "
                    f"as {precision}: use its base model for other precisions")
        path = q.kernel_path(gpu.compute_capability, vllm_version)
        return None if path.supported else f"{arch.hf_id} ({q.method} {q.scheme}): {path.note}"
    if precision == "mxfp4" and arch.native_quantization != "mxfp4-experts":
        return f"{arch.hf_id} has no MXFP4 checkpoint (mxfp4 is only for natively MXFP4 models such as gpt-oss)"
    stand_in = representative(precision)  # on ROCm too (compute_capability None: ROCm's methods per release)
    if stand_in is not None:
        path = stand_in.kernel_path(gpu.compute_capability, vllm_version)
        if not path.supported:
            return f"{precision} on {gpu.gpu} ({gpu.architecture}, sm{gpu.compute_capability}): {path.note}"
    return None


def release_unsupported(gpu: GpuSpec, vllm_version: str | None) -> str | None:
    """Why this vLLM release's wheels cannot run on this GPU at all (None when they can): no kernels of its
    generation in the build (VllmProfile.cubin_archs), with the releases that have them."""
    profile = get_profile(vllm_version)
    cc = gpu.compute_capability
    if cc is None or profile.runs_on(cc):
        return None
    release = release_or_default(vllm_version)
    why = f"vLLM {release}'s wheels carry no kernels for {gpu.gpu} (sm{cc})"
    known = profiles()
    here = known.index(profile)
    later = [p for p in known[here + 1:] if p.runs_on(cc)]
    if later:
        return f"{why}: plan it with --vllm-version {later[0].version} or newer"
    earlier = [i for i, p in enumerate(known[:here]) if p.runs_on(cc)]
    if earlier:
        return f"{why}: releases before {known[earlier[-1] + 1].version} carry them; plan it with one of those"
    return why


def gpu_unsupported(gpu: GpuSpec, precision: WeightFormat, arch: ModelArchitecture,
                    vllm_version: str | None = None) -> str | None:
    """Why vLLM cannot run this model in this weight format on this GPU (None when it can): the release's build
    (release_unsupported), the format's kernels (precision_unsupported), or a DSA model's sparse attention
    (sparse_mla.unsupported)."""
    return (release_unsupported(gpu, vllm_version) or precision_unsupported(gpu, precision, arch, vllm_version)
            or sparse_mla.unsupported(arch, gpu, vllm_version))


def validate(arch: ModelArchitecture, cfg: ServingConfig) -> list[str]:
    """Every problem with this combination, one line each (empty when valid)."""
    problems = [f"model {arch.hf_id}: field '{f}' is missing, so memory cannot be computed"
                for f in arch.missing_fields()]
    tp, pp = cfg.tensor_parallel, cfg.pipeline_parallel
    if tp < 1:
        problems.append(f"--tp must be >= 1 (got {tp})")
    elif arch.num_attention_heads % tp:
        problems.append(f"--tp {tp} does not divide the {arch.num_attention_heads} attention heads of {arch.hf_id}")
    elif not arch.is_mla and arch.num_key_value_heads >= tp and arch.num_key_value_heads % tp:
        problems.append(f"--tp {tp} does not divide the {arch.num_key_value_heads} KV heads of {arch.hf_id}")
    elif not arch.is_mla and arch.num_key_value_heads < tp and tp % arch.num_key_value_heads:
        problems.append(f"--tp {tp} is not a multiple of the {arch.num_key_value_heads} KV heads of {arch.hf_id}")
    if cfg.data_parallel < 1:
        problems.append(f"--dp must be >= 1 (got {cfg.data_parallel})")
    elif (arch.is_moe and cfg.expert_parallel and arch.num_experts and tp >= 1
          and tp * cfg.data_parallel > arch.num_experts):
        # whole experts are dealt over tp x dp GPUs: past the expert count some GPUs hold none, which gpuopt's
        # expert-parallel model (one busiest rank among ranks of E / ep experts) does not describe
        problems.append(f"--tp {tp} x --dp {cfg.data_parallel} with --enable-expert-parallel: more GPUs than the "
                        f"{arch.num_experts} routed experts of {arch.hf_id} (some would hold none; not modelled)")
    elif arch.is_moe and arch.moe_intermediate_size and tp >= 1 and not cfg.expert_parallel:
        # FusedMoE (vllm/model_executor/layers/fused_moe/layer.py, 0.16.0 wheel) asserts that the expert
        # intermediate size divides over the GPUs it is sliced across: tp x dp without expert parallelism
        shards = tp * cfg.data_parallel
        if arch.moe_intermediate_size % shards:
            problems.append(f"--tp {tp} x --dp {cfg.data_parallel}: vLLM slices each expert's "
                            f"{arch.moe_intermediate_size} intermediate channels of {arch.hf_id} over {shards} GPUs, "
                            f"which does not divide them; pass --enable-expert-parallel (whole experts per GPU) "
                            f"or sizes whose product divides {arch.moe_intermediate_size}")
    if tp >= 1 and cfg.data_parallel >= 1 and not problems:
        sharding = quant_sharding.tp_problem(arch, cfg.precision or default_precision(arch), tp, cfg.data_parallel,
                                             cfg.expert_parallel, cfg.vllm_version)
        if sharding is not None:
            problems.append(f"--tp {tp}: {sharding}")
    if pp < 1:
        problems.append(f"--pp must be >= 1 (got {pp})")
    elif pp > arch.num_hidden_layers:
        problems.append(f"--pp {pp} exceeds the {arch.num_hidden_layers} layers of {arch.hf_id}")
    if cfg.max_model_len is not None and cfg.max_model_len <= 0:
        problems.append(f"--max-model-len must be positive (got {cfg.max_model_len})")
    if cfg.kv_cache_memory_bytes is not None and cfg.kv_cache_memory_bytes <= 0:
        problems.append(f"--kv-cache-memory-bytes must be positive (got {cfg.kv_cache_memory_bytes})")
    if cfg.gpu_memory_utilization is not None and not 0 < cfg.gpu_memory_utilization <= 1:
        problems.append(f"--gpu-memory-utilization must be in (0, 1] (got {cfg.gpu_memory_utilization})")
    for name, value in (("--max-num-seqs", cfg.max_num_seqs), ("--max-num-batched-tokens", cfg.max_num_batched_tokens),
                        ("--block-size", cfg.block_size)):
        if value is not None and value <= 0:
            problems.append(f"{name} must be positive (got {value})")
        elif value is not None and value > MAX_TOKENS:  # past it, figures only overflow (1.5e9 GiB of activation)
            problems.append(f"{name} {value:,} is beyond any deployment gpuopt plans (at most {MAX_TOKENS:,})")
    if (unserved := release_problem(arch, cfg.vllm_version)) is not None:
        problems.append(unserved)
    return problems + lora_problems(arch, cfg.max_loras, cfg.max_lora_rank, cfg.vllm_version,
                                    tp=max(tp, 1), data_parallel=max(cfg.data_parallel, 1),
                                    expert_parallel=cfg.expert_parallel, fully_sharded=cfg.fully_sharded_loras)


CHECKPOINT_KV_DTYPE_FIRST = (0, 14)  # the first release whose EngineArgs resolves "auto" from a ModelOpt config


def checkpoint_kv_cache_dtype(arch: ModelArchitecture, kv_cache_dtype: KvCacheDtype,
                              vllm_version: str | None) -> KvCacheDtype:
    """The KV cache dtype vLLM runs for `--kv-cache-dtype kv_cache_dtype`: from 0.14 an `auto` of a ModelOpt
    checkpoint that quantises its KV cache to FP8 (`kv_cache_quant_algo: FP8`) becomes fp8_e4m3
    (EngineArgs.create_engine_config -> utils/torch_utils.resolve_kv_cache_dtype_string, read in the 0.14.0 to
    0.34.0 sources; 0.13.0 has no such step). Only ModelOpt configs are read that way, not compressed-tensors'
    kv_cache_scheme. Nemotron-3-Nano-30B-A3B-NVFP4: 3,072 KV bytes a token instead of 6,144."""
    q = arch.quantization
    if (kv_cache_dtype == "auto" and q is not None and q.method == "modelopt" and q.kv_cache_fp8
            and release_key(release_or_default(vllm_version)) >= CHECKPOINT_KV_DTYPE_FIRST):
        return "fp8"
    return kv_cache_dtype


def resolve(arch: ModelArchitecture, gpu: GpuSpec, cfg: ServingConfig) -> tuple[ResolvedConfig, VllmProfile]:
    problems = validate(arch, cfg)
    if problems:
        raise InputError(*problems)
    profile = get_profile(cfg.vllm_version)
    max_len = cfg.max_model_len or default_max_len(arch)  # vLLM's default (context_limit.py)
    if not max_len:
        raise InputError(f"{arch.hf_id} does not state max_position_embeddings: pass --max-model-len")
    seqs, batched = scheduler_limits(gpu, cfg, profile, max_len)
    ext = profile.extensible_kv_cache
    if cfg.extensible_kv_cache and ext is None:
        raise InputError(f"--enable-extensible-kv-cache is not a flag of vLLM {cfg.vllm_version or profile.version} "
                         "(it came in 0.34)")
    if cfg.extensible_kv_cache and cfg.kv_cache_memory_bytes:
        raise InputError("--enable-extensible-kv-cache with --kv-cache-memory-bytes: vLLM refuses it (\"it sizes the "
                         "KV cache from measured memory, which kv_cache_memory_bytes overrides\"); drop one")
    if (problem := cuda_graphs.settings_problem(cfg.cudagraphs)) is not None:
        raise InputError(problem)
    extensible = ext is not None and cfg.extensible_kv_cache is not False and not cfg.kv_cache_memory_bytes
    default_gmu = ext.gpu_memory_utilization_off if ext is not None and not extensible else \
        profile.gpu_memory_utilization
    resolved = ResolvedConfig(
        tensor_parallel=cfg.tensor_parallel,
        pipeline_parallel=cfg.pipeline_parallel,
        precision=cfg.precision or default_precision(arch),
        kv_cache_dtype=checkpoint_kv_cache_dtype(arch, cfg.kv_cache_dtype, cfg.vllm_version or profile.version),
        max_model_len=max_len,
        gpu_memory_utilization=cfg.gpu_memory_utilization or default_gmu,
        max_num_seqs=seqs,
        max_num_batched_tokens=batched,
        block_size=cfg.block_size or profile.default_block_size,
        # as numbers, so "0.010" or "0.08" is reported (and matched) as the 0.10 or 0.8 it selects
        vllm_version=canonical_release(cfg.vllm_version) if cfg.vllm_version else profile.version,
        interconnect=cfg.interconnect or gpu.default_link,
        enforce_eager=cfg.enforce_eager,
        cudagraphs=cfg.cudagraphs,
        language_model_only=cfg.language_model_only,
        data_parallel=cfg.data_parallel,
        expert_parallel=cfg.expert_parallel,
        max_loras=cfg.max_loras,
        max_lora_rank=cfg.max_lora_rank,
        fully_sharded_loras=cfg.fully_sharded_loras,
        extensible_kv_cache=extensible,
        kv_cache_memory_bytes=cfg.kv_cache_memory_bytes,
        enable_prefix_caching=(state_cache.prefix_caching_default(arch, cfg.vllm_version or profile.version)
                               if cfg.enable_prefix_caching is None else cfg.enable_prefix_caching),
        performance_mode=cfg.performance_mode,
    )
    if (v0 := v0_fallback(arch, gpu, resolved, profile)) is not None:
        raise NotModelledError(f"vLLM {resolved.vllm_version} starts its V0 engine for {v0}, which gpuopt does not "
                               "model (V1 only): plan it with --vllm-version 0.11 or newer")
    if (no_build := release_unsupported(gpu, resolved.vllm_version)) is not None:
        raise InputError(f"--gpu {gpu.gpu}: {no_build}")
    if (no_backend := fp8_kv_backend.unsupported(arch, gpu, resolved.kv_cache_dtype,
                                                 resolved.vllm_version)) is not None:
        raise InputError(f"--kv-cache-dtype fp8: {no_backend}; use --kv-cache-dtype auto")
    return resolved, profile


def v0_fallback(arch: ModelArchitecture, gpu: GpuSpec, cfg: ResolvedConfig, profile: VllmProfile) -> str | None:
    """What makes `vllm serve` of this release fall back to its V0 engine here (VllmProfile.v0_fallback), or
    None when it starts V1."""
    rule = profile.v0_fallback
    if rule is None:
        return None
    cc = gpu.compute_capability
    if cc is not None and cc < rule.min_compute_capability:
        return f"{gpu.gpu} (compute capability {cc / 10:.1f} < {rule.min_compute_capability / 10:.1f})"
    fp8_kv_ok = {"none": (), "hopper": (90,), "hopper-blackwell": (90, 100)}.get(rule.fp8_kv_cache_on)
    if cfg.kv_cache_dtype == "fp8" and fp8_kv_ok is not None and cc not in fp8_kv_ok:
        where = "no GPU" if not fp8_kv_ok else " and ".join(f"sm{c}" for c in fp8_kv_ok)
        return f"an fp8 KV cache on {gpu.gpu} (V1 takes it on {where} in this release)"
    if rule.fp32 and cfg.precision == "fp32":
        return "fp32 weights"
    if rule.pipeline_parallel and cfg.pipeline_parallel > 1:
        return "pipeline parallelism with the default executor"
    if rule.lora and cfg.max_loras:
        return "LoRA"
    if rule.state_layers and state_cache.is_hybrid(arch):
        return f"{arch.hf_id}'s Mamba / linear-attention layers"
    return None


def scheduler_limits(gpu: GpuSpec, cfg: ServingConfig, profile: VllmProfile, max_len: int) -> tuple[int, int]:
    """(max_num_seqs, max_num_batched_tokens) as `vllm serve` sets them (EngineArgs' defaults for this GPU and
    release, `--performance-mode`, chunked prefill off), and the settings its config checks refuse:
    SchedulerConfig.verify_max_model_len (read in the 0.10.1.1, 0.16, 0.27.1 and 0.29 wheels), the default
    budget without chunked prefill (0.10.1.1-0.16 wheels) and the --block-size choices (vllm_serve_flags.yaml)."""
    seqs, batched = profile.scheduler_defaults(gpu.gpu, gpu.memory_gib_reported)
    release = cfg.vllm_version or profile.version
    problems = []
    if cfg.performance_mode != "balanced" and "--performance-mode" not in flags(release):
        problems.append(f"--performance-mode is not a flag of vLLM {release} (it came in 0.17)")
    if cfg.performance_mode == "throughput":
        seqs, batched = 2 * seqs, 2 * batched
    if not cfg.chunked_prefill:  # a prompt runs whole: the default step budget grows to hold one
        batched = max_len if release_key(release) < (0, 12) else max(max_len, batched)
    sizes = block_sizes(release)
    if sizes is not None and cfg.block_size is not None and cfg.block_size not in sizes:
        problems.append(f"--block-size {cfg.block_size} is not a value of vLLM {release} "
                        f"(valid: {', '.join(map(str, sizes))})")
    defaults = seqs, batched
    seqs, batched = cfg.max_num_seqs or seqs, cfg.max_num_batched_tokens or batched
    if not cfg.chunked_prefill and batched < max_len:
        problems.append(f"--max-num-batched-tokens {batched} is below --max-model-len {max_len} with chunked "
                        f"prefill off: vLLM {release} refuses to start (a prompt must fit one step); raise it, "
                        f"lower --max-model-len or leave chunked prefill on")
    if batched < seqs:
        said = (("--max-num-batched-tokens", cfg.max_num_batched_tokens, defaults[1]),
                ("--max-num-seqs", cfg.max_num_seqs, defaults[0]))
        named = [f"{flag} {value}" if value else f"{flag[2:].replace('-', '_')} {default} (vLLM's default on "
                 f"{gpu.gpu})" for flag, value, default in said]
        problems.append(f"{named[0]} is below {named[1]}: vLLM {release} refuses to start (max_num_batched_tokens "
                        f"must be >= max_num_seqs); lower --max-num-seqs or raise --max-num-batched-tokens")
    if problems:
        raise InputError(*problems)
    return seqs, batched


# ---- the pieces ----------------------------------------------------------------------------------


def activation_dtype_bytes(arch: ModelArchitecture, precision: WeightFormat) -> float:
    """Activations, embeddings, norms and biases stay in the checkpoint's float type (fp32 only when asked)."""
    if precision in ("bf16", "fp16"):
        return 2.0
    if precision == "fp32":
        return 4.0
    return min(DTYPE_BYTES[arch.torch_dtype], 2.0)


def kv_dtype_bytes(arch: ModelArchitecture, precision: WeightFormat, kv_cache_dtype: KvCacheDtype) -> float:
    """`auto` follows the model dtype vLLM runs in (bf16/fp16 = 2 B, fp32 = 4 B); fp8 is 1 B."""
    if kv_cache_dtype == "fp8":
        return KV_BYTES["fp8"]
    return activation_dtype_bytes(arch, precision)


def _round_up(value: int, multiple: int) -> int:
    return -(-value // multiple) * multiple


def mxfp4_expert_scale(arch: ModelArchitecture, gpu: GpuSpec, tp: int) -> float:
    """How much larger vLLM makes MXFP4 expert weights than the checkpoint's shapes, on this GPU.

    vllm/model_executor/layers/fused_moe/oracle/mxfp4.py (`mxfp4_round_up_hidden_size_and_intermediate_size`,
    the same for these backends in v0.19 and v0.28) pads the experts to the tile of the kernel it selects:
    Marlin (the only CUDA backend below sm90: triton_kernels needs sm90-sm10x) rounds the hidden size up to 256
    and each rank's intermediate size to 128 -- gpt-oss's 2880 x 2880 experts become 3072 x 2944, 9 % more
    (A100 log: 13.72 GiB loaded, 0.90 GiB above the unpadded weights); the Triton backend of sm90 rounds the
    intermediate size to 64 only. Blackwell's FlashInfer TRT-LLM tiles changed between releases and are not
    applied here.
    """
    cc = gpu.compute_capability or 0
    hidden, inter = arch.hidden_size, (arch.moe_intermediate_size or 0) // tp
    if not hidden or not inter:
        return 1.0
    if 80 <= cc < 90:
        return _round_up(hidden, 256) * _round_up(inter, 128) / (hidden * inter)
    if cc == 90:
        return _round_up(inter, 64) / inter
    return 1.0


@dataclass(frozen=True)
class ExpertLayout:
    """How a replica's GPUs hold the routed experts: `held_shards` -- the experts' total over what the first GPU
    holds -- and `scale`, the kernel's padding of each GPU's slice (mxfp4_expert_scale)."""

    held_shards: float
    scale: float


def expert_layout(arch: ModelArchitecture, gpu: GpuSpec, cfg: ResolvedConfig) -> ExpertLayout:
    """The MXFP4 kernels pad each GPU's slice of an expert: whole experts with expert parallelism, dealt as
    vLLM's determine_expert_map does (E // ep each, the remainder one more on the first ranks: the first GPU,
    the one reported and the one a step waits for, holds ceil(E / ep))."""
    shards = cfg.moe_shards(arch)
    sliced = 1 if cfg.expert_parallel else shards
    held: float = shards
    if cfg.expert_parallel and arch.num_experts and shards > 1:
        held = arch.num_experts / math.ceil(arch.num_experts / shards)
    scale = mxfp4_expert_scale(arch, gpu, sliced) if cfg.precision == "mxfp4" else 1.0
    return ExpertLayout(held_shards=held, scale=scale)


def stage_layers(num_layers: int, pp: int) -> list[range]:
    """Decoder layers of each PP stage: an even split, remainder layers on the stages before the last
    (the last stage also carries the LM head and the sampler)."""
    sizes = [num_layers // pp] * pp
    for i in range(2, num_layers % pp + 2):
        sizes[-i if pp > 1 else 0] += 1
    out, start = [], 0
    for size in sizes:
        out.append(range(start, start + size))
        start += size
    return out


def indexer_layers(arch: ModelArchitecture, layers: range, vllm_version: str | None) -> int:
    """How many of these decoder layers hold a DSA indexer (its weights, its key cache, its scoring work):
    every MLA layer of a DSA model up to vLLM 0.23, from 0.24 only those the IndexCache pattern keeps
    (vllm_support.builds_indexer)."""
    if not arch.indexer_params:  # every model without DSA: no loop over its layers per estimate
        return 0
    return sum(builds_indexer(arch, i, vllm_version) for i in layers)


INDEXER_WK_UNQUANTISED_FIRST = (0, 20)  # wk fused with weights_proj into one unquantised linear


def indexer_linear_params(arch: ModelArchitecture, vllm_version: str | None) -> int:
    """The part of one DSA indexer that vLLM builds with the model's quant_config, so that a quantised checkpoint
    stores it in its format: wq_b (q_lora_rank -> index heads x dim) in every release that serves DSA (0.11.0-0.34.0
    sources), and wk (hidden -> dim) up to 0.19; the 0.20.0 wheel fuses wk with weights_proj into one
    MergedColumnParallelLinear built with quant_config=None. weights_proj and k_norm stay 16-bit. 0 without DSA."""
    modules = arch.indexer_modules
    fused = release_key(release_or_default(vllm_version)) >= INDEXER_WK_UNQUANTISED_FIRST
    return modules.wq_b + (0 if fused else modules.wk)


def replicated_linear_params(arch: ModelArchitecture, layers: range, indexers: int,
                             vllm_version: str | None) -> int:
    """The replicated parameters a checkpoint quantises like its attention: MLA's down-projections
    (LayerSums.replicated_linear) and the quantised part of the `indexers` DSA indexers these layers build."""
    return arch.layer_sums(layers).replicated_linear + indexers * indexer_linear_params(arch, vllm_version)


def replicated_params(arch: ModelArchitecture, layers: range, indexers: int) -> int:
    """Parameters every GPU of a stage holds whole (norms, routers, MLA down-projections, DSA indexers: the
    layer tables' `replicated`), less the indexers of the layers that build none (IndexCache: `indexers` of
    these layers build one, indexer_layers)."""
    return arch.layer_sums(layers).replicated - (len(layers) - indexers) * arch.indexer_params


@dataclass(frozen=True)
class StoredBytes:
    """Bytes per parameter of each kind of weight as the served checkpoint stores them.

    One rule for what vLLM holds (memory.weights_bytes) and what each decode step reads (latency.build_replica):
    a step streams the bytes the GPU stores, so the two must never disagree."""

    dense: float  # dense MLP and other non-attention linear projections
    attention: float  # attention / token-mixer projections, MLA down-projections, a DSA indexer's wq_b and wk
    expert: float  # routed MoE experts
    act: float  # the 16-bit rest: embeddings, LM head, norms, biases, routers


def stored_bytes(arch: ModelArchitecture, precision: WeightFormat) -> StoredBytes:
    """Linear layers and experts in the weight format (MXFP4 quantises experts only); a checkpoint served in its
    own format at its exact bytes per weight (scales and zero points included), with the modules it leaves in
    16-bit (attention, dense and shared MLPs) at 16-bit."""
    act = activation_dtype_bytes(arch, precision)
    linear = WEIGHT_BYTES[precision] if precision != "mxfp4" else act
    expert = WEIGHT_BYTES[precision]
    attention = linear
    q = arch.quantization
    if q is not None and precision == q.weight_format:
        expert = q.bytes_per_weight
        linear = act if q.experts_only else q.bytes_per_weight
        attention = act if q.experts_only or q.attention_excluded else q.bytes_per_weight
    return StoredBytes(dense=linear, attention=attention, expert=expert, act=act)


@dataclass(frozen=True)
class LayerWeights:
    """Bytes of a stage's decoder layers on one GPU: the routed experts apart from the rest (a decode step reads
    all of the rest but only the experts its tokens route to)."""

    dense: float
    experts: float


def layer_weight_bytes(arch: ModelArchitecture, precision: WeightFormat, tp: int, layers: range,
                       expert_scale: float = 1.0, expert_shards: float | None = None,
                       vllm_version: str | None = None) -> LayerWeights:
    """Bytes on one GPU of the decoder layers `layers` (see weights_bytes for the arguments).

    Linear layers and MoE experts are sharded by TP; norms, routers, MLA down-projections and a DSA indexer are
    replicated. Replicated linears (MLA down-projections, the indexer's quantised projections) are stored like
    the attention projections; the rest (norms, routers, the indexer's weights_proj) in 16-bit."""
    fmt = stored_bytes(arch, precision)
    act = fmt.act
    q = arch.quantization
    p = arch.layer_sums(layers)
    # mixers a checkpoint leaves in 16-bit layer by layer (Quantization.excluded_mixer_layers): 16-bit here
    mixer16 = repl16 = ffn16 = 0
    if q is not None and precision == q.weight_format and fmt.attention != act:
        for i in q.excluded_mixer_layers:
            if i in layers:
                mixer16 += arch.layer_params(i).attention
                repl16 += arch.layer_params(i).replicated_linear
    # and the dense MLPs and shared experts it leaves in 16-bit layer by layer (Quantization.excluded_ffn_layers:
    # every linear of the layer but its mixer's)
    if q is not None and precision == q.weight_format and fmt.dense != act:
        ffn16 = sum(arch.layer_params(i).linear - arch.layer_params(i).attention
                    for i in q.excluded_ffn_layers if i in layers)
    dense = ((p.linear - p.attention - ffn16) / tp * fmt.dense + (p.attention - mixer16) / tp * fmt.attention
             + (mixer16 + ffn16) / tp * act + p.bias / tp * act)
    indexers = indexer_layers(arch, layers, vllm_version)
    repl_linear = replicated_linear_params(arch, layers, indexers, vllm_version)
    dense += (replicated_params(arch, layers, indexers) - repl_linear) * act
    dense += (repl_linear - repl16) * fmt.attention + repl16 * act
    experts = p.experts / (expert_shards or tp) * fmt.expert * expert_scale
    return LayerWeights(dense=dense, experts=experts)


def weights_bytes(arch: ModelArchitecture, precision: WeightFormat, tp: int, layers: range,
                  first: bool, last: bool, vision: bool = True, expert_scale: float = 1.0,
                  expert_shards: float | None = None, vllm_version: str | None = None) -> float:
    """Bytes of weights on one GPU of a stage.

    The decoder layers as layer_weight_bytes stores them; the vocab-parallel embedding and LM head are sharded
    by TP but stay in 16-bit. The rotary cos/sin caches (positions x rotary_dim in the model dtype, positions
    from context_limit.rope_cache_positions) are counted too: vLLM's "Model loading took" includes them.
    `expert_scale` is the kernel's padding of routed experts (mxfp4_expert_scale); `expert_shards` the GPUs
    routed experts are split across (ResolvedConfig.moe_shards; default tp). `vllm_version` decides which
    layers build a DSA indexer (indexer_layers; None: the default release).
    The vision tower sits on the first stage unless `vision` is off (`--language-model-only`: vLLM v0.21+
    skips the modules a model marks as its towers when every modality limit is 0), split over the TP ranks like
    the language model: vLLM builds its encoders (SigLIP, Pixtral, Qwen2.5-VL's ViT, ...) from the same
    QKV/column/row-parallel layers, and `--mm-encoder-tp-mode` defaults to "weights" (its "data" mode, a whole
    encoder per rank, is not modelled).
    """
    act = activation_dtype_bytes(arch, precision)
    stage = layer_weight_bytes(arch, precision, tp, layers, expert_scale, expert_shards, vllm_version)
    total = stage.dense + stage.experts
    if first:
        total += (arch.embedding_params + (arch.vision_params() if vision else 0)) / tp * act
    if last:
        if not arch.tie_word_embeddings or not first:
            total += arch.lm_head_params / tp * act
        total += arch.final_norm_params * act
    total += rope_cache_positions(arch) * arch.rotary_dim * act
    return total


def activation_gib(arch: ModelArchitecture, profile: VllmProfile, cfg: ResolvedConfig, last_stage: bool,
                   v2_greedy_sampler: bool = False) -> float:
    """Peak of vLLM's profiling run on this stage (see ActivationCalibration for the form).

    `v2_greedy_sampler`: the V2 model runner's dummy sampler before 0.33 samples greedily (V2ModelRunner), so
    its share of the peak is the logits tensor in the model dtype -- rows x vocabulary x activation bytes --
    where the fitted term covers the fp32 sampling pipeline (copies, top-k/top-p sort, probabilities) that the
    V1 runner's dummy batch exercises."""
    cal = profile.activation
    act = activation_dtype_bytes(arch, cfg.precision)
    tokens = cfg.max_num_batched_tokens
    rows = min(cfg.max_num_seqs, tokens)
    forward = cal.intercept_gib + cal.hidden * tokens * arch.hidden_size * act / GIB
    if arch.is_moe:
        forward += cal.moe * tokens * (arch.experts_per_token or 1) * (arch.moe_intermediate_size or 0) * 2 * act / (
            cfg.tensor_parallel * GIB)
    if not last_stage:
        return forward
    if v2_greedy_sampler:
        return forward + rows * arch.vocab * act / GIB
    return forward + cal.sampler * rows * arch.vocab * 4 / GIB


CUSTOM_ALLREDUCE_WORLD_SIZES = (2, 4, 6, 8)
"""vllm/distributed/device_communicators/custom_all_reduce.py `_SUPPORTED_WORLD_SIZES` (v0.11 source)."""


def custom_allreduce_enabled(cfg: ResolvedConfig) -> bool:
    """Whether vLLM's custom all-reduce (and its IPC buffers) is active for this TP group.

    vLLM disables it for world sizes outside 2/4/6/8 and for more than two GPUs that are not fully
    NVLink-connected ("not supported on more than two PCIe-only GPUs"); two PCIe GPUs need peer-to-peer
    access, which GeForce cards lack and which the observed PCIe start-ups never show (RTX 4090 TP=2:
    non-torch 0.25 GiB, the TP=1 figure), so PCIe is modelled without it.
    """
    return (cfg.tensor_parallel in CUSTOM_ALLREDUCE_WORLD_SIZES and cfg.interconnect == "nvlink")


def non_torch_gib(profile: VllmProfile, cfg: ResolvedConfig, moe_shards: int = 1) -> float:
    """Non-torch memory that appears during the profiling run (outside PyTorch's allocator).

    What drives it: the CUDA/cuBLAS workspaces of one GPU (`tp1_gib`); with TP over NVLink, the custom
    all-reduce IPC buffers and NCCL's lazily-connected channel buffers (NVLS on NVSwitch systems), which
    is the jump from 0.25 to 2.1 GiB in v0.19 H100 logs (`tp_multi_gib`); over PCIe NCCL rings use a few
    small channels and custom all-reduce is off, so the figure stays near the single-GPU one
    (`tp_pcie_gib`). PP-only replicas have just the point-to-point send/recv buffers (`pp_only_gib`).
    A MoE model's expert layers split over `moe_shards` GPUs (data parallel) communicate across all of
    them (all-gather / reduce-scatter or all-to-all): counted as a TP group of that size (no start-up
    with data parallelism is logged in ../shared/data).
    """
    nt = profile.non_torch
    group = replace(cfg, tensor_parallel=max(cfg.tensor_parallel, moe_shards))
    if group.tensor_parallel > 1:
        if custom_allreduce_enabled(group):
            return nt.tp_multi_gib
        return nt.tp_pcie_gib if nt.tp_pcie_gib is not None else nt.tp1_gib
    if cfg.pipeline_parallel > 1:
        return nt.pp_only_gib
    return nt.tp1_gib


def startup_held_gib(held: StartupHeld, cfg: ResolvedConfig) -> float:
    """Memory held before vLLM's start-up snapshot on each GPU of this configuration: the NVLink figure when
    the engine's GPUs (or its data-parallel peers) are joined by NVLink, else the one-GPU figure -- GPUs joined
    over PCIe hold NCCL's few PCIe channels and no NVLS or custom all-reduce buffers, as in non_torch_gib."""
    joined = cfg.gpus * cfg.data_parallel > 1 and cfg.interconnect == "nvlink"
    return held.tp_multi_gib if joined else held.tp1_gib


def graph_plan(arch: ModelArchitecture, gpu: GpuSpec, cfg: ResolvedConfig) -> cuda_graphs.CapturePlan:
    """The CUDA graphs vLLM captures for this model and configuration (cuda_graphs.model_plan)."""
    return cuda_graphs.model_plan(arch, gpu, cfg.vllm_version, cfg.precision, cfg.max_num_seqs,
                                  cfg.max_num_batched_tokens, interactivity=cfg.performance_mode == "interactivity",
                                  enforce_eager=cfg.enforce_eager, settings=cfg.cudagraphs,
                                  language_model_only=cfg.language_model_only)


def cuda_graph_gib(calibration: CudaGraphCalibration, arch: ModelArchitecture, gpu: GpuSpec, cfg: ResolvedConfig,
                   layers: int, plan: cuda_graphs.CapturePlan) -> float:
    """CUDA-graph memory of a GPU holding `layers` layers (cuda_graphs.graph_gib)."""
    return cuda_graphs.graph_gib(calibration, arch, gpu, layers=layers, tp=cfg.tensor_parallel,
                                 max_num_seqs=cfg.max_num_seqs, max_num_batched_tokens=cfg.max_num_batched_tokens,
                                 vllm_version=cfg.vllm_version, precision=cfg.precision, lora=cfg.max_loras > 0,
                                 plan=plan, language_model_only=cfg.language_model_only)


def on_v2_runner(profile: VllmProfile, arch: ModelArchitecture, gpu: GpuSpec, cfg: ResolvedConfig) -> bool:
    """Whether this release starts the model on vLLM's V2 model runner (VllmProfile.v2_model_runner)."""
    runner = profile.v2_model_runner
    if runner is None:
        return False
    quantized = cfg.precision not in ("bf16", "fp16", "fp32")
    return runner.runs(arch.hf_architecture, arch.is_moe, state_cache.is_hybrid(arch), quantized,
                       rocm=gpu.compute_capability is None)  # no CUDA compute capability: an AMD GPU


# What the runner a model starts on (`v2`: on_v2_runner) decides of its memory.

def graph_calibration(profile: VllmProfile, v2: bool) -> CudaGraphCalibration:
    """The CUDA-graph calibration of the model runner that captures the graphs."""
    runner = profile.v2_model_runner
    if v2 and runner is not None and runner.cuda_graph is not None:
        return runner.cuda_graph
    return profile.cuda_graph


def graphs_in_budget(profile: VllmProfile, v2: bool) -> bool:
    """Whether vLLM subtracts its CUDA-graph estimate from the KV budget: from 0.20, except for models that
    0.22-0.28 run on the V2 model runner, whose estimate was a stub returning 0 (V2ModelRunner.profiles_graphs)."""
    if not profile.cudagraph_in_budget:
        return False
    runner = profile.v2_model_runner
    return runner is None or runner.profiles_graphs or not v2


def v2_greedy_sampler(profile: VllmProfile, v2: bool) -> bool:
    """Whether the profiling run's sampler is the V2 runner's greedy dummy pass (0.22-0.32: V2ModelRunner)."""
    runner = profile.v2_model_runner
    return v2 and runner is not None and not runner.sampler_warmup


def indexer_bytes_per_token(arch: ModelArchitecture) -> float:
    """DSA indexer keys per token per layer: vLLM stores them as fp8 with one fp32 scale per 128 values
    (DeepseekV32IndexerCache: head_size = index_head_dim + index_head_dim // 128 x 4, uint8)."""
    if not (arch.is_mla and arch.index_head_dim):
        return 0.0
    return arch.index_head_dim + arch.index_head_dim // 128 * 4


def kv_bytes_per_token_per_layer(arch: ModelArchitecture, tp: int, kv_bytes: float,
                                 dsa: sparse_mla.KvFormat | None = None) -> float:
    """Bytes a token's KV takes in one attention layer of one GPU at `kv_bytes` per value. A DSA model
    (sparse MLA) stores its latent in the layout its backend dictates on the GPU (`dsa`, from
    sparse_mla.kv_format; None: FlashMLA's, fp8_ds_mla for an 8-bit cache -- 656 B, not 576)."""
    if arch.indexer_params:
        fmt = dsa or ("fp8_ds_mla" if kv_bytes == 1 else "model")
        return sparse_mla.bytes_per_token_per_layer(arch, fmt, kv_bytes)
    return arch.kv_values_per_token_per_layer(tp) * kv_bytes


def dsa_format(arch: ModelArchitecture, gpu: GpuSpec, cfg: ResolvedConfig) -> sparse_mla.KvFormat:
    """The DSA cache layout of this configuration (sparse_mla.kv_format)."""
    return sparse_mla.kv_format(arch, gpu.compute_capability, cfg.kv_cache_dtype, cfg.tensor_parallel,
                                cfg.vllm_version)


def kv_groups(arch: ModelArchitecture, layers: range, tp: int, kv_bytes: float,
              act_bytes: float = 2.0, vllm_version: str | None = None,
              dsa: sparse_mla.KvFormat | None = None, sliding_as_full: bool = False,
              chunked_as_full: bool = False) -> tuple[KvGroup, ...]:
    """Layers of this stage that keep a KV cache or a per-sequence state, grouped by kind
    (cross-attention layers keep the encoder's KV, not the text's, and are left out). A DSA model's index
    keys are spread over its MLA layers: all of them hold one, or with IndexCache only the layers that
    build an indexer (indexer_layers), which vLLM pages as their own cache layers. `sliding_as_full`
    (vLLM 0.8-0.9.0): windowed layers next to full ones are cached at full length; `chunked_as_full`
    (0.10.1-0.13): chunked-local layers next to full ones are (the hybrid allocator is off for them)."""
    per_layer = kv_bytes_per_token_per_layer(arch, tp, kv_bytes, dsa)
    counts = arch.layer_kind_counts(layers)
    merged = WINDOWED_LAYER_KINDS if sliding_as_full else ("chunked",) if chunked_as_full else ()
    if counts.get("full") and any(k in counts for k in merged):
        counts = {k: n for k, n in counts.items() if k not in merged} | {
            "full": counts["full"] + sum(counts.get(k, 0) for k in merged)}
    groups = []
    for kind in KV_LAYER_KINDS:
        n = counts.get(kind, 0)
        if n:
            window = arch.sliding_window if kind in WINDOWED_LAYER_KINDS else None
            extra = (indexer_bytes_per_token(arch) * indexer_layers(arch, layers, vllm_version) / n
                     if kind == "mla" else 0.0)
            groups.append(KvGroup(kind=kind, layers=n, bytes_per_token_per_layer=per_layer + extra, window=window))
    for kind in STATE_LAYER_KINDS:
        n = counts.get(kind, 0)
        if n:
            groups.append(KvGroup(kind=kind, layers=n, bytes_per_token_per_layer=0.0,
                                  state_bytes_per_layer=arch.state_bytes_per_layer(kind, tp, act_bytes)))
    return tuple(groups)


def hybrid_block_size(groups: tuple[KvGroup, ...], block_size: int, vllm_version: str | None = None) -> int:
    """vLLM's attention block size for attention + Mamba/linear-attention hybrids.

    vLLM raises the attention block size to the smallest multiple of an alignment whose page holds one
    layer's state ("Setting attention block size to N tokens to ensure that attention page size is >= mamba
    page size"); the state page is padded to it. The alignment is the attention kernel's 16 tokens up to
    0.19 (vllm/model_executor/models/config.py HybridAttentionMambaModelConfig, 0.11.0-0.19.0 wheels), and
    from 0.20 the larger of that and the configured block size (vllm/platforms/interface.py, 0.20.0, 0.21.0,
    0.27.1, 0.29.0, 0.33.0 and 0.34.0 wheels): 0.34's default block of 64 makes Qwen3-Next's block 576
    tokens instead of 544. Models without state layers keep `block_size`. `vllm_version` None: the
    default release.
    """
    state = max((g.state_bytes_per_layer for g in groups), default=0.0)
    per_token = max((g.bytes_per_token_per_layer for g in groups), default=0.0)
    if not state or not per_token:
        return block_size
    align = max(16, block_size) if release_key(release_or_default(vllm_version)) >= (0, 20) else 16
    needed = align * math.ceil(state / (align * per_token))
    return max(block_size, needed)


IN_FLIGHT_FIRST = (0, 26)  # the first release whose windowed KV specs reserve every in-flight batch's tokens


def in_flight_tokens(cfg: ResolvedConfig, profile: VllmProfile, v2: bool) -> int:
    """Tokens a request's windowed (sliding, chunked-local) layers keep beyond their window: the step being
    scheduled, and from 0.26 every batch in flight (VllmConfig.max_in_flight_tokens = max_concurrent_batches x
    max_num_batched_tokens, read in the 0.26.0 to 0.34.0 sources; 0.25 reserves max_num_batched_tokens): out-of-
    window blocks are freed as tokens are processed, so a step still running holds its blocks. Concurrent
    batches: the PP stages, and with async scheduling one more on the V2 model runner, 2 on the V1 runner
    without PP. Async scheduling is taken at the release's default (on from 0.14); `--no-async-scheduling`
    passed to a server is not read here."""
    batched = cfg.max_num_batched_tokens
    if release_key(cfg.vllm_version) < IN_FLIGHT_FIRST:
        return batched
    pp = cfg.pipeline_parallel
    if not profile.async_scheduling_default:
        return pp * batched
    return (pp + 1 if v2 else (2 if pp <= 1 else pp)) * batched


def _blocks_for(group: KvGroup, max_model_len: int, block_size: int, batched_tokens: int,
                state_pages: Mapping[LayerKind, int] | None = None) -> int:
    """Blocks one request of max_model_len tokens needs in one layer of this group (vLLM's KV specs);
    `batched_tokens`: the tokens in flight a windowed layer keeps beyond its window (in_flight_tokens);
    `state_pages`: pages a request holds in each state layer kind (state_cache.pages_per_request; default 1)."""
    if group.kind == "sliding" and group.window:
        return math.ceil(min(group.window - 1 + batched_tokens, max_model_len) / block_size) + 1
    if group.kind == "chunked" and group.window:
        return math.ceil(min(group.window + batched_tokens, max_model_len) / block_size)
    if group.kind in STATE_LAYER_KINDS:
        return (state_pages or {}).get(group.kind, 1)  # "none": one page; "align" (prefix caching): 2-3
    return math.ceil(max_model_len / block_size)


def kv_layout(groups: tuple[KvGroup, ...]) -> tuple[int, list[tuple[KvGroup, int]]]:
    """vLLM's grouping: (layers sharing one block id, [(group kind, number of such groups)]).

    One kind: every layer shares each block id (page = sum over layers). Several kinds (hybrid): layers are
    split into groups of `group_size` = the smallest kind's count (the largest when max < 1.5 x min); each
    group takes block ids from one shared pool.
    """
    if len(groups) <= 1:
        return (groups[0].layers if groups else 0), [(g, 1) for g in groups]
    counts = [g.layers for g in groups]
    lo, hi = min(counts), max(counts)
    size = hi if hi < 1.5 * lo else lo
    return size, [(g, math.ceil(g.layers / size)) for g in groups]


@dataclass(frozen=True)
class KvPool:
    """The KV blocks of one engine and what a request takes from them, as vLLM's hybrid allocator hands them
    out: every request takes blocks from one pool in each KV group; a full-attention group ceil(tokens /
    block_size) of them, a sliding-window group at most `window_blocks`, a linear-attention / Mamba group
    `state_groups` pages for its state whatever its length (2-3 a group with prefix caching: state_cache).

    Why the latency model needs it and not just the KV tokens vLLM logs: that figure is in requests of
    max_model_len. A state page costs as much as an attention block (vLLM sizes the attention block to the
    state page: hybrid_block_size), so a short request of a hybrid holds far more than its tokens --
    Qwen3.5-35B-A3B on one H100 at 32k context on 0.33: 168 blocks of 1,056 tokens, a 1,000-token request
    holds 1 + 9 of them, so 16 run at once, not the 134 its 134,268 logged tokens suggest. Likewise a
    sliding-window layer group holds a short request whole."""

    block_size: int
    num_blocks: int
    full_groups: int = 1
    window_groups: int = 0
    window_blocks: int = 0
    state_groups: int = 0

    @classmethod
    def plain(cls, block_size: int, kv_tokens: int) -> KvPool:
        """One full-attention group (a model without sliding-window or state layers)."""
        return cls(block_size=block_size, num_blocks=max(1, kv_tokens // block_size))

    @classmethod
    def from_estimate(cls, memory: MemoryEstimate) -> KvPool:
        """The binding rank's pool (memory.kv_layout's groups; the block size hybrid_block_size gives)."""
        rank = memory.binding_rank
        _, layout = kv_layout(rank.kv_groups)
        if not layout or rank.num_blocks <= 0:
            return cls.plain(memory.config.block_size, memory.effective_kv_tokens)
        bs = hybrid_block_size(rank.kv_groups, memory.config.block_size, memory.config.vllm_version)
        windowed = [(g, n) for g, n in layout if g.window]
        window = max((g.window or 0 for g, _ in windowed), default=0)
        return cls(block_size=bs, num_blocks=rank.num_blocks,
                   full_groups=sum(n for g, n in layout if not g.window and g.kind not in STATE_LAYER_KINDS),
                   window_groups=sum(n for _, n in windowed), state_groups=rank.state_blocks_per_request,
                   window_blocks=math.ceil(max(window - 1, 0) / bs) + 2 if windowed else 0)

    def blocks_held(self, tokens: float) -> float:
        """Blocks a request with `tokens` tokens in the cache holds (fractional: a mean over requests)."""
        per_group = tokens / self.block_size
        window = min(per_group, self.window_blocks) if self.window_groups else 0.0
        return self.full_groups * per_group + self.window_groups * window + self.state_groups


# ---- the estimate --------------------------------------------------------------------------------


def estimate(arch: ModelArchitecture, gpu: GpuSpec, cfg: ServingConfig) -> MemoryEstimate:
    resolved, profile = resolve(arch, gpu, cfg)
    return estimate_resolved(arch, gpu, resolved, profile)


def estimate_resolved(arch: ModelArchitecture, gpu: GpuSpec, cfg: ResolvedConfig,
                      profile: VllmProfile) -> MemoryEstimate:
    tp, pp = cfg.tensor_parallel, cfg.pipeline_parallel
    total = gpu.memory_gib_reported
    budget = math.ceil(total * cfg.gpu_memory_utilization * GIB) / GIB
    kv_b = kv_dtype_bytes(arch, cfg.precision, cfg.kv_cache_dtype)
    act_b = activation_dtype_bytes(arch, cfg.precision)
    dsa = dsa_format(arch, gpu, cfg)
    v2 = on_v2_runner(profile, arch, gpu, cfg)
    in_budget = graphs_in_budget(profile, v2)
    greedy = v2_greedy_sampler(profile, v2)
    graphs = graph_calibration(profile, v2)
    plan = graph_plan(arch, gpu, cfg)
    pages = {kind: state_cache.pages_per_request(kind, arch, gpu.compute_capability, cfg.vllm_version,
                                                 cfg.enable_prefix_caching)
             for kind in STATE_LAYER_KINDS if kind in arch.layer_kind_prefix}
    warnings: list[str] = []
    if cfg.extensible_kv_cache:
        warnings.append(f"vLLM {cfg.vllm_version} sizes the KV cache after warmup (extensible KV cache); gpuopt "
                        "models it from vLLM's source, and no start-up log of this release has checked it yet")
    if greedy and cfg.max_loras:
        warnings.append("LoRA on the V2 model runner (vLLM 0.22-0.32): a cold torch.compile (no compile cache yet, "
                        "as on a fresh pod) raised the profiled activation peak by 0.65-0.94 GiB in logged 0.27 "
                        "start-ups with 1-64 adapter slots; the KV cache may come out that much smaller than "
                        "printed (docs/memory.md)")
    if (known_bad := checkpoint_table.caution(arch.hf_id, tp * pp)) is not None:
        warnings.append(known_bad)
    if arch.cross_attention_layers:
        warnings.append(f"{arch.cross_attention_layers} cross-attention layers keep vision-token KV that is "
                        "not modelled")
    if arch.multimodal and not arch.vision_params_b and not cfg.language_model_only:
        warnings.append("vision encoder size unknown in the registry: its weights and profiling activation "
                        "are not counted")
    ranks = []
    stages = stage_layers(arch.num_hidden_layers, pp)
    shards = cfg.moe_shards(arch)
    experts = expert_layout(arch, gpu, cfg)
    for s, layers in enumerate(stages):
        first, last = s == 0, s == pp - 1
        w = weights_bytes(arch, cfg.precision, tp, layers, first, last, vision=not cfg.language_model_only,
                          expert_scale=experts.scale, expert_shards=experts.held_shards,
                          vllm_version=cfg.vllm_version) / GIB
        lora = lora_bytes(arch, tp, layers, first, last, shards, cfg.expert_parallel, cfg.vllm_version,
                          cfg.max_loras, cfg.max_lora_rank, act_b, cfg.fully_sharded_loras) / GIB
        w += lora
        a = activation_gib(arch, profile, cfg, last, greedy)
        nt = non_torch_gib(profile, cfg, shards)
        if profile.startup_held is not None:  # 0.8-0.9.0: absolute peak and all non-torch memory
            nt += startup_held_gib(profile.startup_held, cfg)
            a += cfg.max_num_batched_tokens * arch.hidden_size * act_b / GIB  # the runner's inputs_embeds
        cg = cuda_graph_gib(graphs, arch, gpu, cfg, len(layers), plan)
        ext = profile.extensible_kv_cache if cfg.extensible_kv_cache else None
        startup = transient = margin = 0.0
        if cfg.kv_cache_memory_bytes:  # set, not measured: vLLM reserves exactly this (gpu_worker.py)
            kv = cfg.kv_cache_memory_bytes / GIB
        elif ext is None:
            kv = budget - w - a - nt - (cg if in_budget else 0.0)
        else:  # 0.34: measure_kv_cache_bytes after warmup (ExtensibleKvCache)
            startup = startup_held_gib(ext.startup, cfg)
            used = w + nt + cg  # the captured graphs' pool is resident
            transient = a + cg  # peak_activation_memory: the profiled peak plus the CUDA-graph estimate
            margin = max(ext.margin_floor_gib, ext.margin_fraction * transient)
            kv = min(budget - used, total - startup - used - margin) - transient
        groups = kv_groups(arch, layers, tp, kv_b, act_b, cfg.vllm_version, dsa, profile.sliding_window_as_full,
                           profile.chunked_local_as_full)
        size, layout = kv_layout(groups)
        block = hybrid_block_size(groups, cfg.block_size, cfg.vllm_version)
        page = max(max((block * g.bytes_per_token_per_layer for g in groups), default=0.0),
                   max((g.state_bytes_per_layer for g in groups), default=0.0))
        block_bytes = page * size
        blocks = int(max(0.0, kv) * GIB // block_bytes) if block_bytes else 0
        in_flight = in_flight_tokens(cfg, profile, v2)
        per_request = sum(n * _blocks_for(g, cfg.max_model_len, block, in_flight, pages) for g, n in layout)
        state_blocks = sum(n * pages[g.kind] for g, n in layout if g.kind in STATE_LAYER_KINDS)
        ranks.append(RankMemory(
            pp_stage=s, layers=len(layers), total_gib=total, budget_gib=budget, weights_gib=w, activation_gib=a,
            non_torch_gib=nt, cuda_graph_gib=cg, cuda_graph_in_budget=in_budget,
            kv_cache_gib=kv, kv_bytes_per_token=sum(g.layers * g.bytes_per_token_per_layer for g in groups),
            num_blocks=blocks, blocks_per_request=max(per_request, 1), kv_groups=groups, lora_gib=lora,
            extensible=ext is not None, startup_gib=startup, transient_gib=transient, margin_gib=margin,
            state_blocks_per_request=state_blocks, block_bytes=block_bytes))
    binding = min(ranks, key=lambda r: r.num_blocks)
    n_groups = sum(n for _, n in kv_layout(binding.kv_groups)[1]) or 1
    concurrency = binding.num_blocks / binding.blocks_per_request
    if profile.kv_tokens_report == "concurrency":
        tokens = int(concurrency * cfg.max_model_len)
    else:
        tokens = binding.num_blocks // n_groups * hybrid_block_size(binding.kv_groups, cfg.block_size,
                                                                    cfg.vllm_version)
    reason = None
    worst = min(ranks, key=lambda r: r.kv_cache_gib)
    if cfg.kv_cache_memory_bytes and (overflow := _set_cache_overflow(ranks, total)):
        reason = overflow
    elif worst.weights_gib > worst.budget_gib and not cfg.kv_cache_memory_bytes:
        reason = (f"weights need {worst.weights_gib:.2f} GiB per GPU but vLLM's budget is {worst.budget_gib:.2f} GiB "
                  f"({total:.2f} GiB x {cfg.gpu_memory_utilization})")
    elif worst.kv_cache_gib <= 0 and worst.extensible:
        device = total - worst.startup_gib - worst.margin_gib
        bound = (f"the {device:.2f} GiB vLLM can commit ({total:.2f} GiB less {worst.startup_gib:.2f} held at start-up "
                 f"and a {worst.margin_gib:.2f} GiB margin)" if device <= worst.budget_gib else
                 f"the {worst.budget_gib:.2f} GiB budget ({total:.2f} GiB x {cfg.gpu_memory_utilization})")
        reason = (f"no memory left for the KV cache: {worst.weights_gib:.2f} GiB weights + {worst.non_torch_gib:.2f} "
                  f"non-torch + {worst.cuda_graph_gib:.2f} CUDA graphs + {worst.transient_gib:.2f} kept for "
                  f"transients exceed {bound} by {-worst.kv_cache_gib:.2f} GiB")
    elif worst.kv_cache_gib <= 0:
        reason = (f"no memory left for the KV cache: {worst.weights_gib:.2f} GiB weights + {worst.activation_gib:.2f} "
                  f"activation + {worst.non_torch_gib:.2f} non-torch"
                  + (f" + {worst.cuda_graph_gib:.2f} CUDA graphs" if worst.cuda_graph_in_budget else "")
                  + f" exceed the {worst.budget_gib:.2f} GiB budget by {-worst.kv_cache_gib:.2f} GiB")
    elif binding.num_blocks < binding.blocks_per_request:
        reason = (f"one request of max_model_len {cfg.max_model_len} needs {binding.request_kv_gib:.2f} GiB of KV "
                  "cache but only "
                  f"{binding.kv_cache_gib:.2f} GiB is available")
    return MemoryEstimate(model=arch.hf_id, gpu=gpu.gpu, config=cfg, ranks=tuple(ranks), kv_cache_tokens=tokens,
                          max_concurrency=concurrency, fits=reason is None, reason=reason,
                          warnings=tuple(warnings), dsa_kv_format=dsa if arch.indexer_params else None,
                          cuda_graph_plan=plan)


def _set_cache_overflow(ranks: list[RankMemory], total: float) -> str | None:
    """Why a KV cache set by --kv-cache-memory-bytes does not fit beside the rest of the heaviest GPU, or None:
    vLLM checks nothing and runs out of memory allocating it."""
    heaviest = max(ranks, key=lambda r: r.weights_gib + r.activation_gib + r.non_torch_gib + r.cuda_graph_gib)
    need = (heaviest.weights_gib + heaviest.activation_gib + heaviest.non_torch_gib + heaviest.cuda_graph_gib
            + heaviest.kv_cache_gib)
    if need <= total:
        return None
    return (f"--kv-cache-memory-bytes {heaviest.kv_cache_gib:.2f} GiB + {heaviest.weights_gib:.2f} weights + "
            f"{heaviest.activation_gib:.2f} activation + {heaviest.non_torch_gib:.2f} non-torch + "
            f"{heaviest.cuda_graph_gib:.2f} CUDA graphs need {need:.2f} GiB of the {total:.2f} GiB GPU: vLLM "
            "checks nothing and runs out of memory allocating it")


def max_model_len_that_fits(arch: ModelArchitecture, gpu: GpuSpec, cfg: ResolvedConfig,
                            profile: VllmProfile) -> int:
    """Largest max_model_len (a multiple of block_size) for which one request fits; 0 if none."""
    lo, hi = 0, cfg.max_model_len
    while lo < hi:
        mid = (lo + hi + 1) // 2
        mid_cfg = replace(cfg, max_model_len=mid)
        if estimate_resolved(arch, gpu, mid_cfg, profile).fits:
            lo = mid
        else:
            hi = mid - 1
    return lo // cfg.block_size * cfg.block_size


def suggest_fixes(arch: ModelArchitecture, gpu: GpuSpec, cfg: ResolvedConfig, profile: VllmProfile) -> list[str]:
    """Single changes that make a non-fitting configuration fit, smallest first."""
    fixes: list[str] = []

    def fits(**changes: object) -> bool:
        """Whether the changed configuration fits -- and is one `resolve` accepts for this release, so a
        suggestion never draws an error: a TP cutting FP8 blocks in this release, LoRA limits, an fp8 KV cache
        that would start vLLM's V0 engine."""
        new = replace(cfg, **changes)  # type: ignore[arg-type]
        if validate(arch, ServingConfig(tensor_parallel=new.tensor_parallel, pipeline_parallel=new.pipeline_parallel,
                                        data_parallel=new.data_parallel, expert_parallel=new.expert_parallel,
                                        precision=new.precision, vllm_version=new.vllm_version,
                                        max_loras=new.max_loras, max_lora_rank=new.max_lora_rank,
                                        fully_sharded_loras=new.fully_sharded_loras)):
            return False
        if v0_fallback(arch, gpu, new, profile) is not None:
            return False
        return estimate_resolved(arch, gpu, new, profile).fits

    if (cfg.kv_cache_dtype == "auto" and fp8_kv_backend.unsupported(arch, gpu, "fp8", cfg.vllm_version) is None
            and fits(kv_cache_dtype="fp8")):
        fixes.append("--kv-cache-dtype fp8")
    smaller: tuple[WeightFormat, ...] = ("fp8", "int4")
    for precision in smaller:
        if (WEIGHT_BYTES[precision] < WEIGHT_BYTES[cfg.precision]
                and gpu_unsupported(gpu, precision, arch, cfg.vllm_version) is None
                and fits(precision=precision)):
            fixes.append(f"--precision {precision}")
            break
    tp = cfg.tensor_parallel * 2
    while tp <= 16:
        if fits(tensor_parallel=tp):
            fixes.append(f"--tp {tp}")
            break
        tp *= 2
    # a MoE model's experts also split over data-parallel engines, each with its own KV cache (DeepSeek's
    # usual deployment: --data-parallel-size 8 --enable-expert-parallel)
    dp = cfg.data_parallel * 2
    while arch.is_moe and dp <= 16:
        if fits(data_parallel=dp, expert_parallel=True):
            fixes.append(f"--dp {dp} --enable-expert-parallel")
            break
        dp *= 2
    shorter = max_model_len_that_fits(arch, gpu, cfg, profile)
    shorter = min(shorter, model_max_len(arch) or shorter)  # never a length vLLM refuses (context_limit.py)
    if 0 < shorter < cfg.max_model_len:
        fixes.append(f"--max-model-len {shorter}")
    return fixes
