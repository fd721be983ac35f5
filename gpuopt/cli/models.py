"""`gpuopt models list|show`: the architecture registry."""

from __future__ import annotations

import json
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from gpuopt.physics.architecture import ModelArchitecture, get_model, iter_models
from gpuopt.physics.memory import default_precision
from gpuopt.vocabulary import KV_LAYER_KINDS


def kv_bytes_per_token(arch: ModelArchitecture, dtype_bytes: float, tp: int = 1) -> float:
    """Bytes one token adds to the KV cache of one GPU, over every layer that keeps KV (all layers count,
    including sliding-window ones, whose cost is capped per request rather than per token)."""
    kinds = arch.layer_kinds()
    layers = sum(1 for k in kinds if k in KV_LAYER_KINDS)
    return layers * arch.kv_values_per_token_per_layer(tp) * dtype_bytes


def model_summary(arch: ModelArchitecture) -> dict[str, Any]:
    native = 4 if arch.torch_dtype == "float32" else 2
    return {
        "id": arch.hf_id,
        "params_b": round(arch.total_params() / 1e9, 3),
        "active_params_b": round(arch.active_params() / 1e9, 3),
        "layers": arch.num_hidden_layers,
        "attention_kind": arch.attention_kind,
        "sliding_window": arch.sliding_window,
        "kv_bytes_per_token": {"auto": kv_bytes_per_token(arch, native), "fp8": kv_bytes_per_token(arch, 1)},
        "default_precision": default_precision(arch),
        "max_position_embeddings": arch.max_position_embeddings,
        "complete": not arch.missing_fields(),
        "missing_fields": arch.missing_fields(),
        "source": arch.source,
    }


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
    table = Table()
    for col in ("model", "params (B)", "active (B)", "layers", "attention", "KV B/token (auto)", "fit"):
        table.add_column(col, justify="left" if col in ("model", "attention") else "right")
    for r in rows:
        table.add_row(r["id"], f"{r['params_b']:.2f}", f"{r['active_params_b']:.2f}", str(r["layers"]),
                      r["attention_kind"], f"{r['kv_bytes_per_token']['auto']:,.0f}",
                      "yes" if r["complete"] else "no: missing " + ", ".join(r["missing_fields"]))
    Console(width=140).print(table)


@models.command("show")
@click.argument("model_id")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON object.")
def show_model(model_id: str, as_json: bool) -> None:
    """One model: parameters, KV bytes per token per dtype, attention kind."""
    arch = get_model(model_id)
    summary = model_summary(arch)
    if as_json:
        click.echo(json.dumps(summary, indent=2, sort_keys=True))
        return
    kv = summary["kv_bytes_per_token"]
    lines = [
        f"model: {arch.hf_id}",
        f"parameters: {summary['params_b']:.3f} B (active per token: {summary['active_params_b']:.3f} B)",
        f"layers: {arch.num_hidden_layers}, hidden {arch.hidden_size}, attention heads {arch.num_attention_heads}, "
        f"KV heads {arch.num_key_value_heads}, head_dim {arch.head_dim or '-'}",
        f"attention: {arch.attention_kind}" + (f", window {arch.sliding_window}" if arch.sliding_window else ""),
        f"KV cache per token (TP=1): auto {kv['auto']:,.0f} B, fp8 {kv['fp8']:,.0f} B",
        f"checkpoint: {arch.torch_dtype}"
        + (f", native {arch.native_quantization}" if arch.native_quantization else ""),
        f"default precision: {summary['default_precision']}",
        f"max_position_embeddings: {arch.max_position_embeddings or 'not stated'}",
    ]
    if arch.is_moe:
        lines.append(f"experts: {arch.num_experts}, active per token {arch.experts_per_token}, "
                     f"shared width {arch.shared_expert_intermediate_size or 0}")
    if arch.missing_fields():
        lines.append("incomplete: missing " + ", ".join(arch.missing_fields()))
    lines.append(f"source: {arch.source}")
    click.echo("\n".join(lines))
