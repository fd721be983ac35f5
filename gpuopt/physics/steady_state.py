"""The simulated replica in steady state, and the largest request rate at which it meets latency targets.

A capacity is a property of a steady state: the rate a replica sustains indefinitely. A finite run of N
requests is not one: at a high rate all N arrive before the first finishes, decode together as one batch and
drain, so a rate the replica could never sustain looks fine whenever N requests fit in one batch (400
requests of 200 in / 800 out on one H100 "met" 60 ms TPOT at 479 requests/s, 40x what the replica
sustains). `steady_run` therefore surrounds the measured requests with a warm-up and a tail drawn from the
same traffic:

- warm-up: the requests sent while the steady population builds up. A request of lengths (in, out) lives at
  most TTFT target + out x TPOT target (a request that meets both lives no longer), and the population of
  such requests is steady once the first of them finish, one lifetime after the traffic starts; so the
  warm-up lasts the lifetime of the long-lived requests -- the shortest lifetime past which requests holding
  `STEADY_SHARE` of the steady KV population live (lifetime x tokens held, over a fixed sample of the
  lengths) -- rate x that many requests. At most the engine's population (max_num_seqs, and the KV blocks
  over those a running request holds on average, time-weighted: the prompt and half the output in each
  group of the pool, analytic_load.held_kv_tokens, a hybrid's state pages besides) times that lifetime over the
  mean one. With one length this is rate x the end-to-end bound, capped at the engine's population, as
  before; a length mix used the mean lifetime and the mean request's tokens until 2026-12-03, so a chat mix
  of 80 % 300/80 and 20 % 8,500/1,500 tokens filled the KV cache only after the measured requests, and
  Llama-3.1-8B on an H100 NVL was planned at 12.2 requests/s where it sustains 8.7. That lifetime fills a
  population whose requests do not slow each other (M/G/infinity); each decoding sequence lengthens every
  step, though, so the population returns to its steady state (1 - beta) times as fast (relaxed_warmup:
  beta / (1 - beta) more lifetimes for each of RELAXATIONS relaxation times, at most MAX_RELAXED_WARMUP
  requests; since 2026-12-05: long outputs near a loose TPOT target were measured on a population still
  filling, 5-12 % above the rate they sustain);
- measured: `measured` requests (400), summarised as `vllm bench serve` would summarise them alone;
- tail: one lifetime's worth (warmup_requests), so the last measured requests finish under the same load
  instead of a drain.

Each of the three segments arrives at exactly the rate tried (at_exact_rate: the Poisson gaps of a segment
scaled so that its requests span count / rate seconds). Poisson draws put the measured requests' own rate
within about 1 / sqrt(400) = 5 % of the nominal one, and the fixed seed put the same deviation into every
rate and every capacity: seed 0's 400 requests arrive at 0.898 x the rate they stand for (its warm-up at
0.70 x), so every capacity read from it was judged on 10 % less traffic than it claimed. Scaling the gaps
keeps the bursts (the order and relative sizes of the gaps) and drops that one number.

A rate the replica cannot sustain shows as a queue that grows while the measured requests arrive: the run is
unstable when the backlog (sent, no first token yet) grows by more than `UNSTABLE_SD` x sqrt(measured)
requests between the first and the last measured arrival (queue_bounded). At capacity the backlog is a random
walk whose noise over n arrivals is about sqrt(n); an overload of e adds e x n. Two sqrt(n) is 10 % of 400
requests, the fixed 10 % this rule had, and 5 % of the 1,600 of a confirming window, which a fixed 10 % let
pass: a 6 % overload builds 24 requests of backlog over 400 and 91 over 1,600. This catches TPOT-only
targets, which a growing queue does not breach. It is also unstable when the KV cache cannot hold the
in-flight population's swings (kv_fluctuation_fits: its mean plus three standard deviations), which a window
shorter than the long requests' lifetime never sees.

`steady_capacity` searches the rate on a fixed grid ((1 + SEARCH_TOLERANCE)^k requests/s): from a start (the
analytic capacity) up by 1.5x or down by 0.6x until the targets flip, then bisection to neighbouring grid
points; the fixed seed freezes the sampling noise, so the targets are monotone in the rate in practice and the
answer does not depend on the start. The rate found is then confirmed on a window `VERIFY_FACTOR` (4) times
as long -- 1,600 measured requests, the same warm-up and tail rules, the same seed -- and the grid is stepped
down until such a run meets the targets too (confirm). Near saturation a 400-request window is optimistic:
what decides there happens rarely or slowly -- a KV-cache swing that preempts (gemma-3-27b at 3,000 / 300
tokens on an H100, 0.96 requests/s: 3 preemptions and 492 ms mean TTFT in 400 requests, 14 and 579 ms in
2,000), a queue that grows by 4 % of the requests (Qwen3.5-35B-A3B at 1,000 / 250, 3.95 requests/s: mean TTFT
1.8 s in 400 requests, 9.4 s in 2,000), the batch's slow swings in a p90-p99 TPOT -- and a short window
samples it too seldom to see. benchmarks/window_bias.py measures it against 4,000-request runs (docs/
simulator.md): the 400-request capacity was a median 4 % and up to 27 % above theirs; confirmed, 0 % and 4 %.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import numpy as np
from numpy.typing import NDArray

from gpuopt.errors import InputError
from gpuopt.physics import queueing
from gpuopt.physics.analytic_load import (
    LoadPoint,
    at_concurrency,
    held_kv_tokens,
    kv_places,
    max_rate,
    relaxation,
    replica_held_tokens,
)
from gpuopt.physics.latency import Replica
from gpuopt.physics.simulator import SchedulerConfig, SimResult, simulate
from gpuopt.physics.traffic import (
    ConstantArrivals,
    FixedLengths,
    HistogramLengths,
    LengthDistribution,
    PoissonArrivals,
    Request,
    arrival_cv2,
    make_requests,
)

MEASURED = 400
MAX_WARMUP = 8 * MEASURED  # warm-up requests at most (a 0.05 % bin of 8,000-token answers asked for 35,000)
LIFETIME_SAMPLE = 4096  # lengths drawn (fixed seed) to size the warm-up of a length mix
KV_FLUCTUATION_SD = queueing.KV_SWING_SD  # of the in-flight KV the cache must hold (kv_fluctuation_fits)
WINDOW_LIFETIMES = 10  # a window this many KV-holding lifetimes long has sampled the swings itself
STEADY_SHARE = 0.95  # share of the steady KV population whose requests the warm-up lets reach steady state
RELAXATIONS = 2.0  # relaxation times of the decode population the warm-up adds (relaxed_warmup)
MAX_RELAXED_WARMUP = 20 * MEASURED  # warm-up requests at most where the population relaxes slowly
UNSTABLE_SD = 2.0  # a backlog growing by this many sqrt(measured) requests over the window is unbounded
VERIFY_FACTOR = 4  # the confirming window is this many times the measured one (steady_capacity)
SEARCH_TOLERANCE = 0.04  # relative width of the final rate bracket (the model's own error is larger)
Summary = dict[str, float | int]


def percentile_key(percentile: int | None) -> str:
    """The summary key prefix of a target's statistic: mean, median or pNN."""
    if percentile not in (None, 50, 90, 95, 99):
        raise InputError(f"slo.percentile must be 50, 90, 95 or 99 (got {percentile})")
    return "mean" if percentile is None else ("median" if percentile == 50 else f"p{percentile}")


