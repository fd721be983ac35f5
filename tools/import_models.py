"""Import model rows from ../shared/data/models.csv into gpuopt/data/models.csv (the model registry).

Adds the columns the memory model needs that the shared file keeps in its notes (MLP kind, biases, shared
expert width, sliding-layer counts, native quantisation, vision parameters), each read from that row's
own notes or source. The package file is the source of truth: rows are merged by `hf_id` (tools/merge.py),
so a model added to the package by hand stays. Run from the repository root:
`python -m tools.import_models [--write]`.
"""

from __future__ import annotations

import csv
import re
from collections.abc import Sequence
from pathlib import Path

from tools.cli import arguments, finish
from tools.merge import Merge, Row, merge_rows, read_csv

# per-model facts read from each row's own notes/source (the row's notes column is kept verbatim)
extra = {
    "microsoft/phi-2": dict(
        mlp_kind="plain",
        attention_bias="all",
        mlp_bias="true",
        norm_kind="layernorm",
        norms_per_layer="1",
        lm_head_bias="true",
    ),
    "bigcode/starcoder2-15b": dict(
        mlp_kind="plain", attention_bias="all", mlp_bias="true", norm_kind="layernorm", sliding_layers="40"
    ),
    "tiiuae/falcon-40b": dict(mlp_kind="plain", intermediate_size="32768", norm_kind="layernorm"),
    "openai/gpt-oss-20b": dict(
        attention_bias="all",
        mlp_bias="true",
        router_bias="true",
        attention_sinks="true",
        native_quantization="mxfp4-experts",
        sliding_layers="12",
    ),
    "openai/gpt-oss-120b": dict(
        attention_bias="all",
        mlp_bias="true",
        router_bias="true",
        attention_sinks="true",
        native_quantization="mxfp4-experts",
        sliding_layers="18",
    ),
    "deepseek-ai/DeepSeek-V3": dict(native_quantization="fp8-block"),
    "deepseek-ai/DeepSeek-R1": dict(native_quantization="fp8-block"),
    "moonshotai/Kimi-K2-Instruct": dict(native_quantization="fp8-block"),
    "Qwen/Qwen1.5-MoE-A2.7B": dict(shared_expert_intermediate_size="5632", shared_expert_gate="true"),
    "meta-llama/Llama-4-Scout-17B-16E-Instruct": dict(
        shared_expert_intermediate_size="8192", sliding_layers="36", multimodal="true"
    ),
    "google/gemma-2-9b-it": dict(sliding_layers="21", norms_per_layer="4"),
    "google/gemma-2-27b-it": dict(sliding_layers="23", norms_per_layer="4"),
    "google/gemma-2-2b-it": dict(sliding_layers="13", norms_per_layer="4"),
    "google/gemma-3-12b-it": dict(sliding_layers="40", norms_per_layer="4", multimodal="true"),
    "google/gemma-3-27b-it": dict(sliding_layers="52", norms_per_layer="4", multimodal="true"),
    "google/gemma-3-4b-it": dict(sliding_layers="29", norms_per_layer="4", multimodal="true", vision_params_b="0.42"),
    "mistralai/Mistral-Small-3.1-24B-Instruct-2503": dict(multimodal="true", vision_params_b="0.439"),
    "Qwen/Qwen2.5-VL-7B-Instruct": dict(multimodal="true", vision_params_b="0.677"),
    "ibm-granite/granite-vision-3.3-2b": dict(multimodal="true", vision_params_b="0.44"),
    "moonshotai/Kimi-VL-A3B-Instruct": dict(multimodal="true"),
    "meta-llama/Llama-3.2-11B-Vision-Instruct": dict(multimodal="true", cross_attention_layers="8"),
    "MiniMaxAI/MiniMax-M1-80k": dict(linear_attention_layers="70"),
    "zai-org/GLM-4.5-Air": dict(shared_expert_intermediate_size="1408"),
    "THUDM/glm-4-9b-chat": dict(),
    # read in the configs of ../shared/data/model_configs (the shared rows' columns describe these otherwise)
    "nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16": dict(  # relu2 (non-gated) experts, shared expert 3712 wide,
        mlp_kind="plain", shared_expert_intermediate_size="3712", norms_per_layer="1"),  # one norm per block
    "Qwen/Qwen3.5-35B-A3B": dict(multimodal="true"),  # Qwen3_5MoeForConditionalGeneration: a vision tower
    "meta-llama/Llama-4-Maverick-17B-128E-Instruct": dict(multimodal="true"),  # Llama4ForConditionalGeneration
}
DTYPE_ASSUMED = " | gpuopt: torch_dtype not in the source; bfloat16 assumed (the dtype these families ship in)"
COLUMNS = [
    "hf_id",
    "published_params_b",
    "num_hidden_layers",
    "hidden_size",
    "intermediate_size",
    "moe_intermediate_size",
    "num_attention_heads",
    "num_key_value_heads",
    "head_dim",
    "vocab_size",
    "max_position_embeddings",
    "tie_word_embeddings",
    "num_experts",
    "experts_per_token",
    "n_shared_experts",
    "shared_expert_intermediate_size",
    "shared_expert_gate",
    "first_k_dense_layers",
    "attention_kind",
    "sliding_window",
    "sliding_layers",
    "cross_attention_layers",
    "linear_attention_layers",
    "kv_lora_rank",
    "q_lora_rank",
    "qk_rope_head_dim",
    "qk_nope_head_dim",
    "v_head_dim",
    "attention_bias",
    "mlp_kind",
    "mlp_bias",
    "router_bias",
    "attention_sinks",
    "lm_head_bias",
    "norm_kind",
    "norms_per_layer",
    "torch_dtype",
    "native_quantization",
    "multimodal",
    "vision_params_b",
    "total_params_b_reference",
    "active_params_b_reference",
    "source",
    "notes",
]
def published_total(notes: str, computed_total: str) -> str:
    """The published total size quoted in a row's notes ("published 456B"). Notes of MoE models quote the
    active size too ("= published 45.9B" active), so of several the one nearest the computed total is taken."""
    quoted = re.findall(r"published ([0-9.]+)B", notes)
    if not quoted or not computed_total:
        return quoted[0] if quoted else ""
    return min(quoted, key=lambda q: abs(float(q) - float(computed_total)))


