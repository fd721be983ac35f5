"""vLLM's version-dependent behaviour that decides the KV budget, loaded from gpuopt/data/vllm_versions.yaml.

Defaults change between releases (gpu_memory_utilization 0.90 -> 0.92 and the CUDA-graph estimate moving
inside the budget in v0.20; scheduler limits per GPU; the profiling run's activation peak). They are data,
each with the release notes or logs it came from, so a new release is a new YAML entry, not a code change.
"""

from __future__ import annotations

import re
from functools import cache
from typing import Literal

from pydantic import BaseModel, ConfigDict

from gpuopt.datafiles import data_yaml
from gpuopt.errors import InputError


class ActivationCalibration(BaseModel):
    """Peak torch memory of vLLM's profiling run, as a linear model over the tensors it allocates.

    activation_gib = intercept_gib + sampler * rows * vocab * 4 B + hidden * tokens * hidden_size * act_bytes
                     + moe * tokens * top_k * moe_intermediate_size * 2 * act_bytes / TP
    (rows = min(max_num_seqs, max_num_batched_tokens): the sampler runs on fp32 logits over the vocabulary;
    tokens = max_num_batched_tokens: the dummy forward pass.)
    """

    model_config = ConfigDict(frozen=True)

    intercept_gib: float
    sampler: float
    hidden: float
    moe: float
    fitted_on: str


class CudaGraphCalibration(BaseModel):
    """CUDA-graph memory per GPU (physics/cuda_graphs.py): a fixed part plus a part per decoder layer on the
    stage at the reference 102 graphs (cuda_graphs.REFERENCE_GRAPHS) -- more per layer for MoE layers (more again
    for MXFP4 experts, whose kernels route through several more launches), and a LoRA-kernel set of graphs per
    layer when LoRA is on.
    FlashAttention 3's split buffers are computed, not fitted."""

    model_config = ConfigDict(frozen=True)

    base_gib: float
    per_layer_gib: float
    moe_per_layer_gib: float = 0.0
    mxfp4_moe_per_layer_gib: float = 0.0
    lora_per_layer_gib: float = 0.0
    fitted_on: str


class NonTorchMemory(BaseModel):
    """Non-torch memory of the profiling run by what drives it (see memory.non_torch_gib).

    tp_multi_gib: TP >= 2 with custom all-reduce over NVLink; tp_pcie_gib: TP >= 2 over PCIe (custom
    all-reduce off; None = the single-GPU figure).
    """

    model_config = ConfigDict(frozen=True)

    tp1_gib: float
    tp_multi_gib: float
    pp_only_gib: float
    tp_pcie_gib: float | None = None


class StartupHeld(BaseModel):
    """Memory a GPU holds before vLLM's worker takes its start-up snapshot (CUDA context; NCCL's communicators
    when the GPUs are joined by NVLink), measured as total - free on the logs' "Free memory on device (free/total
    GiB) on startup" lines; GPUs joined over PCIe take the one-GPU figure (memory.startup_held_gib). Two
    releases spend it outside what they profile: 0.34's extensible KV cache keeps it free (init_free), and
    0.8.0-0.9.0 subtract it from the budget, because their determine_available_memory (read in the 0.8.0, 0.8.3,
    0.8.5.post1 and 0.9.0 wheels) takes `total x gmu - absolute torch peak - all non-torch memory on the device`
    where 0.9.1+ count only what the profiling run added since the snapshot."""

    model_config = ConfigDict(frozen=True)

    tp1_gib: float  # CUDA context of one GPU (also GPUs joined over PCIe)
    tp_multi_gib: float  # ... plus NCCL's communicators of GPUs joined by NVLink
    source: str