def length_population(lengths: LengthDistribution) -> tuple[NDArray[Any], NDArray[Any], NDArray[Any]]:
    """(input tokens, output tokens, weight) describing the traffic's lengths: a histogram's own bins with their
    shares (exact, however small a share: a sample of them would or would not draw a 0.05 % bin), else
    LIFETIME_SAMPLE draws (seed 0) of equal weight."""
    if isinstance(lengths, HistogramLengths):
        bins = [b for b in lengths.bins if b[2] > 0]
        return (np.array([b[0] for b in bins], dtype=float), np.array([b[1] for b in bins], dtype=float),
                np.array([b[2] for b in bins], dtype=float))
    ins, outs = lengths.sample(np.random.default_rng(0), LIFETIME_SAMPLE)
    return ins.astype(float), outs.astype(float), np.ones(len(ins))


def warmup_requests(sched: SchedulerConfig, lengths: LengthDistribution, rate: float, ttft_slo_ms: float | None,
                    tpot_slo_ms: float | None, shared_prefix_tokens: int = 0) -> int:
    """How many requests the warm-up sends before the measured ones (see the module docstring); at most
    MAX_WARMUP."""
    ins, outs, weight = length_population(lengths)
    ins = np.maximum(ins - _cached_prefix(sched, shared_prefix_tokens), 0.0)
    # each request's lifetime bound, in seconds with both targets (the warm-up then lasts that long at `rate`),
    # else in decode steps (only ratios are used)
    timed = ttft_slo_ms is not None and tpot_slo_ms is not None
    if ttft_slo_ms is not None and tpot_slo_ms is not None:
        lives = (ttft_slo_ms + outs * tpot_slo_ms) / 1e3
    else:
        lives = outs + 1.0
    # a running request holds about its prompt and half its output; the population in flight is time-weighted
    # (each request counts for as long as it lives) and its KV by what each holds meanwhile
    present = weight * lives
    population = present * (ins + outs / 2)
    order = np.argsort(lives, kind="stable")
    reached = np.cumsum(population[order]) / population.sum()
    long_life = float(lives[order][min(int(np.searchsorted(reached, STEADY_SHARE)), len(order) - 1)])
    mean_life = float(present.sum() / weight.sum())
    held = held_kv_tokens(float((present * ins).sum() / present.sum()), float((present * outs).sum() / present.sum()),
                          sched.block_size)
    engine = min(sched.max_num_seqs, sched.num_gpu_blocks / max(sched.pool.blocks_held(held), 1.0 / sched.block_size))
    sent = engine * long_life / mean_life
    if timed:
        sent = min(sent, rate * long_life)
    return max(0, min(math.ceil(sent), MAX_WARMUP))


