"""GPU memory of vLLM's LoRA adapter slots (`--enable-lora --max-loras N --max-lora-rank R`).

With LoRA enabled, vLLM wraps every linear layer it supports and allocates, at load time, stacked A and B
buffers for `max_loras` adapters of `max_lora_rank` in the model's dtype (vllm/lora/layers/*.py
create_lora_weights, read in the 0.27.1 wheel; the same shapes since 0.11.0, checked in the 0.11.0 and
0.12.0-0.17.0 wheels). They are allocated inside
`load_model`, so "Model loading took" includes them, and they grow with the slots, not with the adapters
registered: a slot costs the same whether or not it ever holds one.

Per slot and per GPU, with r the rank, h the hidden size and TP t (no `--fully-sharded-loras`):
  column-parallel linear (qkv, gate_up, shared experts' gate_up): A  r x input per output slice (not split),
                                                                   B  output / t x r
  row-parallel linear (o_proj, down_proj):                         A  input / t x r,  B  output x r
  replicated linear (MLA's q_a / kv_a down-projections):           A  r x input,      B  output x r
  routed experts (FusedMoEWithLoRA, v0.12+): per expert the GPU holds, w13 A  slices x r x h,
      w13 B  slices x I x r, w2 A  r x I, w2 B  h x r (I: the expert's intermediate slice on this GPU)
  LM head (LogitsProcessorWithLoRA): A  r x h,  B  vocab x r (the whole vocabulary, on every rank)
  input embedding: A  vocab x r,  B  h x r; when the LM head is tied to it, vLLM wraps the shared module a
      second time under the lm_head name. vLLM allocates these only for model classes that declare
      `embedding_modules` (0.33: Llama, Mistral, Mixtral, Qwen3 and Qwen3-MoE -- those two from v0.16 --,
      Granite, Nemotron, Command-R, ...; not Qwen2, Gemma, DeepSeek, gpt-oss), per release in
      gpuopt/data/vllm_architectures.csv (physics/vllm_support.py). Where the model's class is not known
      they are counted: at most (vocab + h) x r x 2 B a slot too many (twice if tied; 4.9 MB at rank 16 for
      a 152k vocabulary), the conservative side. A class without LoRA support is refused by name.
Up to v0.11 the LM head also kept 256 extra-vocabulary rows of h per slot (lora_extra_vocab_size, removed in
v0.12).

Gated DeltaNet layers (Qwen3-Next, Qwen3.5) are described (`_gdn`: vLLM wraps every linear layer of the
mixer, in the projection layout each model uses; in_proj_ba whole under Marlin from 0.27.1), Mamba-2 mixers
(`_mamba2`, Nemotron-H: which of in_proj, conv1d and out_proj are wrapped depends on the release) and the DSA
indexer (`_indexer`, DeepSeek-V3.2, GLM-5: its replicated projections, on the layers that build one); lightning
attention is not (MiniMax-M1's class has no LoRA in any release), and a model of such an unknown layer kind
raises an error naming it.
A MoE layer's router gate is a ReplicatedLinear (GateLinear in 0.33) that vLLM wraps like any other:
(hidden + experts) x r, whole on every GPU (`_router`); Qwen2-MoE-style shared-expert gates (hidden -> 1) are
not counted. The activation
peak and CUDA-graph memory LoRA adds (dummy adapters in the profiling run, graphs captured with LoRA) are
not modelled either; on the one published start-up set (Qwen3-4B on an RTX 4090, vLLM 0.27.1, rank 16) the
slot cost this module gives is within 2.5 % of the logged growth from 1 to 64 slots.
"""

from __future__ import annotations

from gpuopt.errors import InputError
from gpuopt.physics.architecture import ModelArchitecture
from gpuopt.physics.vllm_profile import release_key, release_or_default
from gpuopt.physics.vllm_support import builds_indexer, lora_embedding_buffers, lora_problem

