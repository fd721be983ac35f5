"""The memory vLLM's CUDA graphs hold on each GPU: what the KV budget loses to them from 0.20 (where vLLM
subtracts its own estimate of it) and what a GPU holds beyond the budget before then.

Its parts, each from what drives it (read in the 0.11-0.34 wheels):

- **One graph per capture size and mode.** vLLM captures its decode and mixed batches at the sizes
  `VllmConfig._set_cudagraph_sizes` lists: 1, 2, 4, multiples of 8 to 248, then of 16, up to
  min(2 x max_num_seqs, 512, max_num_batched_tokens) -- 1024 instead of 512 on datacenter Blackwell (SM 10.x)
  from 0.28. Each graph keeps the driver's per-node state for every kernel of every layer it runs, so the
  memory grows with layers x capture sizes: the calibration's per-layer figure is for the 51 sizes of the
  defaults and scales with the count (a `--max-num-seqs 8` server captures 5 sizes).
- **FlashAttention 3's split-KV accumulators.** With full CUDA graphs (FULL_AND_PIECEWISE, the default from
  0.11) FlashAttention 3 -- the backend vLLM picks on Hopper -- is told to split every decode over up to 32
  KV chunks (`flash_attn_max_num_splits_for_cuda_graph`), so the largest graph captures fp32 buffers of
  [32 splits, heads, tokens, head size] ("Setting num_splits > 1 may increase the memory usage, because the
  intermediate buffers of size [num_splits, num_heads, num_tokens, head_size] are allocated", flash_attn.py),
  tokens being the largest full graph's: a decode batch, so at most max_num_seqs.
  They are freed after each layer and reused, so one set is held: 32 x 512 (the H100's defaults) x heads per GPU x
  head size x 4 B -- 0.25 GiB for 32 heads of 128, 0.125 GiB at TP 2. Fitted freely on the 19 v0.19 H100 start-ups
  the coefficient comes out at 0.251 GiB per 4,096 head x head-size values, the physical 0.25, and it explains why
  those logs fall with TP (Llama-3.1-8B 0.91 / 0.76 / 0.67 GiB at TP 1 / 2 / 4) where a per-layer rule cannot.
  FlashAttention 2 (Ampere, Ada, consumer Blackwell) is given no split bound and allocates none; MLA on Hopper
  runs FlashAttention 3's MLA kernel first (0.12+), whose value head is the 512-wide latent.
- **Expert layers** add to the per-layer figure by the kernels their experts launch (Triton's fused MoE, or the
  longer MXFP4 chain of gpt-oss), and **LoRA** captures a second set of graphs running its kernels (0.12+;
  before, only that set) -- fitted, see CudaGraphCalibration.
- **A fixed part**, the graph pool's first capture.

The V1 model runner's graphs are fitted on the v0.19 H100 start-ups, the V2 runner's on the 0.27/0.28 logs
that run it (RTX 4090, RTX 5090) -- the V2 runner is what every model starts on from 0.29. Which of the two
differences between those sets (runner, or H100 against GeForce) makes the V2 figure 30 % lower per layer is
not separable with the logs in ../shared/data; the runner is the code that captures, so it decides here.
"""

from __future__ import annotations

from gpuopt.hardware import GIB, GpuSpec
from gpuopt.physics.architecture import ModelArchitecture
from gpuopt.physics.vllm_profile import CudaGraphCalibration, release_key
from gpuopt.vocabulary import KV_LAYER_KINDS

DEFAULT_SIZES = 51  # capture sizes at the defaults (max 512): what the calibrations' per-layer figures are for
MAX_SPLITS = 32  # flash_attn_max_num_splits_for_cuda_graph (VLLM_FLASH_ATTN_MAX_NUM_SPLITS_FOR_CUDA_GRAPH)
FULL_GRAPHS_FIRST = (0, 11)  # cudagraph_mode FULL_AND_PIECEWISE becomes the V1 default
FA_MLA_FIRST = (0, 12)  # FLASH_ATTN_MLA heads the MLA priority list off Blackwell (0.11 chose FlashMLA)
BLACKWELL_1024_FIRST = (0, 28)  # 1024 as the default capture ceiling on SM 10.x
LORA_TWO_SETS_FIRST = (0, 12)  # cudagraph_specialize_lora: graphs without adapters as well as with them
HOPPER = 90
FA3_MAX_HEAD = 256


