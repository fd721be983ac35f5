"""Which tensor-parallel sizes vLLM can shard a quantized checkpoint over: a block-FP8 MoE checkpoint's
experts, and a grouped 4/8-bit checkpoint's row-parallel layers.

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
would drop plans that run.

Grouped integer checkpoints (AWQ, GPTQ, compressed-tensors W4A16/W8A16: `group_size` g) keep one scale per g
inputs of a layer, so a row-parallel layer's slice of its input (o_proj: heads x head_dim / TP; a dense
down_proj: intermediate / TP) must hold whole groups (`group_problem`). vLLM 0.28: AutoAWQ's Marlin method
needs it even with tile padding (marlin_utils.check_marlin_supports_layer) and its fallback refuses it ("The
input size is not aligned with the quantized weight shape", auto_awq.py AutoAWQLinearMethod.create_weights);
compressed-tensors W4A16 and GPTQ shard their scales and call verify_group_size_divides_partition
(compressed_tensors_wNa16.py, marlin_utils.verify_marlin_supports_shape). Checked only where the checkpoint's
own config.json was read, because the sizes that matter are the checkpoint's: Qwen2.5-72B's AWQ and GPTQ
repositories pad the intermediate size to 29,696 so TP 8 holds whole groups, where the base model's 29,568 would
not -- a table row naming a repository does not carry them. Not checked: act-order GPTQ (its scales are
repeated on every rank, marlin_repeat_scales_on_all_ranks), MoE experts (a misaligned slice falls back to the
MoE WNA16 kernels rather than failing), and hybrid token mixers' own projections.
"""

from __future__ import annotations

import math

from gpuopt.physics.architecture import ModelArchitecture
from gpuopt.physics.quantization import KNOWN_CHECKPOINT_SOURCE
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


GROUPED_SCHEMES = ("awq", "gptq", "w4a16", "w8a16-int")

"""Grouped integer weight-only schemes whose scales vLLM shards along a row-parallel layer's input."""


def group_problem(arch: ModelArchitecture, tp: int) -> str | None:
    """Why vLLM refuses to split this grouped AWQ/GPTQ/W4A16 checkpoint's row-parallel layers over `tp` GPUs
    (None: every slice holds whole groups, or the checkpoint is not grouped, or its config was not read)."""
    q = arch.quantization
    if q is None or q.scheme not in GROUPED_SCHEMES or not q.group_size or q.group_size <= 0 or q.desc_act or tp <= 1:
        return None
    if q.source.startswith(KNOWN_CHECKPOINT_SOURCE):
        # resolved offline from the known-checkpoint table: the base model's sizes, not the checkpoint's (review:
        # Qwen2.5-72B-Instruct-AWQ at TP 8 was refused on 29,568 where its config pads to 29,696)
        return None
    group = q.group_size
    layers: list[tuple[str, int]] = []
    if not q.attention_excluded and "o_proj" not in q.excluded_modules:
        heads_dim = arch.v_head_dim if arch.is_mla and arch.v_head_dim else arch.attn_head_dim
        layers.append(("o_proj", arch.num_attention_heads * heads_dim))
    if not arch.is_moe and arch.intermediate_size and "down_proj" not in q.excluded_modules:
        layers.append(("down_proj", arch.intermediate_size))
    for name, size in layers:
        if size % tp or size <= group:
            continue  # an indivisible split is serving_config.validate's own check; one group per row is whole
        if (size // tp) % group:
            return (f"{arch.hf_id}'s {q.scheme.upper()} groups of {group}: {name}'s {size:,} inputs / TP {tp} = "
                    f"{size // tp:,} per GPU, not a multiple of {group}, which vLLM refuses at start-up; use a TP "
                    f"that keeps whole groups")
    return None
