"""Replayable runs of ../shared/data/perf_load.csv and perf_observed.csv, and their replay in the simulator.

A run is one benchmark execution (model, GPU, parallelism, server flags, dataset, lengths, client); its
rows are the metrics the source published for it, so each run is simulated once and compared on all of
them. Assumptions made to replay a row are the row's own (replay_note) plus these, applied uniformly:

- quantised checkpoints and renamed releases map to the registry's architecture (ALIASES, with the weight
  format from precision_id): Qwen3-235B-A22B-Instruct-2507 is Qwen3-235B-A22B's architecture, -FP8/-AWQ
  repos are their base model in that format;
- runs on the V0 engine (0.6.3, 0.7.4; 0.8.4 on a T4) use the 0.11 profile (V0_STAND_IN), 0.8+ V1 runs their
  own release's;
- InferenceMAX's range ratio 0.8 is uniform in [0.8 L, L] (its client): RangeLengths(0.9 L, 1/9);
- outputs that ended at EOS (ignore_eos false) are replayed at the measured mean output length
  (output_tokens_actual), scaled per request, with ignore_eos on;
- a published `_per_gpu` figure is the run's figure over tp x pp x dp GPUs.
"""

from __future__ import annotations

import math
import re
import sys
from dataclasses import dataclass, replace
from functools import cache
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
from observed_latency import load_scenarios  # noqa: E402
from observed_memory import DATA  # noqa: E402

from gpuopt.errors import GpuoptError  # noqa: E402
from gpuopt.hardware import get_gpu  # noqa: E402
from gpuopt.physics import (
    latency,  # noqa: E402
    latency_factors,
)
from gpuopt.physics.architecture import get_model  # noqa: E402
from gpuopt.physics.memory import estimate
from gpuopt.physics.serve_args import parse_serve_args, performance_mode  # noqa: E402
from gpuopt.physics.serving_config import ServingConfig  # noqa: E402
from gpuopt.physics.simulator import SchedulerConfig, SimResult, simulate_dp  # noqa: E402
from gpuopt.physics.traffic import (  # noqa: E402
    AllAtOnce,
    ArrivalProcess,
    ConstantArrivals,
    FixedLengths,
    LengthDistribution,
    PoissonArrivals,
    RangeLengths,
    Request,
    ShareGPTLengths,
    make_requests,
)
from gpuopt.physics.vllm_profile import profiles, release_key  # noqa: E402
from gpuopt.vocabulary import KvCacheDtype  # noqa: E402

ALIASES = {
    "Qwen/Qwen3-235B-A22B-Instruct-2507-FP8": "Qwen/Qwen3-235B-A22B",
    "Qwen/Qwen3-235B-A22B-Instruct-2507": "Qwen/Qwen3-235B-A22B",
    "Qwen/Qwen3-14B-FP8": "Qwen/Qwen3-14B", "Qwen/Qwen3-14B-AWQ": "Qwen/Qwen3-14B",
    "Qwen/Qwen3-32B-FP8": "Qwen/Qwen3-32B", "Qwen/Qwen3-32B-AWQ": "Qwen/Qwen3-32B",
    "meta-llama/Llama-3.1-405B-FP8": "meta-llama/Llama-3.1-405B-Instruct",
    # NVIDIA's FP8 release of the hybrid Mamba-2/attention MoE (its own config is not in ../shared/data): the
    # BF16 architecture in FP8. The run's server set VLLM_USE_FLASHINFER_MOE_FP8=1 (FlashInfer's CUTLASS FP8
    # MoE), an environment switch gpuopt's kernel choice does not read: its experts replay on the FP8 path
    # vLLM picks by default on Hopper (fp8_block)
    "nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-FP8": "nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16",
}
# runs the serving factors are not fitted on (benchmarks/calibrate_serving.py), reported apart by
# load_accuracy.py as out-of-sample checks: model id -> why
NOT_FITTED = {
    "nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-FP8": "its server chose the MoE kernel by environment "
    "(VLLM_USE_FLASHINFER_MOE_FP8=1), which gpuopt's kernel choice does not read; the one hybrid Mamba-2 model "
    "under load, kept as a check of the hybrid step cost",
}
FAMILY = {
    "output_throughput": "throughput", "total_token_throughput": "throughput", "request_throughput": "throughput",
    "max_output_tokens_per_s": "throughput", "mean_ttft_ms": "TTFT", "median_ttft_ms": "TTFT",
    "mean_tpot_ms": "TPOT/ITL", "median_tpot_ms": "TPOT/ITL", "mean_itl_ms": "TPOT/ITL",
    "median_itl_ms": "TPOT/ITL", "mean_e2el_ms": "E2E", "median_e2el_ms": "E2E",
}
PROTOCOL = {"closed-loop": "closed loop", "all-at-once": "all at once", "poisson": "Poisson/constant",
            "constant": "Poisson/constant"}
