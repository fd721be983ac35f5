"""How many state pages a request of a hybrid model holds in each Mamba / linear-attention layer.

A hybrid's Gated DeltaNet, Mamba-2 or lightning layer keeps a constant state per request, paged in the same pool
as the attention blocks (kv_cache.kv_layout). How many pages a request takes depends on vLLM's
`mamba_cache_mode`, which follows prefix caching (`MambaModelConfig.verify_and_update_config`,
vllm/model_executor/models/config.py): off -> "none", one page; on -> "align", the state at the last two block
boundaries, plus one page per prefill checkpoint where the layer exports one (`MambaSpec.max_memory_usage_bytes`
in vllm/v1/kv_cache_interface.py: `page x (2 + speculative + prefill checkpoint blocks)` in align mode).

Read in the wheels (2026-12-02):
- prefix caching for generative hybrids is off by default up to 0.27 (0.25: `is_prefix_caching_supported` False
  for them; 0.26-0.27: EngineArgs sets `default_prefix_caching = supported and not model_config.is_hybrid`) and
  on from 0.28 (`default_prefix_caching = model_config.is_prefix_caching_supported`, True for hybrids);
- Mamba-2 (`MambaMixer2.get_kv_cache_spec`) exports a prefill checkpoint from 0.32;
- Gated DeltaNet (`QwenGatedDeltaNet...get_kv_cache_spec`) from 0.33, when its prefill runs on FlashInfer:
  Hopper, or Blackwell (sm100/sm120) with 128-wide keys on CUDA 13 (`_resolve_gdn_prefill_backend`; vLLM 0.33's
  PyPI wheel is a CUDA 13 build) -- Ampere and Ada run Triton/FLA and take no checkpoint;
- lightning attention (MiniMax-M1) exports none, and no release since 0.23 serves it.
Speculative decoding's extra pages are not modelled (gpuopt plans no draft model).
"""

from __future__ import annotations

from gpuopt.physics.architecture import ModelArchitecture
from gpuopt.physics.vllm_profile import release_key, release_or_default
from gpuopt.vocabulary import STATE_LAYER_KINDS

HYBRID_PREFIX_CACHING_FROM = (0, 28)
ALIGN_MODE_FROM = (0, 26)  # the first release whose EngineArgs decide prefix caching for hybrids by is_hybrid
MAMBA2_CHECKPOINT_FROM = (0, 32)
GDN_CHECKPOINT_FROM = (0, 33)
FLASHINFER_GDN_KEY_DIM = 128


def is_hybrid(arch: ModelArchitecture) -> bool:
    """vLLM's `is_hybrid`: some layers keep a per-request state (Mamba, linear attention)."""
    return any(kind in STATE_LAYER_KINDS for kind in arch.layer_kind_prefix)  # the kinds present, cached


def prefix_caching_default(arch: ModelArchitecture, vllm_version: str | None) -> bool:
    """`--enable-prefix-caching` unset: on for every generative model, for hybrids only from 0.28."""
    if not is_hybrid(arch):
        return True
    return release_key(release_or_default(vllm_version)) >= HYBRID_PREFIX_CACHING_FROM


def pages_per_request(kind: str, arch: ModelArchitecture, compute_capability: int | None,
                      vllm_version: str | None, prefix_caching: bool) -> int:
    """State pages one request holds in one layer of this kind ("mamba": Mamba-2; "linear": Gated DeltaNet, or
    lightning attention when the model has no `linear_num_value_heads`)."""
    key = release_key(release_or_default(vllm_version))
    if not prefix_caching or key < ALIGN_MODE_FROM:
        return 1  # mamba_cache_mode "none" (prefix caching for hybrids before 0.26 is not modelled)
    checkpoint = 0
    if kind == "mamba" and key >= MAMBA2_CHECKPOINT_FROM:
        checkpoint = 1
    elif kind == "linear" and arch.linear_num_value_heads and key >= GDN_CHECKPOINT_FROM:  # Gated DeltaNet
        cc = compute_capability or 0
        flashinfer = cc == 90 or (cc in (100, 120) and arch.linear_key_head_dim == FLASHINFER_GDN_KEY_DIM)
        checkpoint = 1 if flashinfer else 0
    return 2 + checkpoint