def relaxed_warmup(replica: Replica, lengths: LengthDistribution, rate: float, lifetime_warmup: int) -> int:
    """The warm-up requests once the decode population's mutual slowing is counted: `lifetime_warmup`
    (warmup_requests: one lifetime of the long-lived requests, which fills an M/G/infinity population) plus
    RELAXATIONS relaxation times of the population past it, beta / (1 - beta) lifetimes each
    (analytic_load.relaxation at the traffic's mean lengths); at most MAX_RELAXED_WARMUP.

    Each sequence decoding lengthens every step (beta = rate (O - 1) x the step's slope in the batch), so the
    population approaches its steady state at (1 - beta) / lifetime, not in one lifetime: near a loose TPOT
    target beta is 0.8-0.9 and the approach takes 5-10 lifetimes. Until 2026-12-05 the warm-up was one
    lifetime, and the measured window saw a population still filling: Llama-3.1-8B at 200 / 800 tokens on an
    H100 at 18.2 requests/s met 500 ms / 60 ms in 400 and 1,600 requests (TTFT 115 / 127 ms, TPOT 38 / 43)
    after 739 warm-up requests, where after 6,000 it misses (TTFT 5 s, 6,780 preemptions) and 20,000 requests
    collapse (TTFT past 100 s); at 16.6 the steady state is reached and holds (TPOT 38.6 analytic, 37.6-41.8 by
    quarters of 20,000 requests). The surrogate benchmark had read 18.22 requests/s as the simulated capacity
    there, 5 % above the analytic 17.35, gpt-oss-20b's 23.97 against 21.28 (20,000 requests at 22.5: TTFT past
    30 s)."""
    ins, outs, weight = length_population(lengths)
    share = weight / weight.sum()
    factor = relaxation(replica, float(share @ ins), float(share @ outs), rate)
    if not math.isfinite(factor):
        return max(lifetime_warmup, MAX_RELAXED_WARMUP)
    extra = RELAXATIONS * (factor - 1.0)  # beta / (1 - beta) lifetimes a relaxation
    return max(lifetime_warmup, min(math.ceil(lifetime_warmup * (1.0 + extra)), MAX_RELAXED_WARMUP))


def _cached_prefix(sched: SchedulerConfig, shared_prefix_tokens: int) -> int:
    """The prompt tokens every request shares and the prefix cache holds once (the simulator's `held`)."""
    return shared_prefix_tokens if sched.enable_prefix_caching else 0


def steady_run(replica: Replica, lengths: LengthDistribution, rate: float, ttft_slo_ms: float | None,
               tpot_slo_ms: float | None, *, measured: int = MEASURED, seed: int = 0,
               sched: SchedulerConfig | None = None, shared_prefix_tokens: int = 0,
               decided_by: int | None = None, burstiness: float = 1.0) -> tuple[SimResult, bool]:
    """Poisson traffic at `rate` with the engine at its steady population: (the measured requests' result,
    whether the queue stayed bounded while they arrived). `decided_by`: the measured requests of the window
    that will confirm the verdict (kv_fluctuation_fits' `sampled`; None: this one decides). `burstiness`: the
    gamma shape of the inter-arrival times (`vllm bench serve --burstiness`; 1 is Poisson)."""
    sched = sched or SchedulerConfig.from_replica(replica)
    tail = warmup_requests(sched, lengths, rate, ttft_slo_ms, tpot_slo_ms, shared_prefix_tokens)
    warm = relaxed_warmup(replica, lengths, rate, tail)
    arrivals = PoissonArrivals(rate, burstiness)
    reqs = at_exact_rate(segments(lengths, arrivals, (warm, measured, tail), seed, shared_prefix_tokens), rate,
                         (warm, warm + measured))
    whole = simulate(replica, reqs, sched=sched, seed=seed)
    window = whole.window(warm, warm + measured)
    cv2 = arrival_cv2(burstiness)
    return window, queue_bounded(whole, warm, warm + measured, cv2) and kv_fluctuation_fits(
        window, sched, rate, lengths, shared_prefix_tokens, sampled=decided_by, arrival_cv2=cv2)


def queue_bounded(whole: SimResult, start: int, stop: int, arrival_cv2: float = 1.0) -> bool:
    """Whether the backlog (sent, no first token yet) grew by at most `UNSTABLE_SD` x sqrt(cv2 x (stop - start))
    requests between the sends of requests `start` and `stop` - 1 (see the module docstring). `arrival_cv2`:
    the squared coefficient of variation of the inter-arrival times (1 for Poisson): the count of n renewal
    arrivals' span varies as cv2 x n, so the backlog's noise at capacity does too (gamma arrivals of shape
    0.25 swing twice as far as Poisson ones, and a 400-request window of them at a sustainable rate would
    read as a growing queue)."""
    first, last = float(whole.send_s[start]), float(whole.send_s[stop - 1])
    noise = math.sqrt(max(arrival_cv2, 1.0) * (stop - start))
    return whole.backlog(last) - whole.backlog(first) <= UNSTABLE_SD * noise


SEGMENT_SEEDS = (1_000_003, 0, 2_000_006)
"""Offsets of the warm-up's, the measured requests' and the tail's seeds from the run's. Each segment is drawn
from its own stream, so the measured requests (their lengths and the relative sizes of their gaps) are the same
whatever the warm-up's length: drawn as one stream, a warm-up sized from the TTFT target moved which draws were
measured, and a looser target could cost more (QA: a p90 workload's H100 read 8.65 requests/s at a 5 s TTFT
target and 8.99 at 2 s, 1 s and 0.5 s, where TTFT did not bind)."""


