"""`gpuopt fit`: does this model fit on this GPU under vLLM, and how much KV cache does it leave?"""

from __future__ import annotations

import json
from pathlib import Path

import click

from gpuopt.cli.options import (
    ASCII_INT,
    FINITE_FLOAT,
    HUMAN_INT,
    MODEL_HELP,
    VLLM_VERSION,
    VLLM_VERSION_HELP,
    SafePath,
    check_runs_on,
    load_architecture,
)
from gpuopt.cli.profile_option import apply_profile, profile_option
from gpuopt.cli.terminal import say
from gpuopt.errors import EXIT_INFEASIBLE, InfeasibleError, InputError
from gpuopt.hardware import GpuSpec, get_gpu
from gpuopt.physics import analytic_load, latency, latency_factors, steady_state
from gpuopt.physics.architecture import ModelArchitecture
from gpuopt.physics.context_limit import max_model_len_problem
from gpuopt.physics.cuda_graphs import GraphSettings
from gpuopt.physics.graph_flags import GraphFlags
from gpuopt.physics.lora import rank_problem
from gpuopt.physics.memory import MemoryEstimate, estimate_resolved, suggest_fixes
from gpuopt.physics.serving_config import ServingConfig, resolve
from gpuopt.physics.simulator import SchedulerConfig
from gpuopt.reports.fit import fit_json, fit_text
from gpuopt.text import printable
from gpuopt.vocabulary import WEIGHT_FORMATS


@click.command()
@click.option("--model", "model", metavar="ID", help=MODEL_HELP)
@click.option("--model-config", type=SafePath(path_type=Path), metavar="PATH",
              help="A local Hugging Face config.json instead of a registry id (never fetched).")
@click.option("--gpu", required=True, metavar="NAME", help="GPU name, e.g. H100-SXM-80GB (case-insensitive).")
@click.option("--tp", "tp", type=ASCII_INT, default=1, show_default=True, help="Tensor-parallel size.")
@click.option("--pp", "pp", type=ASCII_INT, default=1, show_default=True, help="Pipeline-parallel size.")
@click.option("--dp", "dp", type=ASCII_INT, default=1, show_default=True,
              help="Data-parallel engines (vLLM --data-parallel-size): a MoE model's experts are split over all "
                   "their GPUs; memory is per GPU, a load is shared evenly and throughput is the engines' sum.")
@click.option("--enable-expert-parallel", is_flag=True, default=False, help="Experts placed whole on ranks (EP).")
@click.option("--precision", type=click.Choice(WEIGHT_FORMATS), help="Weight format (default: the checkpoint's).")
@click.option("--kv-cache-dtype", type=click.Choice(["auto", "fp8"]), default="auto", show_default=True)
@click.option("--max-model-len", type=ASCII_INT, help="Context length (default: the model's maximum).")
@click.option("--gpu-memory-utilization", type=FINITE_FLOAT,
              help="Fraction of GPU memory for vLLM (default: the release's).")
@click.option("--max-num-seqs", type=ASCII_INT, help="Scheduler limit (default: vLLM's for this GPU).")
@click.option("--max-num-batched-tokens", type=ASCII_INT, help="Scheduler limit (default: vLLM's for this GPU).")
@click.option("--block-size", type=ASCII_INT,
              help="KV-cache block in tokens (default: the release's, 16; 64 from 0.34).")
@click.option("--vllm-version", type=VLLM_VERSION, help=VLLM_VERSION_HELP)
@click.option("--input-tokens", type=ASCII_INT, help="Mean prompt tokens (enables latency prediction).")
@click.option("--output-tokens", type=ASCII_INT, help="Mean output tokens.")
@click.option("--concurrency", type=FINITE_FLOAT, help="Concurrent clients (closed loop).")
@click.option("--request-rate", type=FINITE_FLOAT, help="Requests per second (open loop).")
@click.option("--ttft-slo-ms", type=FINITE_FLOAT, help="TTFT target: also report the largest rate that meets it.")
@click.option("--tpot-slo-ms", type=FINITE_FLOAT, help="TPOT target: also report the largest rate that meets it.")
@click.option("--interconnect", type=click.Choice(["nvlink", "pcie"]),
              help="Link between the GPUs of a replica (default: NVLink when the GPU has it).")