class ExtensibleKvCache(BaseModel):
    """vLLM 0.34's default KV sizing (vllm/v1/worker/extensible_kv_cache.py, read in the 0.34.0 wheel): the cache
    reserves address space, warmup and CUDA-graph capture run, and only then is its size committed from the
    memory actually free:

        KV = min(requested - used, init_free - used - margin) - transient
        margin = max(margin_floor_gib, margin_fraction x transient)

    `used` is what the process holds besides the cache (weights, non-torch, the captured graphs' pool),
    `transient` the profiled peak the warmup keeps free (activation peak plus the CUDA-graph estimate:
    `peak_activation_memory`), and `init_free` the memory free when the worker took its start-up snapshot,
    after the CUDA context and NCCL were created: total - `startup` (StartupHeld)."""

    model_config = ConfigDict(frozen=True)

    # gpu_memory_utilization unset with the cache turned off (--no-enable-extensible-kv-cache or
    # --kv-cache-memory-bytes): CacheConfig.DEFAULT_GPU_MEMORY_UTILIZATION, sized by estimate as in 0.33
    gpu_memory_utilization_off: float
    margin_floor_gib: float  # KV_CACHE_MARGIN_FLOOR_BYTES on CUDA
    margin_fraction: float  # KV_CACHE_MARGIN_FRACTION
    startup: StartupHeld  # held before the start-up snapshot, so not free at init


class V0Fallback(BaseModel):
    """When `vllm serve` of 0.8-0.10.1 starts its V0 engine instead of V1 (`EngineArgs._is_v1_supported_oracle`,
    vllm/engine/arg_utils.py), which gpuopt does not model: compute capability below `min_compute_capability`,
    an fp8 KV cache except on the GPUs `fp8_kv_cache_on` names ("none"; "hopper": FlashAttention 3 on sm90;
    "hopper-blackwell": also sm100), fp32 weights, pipeline parallelism with the default executor, LoRA, and
    models with Mamba / linear-attention state (`has_inner_state`)."""

    model_config = ConfigDict(frozen=True)

    min_compute_capability: int = 80
    fp8_kv_cache_on: Literal["none", "hopper", "hopper-blackwell", "any"] = "any"
    fp32: bool = False
    pipeline_parallel: bool = False
    lora: bool = False
    state_layers: bool = True


class V2ModelRunner(BaseModel):
    """Which models a release runs on vLLM's V2 model runner (vllm/v1/worker/gpu/), and what that runner's
    start-up profiling leaves out. Two things of the memory budget depend on it:

    - the CUDA-graph estimate: the V2 runner's `profile_cudagraph_memory` returned 0 until 0.29
      (`profiles_graphs`), so before then its graphs are not subtracted and are captured in the headroom, as
      before 0.20;
    - the sampler's share of the activation peak: the V2 runner's `_dummy_sampler_run` samples a dummy batch
      whose requests keep the default sampling state (temperature 0, top-k = vocabulary, top-p 1): greedy,
      no fp32 copy, no top-k/top-p sort, no logprobs -- its peak is the logits tensor in the model dtype.
      From 0.33 it runs a second pass with `SamplingParams.for_sampler_warmup()` (temperature, top-k/top-p,
      min-p, penalties, logit bias, logprobs) because `warmup_kernels`, after the KV cache is sized, pays for
      the fp32 pipeline and ran out of memory (`sampler_warmup`; read in the 0.22-0.34 wheels).

    Who runs on it (`VllmConfig.use_v2_model_runner`, vllm/config/vllm.py): rule "listed-dense-unquantized"
    (0.22, 0.23): a listed class, neither MoE nor quantized; "listed" (0.24): a listed class;
    "listed-or-dense" (0.25-0.28): a listed class or any model that is not MoE, never an attention-free one, and
    a hybrid (Mamba / linear attention) only when listed from 0.27 (`hybrid_if_listed`; 0.25-0.26 keep every
    hybrid on V1); "all" (0.29+): every model on CUDA (V1 only for features gpuopt does not plan: n-gram or
    suffix speculation, torchrun's external launcher with PP, dual-batch overlap), except the classes
    `rocm_v1_architectures` on AMD GPUs (0.29-0.31)."""

    model_config = ConfigDict(frozen=True)

    rule: Literal["listed-dense-unquantized", "listed", "listed-or-dense", "all"]
    architectures: tuple[str, ...] = ()
    hybrid_if_listed: bool = False
    profiles_graphs: bool = False
    sampler_warmup: bool = False
    rocm_v1_architectures: tuple[str, ...] = ()
    cuda_graph: CudaGraphCalibration | None = None  # the V2 runner's graphs; None: the profile's (V1) figures

    def runs(self, architecture: str | None, moe: bool, hybrid: bool, quantized: bool, rocm: bool = False) -> bool:
        """Whether a model of this class and shape starts on the V2 runner (a class gpuopt does not know is
        taken as unlisted)."""
        listed = architecture in self.architectures
        if self.rule == "all":
            return not (rocm and architecture in self.rocm_v1_architectures)
        if self.rule == "listed-dense-unquantized":
            return listed and not moe and not quantized
        if self.rule == "listed":
            return listed
        if hybrid:
            return listed and self.hybrid_if_listed
        return listed or not moe


