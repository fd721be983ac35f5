"""Which tensor-parallel sizes vLLM can shard a block-FP8 MoE checkpoint's experts over.

A block-FP8 checkpoint (DeepSeek, Qwen3-FP8, MiniMax, GLM: `weight_block_size` [128, 128]) keeps one scale per
128 x 128 block, so a GPU's slice of a weight must hold whole blocks. vLLM checks it while it creates the
weights, and stops at start-up when a slice does not (read in the 0.11.0 and 0.27.1-0.33.0 wheels):

- `validate_fp8_block_shape_moe`, for the routed experts, whose intermediate size FusedMoE splits over TP x DP
  (whole experts per GPU with --enable-expert-parallel): the slice must be a multiple of block_n, and of block_k
  when split. Qwen3-235B-A22B-FP8 at TP 8: 1,536 / 8 = 192 -- "The output_size of gate's and up's weight = 192
  is not divisible by weight quantization block_n = 128" (the vLLM recipe: "TP must divide 12; cap at 4").
- From 0.29 (`refine_fp8_moe_block_shape`, fused_moe/oracle/fp8.py) the expert scales are refined to
  gcd(block_n, block_k, slice, hidden) when that is 32 or more, and the Triton MoE kernel takes them: 192 ->
  64 x 64 blocks, so TP 8 starts; GLM-4.5-Air's 1,408 / 8 = 176 (gcd 16) still does not.

Not checked here: the dense layers' slices. `validate_fp8_block_shape` (quantization/utils/fp8_utils.py) asks
the same of every row-parallel layer split over TP (o_proj, a dense or shared-expert down_proj), but whether a
checkpoint quantizes those layers at all is in its config's ignore list, which a table row does not give, and
shared experts may be fused into the routed ones (`resolve_layer_fused_shared_expert`); refusing on a guess
would drop plans that run. Nor 4-bit Marlin checkpoints (AWQ, GPTQ), whose shape checks depend on padded sizes
some checkpoints carry (Qwen2.5-72B's AWQ and GPTQ repositories pad the intermediate size to 29,696 for TP) that
only their own config.json states.
"""

from __future__ import annotations

import math

from gpuopt.physics.architecture import ModelArchitecture
from gpuopt.physics.vllm_profile import release_key, release_or_default
from gpuopt.vocabulary import WeightFormat

REFINE_FIRST = (0, 29)  # refine_fp8_moe_block_shape: absent from the 0.27.1 and 0.28.0 wheels
REFINE_FLOOR = 32  # "When a finer block size (>= 32) divides both the checkpoint blocks and all involved dims"
NATIVE_BLOCK = 128  # DeepSeek-V3/R1, Kimi-K2, MiniMax-M2 config.json: "weight_block_size": [128, 128]


def fp8_block(arch: ModelArchitecture, precision: WeightFormat) -> int | None:
    """The side of the FP8 scale blocks of the weights served in `precision` (None: not block FP8)."""
    q = arch.quantization
    if q is not None:
        return q.group_size if q.scheme == "fp8-block" and q.group_size and q.group_size > 0 else None
    # a natively block-FP8 model served in its own format
    return NATIVE_BLOCK if arch.native_quantization == "fp8-block" and precision == "fp8" else None


def tp_problem(arch: ModelArchitecture, precision: WeightFormat, tp: int, data_parallel: int,
               expert_parallel: bool, vllm_version: str | None) -> str | None:
    """Why vLLM refuses to shard this block-FP8 MoE checkpoint's experts over `tp` x `data_parallel` GPUs (None:
    it shards them, or the weights served are not block FP8, or the model is not MoE)."""
    block = fp8_block(arch, precision)  # block_n = block_k: every block-FP8 checkpoint gpuopt reads is square
    moe = arch.moe_intermediate_size or 0
    shards = 1 if expert_parallel else tp * data_parallel
    if block is None or not arch.is_moe or not moe or moe % shards:
        return None  # an indivisible split is serving_config.validate's own check
    slice_ = moe // shards
    if slice_ % block == 0:
        return None
    release = release_or_default(vllm_version)
    if release_key(release) >= REFINE_FIRST:
        refine = math.gcd(block, slice_, arch.hidden_size)
        if refine >= REFINE_FLOOR:
            return None
        how = f"vLLM {release} refines the scales only to blocks of {REFINE_FLOOR}+, and gcd is {refine}"
    else:
        how = f"vLLM {release} needs whole blocks (it refines them from 0.29)"
    split = f"TP {tp} x DP {data_parallel}" if data_parallel > 1 else f"TP {tp}"
    return (f"{arch.hf_id}'s {block} x {block} FP8 blocks: each expert's intermediate size, {moe:,} / {split} = "
            f"{slice_:,}, is not a multiple of {block} ({how}); use a TP whose slice is, or --enable-expert-parallel")
