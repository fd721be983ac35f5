"""The shared vocabulary of gpuopt: the names every layer speaks, defined once.

This is the ground floor with `errors` and `hardware`: physics, pricing, inputs, planner, reports and cli may
all import it, and it imports nothing of gpuopt. A new precision, layer kind, price kind or provider is added
here, and the layers that branch on it read the tuples below instead of repeating the list.
"""

from __future__ import annotations

from typing import Literal, get_args

# ---- weights and KV cache ------------------------------------------------------------------------
WeightFormat = Literal["bf16", "fp16", "fp32", "fp8", "int8", "int4", "mxfp4"]
WEIGHT_FORMATS: tuple[WeightFormat, ...] = get_args(WeightFormat)
KvCacheDtype = Literal["auto", "fp8"]
KV_CACHE_DTYPES: tuple[KvCacheDtype, ...] = get_args(KvCacheDtype)

# ---- attention --------------------------------------------------------------------------------------
AttentionKind = Literal[
    "mha", "gqa", "mla", "sliding-window", "sliding-window mix", "chunked-local mix", "gqa + cross-attn",
    "linear-attention hybrid",
]
"""How a model's attention is described in the registry (models.csv `attention_kind`)."""

LayerKind = Literal["full", "sliding", "chunked", "mla", "cross", "linear", "mamba", "ffn"]
"""What one decoder layer is, as vLLM builds its KV-cache spec from it: softmax attention (full, sliding,
chunked-local, MLA, cross), linear attention (lightning or Gated DeltaNet), a Mamba-2 mixer, or a block
with no token mixer at all (`ffn`: the MoE/MLP-only blocks of Nemotron-H)."""
LAYER_KINDS: tuple[LayerKind, ...] = get_args(LayerKind)
STATE_LAYER_KINDS: tuple[LayerKind, ...] = ("linear", "mamba")
"""Layer kinds that keep a constant per-sequence state (conv + recurrent/SSM state) instead of per-token KV:
vLLM gives them a MambaSpec, one page per request whatever its length."""
KV_LAYER_KINDS: tuple[LayerKind, ...] = ("full", "mla", "sliding", "chunked")
"""Layer kinds that keep a per-token KV cache of the text (cross-attention keeps the encoder's, linear
attention a fixed-size state): the memory model sizes blocks for these, the latency model reads their KV."""
WINDOWED_LAYER_KINDS: tuple[LayerKind, ...] = ("sliding", "chunked")
"""Layer kinds whose KV is bounded by a window (sliding) or a chunk (chunked-local attention)."""

# ---- hardware links ------------------------------------------------------------------------------
LinkKind = Literal["nvlink", "pcie"]
LINK_KINDS: tuple[LinkKind, ...] = get_args(LinkKind)

# The longest request any length may ask for (workload files, `simulate`'s length flags): the registry's longest
# context (Llama-4-Scout, 10M tokens)
MAX_TOKENS = 10_000_000

# vLLM's `--performance-mode` (vllm/config/vllm.py PerformanceMode, v0.17.0 wheel onwards)
PerformanceMode = Literal["balanced", "interactivity", "throughput"]
PERFORMANCE_MODES: tuple[PerformanceMode, ...] = get_args(PerformanceMode)

# vLLM's CUDAGraphMode (vllm/config/compilation.py, the 0.10.1.1-0.34.0 wheels): which graphs it captures --
# piecewise graphs (attention run eagerly between them) for every capture size, full graphs (attention inside)
# for every size or only for decode batches, both, or none
CudagraphMode = Literal["NONE", "PIECEWISE", "FULL", "FULL_DECODE_ONLY", "FULL_AND_PIECEWISE"]
CUDAGRAPH_MODES: tuple[CudagraphMode, ...] = get_args(CudagraphMode)
# vLLM's CompilationMode (vllm/config/compilation.py, 0.12+; `-cc.mode`, an integer 0-3 or the name): only
# VLLM_COMPILE splits the model into the pieces piecewise CUDA graphs capture
CompilationMode = Literal["NONE", "STOCK_TORCH_COMPILE", "DYNAMO_TRACE_ONCE", "VLLM_COMPILE"]
COMPILATION_MODES: tuple[CompilationMode, ...] = get_args(CompilationMode)

# ---- why a candidate is rejected ---------------------------------------------------------------------
LatencyTarget = Literal["ttft", "tpot"]
"""A latency target of a workload: time to first token, time per output token."""
RejectionKind = Literal["residency", "provider", "price-kind", "no-price", "gpu-data", "precision", "fit", "ttft",
                        "tpot", "capacity", "multi-node", "simulation"]
"""Why a candidate cannot serve a workload, in the order the checks run: the policy (residency, provider,
price kind), the offering's data (no usable price, GPU specs missing), the GPU (precision), memory (fit),
a latency target a lone request misses (ttft, tpot), or no load at all within the targets (capacity); a shape
that passes all of them but spans instances a service cannot join into one server (multi-node:
candidates.MULTI_NODE_SERVICES); or left out of a simulated plan because the analytic screen ranked it below the
shapes that were simulated (simulation)."""
REJECTION_KINDS: tuple[RejectionKind, ...] = get_args(RejectionKind)

# ---- prices ----------------------------------------------------------------------------------------
PriceKind = Literal[
    "on-demand", "spot", "community", "reserved-1y", "reserved-3y", "savings-plan", "savings-plan-3y",
    "subscription-monthly", "subscription-1y", "capacity-block", "contract",
]
PRICE_KINDS: tuple[str, ...] = get_args(PriceKind)

Currency = Literal["USD", "CNY"]
CURRENCIES: tuple[str, ...] = get_args(Currency)
Provider = Literal["alibaba", "aws", "digitalocean", "modal", "replicate", "runpod", "tencent"]
PROVIDERS: tuple[str, ...] = get_args(Provider)
