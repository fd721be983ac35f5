"""The user's own vLLM evidence, read into typed observations: `vllm bench serve --save-result` files,
server start-up logs and Prometheus scrapes of `/metrics`.

Each reader returns observations with the server configuration they were made under; what a file does not
say (the GPU of a bench run, the model of a log) comes from flags or from a sidecar YAML next to the file
(`<file>.yaml`, keys: model, gpu, tensor_parallel, pipeline_parallel, vllm_version, server_args). A file
that cannot be read, or whose configuration stays unknown, is one `error:` line naming the file (exit 2).
"""

from __future__ import annotations

import ast
import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Any, Literal

from gpuopt.errors import InputError
from gpuopt.inputs.loader import parse_yaml, read_text
from gpuopt.physics.cuda_graphs import GraphSettings
from gpuopt.physics.graph_flags import compilation_mode, cudagraph_mode
from gpuopt.physics.serve_args import lora_slots, modelled_kv_cache_dtype, parse_serve_args
from gpuopt.physics.vllm_profile import unmodelled_release
from gpuopt.vocabulary import MAX_TOKENS

Protocol = Literal["closed-loop", "all-at-once", "poisson", "offline"]


@dataclass(frozen=True)
class ServerConfig:
    """What vLLM ran: the model, GPU, parallelism and the serve flags that change memory or scheduling."""

    model: str | None = None
    gpu: str | None = None
    tensor_parallel: int | None = None  # None: not stated (1)
    pipeline_parallel: int | None = None
    precision: str | None = None  # weight format, when the checkpoint's own is not what ran
    vllm_version: str | None = None
    max_model_len: int | None = None
    max_num_seqs: int | None = None
    max_num_batched_tokens: int | None = None
    gpu_memory_utilization: float | None = None
    kv_cache_dtype: str | None = None  # as modelled: auto (2-byte) or fp8
    enable_prefix_caching: bool | None = None  # None: vLLM's default (on)
    async_scheduling: bool | None = None
    chunked_prefill: bool | None = None
    performance_mode: str | None = None  # `--performance-mode` (None: balanced)
    max_loras: int | None = None  # LoRA adapter slots with `--enable-lora` (None: LoRA off)
    max_lora_rank: int | None = None
    fully_sharded_loras: bool | None = None  # `--fully-sharded-loras` with `--enable-lora`
    extensible_kv_cache: bool | None = None  # `--[no-]enable-extensible-kv-cache` (0.34+; None: the release's)
    kv_cache_memory_bytes: int | None = None  # `--kv-cache-memory-bytes`: each GPU's KV cache, set
    enforce_eager: bool | None = None  # `--enforce-eager`: no CUDA graphs
    cudagraphs: GraphSettings | None = None  # `--compilation-config` / `-O<n>` / `--cuda-graph-sizes`

    def merged(self, other: ServerConfig) -> ServerConfig:
        """This configuration with its gaps filled from `other`."""
        return ServerConfig(**{name: getattr(self, name) if getattr(self, name) is not None else getattr(other, name)
                               for name in self.__dataclass_fields__})

    def missing(self) -> list[str]:
        return [name for name in ("model", "gpu") if getattr(self, name) is None]


@dataclass(frozen=True)
class LatencyObservation:
    """A serving measurement at one load (bench result or metrics scrape)."""

    id: str
    source: str
    config: ServerConfig
    protocol: Protocol
    input_tokens: float  # mean per request
    output_tokens: float
    num_prompts: int
    concurrency: float | None  # closed loop: the client cap (or the concurrency the counters imply)
    request_rate: float | None  # open loop
    mean_ttft_ms: float | None
    mean_tpot_ms: float | None
    mean_itl_ms: float | None
    output_throughput: float | None  # output tokens/s
    burstiness: float = 1.0  # gamma shape of the open loop's inter-arrival times (vllm bench serve --burstiness)
    lengths: tuple[tuple[int, int], ...] = ()  # per request (prompt, output) tokens, when the file lists them all