def segments(lengths: LengthDistribution, arrivals: PoissonArrivals, counts: tuple[int, int, int], seed: int,
             shared_prefix_tokens: int = 0) -> list[Request]:
    """Warm-up, measured and tail requests, each segment from its own seed (SEGMENT_SEEDS), one after another in
    time (each segment's gaps counted from the previous one's last send)."""
    out: list[Request] = []
    for count, offset in zip(counts, SEGMENT_SEEDS, strict=True):
        if count <= 0:
            continue
        start = out[-1].arrival_s if out else 0.0
        out += [replace(q, arrival_s=start + q.arrival_s)
                for q in make_requests(lengths, arrivals, count, seed + offset, shared_prefix_tokens)]
    return out


def at_exact_rate(requests: list[Request], rate: float, cuts: tuple[int, ...]) -> list[Request]:
    """`requests` with their send times moved so that each segment (the requests between consecutive `cuts`,
    and before the first and after the last) arrives at exactly `rate`: the gaps in front of a segment's
    requests (the first request's counted from time 0) scaled to sum to its count / `rate`, their order and
    relative sizes kept."""
    gaps = np.diff(np.array([q.arrival_s for q in requests], dtype=float), prepend=0.0)
    edges = [0, *cuts, len(requests)]
    for a, b in zip(edges[:-1], edges[1:], strict=True):
        total = float(gaps[a:b].sum())
        if b > a and total > 0:
            gaps[a:b] *= (b - a) / rate / total
    return [replace(q, arrival_s=float(t)) for q, t in zip(requests, np.cumsum(gaps), strict=True)]


def kv_fluctuation_fits(window: SimResult, sched: SchedulerConfig, rate: float,
                        lengths: LengthDistribution | None = None, shared_prefix_tokens: int = 0,
                        sampled: int | None = None, arrival_cv2: float = 1.0) -> bool:
    """Whether the KV cache holds the steady population's KV `KV_FLUCTUATION_SD` standard deviations above its
    mean.

    Requests in flight under Poisson traffic are an M/G/infinity population: a request that lives L seconds
    holding h(t) blocks adds rate x E[integral h] to the mean of the blocks in use and rate x E[integral h^2] to
    their variance (h grows from the prompt's blocks to the whole request's over the request's life; its mean
    square over a linear growth from a to b is (a^2 + ab + b^2) / 3). The measured window is shorter than one
    lifetime of long requests (400 requests of a chat mix with 1,500-token answers span 45 s, such a request
    lives 60), so it never sees the slow swings of their number; when one fills the cache, vLLM preempts and
    recomputes, and the lost work can tip the replica into a queue that never drains: Llama-3.1-8B on an H100
    NVL with 80 % 300/80 and 20 % 8,500/1,500-token requests met p90 targets in a 400-request window at
    10.2 requests/s, ran out of KV at 9.0 over 6,000 requests (p90 TTFT 5.5 s) and held at 8.5 (peak 91 %).
    Three standard deviations put its capacity at 8.5-9. One length is no different when its requests live
    long against the window: Qwen3-30B-A3B at 200 / 800 tokens on an H100 (lifetimes of 30 s, a window of 2)
    met 2 s / 40 ms at 6.7 requests/s in the window and collapses over 4,000 requests at 6.3 (2,164
    preemptions, TPOT 42 ms), holding at 5.8; the check gives 5.83. A window of `WINDOW_LIFETIMES` or more
    lifetimes (weighted by the blocks each request holds) has sampled the swings itself and is trusted:
    Qwen3.5-35B-A3B at 1,000 / 250 (3 s lifetimes, 34 in its window) waits for blocks without preempting, and
    the three deviations would have planned it 20 % below what 4,000 requests sustain.

    `sampled`: the measured requests of the window whose latencies will decide (a capacity search's 400-request
    runs are confirmed on 1,600: steady_capacity), when not this window's. The three deviations stand in for
    swings a window cannot sample; when the deciding window samples them, a search run applying them only held
    the answer below what that window would have confirmed (confirm steps down, never up): Qwen3-30B-A3B at
    1,000 / 250 on an H100 within 0.5 s / 60 ms (11 s lifetimes: 4 in 400 requests, 16 in 1,600) was capped
    at 8.31 requests/s by the deviations, where 1,600 requests at 9.35 read 256 ms mean TTFT (4,000
    simulated requests: 9.45 meets, 9.6 misses)."""
    if rate <= 0 or window.e2el_s.size == 0:
        return True
    # each length's lifetime from the window's own requests (a line in the output length: decode dominates),
    # applied to the traffic's lengths (`lengths`; the window's requests when None), so the verdict does not
    # hang on how many of a rare long bin the 400 requests drew
    lives_seen, outs_seen = window.e2el_s.astype(float), window.output_tokens.astype(float)
    slope = 0.0
    if float(np.ptp(outs_seen)) > 0:
        slope = max(float(np.polyfit(outs_seen, lives_seen, 1)[0]), 0.0)
    intercept = float(lives_seen.mean() - slope * outs_seen.mean())
    if lengths is None:
        ins, outs, weight = window.input_tokens.astype(float), outs_seen, np.ones(outs_seen.size)
    else:
        ins, outs, weight = length_population(lengths)
    lives = np.maximum(intercept + slope * outs, 1e-9)
    prefix = _cached_prefix(sched, shared_prefix_tokens)  # held once, not by every request
    # each distinct (input, output) once: 4,096 draws of one length are one pair
    pairs, inverse = np.unique(np.stack([ins, outs]), axis=1, return_inverse=True)
    first = np.array([sched.pool.blocks_held(max(float(i) - prefix, 0.0)) for i in pairs[0]])[inverse.ravel()]
    whole = np.array([sched.pool.blocks_held(max(float(i) - prefix, 0.0) + float(o))
                      for i, o in zip(pairs[0], pairs[1], strict=True)])[inverse.ravel()]
    share = weight / weight.sum()
    held = lives * (first + whole) / 2  # block-seconds each request holds
    # the lifetime of the requests that hold the KV (weighted by what they hold): a window many of them long
    # sampled the swings itself, and a full cache there shows in its own latencies
    kv_life = float((share * lives * held).sum() / max(float((share * held).sum()), 1e-12))
    if (sampled or window.e2el_s.size) / rate >= WINDOW_LIFETIMES * kv_life:
        return True
    mean = rate * float((share * held).sum()) + (sched.pool.blocks_held(prefix) if prefix else 0.0)
    # renewal arrivals of squared coefficient of variation cv2 (gamma of shape b: 1 / b) swing the number of
    # long-lived requests in flight cv2 times as widely as Poisson ones (the count of arrivals over a window
    # much longer than a gap has variance cv2 x its mean); smoother arrivals are not credited below Poisson
    variance = max(arrival_cv2, 1.0) * rate * float((share * lives * (first**2 + first * whole + whole**2) / 3).sum())
    return mean + KV_FLUCTUATION_SD * math.sqrt(variance) <= sched.num_gpu_blocks