def shared_rows(shared: Path) -> list[Row]:
    """The shared model table, shaped like the registry, with the per-model facts above."""
    rows: list[Row] = []
    for r in csv.DictReader((shared / "models.csv").read_text(encoding="utf-8").splitlines()):
        e = extra.get(r["hf_id"], {})
        o = {c: "" for c in COLUMNS}
        for c in COLUMNS:
            if c in r:
                o[c] = r[c]
        o["total_params_b_reference"] = r["total_params_b_computed"]
        o["active_params_b_reference"] = r["active_params_b_computed"]
        o["published_params_b"] = published_total(r["notes"], r["total_params_b_computed"])
        o["attention_bias"] = "qkv" if r["qkv_bias"] == "true" else "none"
        o["mlp_kind"] = "gated"
        o["mlp_bias"] = "false"
        o["router_bias"] = "false"
        o["attention_sinks"] = "false"
        o["lm_head_bias"] = "false"
        o["norm_kind"] = "rmsnorm"
        o["norms_per_layer"] = "2"
        o["shared_expert_gate"] = "false"
        o["multimodal"] = "false"
        dt = r["torch_dtype"]
        o["torch_dtype"] = (
            "float16" if dt.startswith("float16") else ("float32" if dt.startswith("float32") else "bfloat16")
        )
        if not dt:
            o["torch_dtype"] = "bfloat16"
            o["notes"] += DTYPE_ASSUMED
        if r["n_shared_experts"] and not e.get("shared_expert_intermediate_size"):
            o["shared_expert_intermediate_size"] = str(int(r["n_shared_experts"]) * int(r["moe_intermediate_size"]))
        if r["head_dim"] == "" and r["attention_kind"] != "mla":
            o["head_dim"] = str(int(r["hidden_size"]) // int(r["num_attention_heads"]))
        o.update(e)
        rows.append(o)
    return rows


def main(argv: Sequence[str] | None = None) -> Merge:
    args = arguments(__doc__, argv)
    columns, rows = read_csv(args.package / "data" / "models.csv")
    merge = merge_rows("gpuopt/data/models.csv", columns or COLUMNS, rows, shared_rows(args.shared), key=("hf_id",))
    finish([merge], args)
    return merge


if __name__ == "__main__":
    main()
