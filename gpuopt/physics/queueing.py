"""Waiting for KV-cache room under Poisson traffic: the Erlang C queue of vLLM's KV blocks.

vLLM admits a waiting request only when the KV cache has the blocks for its prompt (Scheduler.schedule:
KVCacheManager.allocate_slots returns None and the request stays at the head of the waiting queue). A cache
whose blocks hold, on average, `slots` running requests of a shape is then a queue with that many servers,
each request holding one for its decode. The analytic steady state (analytic_load.at_rate) used to stop at the
mean population (rate x holding time = slots) and charge nothing below it; but Poisson arrivals swing about
that mean, and a request arriving while the cache is full waits for a running one to finish -- up to a whole
decode lifetime. The wait grows with the lifetime, so a cache of the same size tolerates short-lived requests
near its limit and long-lived ones well below it:

- Qwen3-30B-A3B at 1,000 / 250 tokens on an H100 (a mean TTFT target of 0.5 s, decodes of ~11 s, ~107
  requests' room): the analytic limit was 10.09 requests/s; `gpuopt simulate` over 4,000 requests meets the
  target at 9.45 (mean TTFT 0.38 s) and misses it at 9.6 (0.91 s); with this wait, 9.61.
- Qwen3.5-35B-A3B at 1,000 / 250 (2 s target, 3 s decodes, ~12 requests' room): 3.91 before; 4,000
  simulated requests meet it at 3.6 (0.83 s) and miss narrowly at 3.77 (2.14 s); with this wait, 3.77.

The servers are the requests that run at once without outgrowing the cache (analytic_load.kv_places): vLLM does
not reserve a request's growth, it admits a prompt while its blocks are free, and the running requests' ages
are independent, so the KV they hold swings about its mean (each holds its prompt and half its output on
average, analytic_load.held_kv_tokens) and past the cache the newest is preempted and recomputed. Counting the
servers at the mean (until 2026-12-03) left that out and was optimistic where outputs dwarf prompts:
Qwen3-30B-A3B at 200 / 800, 2 s / 40 ms, 6.48 requests/s, where 4,000 simulated requests hold 6.1 and collapse
at 6.3 (now 6.16); gemma-3-27b at 200 / 800, 1.81 where they hold 1.61 and miss at 1.7 (now 1.59). The two
cases above move little (outputs short against prompts swing little): 9.52 and 3.75.

Each request holds its place for its decode at the TPOT a Poisson request sees (analytic_load._StepMix.request_step,
since 2026-12-03), so the places busy are rate x O x that TPOT (the decode chain's mean batch), not the
mean-field batch: Qwen3.5-35B-A3B's case above 3.75 -> 3.62 (4,000 simulated requests meet 3.6), Qwen3-30B-A3B
at 200 / 800 6.16 -> 6.14, the first case 9.52; benchmarks/surrogate_capacity.py's KV-bound rows median 1.014
-> 0.992, all 90 |log error| 3.8 -> 3.1 %.

Since 2026-12-04 a place is held from the prompt's admission through its prefill to its last token and a
waiting prompt needs a whole place (analytic_load.place_held_s, whole_places): the first case 9.44, the second
3.03 (the surrogate benchmark's simulated capacity 3.12), and caches of 4-7 long prompts no longer optimistic
(docs/latency.md).

Since 2026-12-04 the queue is fed by peaked traffic and served in fixed lengths, at the cache's mean fill:

- the running population swings wider than Poisson, z times its mean (analytic_load._StepMix.
  population_peakedness: each arrival stretches the lifetimes of the requests it meets), which Hayward's
  approximation carries into Erlang C -- peaked traffic of a Erlangs on c servers waits as Poisson traffic of
  a / z on c / z of them;
- a request shape holds its place for one length, so the wait is M/D/c's, not M/M/c's (Cosmetatos'
  correction, deterministic_share: half at one server, a little more with many);
- the servers are the requests the cache holds at its mean fill (analytic_load.fill_places), not the ones it
  runs without ever preempting (kv_places, which stays the stability limit).

The three had offset one another: M/M/c's exponential lifetimes and the conservative servers stood in for the
missing swing. benchmarks/surrogate_capacity.py over 90 workloads: median |log error| 3.0 -> 2.5 %, p10 0.957
-> 0.978, largest 1.174 -> 1.122 (gemma-3-27b at 3,000 / 300 within 500 ms 1.17 -> 1.09, gpt-oss-120b on an
A100 1.16 -> 1.06); the first case above 9.447 (unchanged), the second 3.04 -> 3.09 (simulated 3.12).
"""

