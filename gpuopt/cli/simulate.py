"""`gpuopt simulate`: what `vllm bench serve` would measure on one replica, from the step-level simulator.

The model, GPU and parallelism flags are `gpuopt fit`'s; the client flags are `vllm bench serve`'s (same
names, same defaults except --ignore-eos, see below); `--server-args` takes the `vllm serve` flag string of
the deployment. The output is the summary `vllm bench serve` prints (or, with --json, the keys of its
--save-result file); --save-result writes a file of vLLM's shape, so a prediction and a real run can be
compared with the same tools.

--ignore-eos is on by default (vLLM's client has it off): with it off, a random-dataset output ends at a
length the simulator has to assume (a geometric length with max_tokens as its mean); ShareGPT lengths are
the replies' own lengths either way.
"""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path
from typing import TypeVar

import click

from gpuopt.cli.options import (
    ASCII_INT,
    FINITE_FLOAT,
    MODEL_HELP,
    VLLM_VERSION,
    VLLM_VERSION_HELP,
    SafePath,
    check_runs_on,
    load_architecture,
)
from gpuopt.cli.profile_option import apply_profile, profile_option
from gpuopt.cli.terminal import say
from gpuopt.decimals import parse_decimal
from gpuopt.errors import InputError
from gpuopt.hardware import get_gpu
from gpuopt.physics import latency
from gpuopt.physics.context_limit import max_model_len_problem
from gpuopt.physics.cuda_graphs import GraphSettings
from gpuopt.physics.memory import estimate_resolved
from gpuopt.physics.serve_args import ServeArgs, lora_slots, parse_serve_args, performance_mode
from gpuopt.physics.serving_config import ServingConfig, resolve
from gpuopt.physics.simulator import SchedulerConfig, SimResult, simulate_dp
from gpuopt.physics.traffic import (
    AllAtOnce,
    ArrivalProcess,
    ConstantArrivals,
    FixedLengths,
    HistogramLengths,
    LengthDistribution,
    PoissonArrivals,
    RangeLengths,
    ShareGPTLengths,
    make_requests,
)
from gpuopt.text import printable
from gpuopt.vocabulary import MAX_TOKENS, WEIGHT_FORMATS

T = TypeVar("T", int, float, str)

# ShareGPT V3 means as `vllm bench serve` measured them in ../shared/data/perf_load.csv (gpt-oss tokenizer,
# 1,000 prompts: 215 in, 194 out); used when --dataset-name sharegpt is given without lengths
SHAREGPT_DEFAULT_MEANS = (215, 194)


def _rate(value: str) -> float:
    if value.strip().lower() == "inf":
        return math.inf
    rate = parse_decimal(value)  # ASCII decimals, finite: float() read 1_0 as 10 (review)
    if rate is None:
        raise InputError(f"--request-rate must be a positive number or inf (got {value!r})")
    if rate <= 0:
        raise InputError(f"--request-rate must be a positive number or inf (got {value})")
    return rate


