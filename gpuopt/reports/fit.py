"""Render a MemoryEstimate: text that reads like vLLM's start-up log, and a stable JSON object."""

from __future__ import annotations

import io
from typing import Any

from rich.table import Table

from gpuopt.physics.cuda_graphs import CapturePlan
from gpuopt.physics.kv_cache import hybrid_block_size
from gpuopt.physics.memory import MemoryEstimate
from gpuopt.planner.plan import plain
from gpuopt.reports.formatting import console


def attention_block_size(est: MemoryEstimate) -> int:
    """The tokens a KV block holds (kv_cache.hybrid_block_size, which the simulator's pool uses too)."""
    return hybrid_block_size(est.binding_rank.kv_groups, est.config.block_size, est.config.vllm_version)


def fit_json(est: MemoryEstimate, suggestions: list[str]) -> dict[str, Any]:
    rank = est.binding_rank
    cfg = est.config
    plan = est.cuda_graph_plan
    return {
        "model": est.model,
        "gpu": est.gpu,
        "gpu_memory_reported_gib": plain(rank.total_gib),
        "vllm_version": cfg.vllm_version,
        "tensor_parallel": cfg.tensor_parallel,
        "pipeline_parallel": cfg.pipeline_parallel,
        "data_parallel": cfg.data_parallel,
        "precision": cfg.precision,
        "kv_cache_dtype": cfg.kv_cache_dtype,
        "max_model_len": cfg.max_model_len,
        "gpu_memory_utilization": cfg.gpu_memory_utilization,
        "max_num_seqs": cfg.max_num_seqs,
        "max_num_batched_tokens": cfg.max_num_batched_tokens,
        "block_size": cfg.block_size,
        # tokens per KV block as vLLM lays out the cache: `block_size` unless Mamba / linear-attention layers make
        # it raise the attention block so a page holds one layer's state (528 for Qwen3.5-9B on 0.33)
        "attention_block_size": attention_block_size(est),
        "max_loras": cfg.max_loras,
        "max_lora_rank": cfg.max_lora_rank if cfg.max_loras else None,
        "fully_sharded_loras": bool(cfg.max_loras) and cfg.fully_sharded_loras,
        # total x gpu_memory_utilization; with "kv_sizing": "set" (--kv-cache-memory-bytes) vLLM sizes the cache
        # by the bytes given and neither bounds anything (the text says "gpu_memory_utilization ignored")
        "budget_gib": plain(rank.budget_gib),
        "weights_gib": plain(rank.weights_gib),
        "lora_gib": plain(rank.lora_gib),
        "activation_gib": plain(rank.activation_gib),
        "non_torch_gib": plain(rank.non_torch_gib),
        "cuda_graph_gib": plain(rank.cuda_graph_gib),
        "cuda_graph_in_budget": rank.cuda_graph_in_budget,
        # the graphs counted: vLLM's cudagraph_mode and how many piecewise and full graphs it captures
        "cuda_graphs": None if plan is None else {"mode": plan.mode, "piecewise": len(plan.piecewise),
                                                  "full": len(plan.full)},
        # "estimate" (budget - profiled use, every release to 0.33) or "extensible" (0.34: sized after warmup,
        # keeping the start-up memory, the transient peak and a margin free)
        "kv_sizing": "set" if cfg.kv_cache_memory_bytes else "extensible" if rank.extensible else "estimate",
        "startup_gib": plain(rank.startup_gib) if rank.extensible else None,
        "transient_gib": plain(rank.transient_gib) if rank.extensible else None,
        "margin_gib": plain(rank.margin_gib) if rank.extensible else None,
        "kv_cache_gib": plain(rank.kv_cache_gib),
        "kv_bytes_per_token": plain(rank.kv_bytes_per_token, 2),
        "dsa_kv_format": est.dsa_kv_format,
        "enable_prefix_caching": cfg.enable_prefix_caching,
        "state_blocks_per_request": rank.state_blocks_per_request,
        "kv_cache_blocks": rank.num_blocks,
        "kv_cache_tokens": est.kv_cache_tokens,
        "max_concurrency": plain(est.max_concurrency, 2),
        "fits": est.fits,
        "reason": est.reason,
        "suggestions": suggestions,
        "warnings": list(est.warnings),
        "per_gpu": [
            {
                "pp_stage": r.pp_stage,
                "layers": r.layers,
                "weights_gib": plain(r.weights_gib),
                "activation_gib": plain(r.activation_gib),
                "non_torch_gib": plain(r.non_torch_gib),
                "cuda_graph_gib": plain(r.cuda_graph_gib),
                "kv_cache_gib": plain(r.kv_cache_gib),
                "kv_cache_blocks": r.num_blocks,
            }
            for r in est.ranks
        ],
    }


def _graphs(plan: CapturePlan) -> str:
    """The graphs vLLM captures, as the fit line names them."""
    if not plan.graphs:
        return "no graphs: cudagraph_mode NONE"
    return f"{plan.graphs} graphs, {plan.mode}: {len(plan.piecewise)} piecewise, {len(plan.full)} full"


