"""Replayable rows of ../shared/data/perf_observed.csv for the latency benchmark and its calibration.

Each row becomes a Scenario (model, GPU, TP, precision, lengths, load) and a metric. Rows of runs that send
every request at once keep only their throughput (their TTFT/TPOT are queueing). Where the lengths are not
stated ("ShareGPT 200 prompts") the ShareGPT means measured by other rows of the same file are assumed and
the row says so. Engines other than vLLM are kept apart as upper bounds.
"""

from __future__ import annotations

import csv
import math
import re
from dataclasses import dataclass

from observed_memory import DATA

from gpuopt.hardware import get_gpu
from gpuopt.physics import analytic_load, latency
from gpuopt.physics.architecture import get_model
from gpuopt.physics.memory import estimate
from gpuopt.physics.serving_config import ServingConfig
from gpuopt.vocabulary import WeightFormat

# ShareGPT means stated by rows of perf_observed.csv: inputs 233/217/217 (Qwen tokenizer), outputs
# 198.508 tok/s / 0.927978 req/s = 214 (Llama-3.3-70B, ShareGPT 200 prompts, QPS 1).
SHAREGPT_ASSUMED = (222, 214)

GPUS = [
    (r"Azure", "A100-PCIE-80GB", "pcie"),
    (r"H100", "H100-SXM-80GB", "nvlink"),
    (r"H200", "H200-141GB", "nvlink"),
    (r"A100", "A100-SXM-80GB", "nvlink"),
]
MODELS: dict[str, tuple[str, WeightFormat]] = {
    "Qwen/Qwen3-14B-AWQ": ("Qwen/Qwen3-14B", "int4"),
}
METRIC_CLASS = {"tpot_ms_mean": "tpot", "itl_ms_mean": "tpot", "itl_ms": "tpot", "ttft_ms_mean": "ttft",
                "ttft_ms": "ttft", "output_tok_per_s": "throughput", "total_tok_per_s": "throughput",
                "req_per_s": "throughput", "e2e_latency_ms_mean": "e2e"}


@dataclass(frozen=True)
class Scenario:
    line: int
    engine: str
    model: str
    precision: WeightFormat
    gpu: str
    interconnect: str
    tp: int
    input_tokens: int
    output_tokens: int
    load_kind: str  # concurrency | rate | saturation | batch
    load: float
    metric: str
    observed: float
    assumed: str
    vllm_version: str | None
    max_model_len: int | None
    max_num_seqs: int | None
    gmu: float | None

    @property
    def metric_class(self) -> str:
        return METRIC_CLASS[self.metric]


def _length(text: str, default: int) -> tuple[int, bool]:
    m = re.search(r"(\d+)", text.replace("ShareGPT 200 prompts", ""))
    if text.strip().startswith("ShareGPT mean") and m:
        return int(m.group(1)), False
    if re.fullmatch(r"\d+", text.strip()):
        return int(text.strip()), False
    return default, True


def _load(text: str) -> tuple[str, float] | None:
    t = text.lower()
    if m := re.search(r"max-concurrency (\d+)", t):
        return "concurrency", float(m.group(1))
    if m := re.search(r"poisson qps (\d+(?:\.\d+)?)", t):
        return "rate", float(m.group(1))
    if m := re.search(r"concurrency (\d+)", t):
        return "concurrency", float(m.group(1))
    if "request-rate inf" in t or "all prompts at once" in t or "offline max throughput" in t:
        return "saturation", math.inf
    if m := re.search(r"fixed batch (\d+)", t):
        return "batch", float(m.group(1))
    return None