def meets(summary: Summary, stable: bool, ttft_slo_ms: float | None, tpot_slo_ms: float | None,
          percentile: int | None) -> bool:
    key = percentile_key(percentile)
    return (stable and (ttft_slo_ms is None or float(summary[f"{key}_ttft_ms"]) <= ttft_slo_ms)
            and (tpot_slo_ms is None or float(summary[f"{key}_tpot_ms"]) <= tpot_slo_ms))


def steady_capacity(replica: Replica, lengths: LengthDistribution, ttft_slo_ms: float | None,
                    tpot_slo_ms: float | None, percentile: int | None, start: float, *, measured: int = MEASURED,
                    verify: int | None = None, seed: int = 0, sched: SchedulerConfig | None = None,
                    shared_prefix_tokens: int = 0, burstiness: float = 1.0) -> tuple[float, Summary | None]:
    """The largest Poisson rate at which the replica in steady state meets the targets (at `percentile`, None =
    mean) and keeps its queue bounded, with the measured summary there; (0, None) when not even a trickle does.

    The rates tried lie on one grid, (1 + SEARCH_TOLERANCE)^k requests/s for integer k (grid_search), and the
    answer is the largest grid rate that meets the targets below the first that misses: `start` (the analytic
    capacity, or a better guess) only decides where the search begins. With a bracket that stopped wherever
    the bisection from `start` landed, one replica's capacity moved with the guess -- the planner's guess comes
    from the other shapes simulated first -- so allowing one more provider changed an H100's capacity from
    38.15 to 37.97 requests/s and the plan's replica counts with it.

    The search runs windows of `measured` requests; its answer is then confirmed on windows of `verify` (None:
    VERIFY_FACTOR x `measured`; at most `measured`: not confirmed), stepping down the grid until one meets the
    targets (confirm; the module docstring says why), and the summary returned is that long window's."""
    percentile_key(percentile)

    def runs(n: int, decided_by: int | None = None) -> Callable[[float], tuple[bool, Summary]]:
        def run(rate: float) -> tuple[bool, Summary]:
            res, stable = steady_run(replica, lengths, rate, ttft_slo_ms, tpot_slo_ms, measured=n, seed=seed,
                                     sched=sched, shared_prefix_tokens=shared_prefix_tokens, decided_by=decided_by,
                                     burstiness=burstiness)
            summary = res.summary()
            return meets(summary, stable, ttft_slo_ms, tpot_slo_ms, percentile), summary
        return run

    longer = VERIFY_FACTOR * measured if verify is None else verify
    confirmed = longer > measured
    # the search's KV-swing check counts the confirming window's span: what it samples, it decides
    rate, summary = grid_search(runs(measured, longer if confirmed else None), start, lambda x: x)
    if summary is None or not confirmed:
        return rate, summary
    return confirm(runs(longer), rate)


def confirm(run: Callable[[float], tuple[bool, Summary]], found: float) -> tuple[float, Summary | None]:
    """The largest rate of the search's grid, (1 + SEARCH_TOLERANCE)^k, at or below `found` (a grid rate) at
    which `run` meets its targets, with its summary: `found` itself when it does, else one grid step down,
    then strides doubling (2, 4, ... steps) until a rate meets them, then bisection to neighbouring grid rates;
    (0, None) when not a thousandth of `found` does. One run when `found` holds; d + 1 when it is d = 1 or 2
    steps too high."""
    step = math.log1p(SEARCH_TOLERANCE)
    top = round(math.log(found) / step)

    def at(k: int) -> tuple[bool, Summary]:  # each grid rate is run once: the strides and bisection never return
        return run(math.exp(k * step))

    ok, summary = at(top)
    if ok:
        return math.exp(top * step), summary
    floor = top + math.log(1e-3) / step
    hi, stride = top, 1
    while True:
        lo = top - stride
        if lo < floor:
            return 0.0, None
        ok, summary = at(lo)
        if ok:
            break
        hi, stride = lo, 2 * stride
    lo, summary = _bisect(at, lo, hi, summary)
    return math.exp(lo * step), summary