def fit_text(est: MemoryEstimate, suggestions: list[str]) -> str:
    rank = est.binding_rank
    cfg = est.config
    lines = [
        f"{est.model} on {cfg.gpus * cfg.data_parallel} x {est.gpu} ({rank.total_gib:.2f} GiB reported), "
        f"TP={cfg.tensor_parallel} PP={cfg.pipeline_parallel}"
        + (f" DP={cfg.data_parallel}" if cfg.data_parallel > 1 else "")
        + f", weights {cfg.precision}, KV cache {cfg.kv_cache_dtype}, vLLM {cfg.vllm_version}",
        (f"KV cache set by --kv-cache-memory-bytes {cfg.kv_cache_memory_bytes:,} (gpu_memory_utilization ignored)"
         if cfg.kv_cache_memory_bytes else
         f"requested memory: {rank.total_gib:.2f} GiB x gpu_memory_utilization {cfg.gpu_memory_utilization} "
         f"= {rank.budget_gib:.2f} GiB"),
        f"Model loading took {rank.weights_gib:.2f} GiB memory"
        + (f" (of which LoRA buffers {rank.lora_gib:.2f} GiB: {cfg.max_loras} slot{'s' if cfg.max_loras > 1 else ''}"
           f" of rank {cfg.max_lora_rank}{', fully sharded' if cfg.fully_sharded_loras else ''})"
           if cfg.max_loras else ""),
        f"torch peak memory increase (activation): {rank.activation_gib:.2f} GiB "
        f"(max_num_batched_tokens={cfg.max_num_batched_tokens}, max_num_seqs={cfg.max_num_seqs})",
        f"non-torch forward increase memory: {rank.non_torch_gib:.2f} GiB",
        f"CUDA graph memory: {rank.cuda_graph_gib:.2f} GiB ("
        + (f"{_graphs(est.cuda_graph_plan)}; " if est.cuda_graph_plan is not None else "")
        + ("beside the KV cache that was set)" if cfg.kv_cache_memory_bytes else
           "resident after capture; its estimate is also kept free as a transient)" if rank.extensible else
           "inside the budget)" if rank.cuda_graph_in_budget else "outside the budget, in the headroom)"),
        *([f"Memory after warmup (extensible KV cache): {rank.transient_gib:.2f} GiB kept for transient activations "
           f"(activation + CUDA-graph estimate), a {rank.margin_gib:.2f} GiB margin (max(1 GiB, 0.75 x transient)), "
           f"{rank.startup_gib:.2f} GiB held before start-up (CUDA context, NCCL)"] if rank.extensible else []),
        f"Available KV cache memory: {rank.kv_cache_gib:.2f} GiB",
        f"GPU KV cache size: {est.kv_cache_tokens:,} tokens"
        + (f" (each of the {cfg.data_parallel} engines)" if cfg.data_parallel > 1 else ""),
        f"Maximum concurrency for {cfg.max_model_len:,} tokens per request: {est.max_concurrency:.2f}x",
    ]
    table = Table(title="per GPU (every TP rank of a stage is identical)", title_justify="left")
    for col in ("PP stage", "layers", "weights", "activation", "non-torch", "CUDA graphs", "KV cache", "blocks"):
        table.add_column(col, justify="right", overflow="fold")
    for r in est.ranks:
        table.add_row(str(r.pp_stage), str(r.layers), f"{r.weights_gib:.2f}", f"{r.activation_gib:.2f}",
                      f"{r.non_torch_gib:.2f}", f"{r.cuda_graph_gib:.2f}", f"{r.kv_cache_gib:.2f}", f"{r.num_blocks:,}")
    buf = io.StringIO()
    console(buf).print(table)
    lines.append(buf.getvalue().rstrip())
    layout = {"model": "the model dtype", "fp8": "plain fp8", "fp8_ds_mla": "DeepSeek's fp8_ds_mla layout"}
    lines.append("(GiB; KV bytes per token per GPU: " + f"{rank.kv_bytes_per_token:,.0f}"
                 + (f"; sparse MLA cache in {layout[est.dsa_kv_format]}" if est.dsa_kv_format else "")
                 + (f"; blocks of {attention_block_size(est):,} tokens, a request holds "
                    f"{rank.state_blocks_per_request} of them in the Mamba / linear-attention layers "
                    f"(prefix caching {'on: align mode' if cfg.enable_prefix_caching else 'off'})"
                    if rank.state_blocks_per_request else "") + ")")
    if est.fits:
        lines.append("fits: yes")
    else:
        lines.append(f"fits: NO -- {est.reason}")
        if suggestions:
            lines.append("smallest changes that fit: " + "; ".join(suggestions))
        else:
            lines.append("no single change (fp8 KV, fp8/int4 weights, higher TP, data-parallel engines with expert "
                         "parallelism for a MoE model, shorter max_model_len) makes it fit")
    return "\n".join(line.rstrip() for line in lines)
