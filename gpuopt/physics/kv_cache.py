"""How vLLM lays out the KV cache of one GPU: bytes per token per layer of each attention kind (GQA, MLA,
a DSA model's latent and indexer keys), the KV-cache groups of its hybrid allocator (full, sliding-window,
chunked-local, Mamba / linear-attention state), their shared block size and page, the blocks one request of
max_model_len needs, and the block pool the scheduler hands out (KvPool).

Bytes per token per layer: 2 x max(1, kv_heads // TP) x head_dim x dtype bytes for MHA/GQA (heads are
replicated once TP exceeds them), kv_lora_rank + qk_rope_head_dim for MLA (not split by TP). Sliding-window
and chunked-local layers share one block pool with full-attention layers (vLLM's hybrid allocator) but need
only window-many tokens per request.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from gpuopt.hardware import GpuSpec
from gpuopt.physics import sparse_mla
from gpuopt.physics.architecture import ModelArchitecture
from gpuopt.physics.serving_config import ResolvedConfig
from gpuopt.physics.vllm_profile import VllmProfile, release_key, release_or_default
from gpuopt.physics.weights import activation_dtype_bytes, indexer_layers
from gpuopt.vocabulary import (
    KV_LAYER_KINDS,
    STATE_LAYER_KINDS,
    WINDOWED_LAYER_KINDS,
    KvCacheDtype,
    LayerKind,
    WeightFormat,
)

if TYPE_CHECKING:
    from gpuopt.physics.memory import MemoryEstimate


KV_BYTES: dict[str, float] = {"fp8": 1.0}


@dataclass(frozen=True)
class KvGroup:
    """Layers of one attention kind on one stage, as vLLM's hybrid allocator groups them."""

    kind: LayerKind
    layers: int
    bytes_per_token_per_layer: float
    window: int | None = None
    state_bytes_per_layer: float = 0.0  # linear-attention / Mamba layers: constant state per request


def kv_dtype_bytes(arch: ModelArchitecture, precision: WeightFormat, kv_cache_dtype: KvCacheDtype) -> float:
    """`auto` follows the model dtype vLLM runs in (bf16/fp16 = 2 B, fp32 = 4 B); fp8 is 1 B."""
    if kv_cache_dtype == "fp8":
        return KV_BYTES["fp8"]
    return activation_dtype_bytes(arch, precision)


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


def blocks_for(group: KvGroup, max_model_len: int, block_size: int, batched_tokens: int,
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
        """The binding rank's pool (kv_cache.kv_layout's groups; the block size hybrid_block_size gives)."""
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