from __future__ import annotations

import math

import numpy as np

NEGLIGIBLE_SD = 8.0
"""Poisson tail beyond this many standard deviations below the servers is left out of Erlang B's sum (its
terms are below 1e-14 of the largest)."""
SPARE_PLACES = 1.0
"""Places (requests the KV cache and max_num_seqs run at once) an open loop keeps free on average: with fewer,
Poisson arrivals wait about a whole decode for room (C(c, c - 1) x holding / 1) and the queue is critical,
so analytic_load.at_rate calls the point unstable there and the capacity of a workload without a TTFT target stops
one place short of the mean-population limit (it printed the clamp's TTFT before: 743,552 ms for a 6,000/500
workload on an L4 with only a TPOT target)."""
KV_SWING_SD = 3.0
"""Standard deviations of the running requests' KV above its mean that the cache holds without preempting
(analytic_load.kv_places; the simulated steady state's check of the in-flight population, steady_state.
kv_fluctuation_fits, uses the same)."""
MAX_LOAD = 0.999
"""Largest server utilisation the wait is computed at: the queue is critical at 1 (an infinite mean wait); the
prefill queue is clamped at the same bound. Points past SPARE_PLACES are unstable: the clamp is reached
before them only in caches of over 1,000 places."""


def _erlang_b(servers: int, offered: float) -> float:
    """Erlang B (the blocking probability of `servers` busy servers under `offered` Erlangs): the Poisson(offered)
    mass at `servers` over its mass up to `servers`, summed in logs from NEGLIGIBLE_SD deviations below."""
    if servers <= 0:
        return 1.0
    if offered <= 0:
        return 0.0
    lo = max(0, int(offered - NEGLIGIBLE_SD * math.sqrt(offered)) - 1)
    lo = min(lo, servers)
    k = np.arange(lo + 1, servers + 1, dtype=float)
    log_p = np.concatenate(([lo * math.log(offered) - offered - math.lgamma(lo + 1)],
                            math.log(offered) - np.log(k)))
    log_p = np.cumsum(log_p)  # log P(X = lo), ..., log P(X = servers)
    top = float(log_p.max())
    mass = np.exp(log_p - top)
    return float(mass[-1] / mass.sum())


def _erlang_c_integer(servers: int, offered: float) -> float:
    if offered >= servers:
        return 1.0
    b = _erlang_b(servers, offered)
    return servers * b / (servers - offered * (1.0 - b))


def erlang_c(servers: float, offered: float) -> float:
    """Probability that an arrival waits in an M/M/c queue of `servers` (real: linear between the neighbouring
    integers, since a mean request's blocks rarely divide the cache) under `offered` Erlangs."""
    servers = max(servers, 1.0)
    low = math.floor(servers)
    c_low = _erlang_c_integer(low, offered)
    if servers == low:
        return c_low
    c_high = _erlang_c_integer(low + 1, offered)
    return c_low + (c_high - c_low) * (servers - low)


def kv_wait_s(slots: float, in_service: float, holding_s: float, peakedness: float = 1.0) -> float:
    """Mean wait for a free slot of `slots`, with `in_service` requests holding one for `holding_s` seconds on
    average (the offered load: rate x holding time), up to MAX_LOAD x slots, when the requests in service
    swing `peakedness` times as wide as a Poisson count: M/D/c's wait (deterministic_share of M/M/c's C(c, a)
    x holding / (c - a)) on c / z servers under a / z Erlangs (Hayward). Until 2026-12-04 the whole M/M/c wait
    on a Poisson count: right at the edge of both cases above by an offset of errors (the module's note)."""
    if slots <= 0 or holding_s <= 0 or in_service <= 0:
        return 0.0
    if not math.isfinite(peakedness):
        return math.inf
    if not peakedness >= 1.0:
        raise ValueError(f"a population's peakedness is at least 1 (Poisson): got {peakedness}")
    if peakedness != 1.0:  # Hayward: peaked traffic on c servers is Poisson traffic a / z on c / z of them
        slots, in_service = slots / peakedness, in_service / peakedness
    offered = min(in_service, MAX_LOAD * slots)
    if offered < slots - NEGLIGIBLE_SD * math.sqrt(slots):
        return 0.0  # a Poisson swing this far above the mean never comes
    return erlang_c(slots, offered) * holding_s / (slots - offered) * deterministic_share(slots, offered / slots)