def _bisect(at: Callable[[int], tuple[bool, Summary]], lo: int, hi: int,
            lo_summary: Summary) -> tuple[int, Summary]:
    """The last grid index that meets the targets between `lo` (meets, with `lo_summary`) and `hi` (misses),
    by bisection to neighbouring indices; with its summary."""
    while hi - lo > 1:
        mid = (lo + hi) // 2
        ok, s = at(mid)
        if ok:
            lo, lo_summary = mid, s
        else:
            hi = mid
    return lo, lo_summary


def grid_search(run: Callable[[float], tuple[bool, Summary]], start: float,
                snap: Callable[[float], float]) -> tuple[float, Summary | None]:
    """The largest load on the grid (1 + SEARCH_TOLERANCE)^k (through `snap`: whole clients for a closed loop)
    at which `run` meets its targets below the first that misses: from `start` up by 1.5x or down by 0.6x until
    the verdict flips, then bisection to neighbouring grid points; (0, None) when not a thousandth of the start
    does. Loads that `snap` to one value are run once."""
    step = math.log1p(SEARCH_TOLERANCE)
    seen: dict[float, tuple[bool, Summary]] = {}

    def at(k: int) -> tuple[bool, Summary]:
        load = snap(math.exp(k * step))
        if load not in seen:
            seen[load] = run(load)
        return seen[load]

    up, down = round(math.log(1.5) / step), round(math.log(1 / 0.6) / step)  # the 1.5x / 0.6x strides
    k0 = round(math.log(max(start, 1e-3)) / step)
    ok, first = at(k0)
    if ok:
        lo, lo_s, hi = k0, first, k0 + up
        while hi < k0 + math.log(64) / step:  # at most 64x the start
            ok, s = at(hi)
            if not ok:
                break
            lo, lo_s, hi = hi, s, hi + up
    else:
        hi, lo = k0, k0 - down
        while True:
            ok, s = at(lo)
            if ok:
                lo_s = s
                break
            hi, lo = lo, lo - down
            if lo < k0 + math.log(1e-3) / step:  # a thousandth of the start: not even a trickle
                return 0.0, None
    lo, lo_s = _bisect(at, lo, hi, lo_s)
    return snap(math.exp(lo * step)), lo_s


def whole_clients(clients: float) -> int:
    """A closed loop's clients as the simulator runs them: rounded half up, at least one."""
    return max(1, math.floor(clients + 0.5))


def closed_run_requests(clients: int, measured: int) -> tuple[int, int, int]:
    """closed_run's requests for `clients`: (warm-up, measured, all sent) -- 2 x clients, max(`measured`,
    clients), and clients more after them."""
    warm, count = 2 * clients, max(measured, clients)
    return warm, count, warm + count + clients


def closed_run(replica: Replica, lengths: LengthDistribution, clients: int, *, measured: int = MEASURED,
               seed: int = 0, sched: SchedulerConfig | None = None, shared_prefix_tokens: int = 0) -> SimResult:
    """A closed loop of `clients` (each sends its next request when its last one ends: `vllm bench serve
    --max-concurrency N --request-rate inf`) drawing from `lengths`, measured in steady state: the clients
    start one after another over one turn of the loop at the analytic rate (a loop started at once stays in
    lockstep, all prefill then all decode), 2 x clients requests of warm-up, max(`measured`, clients) measured
    and clients more after them so the last measured ones finish under the same load."""
    sched = sched or SchedulerConfig.from_replica(replica)
    n = max(1, int(clients))
    warm, count, sent = closed_run_requests(n, measured)
    mean_in, mean_out = lengths.mean_input_tokens, lengths.mean_output_tokens
    top = max_rate(replica, max(1, round(mean_in)), max(1, round(mean_out)), poisson=False).requests_per_second
    turn = n / top if top > 0 else 0.0
    reqs = [replace(q, arrival_s=min(q.arrival_s, turn)) for q in
            make_requests(lengths, ConstantArrivals(n / turn if turn > 0 else 1e9), sent, seed,
                          shared_prefix_tokens)]
    whole = simulate(replica, reqs, sched=sched, max_concurrency=n, seed=seed)
    return whole.window(warm, warm + count)