@click.option("--enforce-eager", is_flag=True,
              help="vLLM's --enforce-eager: no CUDA graphs in memory (latency is still predicted with graphs).")
@click.option("--compilation-config", metavar="JSON",
              help="vLLM's --compilation-config: its cudagraph_mode, cudagraph_capture_sizes and "
                   "max_cudagraph_capture_size decide the CUDA graphs' memory (other keys are named as not "
                   "modelled).")
@click.option("--optimization-level", type=click.Choice(["0", "1", "2", "3"]),
              help="vLLM's -O<n> (0.12+: 0 captures no CUDA graphs, 1 piecewise ones only; before 0.12 the "
                   "compilation level, where only 3, the default, captures any).")
@click.option("--language-model-only", is_flag=True,
              help="vLLM's --language-model-only: a multimodal model's vision tower is not loaded.")
@click.option("--enable-lora", is_flag=True,
              help="vLLM's --enable-lora: adapter slots' buffers are allocated at load time and counted.")
@click.option("--max-loras", type=ASCII_INT, help="Adapter slots with --enable-lora (vLLM's default: 1).")
@click.option("--max-lora-rank", type=ASCII_INT, help="Largest adapter rank with --enable-lora (vLLM's default: 16).")
@click.option("--fully-sharded-loras", is_flag=True,
              help="vLLM's --fully-sharded-loras: adapters' A and B also split over the TP GPUs (less memory).")
@click.option("--kv-cache-memory-bytes", type=HUMAN_INT, metavar="BYTES",
              help="vLLM's --kv-cache-memory-bytes: each GPU's KV cache, set rather than measured (1G = 2**30, "
                   "1g = 10**9).")
@click.option("--enable-extensible-kv-cache/--no-enable-extensible-kv-cache", "extensible_kv_cache", default=None,
              help="vLLM 0.34+: size the KV cache after warmup from the memory left (the default there), or "
                   "estimate it from the profiling run as before 0.34.")
