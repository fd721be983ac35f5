"""Fit a calibration profile on the user's own evidence, and score a profile on new evidence.

Per GPU (and vLLM release), three factors (physics/profile.py): `decode_bandwidth` and `prefill_compute`
minimise the squared log error of the latency model over every serving observation (TPOT, ITL, TTFT,
output throughput), by golden-section search, one coordinate at a time (the errors are smooth and close to
separable: decode time scales with bandwidth, prefill with FLOP/s); `memory_offset_gib` is the mean gap
between the KV-cache memory vLLM logged and the memory model's, in closed form.

A factor is fitted only from at least MIN_OBSERVATIONS observations that inform it (TPOT/ITL/throughput
for bandwidth, TTFT for compute, start-ups for memory): one run is matched exactly and says nothing about
the next. With fewer, the factor is left out and the reason reported; with none fittable, the command
refuses (exit 2) and says what evidence is missing. Leave-one-out errors (refit without an observation,
predict it) show whether a fit generalises.

Serving runs are predicted with the analytic steady-state model (closed loops at their concurrency, open
loops at their rate, all-at-once runs as a closed loop of min(prompts, max_num_seqs)).
"""

from __future__ import annotations

import datetime as dt
import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from functools import partial

from gpuopt.errors import GpuoptError, InputError
from gpuopt.hardware import GpuSpec, get_gpu
from gpuopt.inputs.evidence import LatencyObservation, MemoryObservation, Observation
from gpuopt.physics import latency
from gpuopt.physics.architecture import ModelArchitecture, get_model
from gpuopt.physics.context_limit import model_max_len
from gpuopt.physics.memory import ServingConfig, estimate
from gpuopt.physics.profile import Fit, Profile, ProfileEntry, adjust_gpu, scale
from gpuopt.vocabulary import KV_CACHE_DTYPES, WEIGHT_FORMATS

MIN_OBSERVATIONS = 2
SEARCH = (0.2, 5.0)  # factor range searched (log scale): beyond it the model, not the GPU, is wrong
LATENCY_METRICS = ("mean_ttft_ms", "mean_tpot_ms", "mean_itl_ms", "output_throughput")
BANDWIDTH_METRICS = ("mean_tpot_ms", "mean_itl_ms", "output_throughput")


@dataclass(frozen=True)
class Factors:
    decode_bandwidth: float = 1.0
    prefill_compute: float = 1.0
    memory_offset_gib: float = 0.0


@dataclass(frozen=True)
class Comparison:
    """One measured figure: observed, predicted before and after fitting, and left out of the fit."""

    observation: str
    metric: str
    observed: float
    before: float | None
    after: float | None
    leave_one_out: float | None

    @staticmethod
    def error(predicted: float | None, observed: float) -> float | None:
        return None if predicted is None or not observed else abs(predicted - observed) / observed * 100


@dataclass(frozen=True)
class Calibration:
    profile: Profile
    comparisons: list[Comparison]
    skipped: list[str]  # factors not fitted, and why


def _arch(obs: Observation) -> ModelArchitecture:
    assert obs.config.model is not None
    return get_model(obs.config.model)


def _serving(obs: Observation, arch: ModelArchitecture) -> ServingConfig:
    c = obs.config
    precision = c.precision if c.precision in WEIGHT_FORMATS else None
    kv = c.kv_cache_dtype if c.kv_cache_dtype in KV_CACHE_DTYPES else "auto"
    max_len = c.max_model_len
    if max_len is None and isinstance(obs, LatencyObservation):
        need = int(obs.input_tokens + obs.output_tokens)
        max_len = min(2 ** math.ceil(math.log2(max(need, 16))), model_max_len(arch) or 2 ** 31)
    return ServingConfig(tensor_parallel=c.tensor_parallel or 1, pipeline_parallel=c.pipeline_parallel or 1,
                         precision=precision, kv_cache_dtype=kv, max_model_len=max_len,
                         gpu_memory_utilization=c.gpu_memory_utilization, max_num_seqs=c.max_num_seqs,
                         max_num_batched_tokens=c.max_num_batched_tokens, vllm_version=c.vllm_version)