def load_scenarios() -> tuple[list[Scenario], list[tuple[int, str, str]]]:
    rows: list[Scenario] = []
    skipped: list[tuple[int, str, str]] = []
    group_notes: dict[tuple[str, str, str, str], str] = {}
    with open(DATA / "perf_observed.csv", encoding="utf-8") as fh:
        for line, raw in enumerate(csv.DictReader(fh), start=2):
            # a run's notes sit on its first metric row: carry them to the run's other rows
            group = (raw["source_url"], raw["model"], raw["gpu"], raw["load"])
            if raw["notes"].strip():
                group_notes[group] = raw["notes"]
            raw = {**raw, "notes": group_notes.get(group, "")}
            engine = "vLLM" if raw["engine"].strip() == "vLLM" else raw["engine"].split(" (")[0]
            model = raw["model"].strip()
            precision: WeightFormat = "fp8" if raw["precision"].startswith("FP8") else "bf16"
            if model in MODELS:
                model, precision = MODELS[model]
            if model.startswith("nvidia/") and model.endswith("-FP8"):
                model = "meta-llama/" + model.split("/", 1)[1].removesuffix("-FP8") if "Llama" in model else \
                    "Qwen/" + model.split("/", 1)[1].removesuffix("-FP8")
            try:
                get_model(model)
            except Exception:
                skipped.append((line, model, "model not in the registry"))
                continue
            gpu = next(((g, link) for pat, g, link in GPUS if re.search(pat, raw["gpu"])), None)
            if gpu is None:
                skipped.append((line, model, f"GPU not identifiable: {raw['gpu']}"))
                continue
            load = _load(raw["load"])
            if load is None:
                skipped.append((line, model, f"load not understood: {raw['load']}"))
                continue
            unstated = "ShareGPT 200 prompts" in raw["input_len"]
            if load[0] == "saturation" and unstated:
                skipped.append((line, model, "offline throughput over a sample whose lengths are not stated: it is "
                                "set by the sample's longest outputs (drain), not by a steady state"))
                continue
            if load[0] == "saturation" and METRIC_CLASS.get(raw["metric"]) in ("tpot", "ttft"):
                skipped.append((line, model, "all requests sent at once: TTFT/TPOT are queueing, throughput only"))
                continue
            if "--enforce-eager" in raw["notes"] and METRIC_CLASS.get(raw["metric"]) != "ttft":
                skipped.append((line, model, "server ran --enforce-eager (no CUDA graphs: per-step launch overhead "
                                "gpuopt never plans for); only its prefill-bound TTFT is replayed"))
                continue
            if raw["metric"] not in METRIC_CLASS:
                skipped.append((line, model, f"metric {raw['metric']} not modelled"))
                continue
            inp, a1 = _length(raw["input_len"], SHAREGPT_ASSUMED[0])
            out, a2 = _length(raw["output_len"], SHAREGPT_ASSUMED[1])
            notes = raw["notes"]
            version = "0.11" if raw["engine_version"].startswith("v0.11") else None
            mml = None
            if m := re.search(r"--max-model-len (\d+)", notes):
                mml = int(m.group(1))
            seqs = int(m.group(1)) if (m := re.search(r"--max-num-seqs? (\d+)", notes)) else None
            gmu = float(m.group(1)) if (m := re.search(r"--gpu-memory-utilization ([0-9.]+)", notes)) else None
            rows.append(Scenario(
                line=line, engine=engine, model=model, precision=precision, gpu=gpu[0], interconnect=gpu[1],
                tp=int(raw["tp"]), input_tokens=inp, output_tokens=out, load_kind=load[0], load=load[1],
                metric=raw["metric"], observed=float(raw["value"]),
                assumed="lengths assumed (ShareGPT means)" if (a1 or a2) else "",
                vllm_version=version, max_model_len=mml or max(inp + out, 8192),
                max_num_seqs=seqs, gmu=gmu))
    return rows, skipped


def replica_for(s: Scenario) -> latency.Replica:
    arch, gpu = get_model(s.model), get_gpu(s.gpu)
    mem = estimate(arch, gpu, ServingConfig(tensor_parallel=s.tp, precision=s.precision,
                                            max_model_len=s.max_model_len, max_num_seqs=s.max_num_seqs,
                                            gpu_memory_utilization=s.gmu, vllm_version=s.vllm_version))
    # most of these rows do not state their release (nightly CI builds, excerpts): the newest profile gives the
    # scheduler and memory defaults, but async scheduling, a default only from 0.14, stays off (the stated
    # releases here, 0.9.1 and 0.11.0, ran without it)
    return latency.build_replica(arch, gpu, mem, s.interconnect, async_scheduling=False)


def predict(s: Scenario, r: latency.Replica) -> float:
    """The model's value of the scenario's metric."""
    if s.load_kind == "batch":
        b = s.load
        prefill = latency.step_time_s(r, 0, 0, b * s.input_tokens, s.input_tokens / 2)
        decode = sum(latency.step_time_s(r, b, s.input_tokens + i) for i in range(1, s.output_tokens))
        return (prefill + decode) * 1e3
    if s.load_kind == "concurrency":
        point = analytic_load.at_concurrency(r, s.load, s.input_tokens, s.output_tokens)
    elif s.load_kind == "rate":
        point = analytic_load.at_rate(r, s.load, s.input_tokens, s.output_tokens)
    else:  # saturation: the engine runs full (a benchmark's backlog), with no Poisson place kept free
        point = analytic_load.max_rate(r, s.input_tokens, s.output_tokens, poisson=False)
    if s.metric_class == "tpot":
        return point.tpot_ms
    if s.metric_class == "ttft":
        return point.ttft_ms
    if s.metric == "req_per_s":
        return point.requests_per_second
    if s.metric == "total_tok_per_s":
        return point.requests_per_second * (s.input_tokens + s.output_tokens)
    return point.output_tokens_per_second