OBSERVED_METRIC = {"tpot_ms_mean": "mean_tpot_ms", "itl_ms_mean": "mean_itl_ms", "itl_ms": "mean_itl_ms",
                   "ttft_ms_mean": "mean_ttft_ms", "ttft_ms": "mean_ttft_ms", "output_tok_per_s": "output_throughput",
                   "total_tok_per_s": "total_token_throughput", "req_per_s": "request_throughput",
                   "e2e_latency_ms_mean": "mean_e2el_ms"}


@dataclass(frozen=True)
class Run:
    """One benchmark execution and what it needs to be replayed."""

    key: str
    source: str  # perf_load | perf_observed
    model_id: str
    registry_model: str
    gpu: str
    tp: int
    pp: int
    dp: int
    expert_parallel: bool
    precision: str
    kv_cache_dtype: str
    vllm_version: str  # the release whose memory profile applies (the oldest modelled one for older runs)
    server_args: str
    dataset: str
    input_tokens: int
    output_tokens: float  # mean output actually generated
    range_ratio: float | None
    range_semantics: str  # vllm | inferencemax
    num_prompts: int
    arrival: str
    request_rate: float
    max_concurrency: int | None
    interconnect: str | None = None
    engine_version: str = ""  # the release the run used (decides the V0 / V1 engine)
    chat: bool = False  # the client read /v1/chat/completions (vllm bench serve --backend openai-chat)

    @property
    def protocol(self) -> str:
        return "offline" if self.dataset == "offline" else PROTOCOL[self.arrival]

    @property
    def gpus(self) -> int:
        return self.tp * self.pp * self.dp


@dataclass(frozen=True)
class Metric:
    run: Run
    line: int
    bench_metric: str
    observed: float

    @property
    def family(self) -> str:
        return FAMILY[self.bench_metric.removesuffix("_per_gpu")]


V0_STAND_IN = "0.11"
"""The memory profile that replays runs on vLLM's V0 engine (the 0.6.3 and 0.7.4 nightlies, 0.8.4 on a T4):
gpuopt models V1 only and refuses the configurations 0.8-0.10.1 would run on V0, so these runs take 0.11's V1
profile -- the same calibration the 0.10.1 profile they were replayed with until 2026-12-02 carries -- and the
V0 scheduler defaults (_v0_defaults)."""


def _version(v: str, engine: str = "") -> str:
    parts = tuple(int(x) for x in v.split(".")[:2])
    return v if parts >= (0, 8) and "V0" not in engine else V0_STAND_IN


def _registry(model_id: str) -> str | None:
    for candidate in (model_id, ALIASES.get(model_id)):
        if candidate is None:
            continue
        try:
            get_model(candidate)
            return candidate
        except GpuoptError:
            continue
    return None


