"""Whether vLLM has an attention backend that serves an fp8 KV cache on a GPU, before Ada.

The fp8 cache is stored as `torch.float8_e4m3fn`, which the Triton kernels read as Triton's `fp8e4nv` -- a type
Triton compiles only for SM89 and newer (`triton/backends/nvidia/compiler.py`: "supported_fp8_dtypes ... if
capability >= 89: add fp8e4nv"; older GPUs fail with "type fp8e4nv not supported in this architecture").
FlashAttention 2 takes no fp8 cache (its `supports_kv_cache_dtype` asks for FlashAttention 3, Hopper). So on
Ampere, Turing and Volta the fp8 cache runs only where vLLM picks FlashInfer (read in the 0.11-0.34 wheels:
`vllm/platforms/cuda.py` `_get_backend_priorities` / `get_attn_backend_cls`, the backends'
`supports_compute_capability`, `get_supported_head_sizes`, `supports_sink`, and the METADATA requirements):

- 0.11 chose the backend by rule: Triton for an fp8 cache on SM80+ off Hopper, FlexAttention (no fp8 cache)
  below SM80, and FlashInfer was an optional extra. No pre-Ada GPU runs it.
- 0.12-0.23 walk a priority list (FlashAttention, FlashInfer, Triton, FlexAttention) and keep the first backend
  that accepts the configuration; FlashInfer is a requirement of the wheel and accepts SM75 (Turing) and newer,
  head sizes 64, 128, 256 (and 512 from 0.22), and no attention sinks off Hopper and Blackwell (gpt-oss).
- From 0.24 FlashInfer's floor is SM80 ("currently broken on SM75 (Turing)"), and the Triton backends refuse an
  fp8 cache below SM89 at start-up ("FP8 KV cache is not supported by the Triton attention backend ... native
  FP8 (fp8e4nv) requires SM89+").
- MLA models have no FlashInfer path before Blackwell: Triton MLA is the only backend below SM90, so never.
- Volta (SM70) has no FlashInfer at all.

DSA (sparse MLA) models are refused below Hopper whatever the cache (sparse_mla.unsupported); ROCm GPUs are not
judged here.
"""

from __future__ import annotations

from gpuopt.hardware import GpuSpec
from gpuopt.physics.architecture import ModelArchitecture
from gpuopt.physics.vllm_profile import release_key, release_or_default

NATIVE_FP8 = 89  # Triton's fp8e4nv: SM89 and newer
PRIORITY_LIST_FIRST = (0, 12)  # _get_backend_priorities; FlashInfer a requirement of the wheel
SM80_FLOOR_FIRST = (0, 24)  # FlashInferBackend.supports_compute_capability: SM75 -> SM80
HEAD_512_FIRST = (0, 22)  # FlashInferBackend.get_supported_head_sizes gains 512


def unsupported(arch: ModelArchitecture, gpu: GpuSpec, kv_cache_dtype: str, vllm_version: str | None) -> str | None:
    """Why vLLM refuses (or fails to start) this model with this KV-cache dtype on this GPU; None when it runs."""
    cc = gpu.compute_capability
    if kv_cache_dtype != "fp8" or cc is None or cc >= NATIVE_FP8:
        return None
    release = release_or_default(vllm_version)
    key = release_key(release)
    why = _no_flashinfer(arch, cc, key)
    if why is None:
        return None
    return (f"an fp8 KV cache on {gpu.gpu} (sm{cc}): vLLM {release}'s Triton kernels need native FP8 (SM89+) "
            f"and {why}")


def _no_flashinfer(arch: ModelArchitecture, cc: int, key: tuple[int, ...]) -> str | None:
    """Why FlashInfer does not take the fp8 cache here (None: it does)."""
    if key < PRIORITY_LIST_FIRST:
        return "this release sends an fp8 cache to them (FlashInfer only when asked for)"
    if arch.is_mla:
        return "MLA has no FlashInfer backend before Blackwell"
    floor = 80 if key >= SM80_FLOOR_FIRST else 75
    if cc < floor:
        return f"FlashInfer needs sm{floor}+ in this release"
    heads = (64, 128, 256, 512) if key >= HEAD_512_FIRST else (64, 128, 256)
    head = arch.attn_head_dim
    if head not in heads:
        return f"FlashInfer takes head sizes {', '.join(map(str, heads))}, not {head}"
    if arch.attention_sinks:
        return "FlashInfer takes attention sinks only on Hopper and Blackwell"
    return None