@dataclass(frozen=True)
class MemoryObservation:
    """A start-up: what vLLM logged about its KV-cache budget."""

    id: str
    source: str
    config: ServerConfig
    kv_cache_gib: float | None
    kv_cache_tokens: int | None
    weights_gib: float | None
    cuda_graph_gib: float | None
    notes: list[str] = field(default_factory=list)


Observation = LatencyObservation | MemoryObservation


def server_flags(text: str, flag: str, vllm_version: str | None = None) -> ServerConfig:
    """The memory- and scheduling-relevant flags of a `vllm serve` line (physics.serve_args reads them, as
    for `gpuopt simulate --server-args`; a whole `vllm serve MODEL ...` line is accepted)."""
    args = parse_serve_args(text, flag, vllm_version, command=True)
    slots, rank, sharded = lora_slots(args)
    return ServerConfig(model=args.model, tensor_parallel=args.tensor_parallel,
                        pipeline_parallel=args.pipeline_parallel, max_model_len=args.max_model_len,
                        max_num_seqs=args.max_num_seqs, max_num_batched_tokens=args.max_num_batched_tokens,
                        gpu_memory_utilization=args.gpu_memory_utilization, kv_cache_dtype=args.kv_cache_dtype,
                        enable_prefix_caching=args.enable_prefix_caching, async_scheduling=args.async_scheduling,
                        chunked_prefill=args.chunked_prefill, performance_mode=args.performance_mode,
                        max_loras=slots or None, max_lora_rank=rank if slots else None,
                        fully_sharded_loras=sharded if slots else None,
                        extensible_kv_cache=args.extensible_kv_cache,
                        kv_cache_memory_bytes=args.kv_cache_memory_bytes, enforce_eager=args.enforce_eager,
                        cudagraphs=args.cudagraphs)


def sidecar(path: Path) -> ServerConfig:
    """`<file>.yaml` next to an evidence file, when it exists."""
    side = path.with_name(path.name + ".yaml")
    if not side.exists():
        return ServerConfig()
    data = parse_yaml(read_text(side, "sidecar file"), side)[0] or {}
    if not isinstance(data, dict):
        raise InputError(f"{side}: expected a mapping of model, gpu, tensor_parallel, ...")
    known = {"model", "gpu", "tensor_parallel", "pipeline_parallel", "vllm_version", "server_args"}
    unknown = sorted(set(data) - known)
    if unknown:
        raise InputError(f"{side}: unknown key {', '.join(unknown)} (known: {', '.join(sorted(known))})")
    problems = [f"{side}: {key}: expected a string, got {data[key]!r}" + (
                    f" (quote it: YAML reads {key}: {data[key]!r} as a number)" if key == "vllm_version" else "")
                for key in ("model", "gpu", "vllm_version", "server_args")
                if data.get(key) is not None and not isinstance(data[key], str)]
    if problems:  # QA: `model: 123` was exit 70; `vllm_version: 0.10` became release 0.1, blamed on a flag
        raise InputError(*problems)
    version = data.get("vllm_version") or None
    base = server_flags(data["server_args"], f"{side}: server_args", version) if data.get("server_args") \
        else ServerConfig()
    tp, pp = data.get("tensor_parallel", base.tensor_parallel), data.get("pipeline_parallel", base.pipeline_parallel)
    if not all(v is None or (isinstance(v, int) and not isinstance(v, bool) and v > 0) for v in (tp, pp)):
        raise InputError(f"{side}: tensor_parallel and pipeline_parallel must be positive integers")
    return replace(base, model=data.get("model", base.model), gpu=data.get("gpu"), tensor_parallel=tp,
                   pipeline_parallel=pp, vllm_version=version)


