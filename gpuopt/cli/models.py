"""`gpuopt models list|show`: the architecture registry."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from typing import Any

import click
from rich.table import Table

from gpuopt.cli.terminal import say
from gpuopt.errors import InputError
from gpuopt.physics import sparse_mla
from gpuopt.physics.architecture import ModelArchitecture, iter_models, registry_model
from gpuopt.physics.checkpoint_table import Checkpoint, caution
from gpuopt.physics.context_limit import model_max_len
from gpuopt.physics.kv_cache import indexer_bytes_per_token, kv_bytes_per_token_per_layer, kv_dtype_bytes
from gpuopt.physics.quantization import KernelPath
from gpuopt.physics.resolution import from_known_checkpoint, offline_description, resolve_model
from gpuopt.physics.serving_config import checkpoint_kv_cache_dtype, default_precision
from gpuopt.physics.vllm_profile import default_release
from gpuopt.physics.vllm_support import release_problem, scanned_release, status
from gpuopt.physics.weights import indexer_layers
from gpuopt.reports.formatting import console
from gpuopt.vocabulary import KV_LAYER_KINDS, STATE_LAYER_KINDS

# One representative CUDA capability per GPU generation, for the kernel table of `models show`.
GENERATIONS: tuple[tuple[str, int], ...] = (
    ("Turing sm75", 75), ("Ampere sm80", 80), ("Ada sm89", 89), ("Hopper sm90", 90),
    ("Blackwell sm100", 100), ("Blackwell RTX sm120", 120),
)


def kv_bytes_per_token(arch: ModelArchitecture, dtype_bytes: float, tp: int = 1,
                       dsa: sparse_mla.KvFormat | None = None) -> float:
    """Bytes one token adds to the KV cache of one GPU, over every layer that keeps KV (all layers count,
    including sliding-window ones, whose cost is capped per request rather than per token), with the DSA
    index keys of the layers that build an indexer in the default release (`dsa`: the DSA cache layout,
    sparse_mla.kv_format; None: FlashMLA's, as on Hopper)."""
    kinds = arch.layer_kinds()
    layers = sum(1 for k in kinds if k in KV_LAYER_KINDS)
    return (layers * kv_bytes_per_token_per_layer(arch, tp, dtype_bytes, dsa)
            + _indexers(arch) * indexer_bytes_per_token(arch))


def served_dtype_bytes(arch: ModelArchitecture) -> float:
    """Bytes of the 16- or 32-bit values (KV, state) the model runs with by default: its default precision's
    (kv_cache.kv_dtype_bytes), so a float32 checkpoint, served in 16 bits, counts 2 (default_precision)."""
    return kv_dtype_bytes(arch, default_precision(arch), "auto")


def dsa_kv_by_generation(arch: ModelArchitecture) -> dict[str, dict[str, int] | str]:
    """A DSA model's KV bytes per token (TP=1) in the default release, per GPU generation: the sparse MLA
    backend vLLM picks there decides the layout (sparse_mla), or why none starts."""
    native = served_dtype_bytes(arch)
    release = default_release()
    out: dict[str, dict[str, int] | str] = {}
    for name, cc in GENERATIONS:
        why = sparse_mla.backend_problem(arch, cc, release)
        out[name] = why if why is not None else {
            kv: round(kv_bytes_per_token(arch, native if kv == "auto" else 1, 1,
                                         sparse_mla.kv_format(arch, cc, kv, 1, release))) for kv in ("auto", "fp8")}
    return out


def _indexers(arch: ModelArchitecture) -> int:
    """Layers that build a DSA indexer in the default release (fewer than all with IndexCache)."""
    return indexer_layers(arch, range(arch.num_hidden_layers), default_release())


def state_bytes_per_sequence(arch: ModelArchitecture, tp: int = 1) -> float:
    """Constant per-sequence state (conv + recurrent/SSM) over the linear-attention and Mamba layers."""
    native = served_dtype_bytes(arch)
    return sum(arch.state_bytes_per_layer(k, tp, native) for k in arch.layer_kinds() if k in STATE_LAYER_KINDS)


def kernel_table(arch: ModelArchitecture) -> dict[str, KernelPath]:
    """The kernels the default release picks for the checkpoint on each GPU generation (they differ by
    release: quantization.select_kernel)."""
    q = arch.quantization
    release = default_release()
    return {} if q is None else {name: q.kernel_path(cc, release) for name, cc in GENERATIONS}


def model_summary(arch: ModelArchitecture) -> dict[str, Any]:
    # `--kv-cache-dtype auto` of a ModelOpt checkpoint that quantises its KV runs fp8 in the default release
    # (serving_config.checkpoint_kv_cache_dtype): `fit` counted 3,072 B a token where this said 6,144 (QA)
    auto = kv_dtype_bytes(arch, default_precision(arch), checkpoint_kv_cache_dtype(arch, "auto", None))
    return {
        "id": arch.hf_id,
        "params_b": round(arch.total_params() / 1e9, 3),
        "active_params_b": round(arch.active_params() / 1e9, 3),
        # the vision tower vLLM loads beside the language model (not with --language-model-only): `fit` counts it
        # in the weights, so a page that left it out showed fewer bytes than are loaded (QA: Qwen2.5-VL-7B 7.616 B
        # here, 15.48 GiB in fit)
        "vision_params_b": round(arch.vision_params() / 1e9, 3) if arch.vision_params() else None,
        "layers": arch.num_hidden_layers,
        "attention_kind": arch.attention_kind,
        "sliding_window": arch.sliding_window,
        "sparse_attention": ({"index_n_heads": arch.index_n_heads, "index_head_dim": arch.index_head_dim,
                              "index_topk": arch.index_topk, "indexer_layers": _indexers(arch),
                              "kv_bytes_per_token_by_gpu": dsa_kv_by_generation(arch) if arch.indexer_params else None}
                             if arch.index_head_dim else None),
        "kv_bytes_per_token": {"auto": kv_bytes_per_token(arch, auto), "fp8": kv_bytes_per_token(arch, 1)},
        "default_precision": default_precision(arch),
        "max_position_embeddings": arch.max_position_embeddings,
        "rope_scaling": None if not arch.rope_type else {
            "rope_type": arch.rope_type, "factor": arch.rope_factor,
            "original_max_position_embeddings": arch.rope_original_max_position_embeddings},
        "max_model_len_limit": model_max_len(arch),
        "layer_kinds": {k: arch.layer_kinds().count(k) for k in dict.fromkeys(arch.layer_kinds())},
        "state_bytes_per_sequence": state_bytes_per_sequence(arch),
        "quantization": None if arch.quantization is None else arch.quantization.model_dump(mode="json"),
        "kernels": {k: v.model_dump(mode="json") for k, v in kernel_table(arch).items()},
        "hf_architecture": arch.hf_architecture,
        "vllm_support": _vllm_support(arch),
        "checkpoint_bytes": arch.checkpoint_bytes,
        "complete": not arch.missing_fields(),
        "missing_fields": arch.missing_fields(),
        "source": arch.source,
        "resolved_offline": offline_description(arch),
    }


_SUPPORT_WORDS = {"no": "served, without LoRA", "lora": "served, with LoRA",
                  "lora+embedding": "served, with LoRA (the embedding too)", "plugin": "out-of-tree plugin only",
                  "": "not implemented"}


def _vllm_support(arch: ModelArchitecture) -> dict[str, Any]:
    """What the default vLLM release (the one plans use) does with the model's class (None fields when it is
    unknown)."""
    release = default_release()
    code = status(arch, release)
    return {"release": scanned_release(release), "status": code, "problem": release_problem(arch, release)}


def _support_text(arch: ModelArchitecture, support: dict[str, Any]) -> str:
    """The `models show` line for `support` (model_summary's "vllm_support" of `arch`)."""
    if arch.hf_architecture is None:
        return "vLLM class: not stated in gpuopt's data (which vLLM releases serve it is not checked)"
    code = support["status"]
    word = _SUPPORT_WORDS.get(code, f"no longer implemented (vLLM served it {code})")
    if code == "" and support["problem"] is None:
        word = "no release implements it natively; vLLM would try its Transformers backend"
    return f"vLLM class: {arch.hf_architecture} (vLLM {support['release']}: {word})"


@click.group()
def models() -> None:
    """The model architecture registry."""


@models.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON array.")
def list_models(as_json: bool) -> None:
    """Every model in the registry, with parameters and KV bytes per token."""
    rows = [model_summary(m) for m in sorted(iter_models(), key=lambda m: m.hf_id.lower())]
    if as_json:
        click.echo(json.dumps(rows, indent=2, sort_keys=True))
        return
    table = Table()  # ids are never truncated: the model column does not wrap or shrink
    # "complete": the row has every field the memory model needs (it said "fit", read as "fits on a GPU")
    for col in ("model", "params (B)", "active (B)", "vision (B)", "layers", "attention", "KV B/token (auto)",
                "complete"):
        table.add_column(col, justify="left" if col in ("model", "attention") else "right",
                         no_wrap=col == "model", overflow="fold" if col != "model" else "ignore",
                         min_width=max(len(r["id"]) for r in rows) if col == "model" else None)
    for r in rows:
        table.add_row(r["id"], f"{r['params_b']:.2f}", f"{r['active_params_b']:.2f}",
                      f"{r['vision_params_b']:.2f}" if r["vision_params_b"] else "-", str(r["layers"]),
                      r["attention_kind"], f"{r['kv_bytes_per_token']['auto']:,.0f}",
                      "yes" if r["complete"] else "no: missing " + ", ".join(r["missing_fields"]))
    console(sys.stdout, width=200).print(table)  # plain: no colour codes, no markup read in a model's name


@models.command("show")
@click.argument("model_id")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON object.")
def show_model(model_id: str, as_json: bool) -> None:
    """One model (registry id, local checkpoint path or Hugging Face id): parameters, KV bytes per token,
    layer kinds, per-sequence state, the checkpoint's quantization and the kernels vLLM picks for it."""
    arch = resolve_model(model_id)
    summary = model_summary(arch)
    if (known_bad := caution(arch.hf_id, 1)) is not None:  # `fit` and `solve` warn of it; so does the model's page
        say("warning", known_bad)
    if as_json:
        click.echo(json.dumps(summary, indent=2, sort_keys=True))
        return
    kv = summary["kv_bytes_per_token"]
    lines = [
        f"model: {arch.hf_id}",
        f"parameters: {summary['params_b']:.3f} B (active per token: {summary['active_params_b']:.3f} B)"
        + (f"; vision tower {summary['vision_params_b']:.3f} B more, loaded unless --language-model-only"
           if summary["vision_params_b"] else ""),
        f"layers: {arch.num_hidden_layers}, hidden {arch.hidden_size}, attention heads {arch.num_attention_heads}, "
        + (f"KV: one latent of {arch.kv_lora_rank} + {arch.qk_rope_head_dim} a token (MLA)" if arch.is_mla
           else f"KV heads {arch.num_key_value_heads}, head_dim {arch.attn_head_dim}"
           + ("" if arch.head_dim else " (hidden / heads: the config gives none)")),
        f"attention: {arch.attention_kind}" + (f", window {arch.sliding_window}" if arch.sliding_window else ""),
        f"KV cache per token (TP=1): auto {kv['auto']:,.0f} B, fp8 {kv['fp8']:,.0f} B",
        f"checkpoint: {arch.torch_dtype}"
        + (f", native {arch.native_quantization}" if arch.native_quantization else ""),
        f"default precision: {summary['default_precision']}"
        + (f" (the checkpoint's {arch.quantization.scheme})" if arch.quantization else ""),
        f"max_position_embeddings: {arch.max_position_embeddings or 'not stated'}"
        + (f" (rope {arch.rope_type}" + (f" x{arch.rope_factor:g}" if arch.rope_factor else "") + ")"
           if arch.rope_type else ""),
        "longest --max-model-len vLLM accepts: "
        + (f"{summary['max_model_len_limit']:,}" if summary["max_model_len_limit"] else "not stated"),
    ]
    if arch.is_moe:
        lines.append(f"experts: {arch.num_experts}, active per token {arch.experts_per_token}, "
                     f"shared width {arch.shared_expert_intermediate_size or 0}")
    kinds = summary["layer_kinds"]
    if len(kinds) > 1:
        lines.append("layer kinds: " + ", ".join(f"{n} {k}" for k, n in kinds.items()))
    if summary["state_bytes_per_sequence"]:
        lines.append(f"per-sequence state (TP=1): {summary['state_bytes_per_sequence']:,.0f} B "
                     "(linear-attention / Mamba conv + recurrent state, independent of length)")
    if arch.index_head_dim:
        lines.append(f"DSA indexer: {arch.index_n_heads} heads x {arch.index_head_dim}, keys "
                     f"{indexer_bytes_per_token(arch):.0f} B per token per layer (fp8 + scale)"
                     + (f" on {built} of {arch.num_hidden_layers} layers in vLLM {default_release()} "
                        "(IndexCache: the others reuse an earlier top-k)"
                        if (built := summary["sparse_attention"]["indexer_layers"]) < arch.num_hidden_layers else "")
                     + (f"; attention to the top {arch.index_topk:,} tokens" if arch.index_topk else ""))
        if by_gpu := summary["sparse_attention"]["kv_bytes_per_token_by_gpu"]:
            runs = [f"{name} auto {v['auto']:,.0f} B, fp8 {v['fp8']:,.0f} B" for name, v in by_gpu.items()
                    if isinstance(v, dict)]
            lines.append(f"DSA KV cache per token by GPU (TP=1, vLLM {default_release()}'s sparse MLA backends): "
                         + "; ".join(runs) + "; no backend on "
                         + ", ".join(name for name, v in by_gpu.items() if not isinstance(v, dict)))
    q = arch.quantization
    if q is not None:
        lines.append(f"quantization: {q.label}, {q.weight_bits}-bit weights"
                     + (f", group {q.group_size}" if q.group_size else "")
                     + f", {q.bytes_per_weight:.4f} B per weight with scales (from {q.source})")
        if q.excluded_modules:
            shown = ", ".join(q.excluded_modules[:4]) + (f" (+{len(q.excluded_modules) - 4} more)"
                                                         if len(q.excluded_modules) > 4 else "")
            lines.append(f"left unquantized: {shown}")
        lines.append(f"  kernels in vLLM {default_release()} (the default release):")
        for gen, path in kernel_table(arch).items():
            kern = (f"{path.vllm_method}: linear {path.linear}" + (f", MoE {path.moe}" if path.moe else "")
                    + f", W{path.weight_bits}A{path.activation_bits}") if path.supported else "not supported"
            lines.append(f"  kernel on {gen}: {kern}" + (f" ({path.note})" if path.note else ""))
    lines.append(_support_text(arch, summary["vllm_support"]))
    if arch.checkpoint_bytes:
        lines.append(f"checkpoint size: {arch.checkpoint_bytes / 1024**3:.2f} GiB (safetensors index)")
    if arch.missing_fields():
        lines.append("incomplete: missing " + ", ".join(arch.missing_fields()))
    lines.append(f"source: {arch.source}")
    if (offline := offline_description(arch)) is not None:
        lines.append(f"resolved: {offline}")
    click.echo("\n".join(lines))


def _no_checkpoints(base_model: str, known: Sequence[Checkpoint]) -> None:
    """BASE_MODEL has no row: a registry model without a known checkpoint is an empty answer (a note, exit 0);
    a checkpoint's own id points to its base; anything else is bad input. QA: `models checkpoints zai-org/GLM-5`
    was "error:" and exit 2 for a model gpuopt plans."""
    wanted = base_model.lower()
    if (row := next((c for c in known if c.checkpoint.lower() == wanted), None)) is not None:
        raise InputError(f"'{base_model}' is itself a known checkpoint, of {row.base_model}: `gpuopt models "
                         f"checkpoints {row.base_model}` lists it and its siblings")
    if registry_model(base_model) is None:
        raise InputError(f"no known quantized checkpoint of '{base_model}', which is not a registry model either "
                         "(`gpuopt models checkpoints` lists every known checkpoint, `gpuopt models list` the models)")
    say("note", f"no known quantized checkpoint of {base_model}: a plan at a precision it does not ship in says "
                "what checkpoint to produce, or name one in the workload file (checkpoints:)")


@models.command("checkpoints")
@click.argument("base_model", required=False)
@click.option("--json", "as_json", is_flag=True, help="Print a JSON array.")
def list_checkpoints(base_model: str | None, as_json: bool) -> None:
    """The known quantized checkpoints (of BASE_MODEL, or all): format, bits, the method vLLM detects, whether a
    plan may name it, and whether `--model` resolves it without the network (its row states the quantization
    and its base is in the registry)."""
    from gpuopt.physics.checkpoint_table import table as checkpoint_table

    rows = [{"checkpoint": c.checkpoint, "base_model": c.base_model, "method": c.method, "weight_bits": c.weight_bits,
             "vllm_quantization": c.vllm_quantization or None, "plans_may_name_it": c.use == "ok",
             "use": c.use, "resolves_offline": from_known_checkpoint(c.checkpoint) is not None}
            for c in checkpoint_table() if base_model is None or c.base_model.lower() == base_model.lower()]
    if base_model is not None and not rows:
        _no_checkpoints(base_model, checkpoint_table())
    if as_json:
        click.echo(json.dumps(rows, indent=2, sort_keys=True))
        return
    if not rows:
        return
    table = Table()
    for col in ("checkpoint", "base model", "format", "bits", "vLLM method", "plans", "offline"):
        table.add_column(col, no_wrap=col in ("checkpoint", "base model"))
    for r in rows:
        table.add_row(str(r["checkpoint"]), str(r["base_model"]), str(r["method"]), str(r["weight_bits"] or "mixed"),
                      str(r["vllm_quantization"] or "unconfirmed"), "yes" if r["plans_may_name_it"] else "no",
                      "yes" if r["resolves_offline"] else "no")
    console(sys.stdout, width=220).print(table)
