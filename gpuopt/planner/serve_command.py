"""The exact `vllm serve` command for a planned replica."""

from __future__ import annotations

import shlex

from gpuopt.physics.architecture import ModelArchitecture
from gpuopt.physics.memory import ResolvedConfig

# --quantization values: fp8 quantises a 16-bit checkpoint at load time; int4/int8 need a checkpoint that
# was quantised beforehand (AWQ / W8A8), which is named in the command's comment.
QUANTIZATION_FLAG = {"fp8": "fp8", "int4": "awq", "int8": "compressed-tensors"}


def vllm_command(arch: ModelArchitecture, cfg: ResolvedConfig) -> str:
    model = arch.hf_id
    parts = ["vllm", "serve", model, "--tensor-parallel-size", str(cfg.tensor_parallel)]
    if cfg.pipeline_parallel > 1:
        parts += ["--pipeline-parallel-size", str(cfg.pipeline_parallel)]
    native = {"mxfp4-experts": "mxfp4", "fp8-block": "fp8"}.get(arch.native_quantization or "")
    if cfg.precision in QUANTIZATION_FLAG and cfg.precision != native:
        parts += ["--quantization", QUANTIZATION_FLAG[cfg.precision]]
    if cfg.precision == "fp16":
        parts += ["--dtype", "float16"]
    if cfg.kv_cache_dtype == "fp8":
        parts += ["--kv-cache-dtype", "fp8"]
    parts += ["--max-model-len", str(cfg.max_model_len), "--max-num-seqs", str(cfg.max_num_seqs),
              "--gpu-memory-utilization", f"{cfg.gpu_memory_utilization:g}"]
    command = shlex.join(parts)
    if cfg.precision == "int4":
        command += f"  # serve an AWQ 4-bit checkpoint of {model}"
    elif cfg.precision == "int8":
        command += f"  # serve a W8A8 checkpoint of {model}"
    return command