# vLLM's LoRAConfig.max_lora_rank choices: MaxLoRARanks from 0.12 (0.12.0-0.34.0 sources); up to 0.11
# LoRAConfig.__post_init__'s possible_max_ranks, the same without 1 (0.10.1.1 and 0.11.0 sources)
LORA_RANKS = (1, 8, 16, 32, 64, 128, 256, 320, 512)
RANK_ONE_FIRST = (0, 12)
EXTRA_VOCAB = 256  # lora_extra_vocab_size, v0.11 and before
_MIXERS_DESCRIBED = {"full", "sliding", "chunked", "mla", "ffn", "mamba"}


def rank_problem(rank: int, vllm_version: str | None = None) -> str | None:
    """The one check of a --max-lora-rank value (fit, --server-args, the memory model) against the release's
    choices (None: the default release), None when valid."""
    release = release_or_default(vllm_version)
    ranks = LORA_RANKS if release_key(release) >= RANK_ONE_FIRST else LORA_RANKS[1:]
    if rank in ranks:
        return None
    return (f"--max-lora-rank must be one of {', '.join(map(str, ranks))} (got {rank}): vLLM {release}'s LoRAConfig "
            "accepts only these")


def lora_problems(arch: ModelArchitecture, max_loras: int, rank: int, vllm_version: str | None, *,
                  tp: int = 1, data_parallel: int = 1, expert_parallel: bool = False,
                  fully_sharded: bool = False) -> list[str]:
    """Why these LoRA settings cannot be modelled for this model on this release (empty when they can),
    including what vLLM itself refuses (read in the wheels' vllm/lora/layers/fused_moe.py):
    expert parallelism with MoE LoRA from 0.12 to 0.20 ("EP support for Fused MoE LoRA is not implemented
    yet"), and from 0.21 together with --fully-sharded-loras; a rank the fully sharded buffers cannot split
    over the GPUs (`divide` asserts)."""
    if not max_loras:
        return []
    problems = []
    if (unsupported := lora_problem(arch, vllm_version)) is not None:
        return [unsupported]
    if max_loras < 0:
        problems.append(f"--max-loras must be >= 1 (got {max_loras})")
    if (bad_rank := rank_problem(rank, vllm_version)) is not None:
        problems.append(bad_rank)
    described = _MIXERS_DESCRIBED | ({"linear"} if gdn_layout(arch) is not None else set())
    other: list[str] = sorted(set(arch.layer_kinds()) - described)
    if other:
        problems.append(f"LoRA buffers of {arch.hf_id}'s {', '.join(other)} layers are not modelled; "
                        "plan it without --enable-lora (its adapter memory is then not counted)")
    version = release_or_default(vllm_version)
    release = release_key(version)
    if arch.is_moe and expert_parallel and (0, 12) <= release < (0, 21):
        problems.append(f"vLLM {version} refuses LoRA on {arch.hf_id}'s experts with --enable-expert-parallel "
                        "('EP support for Fused MoE LoRA is not implemented yet'; lifted in 0.21): drop one")
    if fully_sharded:
        if arch.is_moe and expert_parallel and release >= (0, 21):
            problems.append("--fully-sharded-loras with --enable-expert-parallel: vLLM's MoE LoRA takes one or the "
                            "other ('Disable one of them')")
        shards = tp * (data_parallel if arch.is_moe and not expert_parallel else 1)
        if rank % shards:
            problems.append(f"--fully-sharded-loras splits each adapter's rank over {shards} GPUs: --max-lora-rank "
                            f"{rank} does not divide by {shards} (vLLM's divide() asserts)")
    return problems


