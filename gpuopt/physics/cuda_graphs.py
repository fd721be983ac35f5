"""The memory vLLM's CUDA graphs hold on each GPU: what the KV budget loses to them from 0.20 (where vLLM
subtracts its own estimate of it) and what a GPU holds beyond the budget before then.

Its parts, each from what drives it (read in the 0.11-0.34 wheels):

- **A graph per capture size and kind.** vLLM captures its batches at the sizes
  `VllmConfig._set_cudagraph_sizes` lists: 1, 2, 4, multiples of 8 to 248, then of 16 (of 8 up to 0.11), up to
  min(2 x max_num_seqs, 512, max_num_batched_tokens) -- 1024 instead of 512 on datacenter Blackwell (SM 10.x)
  from 0.28; from 0.21 the token budget is added when it is below that ceiling and off the grid, from 0.31
  max_num_seqs likewise. The default mode (FULL_AND_PIECEWISE from 0.11, PIECEWISE before) captures a
  piecewise graph for every size and a full graph for every size a decode batch can take (<= max_num_seqs,
  `CudagraphDispatcher`); `cudagraph_mode`, `--enforce-eager` and `-O` change that. Each graph keeps the
  driver's per-node state for every kernel of every layer it runs, so the memory grows with layers x graphs:
  the calibration's per-layer figure is for the 102 graphs of the v0.19 H100 start-ups it was fitted on (51
  sizes, each piecewise and full) and scales with the count (a `--max-num-seqs 8` server captures 9).
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
differences between those sets (runner, or H100 against GeForce) makes the V2 figure 20 % lower per layer and
graph is not separable with the logs in ../shared/data; the runner is the code that captures, so it decides here.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

from gpuopt.datafiles import data_yaml
from gpuopt.hardware import GIB, GpuSpec
from gpuopt.physics.architecture import ModelArchitecture
from gpuopt.physics.vllm_profile import CudaGraphCalibration, release_key
from gpuopt.vocabulary import KV_LAYER_KINDS, CompilationMode, CudagraphMode

# graphs of the v0.19 H100 start-ups the V1 calibration was fitted on (max_num_seqs 1,024: 51 sizes up to 512,
# each captured piecewise and full): what the calibrations' per-layer figures are for
REFERENCE_GRAPHS = 102
MAX_SPLITS = 32  # flash_attn_max_num_splits_for_cuda_graph (VLLM_FLASH_ATTN_MAX_NUM_SPLITS_FOR_CUDA_GRAPH)
FULL_GRAPHS_FIRST = (0, 11)  # cudagraph_mode FULL_AND_PIECEWISE becomes the V1 default
FA_MLA_FIRST = (0, 12)  # FLASH_ATTN_MLA heads the MLA priority list off Blackwell (0.11 chose FlashMLA)
BLACKWELL_1024_FIRST = (0, 28)  # 1024 as the default capture ceiling on SM 10.x
LORA_TWO_SETS_FIRST = (0, 12)  # cudagraph_specialize_lora: graphs without adapters as well as with them
HOPPER = 90
FA3_MAX_HEAD = 256
SIXTEEN_STEP_FIRST = (0, 12)  # multiples of 16 above 256 (0.10-0.11: of 8 all the way)
BUDGET_SIZE_FIRST = (0, 21)  # max_num_batched_tokens added to the list when below the ceiling, off the grid
SEQS_SIZE_FIRST = (0, 31)  # max_num_seqs likewise (a uniform-decode size)
OPTIMIZATION_LEVEL_FIRST = (0, 12)  # `-O<n>` is --optimization-level; before, the compilation level
# vLLM's MM_PREFIX_LM_MODELS (ModelConfig.is_mm_prefix_lm, by config.json model_type) and the release each joined
# the list (read in the 0.13.0, 0.14.0, 0.17.0, 0.19.0 and 0.21.0 wheels): their image tokens attend
# bidirectionally, which FlashAttention 3 cannot do, so vLLM runs them on another backend (Triton; from 0.27 also
# FlashAttention 4 where it resolves) -- without FA3's split buffers
MM_PREFIX_LM_FIRST = {"gemma3": (0, 13), "paligemma": (0, 14), "molmo2": (0, 17), "bagel": (0, 19),
                      "moondream3": (0, 21)}
TEXT_ONLY_NO_PREFIX_FIRST = (0, 27)  # is_mm_prefix_lm(supports_multimodal=False) under --language-model-only
# A compilation mode other than VLLM_COMPILE (`-cc.mode`, 0.12+) leaves no pieces to capture piecewise graphs of;
# VllmConfig.__post_init__ then drops graphs (read in the 0.12.0-0.34.0 wheels): 0.12 every graph, 0.13-0.29
# the modes that need pieces (PIECEWISE, FULL_AND_PIECEWISE) -> NONE, from 0.30 only their piecewise half
# (`CUDAGraphMode.without_piecewise`: FULL_AND_PIECEWISE -> FULL_DECODE_ONLY)
COMPILATION_MODE_FIRST = (0, 12)
PIECEWISE_MODES_ONLY_FIRST = (0, 13)
WITHOUT_PIECEWISE_FIRST = (0, 30)
# ... except for the architectures vLLM serves with "breakable" CUDA graphs by default
# (gpuopt/data/vllm_breakable_cudagraphs.yaml): it compiles nothing for them, whatever the mode, and captures their
# graphs around the ops that cannot be


@dataclass(frozen=True)
class GraphSettings:
    """What a server set about its CUDA graphs; None everywhere is the release's default.

    `mode` is compilation_config.cudagraph_mode; `capture_sizes` its cudagraph_capture_sizes (or 0.9-0.12's
    `--cuda-graph-sizes` given several values); `max_capture_size` its max_cudagraph_capture_size (0.12+; 0.10-0.11's
    `--cuda-graph-sizes N`, one value: the grid up to N); `optimization_level` the `-O<n>` of the command line --
    `--optimization-level` from 0.12 (0: no graphs, 1: piecewise only, 2-3: the default), the compilation level
    before (3, VLLM's piecewise compilation, is the default; any other captures none); `compilation_mode` the
    compilation config's `mode` (0.12+; unset: VLLM_COMPILE, or NONE at `-O0`)."""

    mode: CudagraphMode | None = None
    capture_sizes: tuple[int, ...] | None = None
    max_capture_size: int | None = None
    optimization_level: int | None = None
    compilation_mode: CompilationMode | None = None


@dataclass(frozen=True)
class CapturePlan:
    """The batch sizes vLLM captures piecewise graphs and full graphs for, under the mode it runs."""

    piecewise: tuple[int, ...]
    full: tuple[int, ...]
    mode: CudagraphMode = "FULL_AND_PIECEWISE"

    @property
    def graphs(self) -> int:
        return len(self.piecewise) + len(self.full)

    @property
    def largest_full(self) -> int:
        """Tokens of the largest full graph (0: none), what FlashAttention 3's split buffers are sized for."""
        return max(self.full, default=0)


def settings_problem(settings: GraphSettings) -> str | None:
    """What vLLM refuses in these settings (VllmConfig._set_cudagraph_sizes), else None."""
    sizes, ceiling = settings.capture_sizes, settings.max_capture_size
    if sizes is not None and (not sizes or min(sizes) < 1):
        return "cudagraph_capture_sizes: give positive batch sizes (an empty list captures nothing: use " \
               "cudagraph_mode NONE or --enforce-eager)"
    if ceiling is not None and ceiling < 1:
        return f"max_cudagraph_capture_size must be positive (got {ceiling})"
    if sizes and ceiling is not None and ceiling != max(sizes):
        return (f"max_cudagraph_capture_size {ceiling} differs from the largest of cudagraph_capture_sizes "
                f"({max(sizes)}): vLLM refuses the two unless they agree; give one")
    return None


def max_capture_size(max_num_seqs: int, max_num_batched_tokens: int, gpu: GpuSpec, vllm_version: str,
                     ceiling: int | None = None) -> int:
    """The largest batch vLLM captures a graph for (VllmConfig._set_cudagraph_sizes): `ceiling` where the server
    set one (max_cudagraph_capture_size), else twice the sequences under the platform's default."""
    if ceiling is None:
        cc = gpu.compute_capability
        default = 1024 if (cc is not None and cc // 10 == 10
                           and release_key(vllm_version) >= BLACKWELL_1024_FIRST) else 512
        ceiling = min(2 * max_num_seqs, default)
    return max(1, min(ceiling, max_num_batched_tokens))


def capture_sizes(largest: int, interactivity: bool = False, vllm_version: str = "0.33") -> list[int]:
    """1, 2, 4, then multiples of 8 below 256, then of 16 (of 8 all the way in 0.10-0.11), up to `largest`;
    `--performance-mode interactivity` (0.17+) captures every size up to 32 instead of 1, 2, 4, 8..32, for less
    padding at small batches."""
    sizes = list(range(1, min(largest, 32) + 1)) if interactivity else [s for s in (1, 2, 4) if s <= largest]
    if release_key(vllm_version) < SIXTEEN_STEP_FIRST:
        return sorted(set(sizes + list(range(8, largest + 1, 8))))
    sizes += list(range(8, min(largest + 1, 256), 8))
    sizes += list(range(256, largest + 1, 16))
    return sorted(set(sizes))


def mm_prefix_lm(arch: ModelArchitecture, vllm_version: str, language_model_only: bool = False) -> bool:
    """Whether vLLM serves this model as a multimodal prefix LM (bidirectional attention over image tokens):
    listed by model type from the release in MM_PREFIX_LM_FIRST, unless served text-only from 0.27."""
    first = MM_PREFIX_LM_FIRST.get(arch.model_type or "")
    release = release_key(vllm_version)
    if first is None or release < first:
        return False
    return not (language_model_only and release >= TEXT_ONLY_NO_PREFIX_FIRST)


def runs_flash_attention_3(arch: ModelArchitecture, gpu: GpuSpec, vllm_version: str, precision: str,
                           language_model_only: bool = False) -> bool:
    """Whether the model's attention runs FlashAttention 3 with full graphs in this release: Hopper, from 0.11,
    not fp32; MLA through FA3's MLA kernel from 0.12 (not a DSA model's sparse backends); head sizes up to 256
    in multiples of 8; some attention at all (a Mamba-only stack runs no attention backend); and not a
    multimodal prefix LM (mm_prefix_lm: gemma-3's logged 0.94 GiB of v0.19 graphs match the model without the
    buffers, 0.91, and not with them, 1.16)."""
    if gpu.compute_capability != HOPPER or release_key(vllm_version) < FULL_GRAPHS_FIRST or precision == "fp32":
        return False
    if not any(kind in KV_LAYER_KINDS for kind in arch.layer_kinds()):
        return False
    if mm_prefix_lm(arch, vllm_version, language_model_only):
        return False
    if arch.is_mla:
        return release_key(vllm_version) >= FA_MLA_FIRST and bool(arch.kv_lora_rank) and not arch.index_head_dim
    return arch.attn_head_dim <= FA3_MAX_HEAD and arch.attn_head_dim % 8 == 0


@cache
def _breakable_lists() -> tuple[tuple[tuple[int, ...], frozenset[str], frozenset[str]], ...]:
    """(release, NVIDIA list, AMD list) per entry of vllm_breakable_cudagraphs.yaml, oldest first."""
    entries = []
    for entry in data_yaml("vllm_breakable_cudagraphs.yaml")["releases"]:
        cuda = frozenset(entry["cuda"])
        rocm = cuda if entry["rocm"] == "as cuda" else frozenset(entry["rocm"])
        entries.append((release_key(str(entry["version"])), cuda, rocm))
    return tuple(sorted(entries, key=lambda e: e[0]))


def breakable_by_default(arch: ModelArchitecture, gpu: GpuSpec, vllm_version: str) -> bool:
    """Whether vLLM serves this model with breakable CUDA graphs by default on this GPU's platform."""
    release = release_key(vllm_version)
    holding = [e for e in _breakable_lists() if e[0] <= release]
    if not holding or not arch.hf_architecture:
        return False
    _, cuda, rocm = holding[-1]
    return arch.hf_architecture in (rocm if gpu.is_rocm else cuda)


def captured_mode(settings: GraphSettings, vllm_version: str, enforce_eager: bool, full_mixed: bool,
                  breakable: bool = False) -> CudagraphMode:
    """The cudagraph_mode vLLM runs with: none under --enforce-eager; the one set; else the optimization level's
    (0.12+: `-O0` none, `-O1` piecewise) or compilation level's (before: anything but 3 captures none); else the
    release's default. Then, from 0.12, a compilation mode other than VLLM_COMPILE drops what needs its pieces
    (see COMPILATION_MODE_FIRST), unless the model's graphs are breakable (`breakable`). FULL needs an attention
    backend that captures mixed batches (FlashAttention 3: `full_mixed`); with any other vLLM falls back
    (resolve_cudagraph_mode_and_sizes) to FULL_AND_PIECEWISE where the compiled model is split at attention, else
    -- nothing compiled, so nothing split -- to FULL_DECODE_ONLY."""
    if enforce_eager:
        return "NONE"
    release = release_key(vllm_version)
    default: CudagraphMode = "FULL_AND_PIECEWISE" if release >= FULL_GRAPHS_FIRST else "PIECEWISE"
    mode = settings.mode
    level = settings.optimization_level
    if mode is None and level is not None:
        if release >= OPTIMIZATION_LEVEL_FIRST:
            mode = "NONE" if level == 0 else "PIECEWISE" if level == 1 else default
        else:
            mode = default if level == 3 else "NONE"
    mode = mode or default
    split = True  # the model is compiled by VLLM_COMPILE, split at attention
    if release >= COMPILATION_MODE_FIRST:
        compilation = settings.compilation_mode or ("NONE" if level == 0 else "VLLM_COMPILE")
        split = compilation == "VLLM_COMPILE" and not breakable
        if not split and not breakable:
            mode = _without_pieces(mode, release)
    if mode == "FULL" and not full_mixed:
        return "FULL_AND_PIECEWISE" if split else "FULL_DECODE_ONLY"
    return mode


def _without_pieces(mode: CudagraphMode, release: tuple[int, ...]) -> CudagraphMode:
    """What VllmConfig leaves of a cudagraph mode when nothing is compiled into pieces (COMPILATION_MODE_FIRST)."""
    if release < PIECEWISE_MODES_ONLY_FIRST:
        return "NONE"
    if mode == "PIECEWISE" or (mode == "FULL_AND_PIECEWISE" and release < WITHOUT_PIECEWISE_FIRST):
        return "NONE"
    return "FULL_DECODE_ONLY" if mode == "FULL_AND_PIECEWISE" else mode


def capture_plan(settings: GraphSettings, gpu: GpuSpec, vllm_version: str, max_num_seqs: int,
                 max_num_batched_tokens: int, *, interactivity: bool = False, enforce_eager: bool = False,
                 full_mixed: bool = False, breakable: bool = False) -> CapturePlan:
    """The sizes vLLM captures piecewise and full graphs for (VllmConfig._set_cudagraph_sizes, then
    CudagraphDispatcher: full graphs of decode batches only up to max_num_seqs tokens, one a sequence)."""
    mode = captured_mode(settings, vllm_version, enforce_eager, full_mixed, breakable)
    if mode == "NONE":
        return CapturePlan((), (), mode)
    if settings.capture_sizes is not None:
        sizes = sorted({s for s in settings.capture_sizes if s <= max_num_batched_tokens})
    else:
        largest = max_capture_size(max_num_seqs, max_num_batched_tokens, gpu, vllm_version, settings.max_capture_size)
        sizes = capture_sizes(largest, interactivity, vllm_version)
        release = release_key(vllm_version)
        if release >= BUDGET_SIZE_FIRST and max_num_batched_tokens <= largest:
            sizes.append(max_num_batched_tokens)
        if release >= SEQS_SIZE_FIRST and settings.max_capture_size is None and max_num_seqs <= largest:
            sizes.append(max_num_seqs)  # a uniform-decode size, added only to the computed default
        sizes = sorted(set(sizes))
    decode = tuple(s for s in sizes if s <= max_num_seqs)
    if mode == "PIECEWISE":
        return CapturePlan(tuple(sizes), (), mode)
    if mode == "FULL":
        return CapturePlan((), tuple(sizes), mode)
    if mode == "FULL_DECODE_ONLY":
        return CapturePlan((), decode, mode)
    return CapturePlan(tuple(sizes), decode, mode)


def split_accumulator_bytes(arch: ModelArchitecture, gpu: GpuSpec, tp: int, largest: int, vllm_version: str,
                            precision: str, language_model_only: bool = False) -> float:
    """FlashAttention 3's fp32 split-KV buffers in a full graph of `largest` tokens; 0 where vLLM does not run
    it (runs_flash_attention_3)."""
    if not runs_flash_attention_3(arch, gpu, vllm_version, precision, language_model_only):
        return 0.0
    heads = max(1, arch.num_attention_heads // tp)
    value_head = arch.kv_lora_rank if arch.is_mla and arch.kv_lora_rank else arch.attn_head_dim
    return float(MAX_SPLITS * largest * heads * value_head * 4)


def model_plan(arch: ModelArchitecture, gpu: GpuSpec, vllm_version: str, precision: str, max_num_seqs: int,
               max_num_batched_tokens: int, *, interactivity: bool = False, enforce_eager: bool = False,
               settings: GraphSettings = GraphSettings(), language_model_only: bool = False) -> CapturePlan:
    """capture_plan for this model: FULL captures mixed batches only where its attention runs FlashAttention 3
    with plain heads (not MLA); breakable graphs by its architecture."""
    fa3 = runs_flash_attention_3(arch, gpu, vllm_version, precision, language_model_only)
    return capture_plan(settings, gpu, vllm_version, max_num_seqs, max_num_batched_tokens,
                        interactivity=interactivity, enforce_eager=enforce_eager, full_mixed=fa3 and not arch.is_mla,
                        breakable=breakable_by_default(arch, gpu, vllm_version))


def graph_gib(calibration: CudaGraphCalibration, arch: ModelArchitecture, gpu: GpuSpec, *, layers: int, tp: int,
              max_num_seqs: int, max_num_batched_tokens: int, vllm_version: str, precision: str,
              lora: bool = False, interactivity: bool = False, enforce_eager: bool = False,
              settings: GraphSettings = GraphSettings(), plan: CapturePlan | None = None,
              language_model_only: bool = False) -> float:
    """CUDA-graph memory of one GPU holding `layers` decoder layers; 0 when no graph is captured (`plan`: the
    model's capture plan when already known, else model_plan). With LoRA vLLM captures every size twice from
    0.12, without adapters and with all slots active (`cudagraph_specialize_lora`; `get_lora_capture_cases`:
    [0, max_loras + 1], since `specialize_active_lora` is off by default), the second set running the LoRA
    kernels as well; before 0.12 only the LoRA set."""
    if plan is None:
        plan = model_plan(arch, gpu, vllm_version, precision, max_num_seqs, max_num_batched_tokens,
                          interactivity=interactivity, enforce_eager=enforce_eager, settings=settings,
                          language_model_only=language_model_only)
    if not plan.graphs:
        return 0.0
    share = plan.graphs / REFERENCE_GRAPHS
    plain = calibration.per_layer_gib
    if lora and release_key(vllm_version) < LORA_TWO_SETS_FIRST:
        plain = 0.0
    moe = 0.0
    if arch.is_moe:
        moe = calibration.mxfp4_moe_per_layer_gib if precision == "mxfp4" else calibration.moe_per_layer_gib
    per_layer = plain + moe + (calibration.lora_per_layer_gib if lora else 0.0)
    return (calibration.base_gib + per_layer * layers * share
            + split_accumulator_bytes(arch, gpu, tp, plan.largest_full, vllm_version, precision,
                                      language_model_only) / GIB)
