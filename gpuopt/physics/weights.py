"""The bytes a model's weights take on each GPU of a replica, as vLLM loads them: quantised linear layers at
their format's bytes with scales (WEIGHT_BYTES, or the checkpoint's own layout), embeddings, norms and the
layers vLLM keeps unquantised in the model dtype, experts sharded by TP or expert parallelism (expert_layout,
MXFP4's padded shapes), layers split over PP stages (stage_layers), and a DSA model's indexer.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from gpuopt.hardware import GpuSpec
from gpuopt.physics.architecture import DTYPE_BYTES, ModelArchitecture
from gpuopt.physics.context_limit import rope_cache_positions
from gpuopt.physics.serving_config import ResolvedConfig
from gpuopt.physics.vllm_profile import release_key, release_or_default
from gpuopt.physics.vllm_support import builds_indexer
from gpuopt.vocabulary import WeightFormat

# Bytes per quantised linear weight, scales included.
#  int4 (AWQ/GPTQ W4A16, group size 128): 4-bit weight + an fp16 scale and a 4-bit zero point per group.
#  mxfp4 (OCP microscaling): 4-bit E2M1 values + one 8-bit E8M0 scale per block of 32.
#  fp8/int8: per-channel or per-tensor scales are negligible next to the weights.
WEIGHT_BYTES: dict[WeightFormat, float] = {
    "bf16": 2.0, "fp16": 2.0, "fp32": 4.0, "fp8": 1.0, "int8": 1.0,
    "int4": 0.5 + (2 + 0.5) / 128, "mxfp4": 0.5 + 1 / 32,
}


def activation_dtype_bytes(arch: ModelArchitecture, precision: WeightFormat) -> float:
    """Activations, embeddings, norms and biases stay in the checkpoint's float type (fp32 only when asked)."""
    if precision in ("bf16", "fp16"):
        return 2.0
    if precision == "fp32":
        return 4.0
    return min(DTYPE_BYTES[arch.torch_dtype], 2.0)


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

    One rule for what vLLM holds (weights.weights_bytes) and what each decode step reads (latency.build_replica):
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