def gdn_layout(arch: ModelArchitecture) -> str | None:
    """How vLLM packs a Gated DeltaNet layer's input projections, which decides how many LoRA A matrices it
    holds (vllm/model_executor/layers/mamba/gdn/qwen_gdn_linear_attn.py create_qkvz_proj / create_ba_proj,
    the same in the 0.27.1 and 0.33.0 wheels; 0.17.0's qwen3_next.py / qwen3_5.py): Qwen3-Next keeps
    in_proj_qkvz and in_proj_ba as one fused output each ("interleaved": one A apiece), Qwen3.5 as 4 and 2
    outputs ("split": one A per output, MergedColumnParallelLinearWithLoRA). None for another linear-attention
    model or an unknown class: not described."""
    if not (arch.linear_num_key_heads and arch.linear_num_value_heads and arch.linear_key_head_dim
            and arch.linear_value_head_dim):
        return None
    if arch.hf_architecture == "Qwen3NextForCausalLM":
        return "interleaved"
    if arch.hf_architecture is not None and arch.hf_architecture.startswith("Qwen3_5"):
        return "split"
    return None


def _gdn(arch: ModelArchitecture, tp: int, sharded: bool, release: tuple[int, ...]) -> float:
    """A Gated DeltaNet layer's LoRA elements per unit of rank on one GPU: vLLM wraps every linear layer of
    the mixer -- in_proj_qkvz (q, k, v, z), in_proj_ba (b, a), the depthwise conv1d (a ColumnParallelLinear
    of kernel-size inputs, whose wrapper is allocated like any other) and out_proj (row-parallel). From
    0.27.1 an AWQ or GPTQ checkpoint in the split layout (Qwen3.5) keeps in_proj_ba whole on every GPU
    (`maybe_disable_tp`: Marlin needs 64 outputs a GPU), so its LoRA buffers are whole too (a layer of TP
    size 1: MergedColumnParallelLinearWithLoRA, not the sharded variant)."""
    h, kernel = arch.hidden_size, arch.linear_conv_kernel_dim or 4
    nv = arch.linear_num_value_heads or 0
    k = (arch.linear_num_key_heads or 0) * (arch.linear_key_head_dim or 0)
    v = nv * (arch.linear_value_head_dim or 0)
    fused = gdn_layout(arch) == "interleaved"
    marlin_whole = (not fused and release >= (0, 27) and arch.quantization is not None
                    and arch.quantization.method in ("awq", "gptq"))
    ba = _column(h, [nv, nv], 1) if marlin_whole else _column(h, [2 * nv] if fused else [nv, nv], tp, sharded)
    return (_column(h, [2 * k + 2 * v] if fused else [k, k, v, v], tp, sharded) + ba
            + _column(kernel, [2 * k + v], tp, sharded) + _row(v, h, tp, sharded))


def _mamba2(arch: ModelArchitecture, tp: int, sharded: bool, release: tuple[int, ...]) -> float:
    """A Mamba-2 mixer's LoRA elements per unit of rank on one GPU (vllm/model_executor/layers/mamba/
    mamba_mixer2.py and vllm/lora/layers, read in the 0.10.1.1, 0.11.0, 0.12.0, 0.14.0, 0.16.0, 0.17.0, 0.20.0
    and 0.33.0 wheels). out_proj is row-parallel in every release. in_proj (z, x, B, C, dt) and the
    depthwise conv1d (x, B, C over kernel-size inputs) are one ColumnParallelLinear each up to 0.10 and
    whenever the GPUs do not divide the groups (one A, the groups replicated to the GPUs); from 0.11 they are
    MergedColumnParallelLinear of 5 and 3 outputs, which no LoRA wrapper took until 0.16's
    MergedColumnParallelLinearVariableSliceWithLoRA (one A per output) -- and which it still leaves unwrapped
    with --fully-sharded-loras."""
    h, kernel, heads = arch.hidden_size, arch.mamba_conv_kernel or 4, arch.mamba_num_heads or 0
    inner, groups, state = heads * (arch.mamba_head_dim or 0), arch.mamba_n_groups or 1, arch.ssm_state_size or 0
    total = _row(inner, h, tp, sharded)  # out_proj
    if release < (0, 11) or groups % tp:
        shared = groups + (0 if groups % tp == 0 else tp - groups)  # extra_groups_for_head_shards
        conv_dim = inner + 2 * shared * state
        return total + _column(h, [inner + conv_dim + heads], tp, sharded) + _column(kernel, [conv_dim], tp, sharded)
    if release < (0, 16) or sharded:
        return total
    bc = groups * state
    return total + _column(h, [inner, inner, bc, bc, heads], tp) + _column(kernel, [inner, bc, bc], tp)