def max_capture_size(max_num_seqs: int, max_num_batched_tokens: int, gpu: GpuSpec, vllm_version: str) -> int:
    """The largest batch vLLM captures a graph for by default (VllmConfig._set_cudagraph_sizes)."""
    cc = gpu.compute_capability
    ceiling = 1024 if (cc is not None and cc // 10 == 10
                       and release_key(vllm_version) >= BLACKWELL_1024_FIRST) else 512
    return max(1, min(2 * max_num_seqs, ceiling, max_num_batched_tokens))


def capture_sizes(largest: int, interactivity: bool = False) -> list[int]:
    """1, 2, 4, then multiples of 8 below 256, then of 16, up to `largest`; `--performance-mode interactivity`
    (0.17+) captures every size up to 32 instead of 1, 2, 4, 8..32, for less padding at small batches (vLLM
    also appends the token budget when it is below 512 and off that grid: one graph more, left out)."""
    sizes = list(range(1, min(largest, 32) + 1)) if interactivity else [s for s in (1, 2, 4) if s <= largest]
    sizes += list(range(8, min(largest + 1, 256), 8))
    sizes += list(range(256, largest + 1, 16))
    return sorted(set(sizes))


def split_accumulator_bytes(arch: ModelArchitecture, gpu: GpuSpec, tp: int, largest: int, vllm_version: str,
                            precision: str) -> float:
    """FlashAttention 3's fp32 split-KV buffers in the largest full graph; 0 where vLLM does not run it."""
    if gpu.compute_capability != HOPPER or release_key(vllm_version) < FULL_GRAPHS_FIRST or precision == "fp32":
        return 0.0
    if not any(kind in KV_LAYER_KINDS for kind in arch.layer_kinds()):
        return 0.0  # attention-free (Mamba only): no attention backend runs
    heads = max(1, arch.num_attention_heads // tp)
    if arch.is_mla:
        if release_key(vllm_version) < FA_MLA_FIRST or not arch.kv_lora_rank or arch.index_head_dim:
            return 0.0  # FlashMLA (0.11), or a DSA model's sparse backends
        value_head = arch.kv_lora_rank
    else:
        value_head = arch.attn_head_dim
        if value_head > FA3_MAX_HEAD or value_head % 8:
            return 0.0  # FlashAttention takes head sizes up to 256, multiples of 8
    return float(MAX_SPLITS * largest * heads * value_head * 4)


def graph_gib(calibration: CudaGraphCalibration, arch: ModelArchitecture, gpu: GpuSpec, *, layers: int, tp: int,
              max_num_seqs: int, max_num_batched_tokens: int, vllm_version: str, precision: str,
              lora: bool = False, interactivity: bool = False) -> float:
    """CUDA-graph memory of one GPU holding `layers` decoder layers. With LoRA vLLM captures every size twice
    from 0.12, without adapters and with all slots active (`cudagraph_specialize_lora`; `get_lora_capture_cases`:
    [0, max_loras + 1], since `specialize_active_lora` is off by default), the second set running the LoRA
    kernels as well; before 0.12 only the LoRA set."""
    largest = max_capture_size(max_num_seqs, max_num_batched_tokens, gpu, vllm_version)
    sizes = capture_sizes(largest, interactivity)
    share = len(sizes) / DEFAULT_SIZES
    # the full graphs are decode batches, one token a sequence: no larger than max_num_seqs
    # (CudagraphDispatcher: "cudagraph_capture_sizes_for_decode ... x <= max_num_tokens")
    decode_largest = max((s for s in sizes if s <= max_num_seqs), default=0)
    plain = calibration.per_layer_gib
    if lora and release_key(vllm_version) < LORA_TWO_SETS_FIRST:
        plain = 0.0
    moe = 0.0
    if arch.is_moe:
        moe = calibration.mxfp4_moe_per_layer_gib if precision == "mxfp4" else calibration.moe_per_layer_gib
    per_layer = plain + moe + (calibration.lora_per_layer_gib if lora else 0.0)
    return (calibration.base_gib + per_layer * layers * share
            + split_accumulator_bytes(arch, gpu, tp, decode_largest, vllm_version, precision) / GIB)