def predict(obs: Observation, gpu: GpuSpec) -> dict[str, float]:
    """The figures of `obs` as the models predict them on `gpu` (a calibrated copy, when fitting)."""
    arch = _arch(obs)
    mem = estimate(arch, gpu, _serving(obs, arch))
    if isinstance(obs, MemoryObservation):
        out = {"kv_cache_gib": mem.binding_rank.kv_cache_gib}
        if obs.kv_cache_tokens is not None:
            out["kv_cache_tokens"] = float(mem.kv_cache_tokens)
        return out
    if not mem.fits:
        raise InputError(f"{obs.source}: the memory model says this run does not fit ({mem.reason}); check "
                         "--gpu, --tp and --server-args")
    replica = latency.build_replica(arch, gpu, mem)
    lengths = (max(1, round(obs.input_tokens)), max(1, round(obs.output_tokens)))
    if obs.protocol == "poisson" and obs.request_rate:
        point = latency.at_rate(replica, obs.request_rate, *lengths)
    else:
        clients = obs.concurrency or min(obs.num_prompts, mem.config.max_num_seqs)
        point = latency.at_concurrency(replica, clients, *lengths)
    return {"mean_ttft_ms": point.ttft_ms, "mean_tpot_ms": point.tpot_ms, "mean_itl_ms": point.tpot_ms,
            "output_throughput": point.output_tokens_per_second}


def observed(obs: Observation) -> dict[str, float]:
    if isinstance(obs, MemoryObservation):
        out: dict[str, float] = {}
        if obs.kv_cache_gib is not None:
            out["kv_cache_gib"] = obs.kv_cache_gib
        if obs.kv_cache_tokens is not None:
            out["kv_cache_tokens"] = float(obs.kv_cache_tokens)
        return out
    return {m: v for m in LATENCY_METRICS if (v := getattr(obs, m)) is not None}


def _golden(f: Callable[[float], float], lo: float, hi: float, iterations: int = 40) -> float:
    """Minimum of a unimodal f on [lo, hi] (searched on the log of the factor)."""
    a, b = math.log(lo), math.log(hi)
    ratio = (math.sqrt(5) - 1) / 2
    c, d = b - ratio * (b - a), a + ratio * (b - a)
    fc, fd = f(math.exp(c)), f(math.exp(d))
    for _ in range(iterations):
        if fc < fd:
            b, d, fd = d, c, fc
            c = b - ratio * (b - a)
            fc = f(math.exp(c))
        else:
            a, c, fc = c, d, fd
            d = a + ratio * (b - a)
            fd = f(math.exp(d))
    return math.exp((a + b) / 2)


def _latency_loss(items: Sequence[LatencyObservation], gpu: GpuSpec, bandwidth: float = 1.0,
                  prefill: float = 1.0) -> float:
    spec = scale(gpu, bandwidth, prefill)
    total = 0.0
    for obs in items:
        try:
            pred = predict(obs, spec)
        except GpuoptError:
            return math.inf
        for metric, value in observed(obs).items():
            total += math.log(max(pred[metric], 1e-12) / value) ** 2
    return total


def fit_factors(items: Sequence[Observation], gpu: GpuSpec, fit_bw: bool, fit_comp: bool,
                fit_mem: bool) -> Factors:
    serving = [o for o in items if isinstance(o, LatencyObservation)]
    bw = comp = 1.0
    for _ in range(4 if fit_bw and fit_comp else 1):
        if fit_bw:
            bw = _golden(partial(_latency_loss, serving, gpu, prefill=comp), *SEARCH)
        if fit_comp:
            comp = _golden(partial(_latency_loss, serving, gpu, bw), *SEARCH)
    offset = 0.0
    starts = [o for o in items if isinstance(o, MemoryObservation) and o.kv_cache_gib is not None]
    if fit_mem and starts:
        # KV GiB moves one for one with the memory CUDA reports, scaled by gpu_memory_utilization
        gaps = []
        for o in starts:
            assert o.kv_cache_gib is not None
            arch = _arch(o)
            mem = estimate(arch, gpu, _serving(o, arch))  # what predict() reads, and the utilisation it resolved
            gaps.append((o.kv_cache_gib - mem.binding_rank.kv_cache_gib) / mem.config.gpu_memory_utilization)
        offset = statistics.fmean(gaps)
    return Factors(bw, comp, offset)


