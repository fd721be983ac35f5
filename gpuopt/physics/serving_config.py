"""What a user asks vLLM to run and what vLLM makes of it: the serving options (ServingConfig), checked
against the model, the GPU and the release (validate, gpu_unsupported), and resolved to the values vLLM
actually uses (resolve: the release's defaults for max_num_seqs and max_num_batched_tokens, the checkpoint's
KV-cache dtype, whether the release falls back to the V0 engine). The memory model (memory.py) and the
latency model start from the ResolvedConfig; nothing here sizes memory.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gpuopt.errors import InputError, NotModelledError
from gpuopt.hardware import GpuSpec
from gpuopt.physics import cuda_graphs, fp8_kv_backend, quant_sharding, sparse_mla, state_cache
from gpuopt.physics.architecture import ModelArchitecture
from gpuopt.physics.context_limit import default_max_len
from gpuopt.physics.cuda_graphs import GraphSettings
from gpuopt.physics.lora import lora_problems
from gpuopt.physics.quantization import representative
from gpuopt.physics.serve_flags import block_sizes, flags
from gpuopt.physics.vllm_profile import (
    VllmProfile,
    canonical_release,
    get_profile,
    profiles,
    release_key,
    release_or_default,
)
from gpuopt.physics.vllm_support import release_problem
from gpuopt.vocabulary import MAX_TOKENS, KvCacheDtype, LinkKind, PerformanceMode, WeightFormat

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


def default_precision(arch: ModelArchitecture, gpu: GpuSpec | None = None) -> WeightFormat:
    """The weight format `vllm serve` loads the model in without --dtype / --quantization: a quantized
    checkpoint's own, else the config's torch_dtype -- except float32, which `--dtype auto` serves in the
    platform's first 16-bit type (vllm/config/model.py _resolve_auto_dtype: "Downcast for float32 models";
    platforms/cuda.py supported_dtypes: bfloat16 from compute capability 8.0, float16 on Volta and Turing).
    Planning such a model at fp32 doubled its weights and KV (QA: a float32 Qwen3-32B config at TP 4, 30.5
    GiB of weights per GPU where vLLM loads 15.3). `gpu`: the GPU it runs on (None: an Ampere or later one)."""
    if arch.quantization is not None:
        return arch.quantization.weight_format
    if arch.native_quantization == "mxfp4-experts":
        return "mxfp4"
    if arch.native_quantization == "fp8-block":
        return "fp8"
    if arch.torch_dtype == "float32":
        return "fp16" if gpu is not None and not gpu.has_bf16 else "bf16"
    return DTYPE_TO_FORMAT[arch.torch_dtype]


def quantized_checkpoint(arch: ModelArchitecture) -> str:
    """What a quantized checkpoint is, in the words every refusal of another precision uses ("X is a
    checkpoint quantized as AWQ (int4)")."""
    q = arch.quantization
    assert q is not None, "quantized_checkpoint of a model without a quantization"
    return f"{arch.hf_id} is a checkpoint quantized as {q.label} ({q.weight_format})"


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
            return (f"{quantized_checkpoint(arch)}; it cannot be served as {precision}: use its base model for "
                    "other precisions")
        path = q.kernel_path(gpu.compute_capability, vllm_version)
        return None if path.supported else f"{arch.hf_id} ({q.label}): {path.note}"
    if precision == "mxfp4" and arch.native_quantization != "mxfp4-experts":
        return f"{arch.hf_id} has no MXFP4 checkpoint (mxfp4 is only for natively MXFP4 models such as gpt-oss)"
    stand_in = representative(precision)  # on ROCm too (compute_capability None: ROCm's methods per release)
    if stand_in is not None:
        path = stand_in.kernel_path(gpu.compute_capability, vllm_version)
        if not path.supported:
            return f"{precision} on {gpu.gpu} ({gpu.architecture}, sm{gpu.compute_capability}): {path.note}"
    return None


def format_removed_in(gpu: GpuSpec, precision: WeightFormat, arch: ModelArchitecture,
                      vllm_version: str | None = None) -> tuple[int, int] | None:
    """The release that dropped this weight format on every GPU, when `vllm_version` is at or past it
    (KernelPath.removed_in: bitsandbytes from 0.28): the refusal is the release's, so an older release plans
    it and no other GPU does."""
    q = arch.quantization if arch.quantization is not None else representative(precision)
    return None if q is None else q.kernel_path(gpu.compute_capability, vllm_version).removed_in


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


MAX_DATA_PARALLEL = 10_000
"""The most data-parallel engines `fit` and `simulate` size: a workload file's replica ceiling
(inputs.workload.MAX_REPLICAS; a test holds them equal)."""


def _mixer_problems(arch: ModelArchitecture, tp: int) -> list[str]:
    """The TP rules of the hybrids' recurrent layers, as vLLM asserts them at start-up (0.28.0 wheel):
    MambaMixer2 (layers/mamba/mamba_mixer2.py) needs TP to divide the Mamba heads and the B/C groups (or one
    group, replicated to every rank); the Gated DeltaNet layers (layers/mamba/gdn/qwen_gdn_linear_attn.py)
    split their value heads with divide() and their key heads per rank. QA: Nemotron-3-Nano's 8 groups "fit"
    at TP 16 and 32, where vLLM stops with "If tensor parallel world size does not divide num_groups, then
    num_groups must equal 1"."""
    kinds = arch.pattern_kinds()
    out = []
    if "mamba" in kinds:
        heads, groups = arch.mamba_num_heads or 0, arch.mamba_n_groups or 1
        if heads % tp:
            out.append(f"--tp {tp} does not divide the {heads} Mamba heads of {arch.hf_id}")
        elif groups != 1 and groups % tp:
            out.append(f"--tp {tp} does not divide the {groups} Mamba B/C groups of {arch.hf_id} (vLLM replicates "
                       f"only a single group)")
    if "linear" in kinds:
        for name, count in (("value", arch.linear_num_value_heads), ("key", arch.linear_num_key_heads)):
            if count and count % tp:
                out.append(f"--tp {tp} does not divide the {count} linear-attention {name} heads of {arch.hf_id}")
                break
    return out


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
    if tp >= 1:
        problems += _mixer_problems(arch, tp)
    if cfg.data_parallel < 1:
        problems.append(f"--dp must be >= 1 (got {cfg.data_parallel})")
    elif cfg.data_parallel > MAX_DATA_PARALLEL:
        # QA: --dp 1000000000000 was sized, "the KV cache holds 3.7e14 requests"
        problems.append(f"--dp must be at most {MAX_DATA_PARALLEL:,}, as a workload's replicas (got "
                        f"{cfg.data_parallel:,})")
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
        if sharding is None:
            sharding = quant_sharding.group_problem(arch, tp)
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
        precision=cfg.precision or default_precision(arch, gpu),
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
        if cfg.kv_cache_dtype == "fp8":
            raise InputError(f"--kv-cache-dtype fp8: {no_backend}; use --kv-cache-dtype auto")
        # `auto` became fp8 from the checkpoint (a ModelOpt kv_cache_quant_algo FP8): telling the user to pass
        # the auto they passed contradicted itself; vLLM would refuse to start this way
        raise InputError(f"{arch.hf_id} quantizes its KV cache to FP8 (kv_cache_quant_algo FP8 in its "
                         f"hf_quant_config.json), which vLLM {resolved.vllm_version} applies under --kv-cache-dtype "
                         f"auto: {no_backend}; vLLM would refuse to start -- choose a GPU whose attention backends "
                         "serve it, or serve the checkpoint with vLLM's --kv-cache-dtype bfloat16 (not modelled by "
                         "gpuopt)")
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
