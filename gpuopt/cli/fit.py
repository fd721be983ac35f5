"""`gpuopt fit`: does this model fit on this GPU under vLLM, and how much KV cache does it leave?"""

from __future__ import annotations

import json
from pathlib import Path

import click

from gpuopt.cli.options import load_architecture
from gpuopt.errors import EXIT_INFEASIBLE, InputError
from gpuopt.hardware import get_gpu
from gpuopt.optimizer.memory import (
    WEIGHT_FORMATS,
    ServingConfig,
    estimate_resolved,
    precision_unsupported,
    resolve,
    suggest_fixes,
)
from gpuopt.reports.fit import fit_json, fit_text


@click.command()
@click.option("--model", "model", metavar="ID", help="Registry model id (see `gpuopt models list`).")
@click.option("--model-config", type=click.Path(path_type=Path), metavar="PATH",
              help="A local Hugging Face config.json instead of a registry id (never fetched).")
@click.option("--gpu", required=True, metavar="NAME", help="GPU name, e.g. H100-SXM-80GB (case-insensitive).")
@click.option("--tp", "tp", type=int, default=1, show_default=True, help="Tensor-parallel size.")
@click.option("--pp", "pp", type=int, default=1, show_default=True, help="Pipeline-parallel size.")
@click.option("--precision", type=click.Choice(WEIGHT_FORMATS), help="Weight format (default: the checkpoint's).")
@click.option("--kv-cache-dtype", type=click.Choice(["auto", "fp8"]), default="auto", show_default=True)
@click.option("--max-model-len", type=int, help="Context length (default: the model's maximum).")
@click.option("--gpu-memory-utilization", type=float, help="Fraction of GPU memory for vLLM (default: the release's).")
@click.option("--max-num-seqs", type=int, help="Scheduler limit (default: vLLM's for this GPU).")
@click.option("--max-num-batched-tokens", type=int, help="Scheduler limit (default: vLLM's for this GPU).")
@click.option("--block-size", type=int, default=16, show_default=True)
@click.option("--vllm-version", metavar="X.Y", help="vLLM release whose defaults apply (default: newest known).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def fit(model: str | None, model_config: Path | None, gpu: str, tp: int, pp: int, precision: str | None,
        kv_cache_dtype: str, max_model_len: int | None, gpu_memory_utilization: float | None,
        max_num_seqs: int | None, max_num_batched_tokens: int | None, block_size: int,
        vllm_version: str | None, as_json: bool) -> None:
    """Check that a model fits on a GPU under vLLM and report its KV-cache capacity.

    Exit code 0 when it fits, 1 when it does not (with the smallest changes that would), 2 on bad input.
    """
    problems: list[str] = []
    arch = None
    spec = None
    try:
        arch = load_architecture(model, model_config)
    except InputError as exc:
        problems.extend(exc.problems)
    try:
        spec = get_gpu(gpu)
    except InputError as exc:
        problems.extend(exc.problems)
    if problems or arch is None or spec is None:
        raise InputError(*problems)
    cfg = ServingConfig(tensor_parallel=tp, pipeline_parallel=pp, precision=precision,  # type: ignore[arg-type]
                        kv_cache_dtype=kv_cache_dtype,  # type: ignore[arg-type]
                        max_model_len=max_model_len, gpu_memory_utilization=gpu_memory_utilization,
                        max_num_seqs=max_num_seqs, max_num_batched_tokens=max_num_batched_tokens,
                        block_size=block_size, vllm_version=vllm_version)
    resolved, profile = resolve(arch, spec, cfg)
    unsupported = precision_unsupported(spec, resolved.precision, arch)
    if unsupported:
        raise InputError(f"--precision {resolved.precision}: {unsupported}")
    est = estimate_resolved(arch, spec, resolved, profile)
    suggestions = [] if est.fits else suggest_fixes(arch, spec, resolved, profile)
    if as_json:
        click.echo(json.dumps(fit_json(est, suggestions), indent=2, sort_keys=True))
    else:
        click.echo(fit_text(est, suggestions))
    if not est.fits:
        raise SystemExit(EXIT_INFEASIBLE)