@click.option("--enable-prefix-caching/--no-enable-prefix-caching", "prefix_caching", default=None,
              help="vLLM's prefix caching (default: on; for Mamba / linear-attention hybrids only from 0.28): a "
                   "hybrid's state layers hold 2-3 pages a request with it, one without.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@profile_option
def fit(model: str | None, model_config: Path | None, gpu: str, tp: int, pp: int, dp: int,
        enable_expert_parallel: bool, precision: str | None,
        kv_cache_dtype: str, max_model_len: int | None, gpu_memory_utilization: float | None,
        max_num_seqs: int | None, max_num_batched_tokens: int | None, block_size: int | None,
        vllm_version: str | None, input_tokens: int | None, output_tokens: int | None,
        concurrency: float | None, request_rate: float | None, ttft_slo_ms: float | None,
        tpot_slo_ms: float | None, interconnect: str | None, enforce_eager: bool, compilation_config: str | None,
        optimization_level: str | None, language_model_only: bool,
        enable_lora: bool, max_loras: int | None, max_lora_rank: int | None, fully_sharded_loras: bool,
        kv_cache_memory_bytes: int | None, extensible_kv_cache: bool | None, prefix_caching: bool | None,
        as_json: bool, profile_path: Path | None) -> None:
    """Check that a model fits on a GPU under vLLM and report its KV-cache capacity; with --input-tokens and
    --output-tokens also predict TTFT, TPOT and throughput (at --concurrency or --request-rate).

    Exit code 0 when it fits, 1 when it does not (with the smallest changes that would) or when no load
    meets the latency targets, 2 on bad input.
    """
    problems: list[str] = []
    arch = None
    spec = None
    apply_profile(profile_path, vllm_version)  # the GPU as your own runs calibrated it (a note says so)
    try:
        arch = load_architecture(model, model_config)
    except InputError as exc:
        problems.extend(exc.problems)
    try:
        spec = get_gpu(gpu)
    except InputError as exc:
        problems.extend(exc.problems)
    problems += _latency_problems(input_tokens, output_tokens, concurrency, request_rate, ttft_slo_ms, tpot_slo_ms,
                                  max_model_len)
    if not enable_lora and (max_loras is not None or max_lora_rank is not None or fully_sharded_loras):
        problems.append("--max-loras/--max-lora-rank/--fully-sharded-loras need --enable-lora (vLLM ignores them "
                        "without it)")
    if max_loras is not None and max_loras < 1:
        problems.append(f"--max-loras must be >= 1 (got {max_loras})")
        # with no slot the memory model never sees the rank, so it is checked here
        if max_lora_rank is not None and (bad_rank := rank_problem(max_lora_rank, vllm_version)) is not None:
            problems.append(bad_rank)
    graphs = GraphFlags("", vllm_version)
    try:
        if compilation_config is not None:
            graphs.compilation_config("--compilation-config", compilation_config)
        if optimization_level is not None:
            graphs.optimization_level("--optimization-level", optimization_level)
    except InputError as exc:
        problems.extend(exc.problems)
    if problems or arch is None or spec is None:
        raise InputError(*problems)
    for key in graphs.not_modelled:
        say("note", f"{key} is not modelled (no effect on memory)")
    graph_settings = graphs.settings()
    cfg = ServingConfig(tensor_parallel=tp, pipeline_parallel=pp, precision=precision,  # type: ignore[arg-type]
                        kv_cache_dtype=kv_cache_dtype,  # type: ignore[arg-type]
                        max_model_len=max_model_len, gpu_memory_utilization=gpu_memory_utilization,
                        max_num_seqs=max_num_seqs, max_num_batched_tokens=max_num_batched_tokens,
                        block_size=block_size, vllm_version=vllm_version,
                        interconnect=interconnect,  # type: ignore[arg-type]
                        enforce_eager=enforce_eager, cudagraphs=graph_settings or GraphSettings(),
                        language_model_only=language_model_only, data_parallel=dp,
                        expert_parallel=enable_expert_parallel,
                        max_loras=(1 if max_loras is None else max_loras) if enable_lora else 0,
                        max_lora_rank=16 if max_lora_rank is None else max_lora_rank,
                        fully_sharded_loras=fully_sharded_loras and enable_lora,
                        extensible_kv_cache=extensible_kv_cache, kv_cache_memory_bytes=kv_cache_memory_bytes,
                        enable_prefix_caching=prefix_caching)
    resolved, profile = resolve(arch, spec, cfg)
    check_runs_on(spec, arch, resolved, precision_given=precision is not None)
    too_long = max_model_len_problem(arch, resolved.max_model_len, "--max-model-len")
    if too_long:
        raise InputError(too_long)
    if input_tokens is not None and output_tokens is not None and input_tokens + output_tokens > resolved.max_model_len:
        raise InputError(f"--input-tokens {input_tokens} + --output-tokens {output_tokens} exceed max_model_len "
                         f"{resolved.max_model_len} by {input_tokens + output_tokens - resolved.max_model_len}")
    est = estimate_resolved(arch, spec, resolved, profile)
    suggestions = [] if est.fits else suggest_fixes(arch, spec, resolved, profile)
    perf: dict[str, float | None] = {}
    infeasible_slo: str | None = None
    if est.fits and input_tokens is not None and output_tokens is not None:
        if enforce_eager or graph_settings is not None:
            click.echo("note: --enforce-eager, --compilation-config and --optimization-level change memory only; "
                       "latency is predicted as with vLLM's default CUDA graphs", err=True)
        if enable_lora:
            click.echo("note: --enable-lora changes memory only; latency is the base model's (LoRA kernels not "
                       "modelled)", err=True)
        perf, infeasible_slo = _predict(arch, spec, est, interconnect, input_tokens, output_tokens, concurrency,
                                        request_rate, ttft_slo_ms, tpot_slo_ms, enable_expert_parallel)
    if as_json:
        click.echo(json.dumps({**fit_json(est, suggestions), **perf}, indent=2, sort_keys=True))
    else:  # the estimate's caveats are diagnostics, on stderr (the JSON carries them as "warnings")
        for warning in est.warnings:
            say("warning", warning)
        if perf.get("overloaded"):
            say("warning", "this load is above what the replica sustains")
        click.echo(fit_text(est, suggestions))
        if perf:
            click.echo(perf_text(perf))
    if not est.fits:
        raise SystemExit(EXIT_INFEASIBLE)
    if infeasible_slo:
        click.echo(f"infeasible: {printable(infeasible_slo)}", err=True)
        raise SystemExit(EXIT_INFEASIBLE)


def _latency_problems(input_tokens: int | None, output_tokens: int | None, concurrency: float | None,
                      request_rate: float | None, ttft_slo_ms: float | None, tpot_slo_ms: float | None,
                      max_model_len: int | None) -> list[str]:
    problems = []
    for name, value in (("--input-tokens", input_tokens), ("--output-tokens", output_tokens),
                        ("--concurrency", concurrency), ("--request-rate", request_rate),
                        ("--ttft-slo-ms", ttft_slo_ms), ("--tpot-slo-ms", tpot_slo_ms)):
        if value is not None and value <= 0:
            problems.append(f"{name} must be positive (got {value:g})")
    if (input_tokens is None) != (output_tokens is None):
        problems.append("give both --input-tokens and --output-tokens")
    if concurrency is not None and request_rate is not None:
        problems.append("give either --concurrency or --request-rate, not both")
    if (concurrency or request_rate or ttft_slo_ms or tpot_slo_ms) and input_tokens is None:
        problems.append("latency options need --input-tokens and --output-tokens")
    return problems


def _predict(arch: ModelArchitecture, spec: GpuSpec, est: MemoryEstimate, interconnect: str | None,
             input_tokens: int, output_tokens: int, concurrency: float | None, request_rate: float | None,
             ttft_slo_ms: float | None, tpot_slo_ms: float | None,
             expert_parallel: bool = False) -> tuple[dict[str, float | None], str | None]:
    """Latency at the load asked for. With data parallelism the load is shared evenly by the engines (vLLM's
    DP coordinator balances them), each predicted as one replica, and the rates are the engines' sum."""
    replica = latency.build_replica(arch, spec, est, interconnect, expert_parallel=expert_parallel)
    dp = est.config.data_parallel
    borrowed = latency_factors.borrowed_calibration(spec)
    if borrowed is not None:
        say("note", borrowed.note)
    if replica.attention_backend == "triton":
        why = "attention sinks" if arch.attention_sinks else "an FP8 KV cache"
        say("note", f"vLLM runs Triton attention for {why} on {spec.gpu} (FlashAttention 2 has neither below "
                    f"sm90): attention FLOPs priced at {replica.attn_time_scale:.2f}x FlashAttention's")
    if request_rate is not None:
        point = analytic_load.at_rate(replica, request_rate / dp, input_tokens, output_tokens)
    elif concurrency is not None:
        clients = concurrency / dp
        point = analytic_load.at_concurrency(replica, clients, input_tokens, output_tokens)
        if steady_state.churns(replica, input_tokens, output_tokens, clients):  # admitted, then preempted
            sched = SchedulerConfig.from_memory(est)
            if steady_state.closed_loop_steps(sched, input_tokens, output_tokens, clients) \
                    <= steady_state.SIMULATED_STEPS_LIMIT:
                point, _ = steady_state.closed_loop_point(replica, sched, input_tokens, output_tokens, clients)
            else:
                say("warning", f"{clients:,.0f} clients overfill the KV cache, where vLLM preempts and recomputes; "
                               "the loop is too long to simulate here, so the figures below leave the churn out "
                               "(optimistic): `gpuopt simulate` runs it")
        if point.limit:  # a closed loop beyond saturation: the extra clients queue (or churn)
            say("note", point.limit + (f" (per data-parallel engine, of {dp})" if dp > 1 else ""))
    else:
        point = analytic_load.zero_load(replica, input_tokens, output_tokens)
    pool = est.kv_pool
    out: dict[str, float | None] = {
        "ttft_ms": _round(point.ttft_ms), "tpot_ms": _round(point.tpot_ms),
        "output_tokens_per_second": _round(point.output_tokens_per_second * dp),
        "requests_per_second": _round(point.requests_per_second * dp), "concurrency": _round(point.concurrency * dp),
        # requests of this size at their full length that the engines' KV blocks hold at once: vLLM's "Maximum
        # concurrency" for the shape asked, a hybrid's state pages and sliding windows included (KvPool)
        "requests_in_kv_cache": _round(pool.num_blocks / pool.blocks_held(input_tokens + output_tokens) * dp),
    }
    if not point.stable:
        out["overloaded"] = 1.0
        if request_rate is not None:
            # an open loop above the largest stable rate is served at that rate, the rest of the arrivals
            # queueing without bound: what the replica delivers is that rate's throughput, not the offered load,
            # and the requests it admits decode at that rate's TPOT (the scheduler's limits cap the batch); only
            # TTFT, the queue, grows without bound
            # saturated, the engine runs full whatever the arrivals do: its closed-loop top rate
            top = analytic_load.max_rate(replica, input_tokens, output_tokens, poisson=False)
            # the queue grows without bound, and so do TTFT and the requests in flight (a rate past the KV
            # cache's limit printed those of a cache that held everyone: 551 ms for 1 request/s of
            # Qwen2.5-32B on an A100-40GB that sustains 0.94)
            out["ttft_ms"] = out["concurrency"] = None
            out["tpot_ms"] = _round(top.tpot_ms)
            out["offered_requests_per_second"] = _round(request_rate)
            out["requests_per_second"] = _round(min(top.requests_per_second, request_rate / dp) * dp)
            out["output_tokens_per_second"] = _round(min(top.output_tokens_per_second,
                                                         request_rate / dp * output_tokens) * dp)
    problem = None
    if ttft_slo_ms is not None or tpot_slo_ms is not None:
        try:
            # a closed loop's rate within the targets has no Poisson waits (the clients are the population) and
            # stops where its clients' KV swings past the cache (steady_state.closed_top, as the planner's)
            best = (analytic_load.max_rate(replica, input_tokens, output_tokens, ttft_slo_ms, tpot_slo_ms)
                    if concurrency is None else
                    steady_state.closed_top(replica, input_tokens, output_tokens, ttft_slo_ms, tpot_slo_ms))
            out["max_requests_per_second_within_slo"] = _round(best.requests_per_second * dp)
        except InfeasibleError as exc:
            out["max_requests_per_second_within_slo"] = 0.0
            problem = exc.problems[0]
    return out, problem


def _round(value: float) -> float | None:
    return None if value != value or value in (float("inf"), float("-inf")) else round(float(value), 3)


def perf_text(perf: dict[str, float | None]) -> str:
    def show(key: str, unit: str) -> str:
        value = perf.get(key)
        if value is None:
            return "unbounded (overloaded)"
        return f"{value:.4g}{unit}" if abs(value) >= 1e12 else f"{value:,.3f}{unit}"  # 1e300 req/s: not 300 digits

    offered = perf.get("offered_requests_per_second")
    served = f"; the most it serves, of {offered:,.3f} offered" if offered is not None else ""
    lines = [f"predicted TTFT: {show('ttft_ms', ' ms')}", f"predicted TPOT: {show('tpot_ms', ' ms')}",
             f"output tokens/s: {show('output_tokens_per_second', '')}",
             f"requests/s: {show('requests_per_second', '')} (concurrency {show('concurrency', '')}{served})"]
    if "requests_in_kv_cache" in perf:
        lines.append(f"requests of this size the KV cache holds at once: {show('requests_in_kv_cache', '')}")
    if "max_requests_per_second_within_slo" in perf:
        lines.append(f"max requests/s within the SLOs: {show('max_requests_per_second_within_slo', '')}")
    return "\n".join(lines)