def load_runs() -> tuple[list[Metric], list[tuple[int, str, str]]]:
    """(metrics of replayable runs, skipped rows as (line, model, reason))."""
    metrics: list[Metric] = []
    skipped: list[tuple[int, str, str]] = []
    df = pd.read_csv(DATA / "perf_load.csv")
    for idx, row in df.iterrows():
        line = int(idx) + 2  # type: ignore[call-overload]
        model_id = str(row["model_id"])
        if not bool(row["replayable"]):
            skipped.append((line, model_id, "not replayable: " + str(row["replay_note"])[:120]))
            continue
        registry = _registry(model_id)
        if registry is None:
            skipped.append((line, model_id, "model not in the registry yet"))
            continue
        metric = str(row["bench_metric"])
        if metric.removesuffix("_per_gpu") not in FAMILY:
            skipped.append((line, model_id, f"metric {metric} not simulated"))
            continue
        actual = row["output_tokens_actual"]
        out = float(actual) if not pd.isna(actual) else float(row["output_tokens"])
        note = str(row["replay_note"])
        rr = None if pd.isna(row["range_ratio"]) else float(row["range_ratio"])
        mc = None if pd.isna(row["max_concurrency"]) else int(row["max_concurrency"])
        # GPUStack's guidellm runs report the peak number of requests the client held in flight; a "constant
        # 1000 req/s" run of 200 long requests peaked at 18. The client, not the server, set that cap, so the
        # replay sends no more than that at once (otherwise it would queue requests the client never sent)
        peak = re.search(r"peak concurrent requests reported (\d+)", str(row["load"]))
        if peak:
            mc = min(mc or int(peak.group(1)), int(peak.group(1)))
        rate = float(row["request_rate"]) if not pd.isna(row["request_rate"]) else math.inf
        args = "" if pd.isna(row["server_args"]) else str(row["server_args"])
        # the client's endpoint, as the row's notes quote its command (the chat stream adds a role chunk)
        said = f"{row['notes']} {note}"
        chat = "--backend openai-chat" in said or "/v1/chat/completions" in said
        run = Run(
            key="", source="perf_load", model_id=model_id, registry_model=registry, gpu=str(row["gpu_id"]),
            tp=int(row["tp_size"]), pp=int(row["pp"]), dp=int(row["dp"]),
            expert_parallel=bool(row["expert_parallel"]), precision=str(row["precision_id"]),
            kv_cache_dtype=str(row["kv_cache_dtype"]),
            vllm_version=_version(str(row["vllm_version"]), str(row["engine_version"])),
            engine_version=str(row["vllm_version"]),
            server_args=args, dataset=str(row["dataset"]), input_tokens=int(row["input_tokens"]),
            output_tokens=out, range_ratio=rr,
            range_semantics="inferencemax" if "bench_serving semantics" in note else "vllm",
            num_prompts=int(row["num_prompts"]), arrival=str(row["arrival"]), request_rate=rate,
            max_concurrency=mc, chat=chat)
        run = Run(**{**run.__dict__, "key": repr(sorted(run.__dict__.items()))})
        metrics.append(Metric(run=run, line=line, bench_metric=metric, observed=float(row["value"])))
    scenarios, obs_skipped = load_scenarios()
    skipped += [(line, model, "perf_observed: " + why) for line, model, why in obs_skipped]
    for s in scenarios:
        if s.engine != "vLLM" or s.load_kind == "batch":
            skipped.append((s.line, s.model, "perf_observed: " + (
                "not vLLM" if s.engine != "vLLM" else "fixed-batch latency (benchmarks/latency_accuracy.py)")))
            continue
        arrival = {"concurrency": "closed-loop", "rate": "poisson", "saturation": "all-at-once"}[s.load_kind]
        args = " ".join(f"--{k} {v}" for k, v in (("max-model-len", s.max_model_len), ("max-num-seqs", s.max_num_seqs),
                                                   ("gpu-memory-utilization", s.gmu)) if v)
        # the release is mostly not stated: async scheduling off, as observed_latency.replica_for has it
        args += " --no-async-scheduling"
        conc = int(s.load) if s.load_kind == "concurrency" else None
        run = Run(key="", source="perf_observed", model_id=s.model, registry_model=s.model, gpu=s.gpu, tp=s.tp, pp=1,
                  dp=1, expert_parallel=False, precision=s.precision, kv_cache_dtype="auto",
                  vllm_version=_version(s.vllm_version or profiles()[-1].version), server_args=args,
                  dataset="sharegpt" if s.assumed or s.load_kind == "saturation" else "random",
                  input_tokens=s.input_tokens, output_tokens=float(s.output_tokens), range_ratio=None,
                  range_semantics="vllm", num_prompts=max(200, 10 * (conc or 0)) if s.load_kind != "saturation"
                  else 1000, arrival=arrival, request_rate=s.load if s.load_kind == "rate" else math.inf,
                  max_concurrency=conc, interconnect=s.interconnect)
        run = Run(**{**run.__dict__, "key": repr(sorted(run.__dict__.items()))})
        metrics.append(Metric(run=run, line=s.line, bench_metric=OBSERVED_METRIC[s.metric], observed=s.observed))
    return metrics, skipped


def _v0_defaults(run: Run, max_model_len: int) -> tuple[int, int, bool] | None:
    """(max_num_seqs, max_num_batched_tokens, chunked prefill) of the V0 engine (vLLM < 0.8) when the run did
    not set them, read from the vLLM 0.6.3 wheel (engine/arg_utils.py: max_num_seqs 256, chunked prefill on
    only for max_model_len > 32K; config.py SchedulerConfig: then 512 tokens per step, else
    max(max_model_len, 2048)); the 0.7.3 wheel has the same rule with 2,048 tokens per chunked step, used for
    0.7.x (releases between 0.6.3 and 0.7.3 were not read). None for V1 runs (the memory profiles apply)."""
    version = run.engine_version or run.vllm_version
    key = release_key(version)
    if key >= (0, 8):
        return None
    chunked = max_model_len > 32768
    chunk = 2048 if key >= (0, 7) else 512
    return 256, chunk if chunked else max(max_model_len, 2048), chunked