def _counts(items: Sequence[Observation]) -> tuple[int, int, int]:
    bw = sum(1 for o in items if isinstance(o, LatencyObservation) and any(m in observed(o) for m in BANDWIDTH_METRICS))
    comp = sum(1 for o in items if isinstance(o, LatencyObservation) and "mean_ttft_ms" in observed(o))
    mem = sum(1 for o in items if isinstance(o, MemoryObservation) and o.kv_cache_gib is not None)
    return bw, comp, mem


def _median_error(items: Sequence[Observation], gpu: GpuSpec, metrics: tuple[str, ...]) -> float:
    errors = []
    for o in items:
        pred = predict(o, gpu)
        errors += [abs(pred[m] - v) / v * 100 for m, v in observed(o).items() if m in metrics and v]
    return round(statistics.median(errors), 2) if errors else 0.0


def calibrate(observations: Sequence[Observation], today: dt.date | None = None) -> Calibration:
    """One profile entry per (GPU, vLLM release) of the evidence."""
    groups: dict[tuple[str, str | None], list[Observation]] = {}
    for o in observations:
        assert o.config.gpu is not None
        groups.setdefault((get_gpu(o.config.gpu).gpu, o.config.vllm_version), []).append(o)
    entries, comparisons, skipped = [], [], []
    for (gpu_name, version), shown in groups.items():
        gpu = get_gpu(gpu_name)
        where = f"{gpu_name}" + (f" (vLLM {version})" if version else "")
        items = [o for o in shown if steady(o, gpu)]
        skipped += [f"{where}: {o.id} is shown but not fitted: the steady-state model has no steady state for "
                    "it (a finite run sent all at once or above the replica's capacity: it drains in a way only "
                    "`gpuopt simulate` replays)" for o in shown if o not in items]
        n_bw, n_comp, n_mem = _counts(items)
        fit_bw, fit_comp, fit_mem = (n >= MIN_OBSERVATIONS for n in (n_bw, n_comp, n_mem))
        for ok, n, name, what in ((fit_bw, n_bw, "decode_bandwidth", "runs with TPOT, ITL or throughput"),
                                  (fit_comp, n_comp, "prefill_compute", "runs with TTFT"),
                                  (fit_mem, n_mem, "memory_offset_gib", "start-up logs")):
            if not ok and n:
                skipped.append(f"{where}: {name} not fitted: {n} of the {MIN_OBSERVATIONS} {what} it needs")
        if not (fit_bw or fit_comp or fit_mem):
            continue
        factors = fit_factors(items, gpu, fit_bw, fit_comp, fit_mem)
        # a factor that does not lower the median error of its own figures is not evidence of a GPU
        # difference (e.g. TTFT dominated by queueing the model does not capture): leave it out, say so
        for name, ok, metrics in (("decode_bandwidth", fit_bw, BANDWIDTH_METRICS),
                                  ("prefill_compute", fit_comp, ("mean_ttft_ms",))):
            if not ok:
                continue
            trial = scale(gpu, factors.decode_bandwidth, factors.prefill_compute, factors.memory_offset_gib)
            error_before, error_after = _median_error(items, gpu, metrics), _median_error(items, trial, metrics)
            value = getattr(factors, name)
            if not SEARCH[0] * 1.02 < value < SEARCH[1] / 1.02:  # pinned to the edge of the plausible range
                factors = replace(factors, **{name: 1.0})
                fit_bw, fit_comp = (False, fit_comp) if name == "decode_bandwidth" else (fit_bw, False)
                skipped.append(f"{where}: {name} not fitted: the best value ({value:.2f}) is at the edge of the "
                               f"plausible range {SEARCH[0]:g}-{SEARCH[1]:g}x, so the error is not the GPU's speed")
            elif error_after >= error_before:
                factors = replace(factors, **{name: 1.0})
                fit_bw, fit_comp = (False, fit_comp) if name == "decode_bandwidth" else (fit_bw, False)
                skipped.append(f"{where}: {name} not fitted: no value lowers the median error of its figures "
                               f"({error_before:.1f} % at 1.0, {error_after:.1f} % at the best overall fit)")
        if not (fit_bw or fit_comp or fit_mem):
            continue
        factors = fit_factors(items, gpu, fit_bw, fit_comp, fit_mem)  # the kept factors alone
        fitted_gpu = scale(gpu, factors.decode_bandwidth, factors.prefill_compute, factors.memory_offset_gib)
        loo: dict[str, dict[str, float]] = {}
        for o in items:
            rest = [x for x in items if x is not o]
            rb, rc, rm = _counts(rest)
            f = fit_factors(rest, gpu, fit_bw and rb >= MIN_OBSERVATIONS, fit_comp and rc >= MIN_OBSERVATIONS,
                            fit_mem and rm >= MIN_OBSERVATIONS)
            loo[o.id] = predict(o, scale(gpu, f.decode_bandwidth, f.prefill_compute, f.memory_offset_gib))
        for o in shown:
            before, after = predict(o, gpu), predict(o, fitted_gpu)
            comparisons += [Comparison(o.id, m, v, before.get(m), after.get(m), loo.get(o.id, {}).get(m))
                            for m, v in observed(o).items()]
        fit = partial(_fit_record, items=items, comparisons=list(comparisons), gpu=gpu, fitted_gpu=fitted_gpu)
        entries.append(ProfileEntry(
            gpu=gpu_name, vllm_version=version, models=sorted({o.config.model or "" for o in items}),
            decode_bandwidth=fit(factors.decode_bandwidth, BANDWIDTH_METRICS, LatencyObservation) if fit_bw else None,
            prefill_compute=fit(factors.prefill_compute, ("mean_ttft_ms",), LatencyObservation) if fit_comp else None,
            memory_offset_gib=fit(factors.memory_offset_gib, ("kv_cache_gib",), MemoryObservation) if fit_mem else None,
            fitted=(today or dt.date.today()).isoformat()))
    if not entries:
        raise InputError("no factor fitted (nothing written): each needs at least "
                         f"{MIN_OBSERVATIONS} observations on one GPU that the model describes (decode_bandwidth: "
                         "runs with TPOT/ITL or throughput; prefill_compute: runs with TTFT; memory_offset_gib: "
                         "start-up logs) and must lower their error; why not here:", *skipped)
    return Calibration(Profile(entries=entries), comparisons, skipped)


