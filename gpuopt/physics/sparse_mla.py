"""The KV-cache layout of a DSA (DeepSeek sparse attention) model, which depends on the GPU and the release.

DeepSeek-V3.2 and GLM-5 run MLA through a *sparse* MLA backend, and which one vLLM picks -- and so how each
token's latent is stored -- depends on the GPU generation, the requested KV-cache dtype and the release
(read in the wheels: `vllm/platforms/cuda.py` backend priorities, the backends' `supported_kv_cache_dtypes`
and `supports_compute_capability`, and the dtype rewrites in `models/config.py` (0.11-0.17) and
`layers/attention/mla_attention.py` (0.18+)):

- FlashMLA sparse (sm90, sm100; every release) stores any 8-bit cache in DeepSeek's **fp8_ds_mla** layout:
  512 fp8 latent values + one fp32 scale per 128 + 64 bf16 RoPE values = 656 B a token and layer.
- FlashInfer's sparse MLA (sm100, from 0.18) stores fp8 plainly: 576 B. vLLM prefers it for fp8 caches from
  0.19, and in 0.18 when a GPU holds at most 16 heads (it took bf16 only in 0.17).
- FlashInfer's SM120 sparse MLA (RTX Blackwell, from 0.24) is the only sparse backend there and takes even
  `auto` to fp8_ds_mla; it requires `index_topk` 2048.
- 0.11 rewrote `auto` to fp8_ds_mla for every DSA model ("we use a custom fp8 format as default").
- No release has a sparse MLA backend for Ampere, Ada or older: vLLM stops at start-up ("No valid attention
  backend"), so gpuopt refuses those GPUs for a DSA model. ROCm is not modelled here (its AITER backend
  is left as the FlashMLA layout).
"""

from __future__ import annotations

from typing import Literal

from gpuopt.hardware import GpuSpec
from gpuopt.physics.architecture import ModelArchitecture
from gpuopt.physics.vllm_profile import release_key, release_or_default

KvFormat = Literal["model", "fp8", "fp8_ds_mla"]
"""How a DSA layer stores a token: in the model dtype, plain fp8 (576 B), or DeepSeek's fp8_ds_mla (656 B)."""

SM120_FIRST = (0, 24)  # FlashInferMLASparseSM120Backend: absent from the 0.21-0.23 wheels, present from 0.24.0
SM120_INDEX_TOPK = 2048  # its supports_combination: "requires index_topk=2048"
FLASHINFER_NOPE_DIMS = (128, 192)  # FlashInfer sparse MLA: "requires qk_nope_head_dim in [128, 192]"


def kv_format(arch: ModelArchitecture, compute_capability: int | None, kv_cache_dtype: str, tp: int,
              vllm_version: str | None) -> KvFormat:
    """The layout vLLM gives a DSA model's MLA cache on a GPU of this compute capability (None: not CUDA,
    or unknown; then FlashMLA's). Models without a DSA indexer store `kv_cache_dtype` as asked."""
    fp8 = kv_cache_dtype == "fp8"
    if not arch.indexer_params:
        return "fp8" if fp8 else "model"
    key = release_key(release_or_default(vllm_version))
    if key[:2] == (0, 11):
        return "fp8_ds_mla"  # DeepseekV32ForCausalLM.verify_and_update_config: auto or fp8 -> fp8_ds_mla
    if compute_capability == 120:
        return "fp8_ds_mla"  # _canonicalize_sparse_mla_kv_cache_dtype: SM120 maps auto/fp8 to it
    if not fp8:
        return "model"
    if compute_capability == 100 and key >= (0, 18) and arch.qk_nope_head_dim in FLASHINFER_NOPE_DIMS:
        heads_per_gpu = arch.num_attention_heads // max(tp, 1)
        if key >= (0, 19) or heads_per_gpu <= 16:
            return "fp8"  # FLASHINFER_MLA_SPARSE first; its fp8 is plain ("Using standard fp8 KV cache format")
    return "fp8_ds_mla"


def bytes_per_token_per_layer(arch: ModelArchitecture, fmt: KvFormat, model_bytes: float) -> float:
    """A token's MLA cache in one layer: the 576-value latent + RoPE row at `model_bytes` a value, plain fp8,
    or fp8_ds_mla (fp8 latent, fp32 scale per 128 values, RoPE kept in bf16)."""
    latent, rope = arch.kv_lora_rank or 0, arch.qk_rope_head_dim or 0
    if fmt == "fp8_ds_mla":
        return latent + latent // 128 * 4 + rope * 2
    return (latent + rope) * (1.0 if fmt == "fp8" else model_bytes)


def backend_problem(arch: ModelArchitecture, compute_capability: int | None, vllm_version: str | None) -> str | None:
    """Why no sparse MLA backend of vLLM `vllm_version` runs this DSA model on GPUs of this compute capability
    (None when one does, when the model has no DSA indexer, or when the GPU is not CUDA)."""
    cc = compute_capability
    if not arch.indexer_params or cc is None or cc in (90, 100):
        return None
    release = release_or_default(vllm_version)
    if cc == 120:
        if release_key(release) < SM120_FIRST:
            return (f"vLLM {release} runs DeepSeek sparse attention only on Hopper and datacenter Blackwell; sm120 "
                    "has a sparse MLA backend from vLLM 0.24")
        if arch.index_topk != SM120_INDEX_TOPK:
            return (f"vLLM's only sparse MLA backend on sm120 (FLASHINFER_MLA_SPARSE_SM120) requires index_topk "
                    f"{SM120_INDEX_TOPK}; the model attends to the top {arch.index_topk} tokens")
        return None
    return ("vLLM runs DeepSeek sparse attention only on Hopper and Blackwell (FlashMLA and FlashInfer sparse MLA "
            "kernels): no attention backend starts")


def unsupported(arch: ModelArchitecture, gpu: GpuSpec, vllm_version: str | None) -> str | None:
    """Why vLLM has no sparse MLA backend for this DSA model on this GPU (None when it has one, or when
    the model has no DSA indexer)."""
    why = backend_problem(arch, gpu.compute_capability, vllm_version)
    return None if why is None else (f"{arch.hf_id} uses DeepSeek sparse attention and {gpu.gpu} is "
                                     f"{gpu.architecture} (sm{gpu.compute_capability}): {why}")