def closed_capacity(replica: Replica, lengths: LengthDistribution, ttft_slo_ms: float | None,
                    tpot_slo_ms: float | None, percentile: int | None, start: float, *, measured: int = MEASURED,
                    seed: int = 0, sched: SchedulerConfig | None = None,
                    shared_prefix_tokens: int = 0) -> tuple[float, Summary | None]:
    """The most clients a closed loop can have with the replica meeting the targets at `percentile` (None =
    mean), and the measured summary there; (0, None) when not one client does. A closed loop has no
    unbounded queue (its population is its clients), so the targets decide, and for one request size the KV
    swings of clients whose ages vary as real ones do (analytic_load.kv_places). On the grid of
    steady_capacity, in whole clients; `start`: the analytic capacity in clients."""
    percentile_key(percentile)

    def run(clients: float) -> tuple[bool, Summary]:
        summary = closed_run(replica, lengths, int(clients), measured=measured, seed=seed, sched=sched,
                             shared_prefix_tokens=shared_prefix_tokens).summary()
        return meets(summary, True, ttft_slo_ms, tpot_slo_ms, percentile) and not overfilled(clients), summary

    def overfilled(clients: float) -> bool:
        """Equal requests started one after another keep their ages evenly spread for ever, a phase no real
        population keeps (lengths vary, clients pause): past analytic_load.kv_places such a loop is a miss (Llama-3.1-8B
        200/800 on an RTX 4090 holds 66 staggered clients, collapses at 68; the limit is 61.5)."""
        return isinstance(lengths, FixedLengths) and overfills(
            replica, lengths.input_tokens, lengths.output_tokens, clients)

    if ttft_slo_ms is None:
        # no TTFT target: clients past what vLLM runs at once only wait, which no target limits, so a loop that
        # meets the targets there meets them with any number of clients (the analytic capacity stands); searching
        # up from the analytic figure -- 3.7e10 clients for a loop without targets -- allocated a 1 TiB array
        sched = sched or SchedulerConfig.from_replica(replica)
        engine = _simulated_clients(sched, max(1, round(lengths.mean_input_tokens)), start)
        if start > engine:
            ok, at_engine = run(engine)
            if ok:
                return start, at_engine
            start = engine
    clients, summary = grid_search(run, start, lambda x: float(whole_clients(x)))
    if summary is None or clients < 1:
        return 0.0, None
    return clients, summary


OVER_ADMISSION = 1.02
"""A closed loop churns when vLLM may run this many times the steady population or more (max_num_seqs above
what the KV cache holds in steady state); below it the extra clients only queue (analytic_load.at_concurrency)."""
KV_BOUND_SLACK = 1e-3
"""The KV cache bounds the largest stable rate when its running sequences are this close to what it runs without
preempting (analytic_load.kv_places)."""
QUEUE_CLIENTS = 256
"""Clients simulated beyond those vLLM can run at once: enough to keep its waiting queue from ever emptying;
every client beyond them only waits longer (Little's law), so the engine's steady state is theirs."""
SIMULATED_STEPS_LIMIT = 200_000
"""closed_loop_point's run is skipped beyond about this many engine steps (a few seconds of CPU): a loop of
requests with 10^6 output tokens would take minutes to simulate."""


def churns(replica: Replica, input_tokens: int, output_tokens: int, clients: float) -> bool:
    """Whether a closed loop of `clients` runs past the population of the replica's largest stable rate with
    room left in max_num_seqs: vLLM then admits more prompts than its KV cache holds in steady state and
    preempts (the analytic closed loop assumes the extra clients wait; see closed_loop_point). Only when the
    KV cache is what bounds that rate: where the step budget or the API server binds first, the extra clients
    queue with the KV cache to spare (a 0.5B model's 4,000-token prompts on an H100 were simulated as a churn
    the cache never had: 0 preemptions)."""
    top = max_rate(replica, input_tokens, output_tokens, poisson=False)
    kv_bound = top.running >= (1 - KV_BOUND_SLACK) * kv_places(replica, input_tokens, output_tokens)
    return (top.requests_per_second > 0 and kv_bound
            and replica.config.max_num_seqs > OVER_ADMISSION * top.running
            and (clients > top.concurrency or overfills(replica, input_tokens, output_tokens, clients)))


def overfills(replica: Replica, input_tokens: int, output_tokens: int, clients: float) -> bool:
    """Whether `clients` requests running at once hold more than the KV cache `KV_FLUCTUATION_SD` standard
    deviations above their mean (analytic_load.kv_places). Llama-3.1-8B at 200/800 on an RTX 4090 holds 42,800
    tokens, 70 mean-sized requests: 64-68 clients were planned at 2,102-2,189 tokens/s with the cache "not
    full", where `gpuopt simulate` preempts 899-2,069 times per 1,500 requests and serves 1,916-1,813; a closed
    loop started one client after another collapses at 68 (393 preemptions, mean TTFT 1.5 s against 120 ms) and
    holds at 66; the places are 61.5."""
    return clients > kv_places(replica, input_tokens, output_tokens)