def _indexer(arch: ModelArchitecture, release: tuple[int, ...]) -> float:
    """A DSA indexer's LoRA elements per unit of rank (replicated, so whole on every GPU, fully sharded
    too): wq_b (q_lora_rank -> heads x dim) in every release; wk (h -> dim) and weights_proj (h -> heads)
    up to 0.19, which 0.20 fuses into one wk_weights_proj that no LoRA wrapper takes (a
    MergedColumnParallelLinear of 2 outputs with no packed_modules_mapping entry; read in the 0.11.0,
    0.17.0, 0.20.0 and 0.33.0 wheels)."""
    ih, idim, h = arch.index_n_heads or 0, arch.index_head_dim or 0, arch.hidden_size
    total = (arch.q_lora_rank or h) + ih * idim
    if release < (0, 20):
        total += h + idim + h + ih
    return total


def _router(arch: ModelArchitecture, release: tuple[int, ...]) -> int:
    """A MoE layer's router gate, per unit of rank (replicated: whole on every GPU, fully sharded too). Every
    release wraps it (`get_supported_lora_modules` takes every LinearBase; read in the 0.10.1.1, 0.11.0,
    0.12.0 and 0.33.0 wheels) except where it is not a LinearBase -- gpt-oss's router is a torch.nn.Linear up
    to 0.16, a ReplicatedLinear from 0.17 -- and, from 0.16, a non-gated MoE's gate (Nemotron-H,
    `is_non_gated_moe`: "LoRA is not supported for non-gated MoE gate module")."""
    if arch.hf_architecture == "GptOssForCausalLM" and release < (0, 17):
        return 0
    if arch.hf_architecture == "NemotronHForCausalLM" and release >= (0, 16):
        return 0
    return arch.hidden_size + (arch.num_experts or 0)


def _column(inputs: int, outputs: list[int], tp: int, sharded: bool = False) -> float:
    """Elements per unit of rank of a column-parallel layer's A (one per output slice) and B on one GPU;
    --fully-sharded-loras splits A's rank over the TP group too (S-LoRA)."""
    return len(outputs) * inputs / (tp if sharded else 1) + sum(outputs) // tp


def _row(inputs: int, output: int, tp: int, sharded: bool = False) -> float:
    """The same for a row-parallel layer; --fully-sharded-loras splits B's output over the TP group."""
    return inputs // tp + output / (tp if sharded else 1)


def lora_bytes(arch: ModelArchitecture, tp: int, layers: range, first: bool, last: bool, expert_shards: float,
               expert_parallel: bool, vllm_version: str, max_loras: int, rank: int, dtype_bytes: float,
               fully_sharded: bool = False) -> float:
    """Bytes of the LoRA buffers on one GPU of a stage: max_loras x (rank x the A and B elements of a
    rank-1 slot + the rank-free extra-vocabulary rows) x the model dtype's bytes. 0 when LoRA is off.

    `expert_shards`: GPUs the routed experts are spread over (ResolvedConfig.moe_shards); with expert
    parallelism a GPU holds whole experts (E / shards of them, the first GPU the remainder), without it
    every expert sliced. `fully_sharded`: vLLM's --fully-sharded-loras."""
    if not max_loras:
        return 0.0
    problems = lora_problems(arch, max_loras, rank, vllm_version, tp=tp, expert_parallel=expert_parallel,
                             fully_sharded=fully_sharded)
    if problems:
        raise InputError(*problems)
    per_rank, fixed = _slot_elements(arch, tp, layers, first, last, expert_shards, expert_parallel, vllm_version,
                                     fully_sharded)
    return max_loras * (rank * per_rank + fixed) * dtype_bytes