def read_lengths_file(path: Path) -> HistogramLengths:
    """A CSV histogram with the header input_tokens,output_tokens,share (shares summing to 1)."""
    from gpuopt.decimals import parse_whole
    from gpuopt.inputs.loader import read_text

    try:  # missing, a folder, binary, not UTF-8: the input boundary's messages
        text = read_text(path, "lengths CSV file")
    except InputError as exc:
        raise InputError(*(f"--lengths-file {p}" for p in exc.problems)) from None
    reader = csv.reader(text.splitlines())
    header = next(reader, [])
    numbered = [(reader.line_num, fields) for fields in reader if fields]
    needed = {"input_tokens", "output_tokens", "share"}
    if not numbered or not needed <= set(header):
        raise InputError(f"--lengths-file {path}: needs a header input_tokens,output_tokens,share and rows")
    twice = [col for col in dict.fromkeys(header) if header.count(col) > 1]
    if twice:  # a reader keeps the last one, silently (review)
        raise InputError(*(f"--lengths-file {path}: column '{col}' appears {header.count(col)} times in the header"
                           for col in twice))
    ragged = [f"--lengths-file {path} line {n}: {len(fields)} fields, the header has {len(header)}"
              for n, fields in numbered if len(fields) != len(header)]
    if ragged:
        raise InputError(*ragged)
    bins = []
    problems: list[str] = []
    for line, row in ((n, dict(zip(header, fields, strict=True))) for n, fields in numbered):
        try:  # ASCII digits, as every number gpuopt reads from a file (int() and float() read 1_00 and ٢٠٠)
            inp_v, out_v, share_v = (parse_whole(row["input_tokens"]), parse_whole(row["output_tokens"]),
                                     parse_decimal(row["share"]))
            if inp_v is None or out_v is None or share_v is None:
                raise ValueError(row)
            inp, out, share = inp_v, out_v, share_v
        except (TypeError, ValueError):
            problems.append(f"--lengths-file {path} line {line}: input_tokens and output_tokens must be integers "
                            f"and share a number")
            continue
        if inp <= 0 or out <= 0:
            problems.append(f"--lengths-file {path} line {line}: lengths must be positive (got {inp}, {out})")
        if not (math.isfinite(share) and share >= 0):
            problems.append(f"--lengths-file {path} line {line}: share must be >= 0 (got {row['share']})")
        bins.append((inp, out, share))
    if problems:
        raise InputError(*problems)
    total = sum(b[2] for b in bins)
    if abs(total - 1) > 1e-6:
        raise InputError(f"--lengths-file {path}: shares must sum to 1 (got {total:g})")
    return HistogramLengths(tuple(bins))


MAX_PROMPTS = 1_000_000
"""A quarter of an hour of simulation on one core; a typo of 10^9 prompts would run for weeks and exhaust memory."""


def _positive(problems: list[str], name: str, value: float | None) -> None:
    if value is not None and not (value > 0 and math.isfinite(value)):
        problems.append(f"{name} must be positive (got {value:g})")


def _merge(name: str, explicit: T | None, from_args: T | None, problems: list[str]) -> T | None:
    """A knob given as a flag and in --server-args: they must agree."""
    if explicit is not None and from_args is not None and explicit != from_args:
        problems.append(f"{name} {explicit} disagrees with --server-args {name} {from_args}")
    return explicit if explicit is not None else from_args


@click.command()
@click.option("--model", "model", metavar="ID", help=MODEL_HELP)
@click.option("--model-config", type=SafePath(path_type=Path), metavar="PATH",
              help="A local Hugging Face config.json instead of a registry id (never fetched).")
@click.option("--gpu", required=True, metavar="NAME", help="GPU name, e.g. H100-SXM-80GB (case-insensitive).")
@click.option("--tp", "tp", type=ASCII_INT, default=None, help="Tensor-parallel size (default 1).")
@click.option("--pp", "pp", type=ASCII_INT, default=None, help="Pipeline-parallel size (default 1).")
@click.option("--dp", "dp", type=ASCII_INT, default=None,
              help="Data-parallel engines (default 1); a MoE model's experts are split over all of their GPUs.")
@click.option("--enable-expert-parallel", is_flag=True, default=False, help="Experts placed whole on ranks (EP).")
@click.option("--precision", type=click.Choice(WEIGHT_FORMATS), help="Weight format (default: the checkpoint's).")
@click.option("--kv-cache-dtype", type=click.Choice(["auto", "fp8"]), default=None, help="KV cache dtype (auto).")
@click.option("--max-model-len", type=ASCII_INT, help="Context length (default: the model's maximum).")
@click.option("--gpu-memory-utilization", type=FINITE_FLOAT,
              help="Fraction of GPU memory for vLLM (default: the release's).")
@click.option("--max-num-seqs", type=ASCII_INT, help="Scheduler limit (default: vLLM's for this GPU).")
@click.option("--max-num-batched-tokens", type=ASCII_INT, help="Scheduler limit (default: vLLM's for this GPU).")
@click.option("--block-size", type=ASCII_INT, default=None,
              help="KV block size in tokens (default: the release's, 16; 64 from 0.34).")
@click.option("--vllm-version", type=VLLM_VERSION, help=VLLM_VERSION_HELP)
@click.option("--interconnect", type=click.Choice(["nvlink", "pcie"]),
              help="Link between the GPUs of a replica (default: NVLink when the GPU has it).")