def closed_top(replica: Replica, input_tokens: int, output_tokens: int, ttft_slo_ms: float | None = None,
               tpot_slo_ms: float | None = None) -> LoadPoint:
    """The largest closed loop the replica serves within the targets in steady state: analytic_load.max_rate's
    (poisson=False) when its clients do not overfill the KV cache (`overfills`, the clients `fit --concurrency`
    simulates), else the most clients that do not (analytic_load.kv_places; analytic_load.at_concurrency there).
    max_rate keeps the decoding requests within kv_places already; this counts the clients in their TTFT as well (61.7
    clients of Llama-3.1-8B 200/800 on an RTX 4090 for 61.5 places), so a plan's clients are never ones fit
    would call a churn. Past the places vLLM admits prompts while blocks are free, the running sequences grow
    out of the cache and it preempts: counted at the mean population, the loop was planned at 70.6 such clients
    at 121 ms TTFT, where 68 collapse to 1.5 s."""
    top = max_rate(replica, input_tokens, output_tokens, ttft_slo_ms, tpot_slo_ms, poisson=False)
    cap = kv_places(replica, input_tokens, output_tokens)
    if top.concurrency <= cap:
        return top
    point = at_concurrency(replica, cap, input_tokens, output_tokens)
    return replace(point, limit=(
        f"{cap:,.1f} clients: with more, the KV their requests hold swings past the cache {KV_FLUCTUATION_SD:g} "
        f"standard deviations above its mean, where vLLM preempts and recomputes"))


def closed_loop_steps(sched: SchedulerConfig, input_tokens: int, output_tokens: int, clients: float) -> float:
    """About how many engine steps closed_loop_point's run takes: each turn of the loop is at least the
    longest request's decode (output steps) and the prompts' chunks (prompt tokens / max_num_batched_tokens
    per request): 2 turns of warm-up, the measured requests' (max(400, clients) of them), 1 of tail."""
    engine = _simulated_clients(sched, input_tokens, clients)
    turns = 3 + math.ceil(max(engine, MEASURED) / engine)
    prefill = engine * input_tokens / sched.max_num_batched_tokens
    return turns * (output_tokens + prefill)


def _simulated_clients(sched: SchedulerConfig, input_tokens: int, clients: float) -> int:
    """QUEUE_CLIENTS more than vLLM can ever run at once (max_num_seqs, or the requests whose prompts alone fill
    the blocks), or all the clients when fewer."""
    admissible = min(sched.max_num_seqs, sched.num_gpu_blocks / max(sched.pool.blocks_held(input_tokens), 1e-9))
    return max(1, min(math.ceil(clients), math.ceil(admissible) + QUEUE_CLIENTS))


def closed_loop_point(replica: Replica, sched: SchedulerConfig, input_tokens: int, output_tokens: int,
                      clients: float, *, seed: int = 0) -> tuple[LoadPoint, Summary]:
    """The simulated steady state of a closed loop of `clients` (`vllm bench serve --max-concurrency N
    --request-rate inf`) past saturation, as a LoadPoint, with the measured requests' summary.

    Why simulate: past the population its KV cache holds, vLLM does not leave the extra clients in its queue.
    It admits prompts while blocks are free (up to max_num_seqs), the running sequences then grow out of the
    pool, and the newest is preempted and recomputed later (scheduler.py: `_preempt_request`, the request
    goes back to the head of the queue with its progress dropped). The churn costs prefill work and lengthens
    the steps: Qwen3-8B 500/200 on an H100 with 2,000 clients sustains 28 requests/s in the simulator, where
    the analytic loop (which assumes the extra clients wait) gave 41.

    The run: min(clients, QUEUE_CLIENTS more than vLLM can ever run at once -- max_num_seqs, or the requests
    whose prompts alone fill the blocks) clients, started over one turn of the loop; 2 x that many requests
    to reach the churn's steady state, max(400, that many) measured, and as many again after them so that the
    measured ones finish under the same load. The rate is Little's law on the simulated clients (every one is
    always in flight: simulated clients / the measured requests' mean end-to-end latency); TPOT the measured
    requests' mean; TTFT Little's law over all `clients`: clients = rate x (TTFT + (output - 1) x TPOT), so
    the clients beyond the simulated ones add their wait."""
    engine = _simulated_clients(sched, input_tokens, clients)
    # the clients start one after another over one turn of the loop (closed_run): equal requests started
    # together stay in lockstep (all prefill, then all decode), a phase no population of real clients keeps
    window = closed_run(replica, FixedLengths(input_tokens, output_tokens), engine, sched=sched, seed=seed)
    summary = window.summary()
    rate = engine / float(window.e2el_s.mean())
    tpot = float(summary["mean_tpot_ms"])
    ttft = max(clients / rate * 1e3 - max(output_tokens - 1, 0) * tpot, float(summary["mean_ttft_ms"])) \
        if rate > 0 else math.inf
    per_k = 1000 * window.preemptions / closed_run_requests(engine, MEASURED)[2]  # the whole run's (window)
    held = clients * replica_held_tokens(replica, input_tokens, output_tokens)
    what = "more than" if held > replica.kv_capacity_tokens else "close to what"  # churns: over, or overfills
    # Little's law on the decode phase and the prompts' steps
    running = rate * (max(output_tokens - 1, 0) * tpot + float(summary["mean_itl_ms"])) * 1e-3
    point = LoadPoint(requests_per_second=rate, concurrency=clients, running=running, step_ms=tpot,
                      tpot_ms=tpot, ttft_ms=ttft, output_tokens_per_second=rate * output_tokens, stable=True,
                      limit=(f"{clients:,.0f} clients, {what} the KV cache holds in steady state: vLLM admits up "
                             f"to max_num_seqs {sched.max_num_seqs:,} and preempts (recomputes) the newest when the "
                             f"cache runs out ({per_k:,.0f} preemptions per 1,000 requests); simulated steady state"))
    return point, summary