def _slot_elements(arch: ModelArchitecture, tp: int, layers: range, first: bool, last: bool,
                   expert_shards: float, expert_parallel: bool, vllm_version: str,
                   sharded: bool = False) -> tuple[float, int]:
    """(elements per unit of rank, rank-free elements) of one slot on one GPU of a stage. `sharded`
    (--fully-sharded-loras): column-parallel A and row-parallel B split over the TP group, and in the
    experts w13's A and w2's B over the expert shards (replicated layers, the LM head and the embedding
    stay whole)."""
    release = release_key(vllm_version)
    h = arch.hidden_size
    nh, hd = arch.num_attention_heads, arch.attn_head_dim
    slices = 2 if arch.mlp_kind == "gated" else 1  # gate_up (w13) or up (w1)
    kinds = arch.layer_kinds()
    total = 0.0
    for index in layers:
        if arch.is_mla:
            rope, nope = arch.qk_rope_head_dim or 0, arch.qk_nope_head_dim or 0
            vhd, kvr = arch.v_head_dim or hd, arch.kv_lora_rank or 0
            if arch.q_lora_rank:
                total += h + arch.q_lora_rank  # q_a_proj (replicated)
                total += _column(arch.q_lora_rank, [nh * (nope + rope)], tp, sharded)
            else:
                total += _column(h, [nh * (nope + rope)], tp, sharded)
            total += h + kvr + rope  # kv_a_proj_with_mqa (replicated)
            total += _column(kvr, [nh * (nope + vhd)], tp, sharded) + _row(nh * vhd, h, tp, sharded)
            if builds_indexer(arch, index, vllm_version):
                total += _indexer(arch, release)
        elif kinds[index] == "mamba":
            total += _mamba2(arch, tp, sharded, release)
        elif kinds[index] == "linear":
            total += _gdn(arch, tp, sharded, release)
        elif kinds[index] != "ffn":
            q, kv = nh * hd, arch.num_key_value_heads * hd
            kv_rank = max(kv // tp, hd)  # KV heads replicated once TP exceeds them
            a_inputs = 3 * h / (tp if sharded else 1)  # one A per q, k, v slice
            total += a_inputs + (q * (2 if arch.attn_output_gate else 1)) // tp + 2 * kv_rank  # qkv_proj
            total += _row(q, h, tp, sharded)  # o_proj
        if arch.block_per_layer and kinds[index] != "ffn":
            continue
        if arch.is_dense_layer(index):
            inter = arch.intermediate_size or 0
            total += _column(h, [inter] * slices, tp, sharded) + _row(inter, h, tp, sharded)
            continue
        total += _router(arch, release)
        if arch.shared_expert_intermediate_size:
            si = arch.shared_expert_intermediate_size
            total += _column(h, [si] * slices, tp, sharded) + _row(si, h, tp, sharded)
        if release >= (0, 12):
            experts, mi = arch.num_experts or 0, arch.moe_intermediate_size or 0
            if expert_parallel:
                local, inter = -(-experts // int(expert_shards)), mi
            else:
                local, inter = experts, int(mi // expert_shards)
            split = expert_shards if sharded else 1  # w13 A's rank and w2 B's hidden, fully sharded
            total += local * (slices * h / split + slices * inter + inter + h / split)
    vocab = arch.vocab
    if last:
        total += h + vocab  # LM head (logits processor)
    if first and lora_embedding_buffers(arch, vllm_version):
        total += vocab + h  # input embedding (counted when the class is unknown: see the module docstring)
        if last and arch.tie_word_embeddings:
            total += vocab + h  # the tied LM head wrapped again as an embedding
    return total, (EXTRA_VOCAB * h if last and release < (0, 12) else 0)