class VllmProfile(BaseModel):
    model_config = ConfigDict(frozen=True)

    version: str
    gpu_memory_utilization: float
    cudagraph_in_budget: bool
    # 0.22+: which models run on the V2 model runner, and what its profiling leaves out (V2ModelRunner);
    # None: every model on the V1 runner
    v2_model_runner: V2ModelRunner | None = None
    kv_tokens_report: str  # "blocks" (<= v0.20) or "concurrency" (v0.21+: max_concurrency x max_model_len)
    # `--async-scheduling` unset: off before v0.14 (SchedulerConfig.async_scheduling = False), on from v0.14
    # (None, resolved to True in VllmConfig unless the executor or speculative method cannot)
    async_scheduling_default: bool = False
    large_gpu_gib: float  # scheduler defaults switch at this reported memory (non-A100)
    large_max_num_seqs: int
    large_max_num_batched_tokens: int
    small_max_num_seqs: int
    small_max_num_batched_tokens: int
    huge_gpu_gib: float | None = None
    huge_max_num_batched_tokens: int | None = None
    # 0.8.0-0.8.4 chose the large defaults by device name ("h100"/"h200" in it), not by memory
    large_gpu_names: tuple[str, ...] = ()
    # 0.9.0+: A100s keep the small defaults whatever their memory (0.8.5 had no such exception)
    a100_exception: bool = True
    # 0.8.0-0.9.0: the KV budget also loses the memory held before start-up (StartupHeld) and the runner's
    # input buffers
    startup_held: StartupHeld | None = None
    # 0.8.x-0.9.0: a model mixing sliding-window and full layers is cached as all full (unify_hybrid_kv_cache_specs)
    sliding_window_as_full: bool = False
    # 0.10.1-0.13: chunked-local layers (Llama-4) next to full ones are cached at full length: VllmConfig turns
    # the hybrid KV cache manager off for a model with attention_chunk_size unless
    # VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE=1 (default "0" in vllm/envs.py up to 0.13.0, "1" from
    # 0.14.0), and unify_hybrid_kv_cache_specs makes them FullAttentionSpec
    chunked_local_as_full: bool = False
    # 0.8-0.10.1: what makes `vllm serve` start the V0 engine (V0Fallback); None: V1 only (0.11+)
    v0_fallback: V0Fallback | None = None
    # CacheConfig.DEFAULT_BLOCK_SIZE: what `--block-size` unset gives with the standard attention backends
    # (FlashAttention and FlashInfer accept it; 16 up to 0.33, 64 from 0.34)
    default_block_size: int = 16
    # None: the budget is estimated from the profiling run (requested - weights - activation - non-torch
    # [- graphs]); set: the KV cache is sized after warmup from the memory left (0.34's extensible KV cache)
    extensible_kv_cache: ExtensibleKvCache | None = None
    # the GPU generations (compute capability x 10) the release's PyPI wheels carry compiled kernels for: the
    # cubins of vllm/_C*.abi3.so (tools/extract_vllm_gpu_archs.py). A GPU runs a cubin of its own major version
    # and a minor at or below its own; without one it stops at the first custom op
    cubin_archs: tuple[int, ...] = (70, 75, 80, 86, 89, 90, 100, 120)
    non_torch: NonTorchMemory
    activation: ActivationCalibration
    cuda_graph: CudaGraphCalibration
    source: str

    def runs_on(self, compute_capability: int) -> bool:
        """Whether the release's wheels carry kernels this GPU generation can run."""
        return any(a // 10 == compute_capability // 10 and a <= compute_capability for a in self.cubin_archs)

    def scheduler_defaults(self, gpu_name: str, reported_gib: float) -> tuple[int, int]:
        """(max_num_seqs, max_num_batched_tokens) that `vllm serve` picks for this GPU."""
        if self.huge_gpu_gib and self.huge_max_num_batched_tokens and reported_gib >= self.huge_gpu_gib:
            return self.large_max_num_seqs, self.huge_max_num_batched_tokens
        if self.large_gpu_names:
            large = any(name in gpu_name.upper() for name in self.large_gpu_names)
        else:
            large = reported_gib >= self.large_gpu_gib and not (self.a100_exception
                                                               and gpu_name.upper().startswith("A100"))
        if large:
            return self.large_max_num_seqs, self.large_max_num_batched_tokens
        return self.small_max_num_seqs, self.small_max_num_batched_tokens


@cache  # a handful of distinct strings, asked for by every candidate the planner screens
def release_key(version: str) -> tuple[int, ...]:
    """A vLLM version as comparable numbers: the leading digits of each dot-separated part, up to the first
    part that has none ("v0.28.1rc1.dev580+g385dce36b" -> (0, 28, 1); "0.6.3.post2" -> (0, 6, 3)). One
    parser for every per-release rule (memory profiles, serve flags, kernel paths, the V0 engine)."""
    key: list[int] = []
    for part in version.strip().removeprefix("v").split("."):
        digits = re.match(r"\d+", part)
        if digits is None:
            break
        key.append(int(digits.group()))
    return tuple(key)


def canonical_release(version: str) -> str:
    """A release as the numbers it selects ("0.019" -> "0.19", "v0.10.1.1" -> "0.10.1.1"): what plans, pins and
    image tags carry, whoever typed it."""
    return ".".join(map(str, release_key(version)))


@cache
def profiles() -> tuple[VllmProfile, ...]:
    raw = data_yaml("vllm_versions.yaml")
    items = [VllmProfile.model_validate(p) for p in raw["profiles"]]
    return tuple(sorted(items, key=lambda p: release_key(p.version)))


@cache
def default_release() -> str:
    """The release a plan uses when none is named (vllm_versions.yaml `default_release`, with its reason)."""
    return str(data_yaml("vllm_versions.yaml")["default_release"])


def release_or_default(vllm_version: str | None) -> str:
    """The release asked for, or the default one (None: what a plan uses when no --vllm-version is given)."""
    return vllm_version or default_release()


def unmodelled_release(version: str) -> str | None:
    """Why a release is outside what gpuopt models (None: it is modelled, or lies between two modelled
    releases and takes the older one's defaults): newer than the newest modelled minor release (its defaults
    are unknown), or older than the oldest. What --vllm-version refuses, and what a calibration file's logged
    release must pass (QA: a log of "99.0" was fitted with 0.34's defaults)."""
    known = [p.version for p in profiles()]
    wanted = release_key(version)
    if not wanted:
        return f"'{version}' is not a version like 0.19 or 0.11.0"
    if wanted[:2] > release_key(known[-1])[:2]:
        return f"{version} is newer than the newest modelled release {known[-1]}"
    if wanted < release_key(known[0]):
        return f"{version} is older than the oldest modelled release {known[0]}"
    return None


@cache  # pure in its argument (the profiles are read once); a bad version raises, which is never cached
def get_profile(version: str | None) -> VllmProfile:
    """The newest profile whose version is <= the requested one (None: the default release)."""
    known = profiles()
    version = release_or_default(version)
    wanted = release_key(version)
    if not version.replace(".", "").isdigit():
        raise InputError(f"--vllm-version: '{version}' is not a version like 0.19 or 0.11.0")
    eligible = [p for p in known if release_key(p.version) <= wanted]
    if not eligible:
        raise InputError(f"--vllm-version: {version} is older than the oldest modelled release "
                         f"({known[0].version}); known: {', '.join(p.version for p in known)}")
    return eligible[-1]