@click.option("--server-args", default="", metavar="FLAGS", help="`vllm serve` flags of the deployment, quoted.")
@click.option("--dataset-name", type=click.Choice(["random", "sharegpt"]), default="random", show_default=True)
@click.option("--random-input-len", type=ASCII_INT, default=1024, show_default=True)
@click.option("--random-output-len", type=ASCII_INT, default=128, show_default=True)
@click.option("--random-range-ratio", type=FINITE_FLOAT, default=0.0, show_default=True,
              help="Lengths uniform in [L(1-r), L(1+r)].")
@click.option("--sharegpt-input-len", type=ASCII_INT, default=None, help="Mean prompt tokens of a ShareGPT-shaped run.")
@click.option("--sharegpt-output-len", type=ASCII_INT, default=None,
              help="Mean output tokens of a ShareGPT-shaped run.")
@click.option("--lengths-file", type=SafePath(path_type=Path), default=None, metavar="FILE",
              help="CSV histogram input_tokens,output_tokens,share (overrides the dataset lengths).")
@click.option("--num-prompts", type=ASCII_INT, default=1000, show_default=True)
@click.option("--request-rate", default="inf", show_default=True, metavar="R|inf", help="Requests per second.")
@click.option("--burstiness", type=FINITE_FLOAT, default=1.0, show_default=True, help="Gamma shape of inter-arrivals.")
@click.option("--arrival", type=click.Choice(["poisson", "constant"]), default="poisson", show_default=True)
@click.option("--max-concurrency", type=ASCII_INT, default=None, help="Requests in flight at most (a closed loop).")
@click.option("--ignore-eos/--no-ignore-eos", default=True, show_default=True,
              help="Force every output to its requested length.")
@click.option("--offline", is_flag=True, default=False, help="LLM.generate batch: no API server.")
@click.option("--backend", type=click.Choice(["openai", "vllm", "openai-chat"]), default="openai", show_default=True,
              help="vllm bench serve's client: the completions endpoint, or the chat one (its stream's role chunk "
                   "counts as a chunk in the ITLs and the peak output rate).")