def steady(o: Observation, gpu: GpuSpec) -> bool:
    """Whether the steady-state model describes this observation: a start-up always; a serving run when it is
    not sent all at once and every figure it predicts on the uncalibrated GPU is finite."""
    if isinstance(o, MemoryObservation):
        return True
    if o.protocol == "all-at-once":
        return False
    try:
        return all(math.isfinite(v) for v in predict(o, gpu).values())
    except GpuoptError:
        return False


def _fit_record(value: float, metrics: tuple[str, ...], kind: type, items: Sequence[Observation],
                comparisons: Sequence[Comparison], gpu: GpuSpec, fitted_gpu: GpuSpec) -> Fit:
    used = [o.id for o in items if isinstance(o, kind) and any(m in observed(o) for m in metrics)]
    mine = [c for c in comparisons if c.observation in used and c.metric in metrics]
    loo_errors = [e for c in mine if (e := Comparison.error(c.leave_one_out, c.observed)) is not None]
    return Fit(value=round(value, 4), observations=used,
               median_error_before_pct=_median_error(items, gpu, metrics),
               median_error_after_pct=_median_error(items, fitted_gpu, metrics),
               leave_one_out_error_pct=(round(statistics.median(loo_errors), 2)
                                        if len(used) > MIN_OBSERVATIONS and loo_errors else None))


def check(profile: Profile, observations: Sequence[Observation]) -> list[Comparison]:
    """Score a profile on new evidence without refitting: `after` is the profile's prediction."""
    out = []
    for o in observations:
        assert o.config.gpu is not None
        gpu = get_gpu(o.config.gpu)
        entry = profile.entry_for(gpu.gpu, o.config.vllm_version)
        before, after = predict(o, gpu), predict(o, adjust_gpu(gpu, entry))
        out += [Comparison(o.id, m, v, before.get(m), after.get(m) if entry else None, None)
                for m, v in observed(o).items()]
    return out


__all__ = ["Calibration", "Comparison", "Factors", "calibrate", "check", "fit_factors", "predict"]
