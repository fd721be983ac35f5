"""The simulated replica in steady state, and the largest request rate at which it meets latency targets.

A capacity is a property of a steady state: the rate a replica sustains indefinitely. A finite run of N
requests is not one: at a high rate all N arrive before the first finishes, decode together as one batch and
drain, so a rate the replica could never sustain looks fine whenever N requests fit in one batch (400
requests of 200 in / 800 out on one H100 "met" 60 ms TPOT at 479 requests/s, 40x what the replica
sustains). `steady_run` therefore surrounds the measured requests with a warm-up and a tail drawn from the
same traffic:

- warm-up: as many requests as the steady state holds, rate x the targets' end-to-end bound (TTFT target +
  mean output x TPOT target; a request that meets both lives no longer), at most what the engine can hold
  (max_num_seqs, and the KV cache over what a running request holds on average: latency.held_kv_tokens,
  the prompt and half the output -- the whole request, used before 2026-12-02, under-counted long-output
  steady states by up to 40 %); they fill the engine to its steady population
  before the first measured request arrives;
- measured: `measured` requests (400), summarised as `vllm bench serve` would summarise them alone;
- tail: as many as the warm-up, so the last measured requests finish under the same load instead of a drain.

A rate the replica cannot sustain shows as a queue that grows while the measured requests arrive: the run is
unstable when the backlog (sent, no first token yet) grows by more than `UNSTABLE_GROWTH` of the measured
requests between the first and the last measured arrival (random-walk noise at capacity is about
sqrt(measured), 5 % of 400; an overload of 10 % adds 10 %). This catches TPOT-only targets, which a growing
queue does not breach.

`steady_capacity` searches the rate: from a start (the analytic capacity) up by 1.5x or down by 0.6x until
the targets flip, then bisection to SEARCH_TOLERANCE; the fixed seed freezes the sampling noise, so the
targets are monotone in the rate in practice.
"""

from __future__ import annotations

import math

from gpuopt.errors import InputError
from gpuopt.physics.latency import Replica, held_kv_tokens
from gpuopt.physics.simulator import SchedulerConfig, SimResult, simulate
from gpuopt.physics.traffic import LengthDistribution, PoissonArrivals, make_requests

MEASURED = 400
UNSTABLE_GROWTH = 0.10
SEARCH_TOLERANCE = 0.04  # relative width of the final rate bracket (the model's own error is larger)
Summary = dict[str, float | int]


def percentile_key(percentile: int | None) -> str:
    """The summary key prefix of a target's statistic: mean, median or pNN."""
    if percentile not in (None, 50, 90, 95, 99):
        raise InputError(f"slo.percentile must be 50, 90, 95 or 99 (got {percentile})")
    return "mean" if percentile is None else ("median" if percentile == 50 else f"p{percentile}")


def warmup_requests(sched: SchedulerConfig, lengths: LengthDistribution, rate: float, ttft_slo_ms: float | None,
                    tpot_slo_ms: float | None) -> int:
    """How many requests the steady state at `rate` holds at most (see the module docstring)."""
    per_request = max(held_kv_tokens(lengths.mean_input_tokens, lengths.mean_output_tokens, sched.block_size), 1.0)
    engine = min(sched.max_num_seqs, sched.num_gpu_blocks * sched.block_size / per_request)
    if ttft_slo_ms is not None and tpot_slo_ms is not None:
        e2e_s = (ttft_slo_ms + lengths.mean_output_tokens * tpot_slo_ms) / 1e3
        engine = min(engine, rate * e2e_s)
    return max(0, math.ceil(engine))


def steady_run(replica: Replica, lengths: LengthDistribution, rate: float, ttft_slo_ms: float | None,
               tpot_slo_ms: float | None, *, measured: int = MEASURED, seed: int = 0,
               sched: SchedulerConfig | None = None, shared_prefix_tokens: int = 0) -> tuple[SimResult, bool]:
    """Poisson traffic at `rate` with the engine at its steady population: (the measured requests' result,
    whether the queue stayed bounded while they arrived)."""
    sched = sched or SchedulerConfig.from_replica(replica)
    warm = warmup_requests(sched, lengths, rate, ttft_slo_ms, tpot_slo_ms)
    reqs = make_requests(lengths, PoissonArrivals(rate), warm + measured + warm, seed, shared_prefix_tokens)
    whole = simulate(replica, reqs, sched=sched, seed=seed)
    first, last = float(whole.send_s[warm]), float(whole.send_s[warm + measured - 1])
    growth = whole.backlog(last) - whole.backlog(first)
    return whole.window(warm, warm + measured), growth <= UNSTABLE_GROWTH * measured


def meets(summary: Summary, stable: bool, ttft_slo_ms: float | None, tpot_slo_ms: float | None,
          percentile: int | None) -> bool:
    key = percentile_key(percentile)
    return (stable and (ttft_slo_ms is None or float(summary[f"{key}_ttft_ms"]) <= ttft_slo_ms)
            and (tpot_slo_ms is None or float(summary[f"{key}_tpot_ms"]) <= tpot_slo_ms))


def steady_capacity(replica: Replica, lengths: LengthDistribution, ttft_slo_ms: float | None,
                    tpot_slo_ms: float | None, percentile: int | None, start: float, *, measured: int = MEASURED,
                    seed: int = 0, sched: SchedulerConfig | None = None,
                    shared_prefix_tokens: int = 0) -> tuple[float, Summary | None]:
    """The largest Poisson rate at which the replica in steady state meets the targets (at `percentile`, None =
    mean) and keeps its queue bounded, with the measured summary there; (0, None) when not even a trickle does.
    `start`: where the search begins (the analytic capacity)."""
    percentile_key(percentile)

    def run(rate: float) -> tuple[bool, Summary]:
        res, stable = steady_run(replica, lengths, rate, ttft_slo_ms, tpot_slo_ms, measured=measured, seed=seed,
                                 sched=sched, shared_prefix_tokens=shared_prefix_tokens)
        summary = res.summary()
        return meets(summary, stable, ttft_slo_ms, tpot_slo_ms, percentile), summary

    start = max(start, 1e-3)
    ok, first = run(start)
    if ok:
        lo, lo_s, hi = start, first, start * 1.5
        while hi < start * 64:
            ok, s = run(hi)
            if not ok:
                break
            lo, lo_s, hi = hi, s, hi * 1.5
    else:
        hi, lo = start, start * 0.6
        while True:
            ok, s = run(lo)
            if ok:
                lo_s = s
                break
            hi, lo = lo, lo * 0.6
            if lo < start * 1e-3:
                return 0.0, None
    while hi - lo > SEARCH_TOLERANCE * hi:
        mid = (lo + hi) / 2
        ok, s = run(mid)
        if ok:
            lo, lo_s = mid, s
        else:
            hi = mid
    return lo, lo_s