def _finite(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


MAX_BENCH_REQUESTS = 1_000_000


def _count(data: dict[str, Any], key: str) -> int | None:
    """A whole count the file states (None: absent); a boolean, a fraction or a negative number is not one."""
    value = data.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{key}: expected a whole number >= 0, got {value!r}")
    if key in ("completed", "num_prompts") and value > MAX_BENCH_REQUESTS:
        # each is replayed through the simulator: 10^12 requests ended in a MemoryError
        raise ValueError(f"{key}: {value:,} requests, more than gpuopt replays ({MAX_BENCH_REQUESTS:,})")
    return value


def read_bench(path: Path, text: str) -> LatencyObservation:
    """A `vllm bench serve --save-result` JSON file, its fields checked as vLLM writes them: a wrong one would be
    replayed as a load that never ran (`"completed": true` read as 1 made 200 requests of 42,597 tokens each)."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"{path}: not JSON (line {exc.lineno}: {exc.msg}); truncated?") from None
    except RecursionError:  # found by QA: 100,000 nested brackets
        raise InputError(f"{path}: not a `vllm bench serve --save-result` file (nested deeper than a JSON reader "
                         "goes)") from None
    if not isinstance(data, dict) or "completed" not in data or "total_output_tokens" not in data:
        raise InputError(f"{path}: not a `vllm bench serve --save-result` file (no completed/total_output_tokens)")
    problems: list[str] = []

    def check(reading: Callable[[], Any]) -> Any:
        try:
            return reading()
        except ValueError as exc:
            problems.append(f"{path}: {exc}")
            return None

    completed = check(partial(_count, data, "completed")) or 0
    prompts = check(partial(_count, data, "num_prompts"))
    totals = [check(partial(_count, data, key)) for key in ("total_input_tokens", "total_output_tokens")]
    rate = data.get("request_rate")
    rate_f = None if rate in (None, "inf") else _finite(rate)
    if rate not in (None, "inf") and (rate_f is None or rate_f <= 0):
        problems.append(f"{path}: request_rate: expected a positive number or \"inf\", got {rate!r}")
    cap = _finite(data.get("max_concurrency"))
    if data.get("max_concurrency") is not None and (cap is None or cap < 1 or cap != int(cap)):
        # vLLM's --max-concurrency is a whole number of clients (2.5 was replayed as a loop of 2.5); more clients
        # than prompts is a loop of the prompts (below)
        problems.append(f"{path}: max_concurrency: expected a whole number of clients >= 1, got "
                        f"{data.get('max_concurrency')!r}")
    means = {key: _finite(data.get(key)) for key in ("mean_ttft_ms", "mean_tpot_ms", "mean_itl_ms",
                                                     "output_throughput")}
    for key, value in means.items():
        if data.get(key) is not None and (value is None or value < 0):
            problems.append(f"{path}: {key}: expected a number >= 0, got {data.get(key)!r}")
    for key in ("duration", "burstiness"):  # vLLM writes a positive duration; --burstiness must be > 0
        value = data.get(key)
        if value is not None and ((f := _finite(value)) is None or f <= 0):
            problems.append(f"{path}: {key}: expected a positive number, got {value!r}")
    if completed and means["mean_ttft_ms"] == 0:  # every request waits for its prefill: no TTFT is 0
        problems.append(f"{path}: mean_ttft_ms: 0 for {completed} completed requests")
    if completed and totals[0] == 0:  # vLLM sends no empty prompt: 0 tokens were replayed as prompt-less requests
        problems.append(f"{path}: total_input_tokens: 0 prompt tokens for {completed} completed requests")
    if completed and totals[1] == 0 and (means["output_throughput"] or 0) > 0:
        problems.append(f"{path}: total_output_tokens: 0 output tokens for {completed} completed requests, where "
                        f"output_throughput says {means['output_throughput']:g} tokens/s")
    ins, outs = data.get("input_lens") or [], data.get("output_lens") or []
    for key, lens, floor, name, total in (("input_lens", ins, 1, "total_input_tokens", totals[0]),
                                          ("output_lens", outs, 0, "total_output_tokens", totals[1])):
        # per request, as vllm bench serve writes them (an output of 0 tokens: a failed request); QA: a list
        # of strings or negatives was ignored silently, and one that disagreed with the totals was replayed
        if not (isinstance(lens, list) and all(isinstance(v, int) and not isinstance(v, bool) and v >= floor
                                               for v in lens)):
            problems.append(f"{path}: {key}: expected a list of whole numbers >= {floor}, one per request")
        elif lens and len(lens) == completed and total is not None and sum(lens) != total:
            # every request completed: the totals are these lists' sums (vLLM sums them)
            problems.append(f"{path}: {key}: its {len(lens)} requests sum to {sum(lens):,} tokens, where {name} "
                            f"says {total:,}")
    if (isinstance(ins, list) and completed and len(ins) > completed and totals[0]
            and all(isinstance(v, int) and not isinstance(v, bool) for v in ins)
            and totals[0] / completed > 2 * sum(ins) / len(ins)):
        # input_lens lists every request sent (failed ones too), so it may be longer than `completed`; but a
        # completed count that puts twice the listed prompt length on each request is not the run's
        problems.append(f"{path}: completed: {completed} requests would carry {totals[0] / completed:,.0f} prompt "
                        f"tokens each, where input_lens' {len(ins)} average {sum(ins) / len(ins):,.0f}")
    for key, total in zip(("total_input_tokens", "total_output_tokens"), totals, strict=True):
        if completed and total and total / completed > MAX_TOKENS:  # QA: said of mean_output_tokens, no file
            problems.append(f"{path}: {key}: {total:.3g} tokens over {completed:,} requests, {total / completed:.3g} "
                            f"a request: more than gpuopt models ({MAX_TOKENS:,})")
    if prompts is not None and completed > prompts:
        problems.append(f"{path}: completed: {completed} requests, more than num_prompts ({prompts})")
    if not problems and completed <= 0:
        problems.append(f"{path}: no completed requests")
    if problems:
        raise InputError(*problems)
    protocol: Protocol = "closed-loop" if cap else ("poisson" if rate_f else "all-at-once")
    num_prompts = prompts or completed
    config = ServerConfig(model=data.get("model_id"))
    whole = (isinstance(ins, list) and isinstance(outs, list) and len(ins) == len(outs) == completed
             and all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in ins + outs))
    burstiness = _finite(data.get("burstiness"))
    return LatencyObservation(
        id=path.name, source=str(path), config=config, protocol=protocol,
        input_tokens=float(totals[0] or 0) / completed,
        output_tokens=float(totals[1] or 0) / completed,
        # a closed loop of more clients than prompts runs every prompt at once: the clients are the prompts
        num_prompts=num_prompts, concurrency=None if cap is None else min(cap, float(num_prompts)),
        request_rate=rate_f, mean_ttft_ms=means["mean_ttft_ms"], mean_tpot_ms=means["mean_tpot_ms"],
        mean_itl_ms=means["mean_itl_ms"], output_throughput=means["output_throughput"],
        burstiness=burstiness if burstiness and burstiness > 0 else 1.0,
        lengths=tuple(zip(ins, outs, strict=True)) if whole else ())


LOG_PATTERNS = {
    # numbers as vLLM prints them (a malformed ". GiB" or "1.2.3 GiB" is no match, not a float() error)
    "kv_cache_gib": re.compile(r"Available KV cache memory: (\d+(?:\.\d+)?) ?GiB"),
    "kv_cache_tokens": re.compile(r"GPU KV cache size: (\d{1,3}(?:,\d{3})*|\d+) tokens"),
    "weights_gib": re.compile(r"(?:Model loading took (\d+(?:\.\d+)?) ?GiB|weights memory: (\d+(?:\.\d+)?) ?GiB)"),
    "cuda_graph_gib": re.compile(r"(?:Graph capturing finished in [\d.]+ secs?, took (\d+(?:\.\d+)?) GiB|"
                                 r"CUDA graph pool memory: (\d+(?:\.\d+)?) GiB)"),
}
VERSION = re.compile(r"vLLM API server version ([\d.]+)|Initializing a V1 LLM engine \(v([\d.]+)")
NON_DEFAULT = re.compile(r"non-default args: (\{.*\})")


# a literal `'key': value` of the arguments dict, and the CUDA-graph mode however the config object prints it
# (`'cudagraph_mode': 'PIECEWISE'`, `cudagraph_mode=<CUDAGraphMode.PIECEWISE: 1>`)
ARG_PAIR = re.compile(r"'(\w+)': ('[^']*'|\"[^\"]*\"|-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?|True|False|None)(?=[,}])")
CUDAGRAPH_MODE_IN_LOG = re.compile(r"cudagraph_mode'?\s*[:=]\s*([<'\"]?)(?:CUDAGraphMode\.)?([A-Za-z_]+)")
# the compilation mode in the compilation config that follows (`mode=<CompilationMode.NONE: 0>`, `'mode': 0`)
COMPILATION_MODE_IN_LOG = re.compile(r"(?<!\w)'?mode'?\s*[:=]\s*([<'\"]?)(?:CompilationMode\.)?([A-Za-z_]+|\d)")


def _compilation_config(args: str) -> str:
    """The compilation config's own text in the arguments' repr -- from `compilation_config` to the bracket that
    closes its value -- so a later argument's `'mode':` is not taken for its mode; "" without one."""
    at = args.find("compilation_config")
    opening = next((i for i in range(at, len(args)) if args[i] in "({"), -1) if at >= 0 else -1
    if opening < 0:
        return ""
    depth = 0
    for i in range(opening, len(args)):
        depth += {"(": 1, "{": 1, "[": 1, ")": -1, "}": -1, "]": -1}.get(args[i], 0)
        if depth == 0:
            return args[at:i + 1]
    return args[at:]


def _logged_mode(found: re.Match[str] | None) -> str | None:
    """The value a mode pattern found, None where the repr printed a bare `None` (unset: vLLM's default, not
    the NONE mode, which prints as an enum or a quoted name)."""
    if found is None or (found.group(1) == "" and found.group(2) == "None"):
        return None
    return found.group(2)


def non_default_args(text: str) -> dict[str, Any]:
    """vLLM's "non-default args: {...}" as a dict. It is a Python repr, and one value that is not a literal (a
    config object, an enum) would lose every argument to a plain literal_eval: then the literal pairs are read
    one by one."""
    try:
        parsed = ast.literal_eval(text)
        if isinstance(parsed, dict):
            return parsed
    except (ValueError, SyntaxError):
        pass
    return {key: ast.literal_eval(value) for key, value in ARG_PAIR.findall(text)}


LOG_ARG_KINDS: dict[str, str] = {
    "model": "text", "model_tag": "text", "kv_cache_dtype": "text",
    "tensor_parallel_size": "count", "pipeline_parallel_size": "count", "max_model_len": "count",
    "max_num_seqs": "count", "max_num_batched_tokens": "count",
    "gpu_memory_utilization": "fraction", "enable_prefix_caching": "flag", "enforce_eager": "flag",
}
"""The non-default arguments gpuopt reads from a log, by the type vLLM's own parser would have given them."""


def _typed_args(path: Path, parsed: dict[str, Any]) -> dict[str, Any]:
    """The arguments of LOG_ARG_KINDS a log states, each of its type; a value of another type (a hand-edited or
    foreign log) is one line naming the argument, exit 2 (QA: 'tensor_parallel_size': 'abc' was exit 70)."""
    out: dict[str, Any] = {}
    problems = []
    for key, kind in LOG_ARG_KINDS.items():
        value = parsed.get(key)
        if value is None:
            continue
        ok = {"text": isinstance(value, str) and value.strip() != "",
              "count": isinstance(value, int) and not isinstance(value, bool) and value > 0,
              "fraction": isinstance(value, int | float) and not isinstance(value, bool) and 0 < value <= 1,
              "flag": isinstance(value, bool)}[kind]
        if not ok:
            want = {"text": "a name", "count": "a positive integer", "fraction": "a number in (0, 1]",
                    "flag": "True or False"}[kind]
            problems.append(f"{path}: non-default args {key}: expected {want}, got {value!r}")
        else:
            out[key] = float(value) if kind == "fraction" else value
    if problems:
        raise InputError(*problems)
    return out


def _last(pattern: re.Pattern[str], text: str) -> str | None:
    found = None
    for m in pattern.finditer(text):
        found = next(g for g in m.groups() if g is not None)
    return found


def read_log(path: Path, text: str) -> MemoryObservation:
    """A vLLM server log: the last start-up's KV-cache lines, the release and the non-default arguments."""
    kv = _last(LOG_PATTERNS["kv_cache_gib"], text)
    tokens = _last(LOG_PATTERNS["kv_cache_tokens"], text)
    if kv is None and tokens is None:
        raise InputError(f"{path}: no vLLM start-up lines (\"Available KV cache memory\", \"GPU KV cache size\")")
    config = ServerConfig()
    args = _last(NON_DEFAULT, text)
    if args:
        parsed = non_default_args(args)
        logged = _logged_mode(CUDAGRAPH_MODE_IN_LOG.search(args))
        mode = cudagraph_mode(logged) if logged else None
        span = _compilation_config(args)
        logged = _logged_mode(COMPILATION_MODE_IN_LOG.search(span)) if span else None
        compile_mode = compilation_mode(logged) if logged else None
        typed = _typed_args(path, parsed)
        if (dtype := typed.get("kv_cache_dtype")) and modelled_kv_cache_dtype(dtype) is None:
            # QA: 'nvfp4' was fitted as a 2-byte cache (473,856 tokens predicted of 1,800,000 logged)
            raise InputError(f"{path}: non-default args kv_cache_dtype '{dtype}' is not modelled (auto and the fp8 "
                             "formats are): this run cannot be replayed")
        config = ServerConfig(
            model=typed.get("model") or typed.get("model_tag"), tensor_parallel=typed.get("tensor_parallel_size"),
            pipeline_parallel=typed.get("pipeline_parallel_size"),
            max_model_len=typed.get("max_model_len"), max_num_seqs=typed.get("max_num_seqs"),
            max_num_batched_tokens=typed.get("max_num_batched_tokens"),
            gpu_memory_utilization=typed.get("gpu_memory_utilization"),
            kv_cache_dtype=modelled_kv_cache_dtype(dtype) if (dtype := typed.get("kv_cache_dtype")) else None,
            enable_prefix_caching=typed.get("enable_prefix_caching"), enforce_eager=typed.get("enforce_eager"),
            cudagraphs=GraphSettings(mode=mode, compilation_mode=compile_mode) if mode or compile_mode else None)
    version = _last(VERSION, text)
    weights = _last(LOG_PATTERNS["weights_gib"], text)
    graphs = _last(LOG_PATTERNS["cuda_graph_gib"], text)
    return MemoryObservation(
        id=path.name, source=str(path), config=replace(config, vllm_version=version),
        kv_cache_gib=float(kv) if kv else None, kv_cache_tokens=int(tokens.replace(",", "")) if tokens else None,
        weights_gib=float(weights) if weights else None, cuda_graph_gib=float(graphs) if graphs else None)


def read_metrics(path: Path, text: str) -> LatencyObservation:
    """A Prometheus text scrape of vLLM's /metrics, as one observation at the load its counters imply:
    mean lengths from the prompt/generation token histograms, mean TTFT, TPOT and E2E from their histograms'
    sums over counts, and the decode concurrency from the generation tokens per engine step
    (`vllm:iteration_tokens_total`: a step that carries n decodes emits n tokens)."""
    from prometheus_client.parser import text_string_to_metric_families

    samples: dict[str, float] = {}
    model = None
    try:
        for family in text_string_to_metric_families(text):
            for s in family.samples:
                if s.name.startswith("vllm:"):
                    if not math.isfinite(s.value) or s.value < 0:
                        # counters, histogram sums and gauges of vLLM are finite and never negative (QA: a
                        # +Inf sum reached a logarithm, exit 70; NaN dropped the TTFT silently)
                        raise InputError(f"{path}: series {s.name} is {s.value}: vLLM's series are finite "
                                         "and never negative")
                    samples[s.name] = samples.get(s.name, 0.0) + s.value
                    model = model or s.labels.get("model_name")
    except ValueError as exc:
        raise InputError(f"{path}: not Prometheus text exposition ({exc})") from None
    if not samples:
        raise InputError(f"{path}: no vLLM series (vllm:*) in this scrape")

    def mean(name: str) -> float | None:
        count = samples.get(f"{name}_count", 0.0)
        return samples[f"{name}_sum"] / count if count and f"{name}_sum" in samples else None

    requests = samples.get("vllm:request_prompt_tokens_count", 0.0)
    if not requests:
        raise InputError(f"{path}: the scrape counts no finished requests (vllm:request_prompt_tokens_count)")
    ttft, tpot = mean("vllm:time_to_first_token_seconds"), mean("vllm:time_per_output_token_seconds")
    itl = mean("vllm:inter_token_latency_seconds")
    steps = samples.get("vllm:iteration_tokens_total_count", 0.0)
    generated = samples.get("vllm:generation_tokens_total", samples.get("vllm:request_generation_tokens_sum", 0.0))
    concurrency = max(1.0, generated / steps) if steps else None
    return LatencyObservation(
        id=path.name, source=str(path), config=ServerConfig(model=model), protocol="closed-loop",
        input_tokens=samples.get("vllm:request_prompt_tokens_sum", 0.0) / requests,
        output_tokens=samples.get("vllm:request_generation_tokens_sum", 0.0) / requests,
        num_prompts=int(requests), concurrency=concurrency, request_rate=None,
        mean_ttft_ms=None if ttft is None else ttft * 1e3, mean_tpot_ms=None if tpot is None else tpot * 1e3,
        mean_itl_ms=None if itl is None else itl * 1e3, output_throughput=None)


def read_evidence(path: Path, defaults: ServerConfig) -> Observation:
    """One file, by its content: JSON (bench result), Prometheus text (/metrics) or a vLLM log."""
    # "a ... file" reads right in every message; a byte order mark (Windows editors save one) is no content: a
    # bench file that began with one was read as a log, "no vLLM start-up lines"
    text = read_text(path, "calibration evidence file").removeprefix("\ufeff")
    stripped = text.lstrip()
    if not stripped:
        raise InputError(f"{path}: empty file")
    if stripped.startswith("{"):
        obs: Observation = read_bench(path, text)
    elif re.search(r"^# (?:TYPE|HELP) ", text, re.M) or re.search(r"^vllm:[a-z_]+[{ ]", text, re.M):
        obs = read_metrics(path, text)
    else:
        obs = read_log(path, text)
    # what the user says about this run wins over what the file claims: a bench file's model_id is often a
    # served alias, while a log's non-default args are vLLM's own and fill what the user left out
    config = sidecar(path).merged(defaults).merged(obs.config)
    if config.vllm_version and (problem := unmodelled_release(config.vllm_version)) is not None:
        raise InputError(f"{path}: vLLM {problem}: its defaults are not modelled, so this run cannot be replayed")
    missing = config.missing()
    if missing:
        raise InputError(f"{path}: unknown {' and '.join(missing)} of this run: give --{' --'.join(missing)} or a "
                         f"sidecar {path.name}.yaml")
    return replace(obs, config=config)
