"""Per-GPU memory as vLLM (V1 engine) accounts it: weights, activation peak, non-torch, CUDA graphs, KV blocks.

The budget (vllm/v1/worker/gpu_worker.py, see docs/memory.md):

    requested   = total_memory_reported x gpu_memory_utilization
    kv_cache    = requested - weights - activation_peak - non_torch - (cuda_graphs if the release counts them)
    num_blocks  = floor(kv_cache / (page_bytes x layers_per_group)),  page = block_size x bytes per token per layer
    tokens      = num_blocks x block_size (uniform models); the minimum over TP ranks and PP stages is used

The options it starts from are serving_config's, the weights weights.py's, the KV layout (bytes per token,
hybrid groups, blocks per request, the block pool) kv_cache.py's; this module adds the activation peak,
non-torch memory and CUDA graphs, and sizes the KV cache from what is left. Nothing here knows about prices,
solvers or output formats.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

from gpuopt.hardware import GIB, GpuSpec
from gpuopt.physics import checkpoint_table, cuda_graphs, fp8_kv_backend, sparse_mla, state_cache
from gpuopt.physics.architecture import ModelArchitecture
from gpuopt.physics.context_limit import limit_advice, model_max_len
from gpuopt.physics.kv_cache import (
    KvGroup,
    KvPool,
    blocks_for,
    dsa_format,
    hybrid_block_size,
    in_flight_tokens,
    kv_dtype_bytes,
    kv_groups,
    kv_layout,
)
from gpuopt.physics.lora import lora_bytes
from gpuopt.physics.serving_config import ResolvedConfig, ServingConfig, gpu_unsupported, resolve, v0_fallback, validate
from gpuopt.physics.vllm_profile import CudaGraphCalibration, StartupHeld, VllmProfile
from gpuopt.physics.weights import WEIGHT_BYTES, activation_dtype_bytes, expert_layout, stage_layers, weights_bytes
from gpuopt.vocabulary import STATE_LAYER_KINDS, WeightFormat


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
    if model_max_len(arch) is None:
        # gpuopt's registry row lacks the limit (a config it did not read): vLLM refuses a length above the
        # checkpoint's own max_position_embeddings, which gpuopt cannot check, nor cap its suggestions at
        where = ("its config" if arch.source.startswith("config ")
                 else "gpuopt's registry (its config.json was not read)")
        warnings.append(f"{arch.hf_id}'s context limit is not in {where}: max_model_len {cfg.max_model_len:,} is not "
                        f"checked against it; {limit_advice(arch)}")
    if arch.cross_attention_layers:
        warnings.append(f"{arch.cross_attention_layers} cross-attention layers keep vision-token KV that is "
                        "not modelled")
    if arch.multimodal and not arch.vision_params_b and not cfg.language_model_only:
        where = ("from its config (a vision_config gpuopt does not count: physics/vision.py)"
                 if arch.source.startswith("config ") else "in the registry")
        warnings.append(f"vision encoder size unknown {where}: its weights and profiling activation are not "
                        "counted")
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
        per_request = sum(n * blocks_for(g, cfg.max_model_len, block, in_flight, pages) for g, n in layout)
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