@click.option("--seed", type=ASCII_INT, default=0, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object (vllm bench serve's result keys).")
@click.option("--save-result", type=SafePath(path_type=Path), default=None, metavar="FILE",
              help="Write a result file of vllm bench serve's shape.")
@profile_option
def simulate(model: str | None, model_config: Path | None, gpu: str, tp: int | None, pp: int | None,
             dp: int | None, enable_expert_parallel: bool, precision: str | None, kv_cache_dtype: str | None,
             max_model_len: int | None, gpu_memory_utilization: float | None, max_num_seqs: int | None,
             max_num_batched_tokens: int | None, block_size: int | None, vllm_version: str | None,
             interconnect: str | None, server_args: str, dataset_name: str, random_input_len: int,
             random_output_len: int, random_range_ratio: float, sharegpt_input_len: int | None,
             sharegpt_output_len: int | None, lengths_file: Path | None, num_prompts: int, request_rate: str,
             burstiness: float, arrival: str, max_concurrency: int | None, ignore_eos: bool, offline: bool,
             backend: str, seed: int, as_json: bool, save_result: Path | None, profile_path: Path | None) -> None:
    """Simulate `vllm bench serve` against one vLLM deployment, step by step, and print what it would
    measure: throughput, TTFT, TPOT, ITL and end-to-end latency (mean, median, p90/95/99).

    Exit code 0 on success, 1 when the model does not fit, 2 on bad input.
    """
    problems: list[str] = []
    apply_profile(profile_path, vllm_version)  # the GPU as your own runs calibrated it (a note says so)
    args = ServeArgs()
    try:
        args = parse_serve_args(server_args, vllm_version=vllm_version)
    except InputError as exc:
        problems.extend(exc.problems)
    for name, value in (("--random-input-len", random_input_len), ("--random-output-len", random_output_len),
                        ("--sharegpt-input-len", sharegpt_input_len), ("--sharegpt-output-len", sharegpt_output_len),
                        ("--num-prompts", num_prompts), ("--burstiness", burstiness),
                        ("--max-concurrency", max_concurrency), ("--tp", tp), ("--pp", pp), ("--dp", dp)):
        _positive(problems, name, value)
        if name.endswith("-len") and value is not None and value > MAX_TOKENS:
            problems.append(f"{name} must be at most {MAX_TOKENS:,} tokens (got {value:,})")
    if num_prompts > MAX_PROMPTS:
        problems.append(f"--num-prompts must be at most {MAX_PROMPTS:,} (got {num_prompts:,}): the simulator replays "
                        f"about a thousand prompts a second")
    if seed < 0:  # numpy's generators (and vllm bench serve's np.random.seed) take no negative seed
        problems.append(f"--seed must be a non-negative integer (got {seed})")
    if not (math.isfinite(random_range_ratio) and 0 <= random_range_ratio < 1):
        problems.append(f"--random-range-ratio must be in [0, 1) (got {random_range_ratio:g})")
    rate = math.inf
    try:
        rate = _rate(request_rate)
    except InputError as exc:
        problems.extend(exc.problems)
    if save_result is not None:  # before the run: a folder or a missing folder used to fail after it (exit 70)
        from gpuopt.inputs.loader import check_output_path

        try:
            check_output_path(save_result, "--save-result")
        except InputError as exc:
            problems.extend(exc.problems)
    lengths: LengthDistribution | None = None
    if lengths_file is not None:
        try:
            lengths = read_lengths_file(lengths_file)
        except InputError as exc:
            problems.extend(exc.problems)
    tp_v = _merge("--tp", tp, args.tensor_parallel, problems)
    pp_v = _merge("--pp", pp, args.pipeline_parallel, problems)
    dp_v = _merge("--dp", dp, args.data_parallel, problems)
    ep = enable_expert_parallel or bool(args.enable_expert_parallel)
    mml = _merge("--max-model-len", max_model_len, args.max_model_len, problems)
    gmu = _merge("--gpu-memory-utilization", gpu_memory_utilization, args.gpu_memory_utilization, problems)
    seqs = _merge("--max-num-seqs", max_num_seqs, args.max_num_seqs, problems)
    batched = _merge("--max-num-batched-tokens", max_num_batched_tokens, args.max_num_batched_tokens, problems)
    bsize = _merge("--block-size", block_size, args.block_size, problems)
    kv_dtype = _merge("--kv-cache-dtype", kv_cache_dtype, args.kv_cache_dtype, problems)
    arch = spec = None
    try:
        arch = load_architecture(model, model_config)
    except InputError as exc:
        problems.extend(exc.problems)
    try:
        spec = get_gpu(gpu)
    except InputError as exc:
        problems.extend(exc.problems)
    # vLLM refuses to start above the model's limit: the rule fit and solve apply (physics/context_limit.py),
    # for --max-model-len given as a flag or inside --server-args alike
    if arch is not None and mml is not None and (too_long := max_model_len_problem(arch, mml, "--max-model-len")):
        problems.append(too_long)
    if arch is not None and args.quantization is not None:
        # `--quantization fp8` quantizes 16-bit weights to FP8 at load (what a plan's command prints for fp8);
        # any other method names the checkpoint's own format, which the model must then be
        method = args.quantization.lower()
        own = arch.quantization.method if arch.quantization is not None else None
        if method == "fp8" and own is None:
            if precision not in (None, "fp8"):
                problems.append(f"--server-args --quantization fp8 and --precision {precision} disagree: give one")
            precision = "fp8"
        elif own is None or not (method == own or method.startswith(own.replace("-", "_"))
                                 or own.replace("-", "_").startswith(method)):
            problems.append(f"--server-args --quantization {args.quantization}: {arch.hf_id} is "
                            + (f"a {own} checkpoint" if own else "not a quantized checkpoint")
                            + "; gpuopt simulates `--quantization fp8` on 16-bit weights, or a quantized checkpoint "
                            "named as --model (its format is read from it)")
    if problems or arch is None or spec is None:
        raise InputError(*problems)
    for flag in args.not_modelled:
        say("note", f"--server-args {flag} is not modelled (no effect on the simulation)")
    ignored = [flag for flag, given in (("--sharegpt-input-len", sharegpt_input_len),
                                        ("--sharegpt-output-len", sharegpt_output_len))
               if given is not None and (dataset_name != "sharegpt" or lengths is not None)]
    if ignored:  # as vllm bench serve, which reads them for the sharegpt dataset only
        verb = "applies" if len(ignored) == 1 else "apply"
        say("note", f"{' and '.join(ignored)} {verb} to --dataset-name sharegpt without --lengths-file only: ignored")
    if lengths is None:
        if dataset_name == "sharegpt":
            lengths = ShareGPTLengths(sharegpt_input_len or SHAREGPT_DEFAULT_MEANS[0],
                                      sharegpt_output_len or SHAREGPT_DEFAULT_MEANS[1])
        elif random_range_ratio:
            lengths = RangeLengths(random_input_len, random_output_len, random_range_ratio)
        else:
            lengths = FixedLengths(random_input_len, random_output_len)
    slots, rank, sharded = lora_slots(args)
    cfg = ServingConfig(tensor_parallel=tp_v or 1, pipeline_parallel=pp_v or 1,
                        precision=precision,  # type: ignore[arg-type]
                        kv_cache_dtype="fp8" if kv_dtype == "fp8" else "auto", max_model_len=mml,
                        gpu_memory_utilization=gmu, max_num_seqs=seqs, max_num_batched_tokens=batched,
                        block_size=bsize, vllm_version=vllm_version, data_parallel=dp_v or 1,
                        expert_parallel=ep, performance_mode=performance_mode(args.performance_mode),
                        chunked_prefill=args.chunked_prefill is not False,
                        max_loras=slots, max_lora_rank=rank,
                        fully_sharded_loras=sharded, extensible_kv_cache=args.extensible_kv_cache,
                        kv_cache_memory_bytes=args.kv_cache_memory_bytes,
                        enforce_eager=bool(args.enforce_eager), cudagraphs=args.cudagraphs or GraphSettings(),
                        enable_prefix_caching=args.enable_prefix_caching,
                        interconnect=interconnect)  # type: ignore[arg-type]  # one link for memory and latency
    if args.enforce_eager or args.cudagraphs is not None:
        say("note", "--server-args: the CUDA graphs' memory follows --enforce-eager / --compilation-config / -O; step "
                    "times are simulated as with vLLM's default graphs (eager steps are slower)")
    if args.enable_lora:
        say("note", "--server-args --enable-lora: the adapter slots' memory is modelled, the LoRA kernels' "
                    "step time is not (the simulation runs the base model's)")
    resolved, profile = resolve(arch, spec, cfg)
    check_runs_on(spec, arch, resolved, precision_given=cfg.precision is not None)
    mem = estimate_resolved(arch, spec, resolved, profile)
    if not mem.fits:
        click.echo(f"infeasible: {printable(mem.reason or '')}", err=True)
        raise SystemExit(1)
    replica = latency.build_replica(arch, spec, mem, interconnect, expert_parallel=ep,
                                    async_scheduling=args.async_scheduling)
    sched = SchedulerConfig.from_memory(mem, async_scheduling=replica.async_scheduling,
                                        chunked_prefill=args.chunked_prefill is not False)
    # what vLLM would log at start-up, to hold a prediction against a real server's log
    engines = f"{dp_v} engines of " if (dp_v or 1) > 1 else ""
    say("note", f"simulated vLLM {resolved.vllm_version}, {engines}TP={resolved.tensor_parallel} "
                f"PP={resolved.pipeline_parallel} on {spec.gpu}: max_num_seqs {sched.max_num_seqs}, "
                f"max_num_batched_tokens {sched.max_num_batched_tokens}, KV cache {mem.kv_cache_tokens:,} tokens, "
                f"{'async' if sched.async_scheduling else 'sync'} scheduling, prefix caching "
                f"{'on' if sched.enable_prefix_caching else 'off'}, chunked prefill "
                f"{'on' if sched.chunked_prefill else 'off'}")
    process: ArrivalProcess
    if offline or not math.isfinite(rate):
        process = AllAtOnce()
    elif arrival == "constant":
        process = ConstantArrivals(rate)
    else:
        process = PoissonArrivals(rate, burstiness)
    requests = make_requests(lengths, process, num_prompts, seed)
    longest = max(r.input_tokens + r.output_tokens for r in requests)
    if longest > resolved.max_model_len:
        raise InputError(f"--max-model-len {resolved.max_model_len}: a request of {longest:,} tokens "
                         f"(prompt + output) exceeds it; raise it or shorten the lengths")
    # ShareGPT and histogram lengths are the replies' own lengths: only random outputs need an EOS assumption
    as_given = ignore_eos or dataset_name == "sharegpt" or lengths_file is not None
    result = simulate_dp(replica, requests, dp_v or 1, sched=sched,
                         max_concurrency=None if offline else max_concurrency, offline=offline,
                         ignore_eos=as_given, seed=seed, chat=backend == "openai-chat")
    summary = result.summary()
    if save_result is not None:
        record = result_file(result, summary, model=arch.hf_id, num_prompts=num_prompts, rate=rate,
                             burstiness=burstiness, max_concurrency=max_concurrency)
        from gpuopt.inputs.loader import write_output_file

        write_output_file(save_result, json.dumps(record) + "\n", "--save-result")  # atomic, as every output
    if as_json:
        click.echo(json.dumps(summary, indent=2, sort_keys=True))
    else:
        click.echo(summary_text(summary, offline))


def result_file(result: SimResult, summary: dict[str, float | int], *, model: str, num_prompts: int, rate: float,
                burstiness: float, max_concurrency: int | None) -> dict[str, object]:
    """vllm bench serve's --save-result record (vllm/benchmarks/serve.py), per-request lists included.
    `date` is null so that a seed reproduces the file byte for byte."""
    n = int(result.output_tokens.size)
    return {
        "date": None, "endpoint_type": "gpuopt-simulate", "backend": "gpuopt-simulate", "label": None,
        "model_id": model, "tokenizer_id": model, "num_prompts": num_prompts,
        "request_rate": "inf" if not math.isfinite(rate) else rate, "burstiness": burstiness,
        "max_concurrency": max_concurrency, **{k: summary[k] for k in ("duration", "completed")}, "failed": 0,
        **{k: summary[k] for k in ("total_input_tokens", "total_output_tokens", "request_throughput")},
        "request_goodput": None,
        **{k: summary[k] for k in ("output_throughput", "total_token_throughput")},
        "input_lens": [int(v) for v in result.input_tokens], "output_lens": [int(v) for v in result.output_tokens],
        "ttfts": [round(float(v), 6) for v in result.ttft_s],
        "itls": [[round(v, 6) for v in gaps] for gaps in result.request_itls_s()],
        "start_times": [round(float(v), 6) for v in result.send_s], "generated_texts": [], "errors": [""] * n,
        "rtfx": 0.0,
        **{k: v for k, v in summary.items() if k not in ("completed", "duration", "total_input_tokens",
                                                        "total_output_tokens", "request_throughput",
                                                        "output_throughput", "total_token_throughput")},
    }


def summary_text(summary: dict[str, float | int], offline: bool) -> str:
    """The table `vllm bench serve` prints at the end of a run."""
    lines = ["============ Simulated Benchmark Result ============"]
    rows = [("Successful requests:", summary["completed"], "d"),
            ("Benchmark duration (s):", summary["duration"], ".2f"),
            ("Total input tokens:", summary["total_input_tokens"], "d"),
            ("Total generated tokens:", summary["total_output_tokens"], "d"),
            ("Request throughput (req/s):", summary["request_throughput"], ".2f"),
            ("Output token throughput (tok/s):", summary["output_throughput"], ".2f"),
            ("Peak output token throughput (tok/s):", summary["max_output_tokens_per_s"], ".2f"),
            ("Peak concurrent requests:", summary["max_concurrent_requests"], "d"),
            ("Total Token throughput (tok/s):", summary["total_token_throughput"], ".2f")]
    for label, value, fmt in rows:
        lines.append(f"{label:<40}{format(value, fmt):>10}")
    if not offline:
        for title, key in (("Time to First Token", "ttft"), ("Time per Output Token (excl. 1st token)", "tpot"),
                           ("Inter-token Latency", "itl"), ("End-to-end Latency", "e2el")):
            lines.append(f"{title:-^50}")
            for stat in ("mean", "median", "p90", "p95", "p99"):
                lines.append(f"{f'{stat.capitalize()} {key.upper()} (ms):':<40}{summary[f'{stat}_{key}_ms']:>10.2f}")
    lines.append(f"{'Preemptions:':<40}{summary['preemptions']:>10d}")
    lines.append(f"{'KV cache usage peak (%):':<40}{float(summary['kv_usage_peak']) * 100:>10.1f}")
    lines.append("=" * 50)
    return "\n".join(lines)