def kv_cache_dtype_of(run: Run) -> KvCacheDtype:
    """The `--kv-cache-dtype` a run's server used, as gpuopt names it (the CSV leaves it empty for auto)."""
    return "fp8" if run.kv_cache_dtype == "fp8" else "auto"


def build(run: Run) -> tuple[latency.Replica, SchedulerConfig]:
    """The replica and its scheduler as the run's `vllm serve` flags configure them."""
    flags = parse_serve_args(run.server_args)
    arch, gpu = get_model(run.registry_model), get_gpu(run.gpu)
    v0 = _v0_defaults(run, flags.max_model_len or max(8192, run.input_tokens + int(run.output_tokens) * 4))
    chunked = flags.chunked_prefill if flags.chunked_prefill is not None else (v0[2] if v0 else True)
    precision = run.precision if run.precision != "fp16" or arch.torch_dtype == "float16" else "fp16"
    cfg = ServingConfig(tensor_parallel=run.tp, pipeline_parallel=run.pp, precision=precision,  # type: ignore[arg-type]
                        kv_cache_dtype=kv_cache_dtype_of(run),
                        max_model_len=flags.max_model_len or max(8192, run.input_tokens + int(run.output_tokens) * 4),
                        gpu_memory_utilization=flags.gpu_memory_utilization,
                        max_num_seqs=flags.max_num_seqs or (v0[0] if v0 else None),
                        max_num_batched_tokens=flags.max_num_batched_tokens or (v0[1] if v0 else None),
                        block_size=flags.block_size, data_parallel=run.dp, expert_parallel=run.expert_parallel,
                        vllm_version=run.vllm_version, performance_mode=performance_mode(flags.performance_mode),
                        chunked_prefill=chunked)
    mem = estimate(arch, gpu, cfg)
    if not mem.fits:
        raise GpuoptError(f"does not fit: {mem.reason}")
    replica = latency.build_replica(arch, gpu, mem, run.interconnect, expert_parallel=run.expert_parallel,
                                    async_scheduling=flags.async_scheduling)
    if run.engine_version and run.engine_version != run.vllm_version:  # older than the memory profiles: the
        # release still decides the engine (V0 before 0.8)
        replica = replace(replica, config=replace(replica.config, vllm_version=run.engine_version))
    sched = SchedulerConfig.from_memory(
        mem, enable_prefix_caching=flags.enable_prefix_caching is not False,
        async_scheduling=replica.async_scheduling, chunked_prefill=chunked)
    return replica, sched


@cache
def prepared(run: Run, seed: int = 0) -> tuple[latency.Replica, SchedulerConfig, tuple[Request, ...]]:
    """The run's replica, scheduler and requests (cached: calibration replays each run many times)."""
    replica, sched = build(run)
    out = max(1, round(run.output_tokens))
    lengths: LengthDistribution
    if run.dataset == "sharegpt":
        lengths = ShareGPTLengths(run.input_tokens, out)
    elif run.range_ratio:
        if run.range_semantics == "inferencemax":
            lengths = RangeLengths(round(run.input_tokens * (1 + run.range_ratio) / 2), round(
                out * (1 + run.range_ratio) / 2), (1 - run.range_ratio) / (1 + run.range_ratio))
        else:
            lengths = RangeLengths(run.input_tokens, out, run.range_ratio)
    else:
        lengths = FixedLengths(run.input_tokens, out)
    arrival: ArrivalProcess
    if run.arrival == "poisson" and math.isfinite(run.request_rate):
        arrival = PoissonArrivals(run.request_rate)
    elif run.arrival == "constant" and math.isfinite(run.request_rate):
        arrival = ConstantArrivals(run.request_rate)
    else:
        arrival = AllAtOnce()
    return replica, sched, tuple(make_requests(lengths, arrival, run.num_prompts, seed))


def replay_with(run: Run, serving: latency_factors.ServingCalibration | None = None, seed: int = 0,
                latency_cal: latency_factors.LatencyCalibration | None = None) -> SimResult:
    """Replay the run with other calibrations (the fits try many)."""
    replica, sched, reqs = prepared(run, seed)
    if serving is not None:
        replica = replace(replica, serving=serving)
    if latency_cal is not None:
        replica = replace(replica, cal=latency_cal)
    return simulate_dp(replica, list(reqs), run.dp, sched=sched, max_concurrency=run.max_concurrency,
                       offline=run.dataset == "offline", seed=seed, chat=run.chat)


def replay(run: Run, seed: int = 0) -> SimResult:
    return replay_with(run, None, seed)


def predicted(metric: Metric, summary: dict[str, float | int]) -> float:
    name = metric.bench_metric
    value = float(summary[name.removesuffix("_per_gpu")])
    return value / metric.run.gpus if name.endswith("_per_gpu") else value