def deterministic_share(servers: float, load: float) -> float:
    """M/D/c's mean wait over M/M/c's at utilisation `load` (Cosmetatos 1976):

        1/2 (1 + (1 - rho) (c - 1) (sqrt(4 + 5 c) - 2) / (16 rho c)),

    exactly 1/2 at one server (Pollaczek-Khinchine) and in heavy traffic, a little more with many servers at
    moderate load, never above 1. Below one server (a peaked population's c / z) it is taken as one server's."""
    if load <= 0.0:
        return 1.0
    c = max(servers, 1.0)
    # at most M/M/c's own wait: the correction grows as 1 / rho at light load (1.85 at 10 servers, 0.1 busy),
    # where it is not meant to apply, and against the interpolated Erlang C of 1-2 servers it left the wait a
    # floor at vanishing load that max_rate's search chased to rate 0 (QA: a hang)
    return min(0.5 * (1.0 + (1.0 - load) * (c - 1.0) * (math.sqrt(4.0 + 5.0 * c) - 2.0) / (16.0 * load * c)), 1.0)


def _lower_gamma_regularized(a: float, x: float) -> float:
    """P(a, x), the regularized lower incomplete gamma function (the gamma(a, 1) distribution's CDF at x): its
    power series below x = a + 1 and one minus Legendre's continued fraction for Q(a, x) above (modified Lentz),
    each with its prefactor x^a e^-x / Gamma taken in logs, so no term overflows (the series alone turned into
    inf x 0 = NaN past x ~ 709)."""
    if x <= 0.0:
        return 0.0
    log_front = a * math.log(x) - x - math.lgamma(a)
    if x < a + 1.0:
        term = total = 1.0 / a
        n = 0
        while abs(term) > 1e-15 * abs(total) and n < 100_000:
            n += 1
            term *= x / (a + n)
            total += term
        return min(math.exp(log_front + math.log(total)), 1.0)
    tiny = 1e-300
    b = x + 1.0 - a
    c = 1.0 / tiny
    d = 1.0 / b
    h = d
    for n in range(1, 100_000):
        an = -n * (n - a)
        b += 2.0
        d = an * d + b
        d = tiny if abs(d) < tiny else d
        c = b + an / c
        c = tiny if abs(c) < tiny else c
        d = 1.0 / d
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < 1e-15:
            break
    return max(1.0 - math.exp(log_front) * h, 0.0)


SETTLED_GAMMA_SCALE = 100.0
"""rate x burstiness x window past which arrivals_excess is its limit, (1 / b - 1) / 2: within 1e-12 of it from
here on for shapes 0.1-0.5 (3e-7 at 10)."""


def arrivals_excess(burstiness: float, rate: float, window_s: float) -> float:
    """How many more requests than Poisson's rate x window arrive within `window_s` after a request (the
    renewal function U(w) - rate x w of gamma gaps of shape b and mean 1 / rate: the sum over k of P(kb, rate
    b w), the k-th arrival's chance to fall within the window, less the mean). 0 for Poisson; for clumped
    arrivals (b < 1) it rises from about (rate b w)^b / Gamma(b + 1) at light load to (1 / b - 1) / 2 (the
    renewal theorem's second term) when the window holds many gaps: with shape 0.25 a request has a
    follower within one 3,000-token prefill a third of the time even at 0.07 requests/s. The arrivals whose
    shape is far below x = rate b w are certain to have come (P = 1 to double precision) and are counted, not
    summed one by one."""
    if rate <= 0.0 or window_s <= 0.0:
        return 0.0
    x = rate * burstiness * window_s
    if x >= SETTLED_GAMMA_SCALE:
        # the renewal theorem's limit, reached to 1e-12 by now: summing the gamma terms one by one past it took
        # 41 s a call at 1e9 requests/s (QA, 2026-12-04)
        return (1.0 / burstiness - 1.0) / 2
    spread = 12.0 * math.sqrt(x) + 12.0
    certain = max(math.floor((x - spread) / burstiness), 0)
    total = float(certain)
    k = certain + 1
    while True:
        a = k * burstiness
        total += _lower_gamma_regularized(a, x)
        if a > x + spread or k > certain + 1_000_000:
            return total - rate * window_s
        k += 1
