"""A replica serving a length mix: its capacity over the mix, and its latency at a given load (analytic).

Why not the capacity at the mean request: on Melange's Chatbot Arena histogram (Llama-2-7B, A10 and A100)
the capacity at the mean size is 1.39-1.41x the capacity over the mix, so planning at the mean buys about
28 % too few GPUs. Nor the share-weighted mean of per-bin capacities, which is the same mistake: a replica
that can serve 10 short or 1 long request per second cannot serve 5.5 of a half-and-half mix.

The combination used is the rate at which the mixed stream meets the targets. A replica receiving the mix at
rate R spends the share R s_i / cap_i of its capacity on bin i (cap_i: the replica's capacity for bin i
alone), so the mixed stream fills the replica when

    sum_i R s_i / cap_i = 1,   R_mix = 1 / sum_i (s_i / cap_i)     (the share-weighted harmonic mean)

With the latency model's affine step (T = alpha / (1 - beta R); beta is linear in the request's tokens and
context, alpha is the weights and overhead every step pays once), this is exact where TPOT or a scheduler
limit binds: the mix's beta is sum_i s_i beta_i and each cap_i = (1 - alpha / target) / beta_i, which gives the
formula above. Every bin then runs at the same fraction u = R / R_mix of its own capacity and sees the same
step time, which is what lets the latency of the mix be read from per-bin steady states at u.

TTFT is per request and differs by bin, so cap_i is taken with the TPOT target and the scheduler limits only;
the mix then runs at the largest u <= 1 at which the TTFT target holds over the mix: the share-weighted mean,
or with `slo.percentile` the percentile over the bins' mean TTFTs (the length mix's spread, without the
queueing spread: the simulator gives that). TPOT likewise.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from statistics import NormalDist

from gpuopt.errors import SloUnreachableError
from gpuopt.inputs.workload import ServingTarget
from gpuopt.physics import analytic_load, steady_state
from gpuopt.physics.analytic_load import LoadPoint
from gpuopt.physics.latency import Replica
from gpuopt.physics.traffic import SHAREGPT_MIN_TOKENS, SHAREGPT_SIGMA

Bin = tuple[int, int, float]  # input tokens, output tokens, share
U_TOLERANCE = 5e-3  # as analytic_load.RATE_TOLERANCE: half a percent of the capacity


SHAREGPT_QUANTILES = 5  # bins per side for a ShareGPT-shaped mix: 25 bins, quintile midpoints


def _lognormal_quantiles(mean: float) -> list[int]:
    """The mean of each of SHAREGPT_QUANTILES equal-probability slices of the simulator's ShareGPT shape (a
    log-normal of sigma SHAREGPT_SIGMA with this mean), floored as its sampler floors them. Slice means, not
    midpoints, so the bins keep the distribution's mean: E[X; Z in (a, b)] = mean (Phi(b - s) - Phi(a - s))."""
    n, sigma, phi = SHAREGPT_QUANTILES, SHAREGPT_SIGMA, NormalDist()
    cuts = [-math.inf] + [phi.inv_cdf(k / n) for k in range(1, n)] + [math.inf]
    cdf = [0.0 if c == -math.inf else 1.0 if c == math.inf else phi.cdf(c - sigma) for c in cuts]
    return [max(SHAREGPT_MIN_TOKENS, round(mean * n * (cdf[k + 1] - cdf[k]))) for k in range(n)]


def length_bins(w: ServingTarget) -> tuple[Bin, ...]:
    """The workload's (input, output, share) bins: its histogram; for `dataset: sharegpt` the simulator's
    ShareGPT shape cut into quantile bins (prompt and reply drawn independently, as the simulator draws them);
    else its mean request alone."""
    if w.lengths is not None and w.lengths.histogram is not None:
        return tuple((b.input_tokens, b.output_tokens, b.share) for b in w.lengths.histogram if b.share > 0)
    if w.lengths is not None and w.lengths.dataset == "sharegpt":
        share = 1.0 / SHAREGPT_QUANTILES**2
        return tuple((i, o, share) for i in _lognormal_quantiles(w.input_tokens)
                     for o in _lognormal_quantiles(w.output_tokens))
    return ((w.input_tokens, w.output_tokens, 1.0),)


def has_mix(w: ServingTarget) -> bool:
    return len(length_bins(w)) > 1


def percentile_of(values: list[float], shares: list[float], percentile: int) -> float:
    """The `percentile`-th percentile of a discrete distribution (value v_i with probability s_i): the smallest
    value whose cumulative share reaches percentile / 100."""
    target = percentile / 100 - 1e-12
    total = 0.0
    for value, share in sorted(zip(values, shares, strict=True)):
        total += share
        if total >= target:
            return value
    return max(values)


@dataclass(frozen=True)
class MixPoint:
    """A replica's steady state under the mix at one rate: means over requests, and a percentile."""

    point: LoadPoint  # rate, concurrency, means of TTFT and TPOT over the mix
    percentile: int | None
    ttft_percentile_ms: float | None
    tpot_percentile_ms: float | None


def _combine(points: list[LoadPoint], bins: tuple[Bin, ...], rate: float, percentile: int | None) -> MixPoint:
    shares = [s for _, _, s in bins]
    ttft = sum(s * p.ttft_ms for s, p in zip(shares, points, strict=True))
    # TPOT over the requests that have one, as `vllm bench serve` and the simulator count it (output > 1): a
    # one-token bin's TPOT of 0 (analytic_load.no_tpot_below_two) averaged in read 6.0 ms of a 12 ms decode
    decoding = [(s, p) for (_, o, s), p in zip(bins, points, strict=True) if o > 1]
    weight = sum(s for s, _ in decoding)
    tpot = sum(s * p.tpot_ms for s, p in decoding) / weight if weight > 0 else 0.0
    # Little's law over the mix: bin i arrives at rate R s_i and stays TTFT_i + (O_i - 1) TPOT_i
    concurrency = sum(rate * s * (p.ttft_ms + max(o - 1, 0) * p.tpot_ms) / 1e3
                      for (_, o, s), p in zip(bins, points, strict=True))
    stable = all(p.stable for p in points)
    limit = next((p.limit for p in points if p.limit), None)
    combined = LoadPoint(requests_per_second=rate, concurrency=concurrency,
                         running=sum(p.running for p in points),
                         step_ms=max(p.step_ms for p in points), tpot_ms=tpot, ttft_ms=ttft,
                         output_tokens_per_second=rate * sum(o * s for _, o, s in bins), stable=stable, limit=limit)
    if percentile is None:
        return MixPoint(combined, None, None, None)
    return MixPoint(combined, percentile, percentile_of([p.ttft_ms for p in points], shares, percentile),
                    percentile_of([p.tpot_ms for _, p in decoding], [s / weight for s, _ in decoding], percentile)
                    if decoding else 0.0)


class MixModel:
    """One replica and one workload's mix: per-bin capacities at the TPOT target, computed once."""

    def __init__(self, replica: Replica, w: ServingTarget, poisson: bool = True) -> None:
        """`poisson`: the workload's traffic is an open loop (analytic_load.at_rate, of the workload's
        burstiness); False for a closed loop's."""
        self.replica, self.bins, self.poisson = replica, length_bins(w), poisson
        self.burstiness = w.arrival_burstiness if poisson else 1.0
        self.ttft_slo, self.tpot_slo, self.percentile = w.slo.ttft_ms, w.slo.tpot_ms, w.slo.percentile
        # raises InfeasibleError when some bin misses the TPOT target even alone (conservative for a mix)
        self.caps = [analytic_load.max_rate(replica, i, o, None, self.tpot_slo, poisson=poisson,
                                            burstiness=self.burstiness).requests_per_second
                     for i, o, _ in self.bins]
        # a bin no rate serves (a request the KV cache or the step budget cannot hold at all) serves the mix at no
        # rate: capacity 0, a rejection, where 1 / sum(s / 0) was a ZeroDivisionError, exit 70 (review: a
        # ShareGPT tail past the model's context)
        self.dead = [(i, o, s) for (i, o, s), c in zip(self.bins, self.caps, strict=True) if c <= 0]
        self.full_rate = 0.0 if self.dead else 1.0 / sum(s / c for (_, _, s), c in zip(self.bins, self.caps,
                                                                                         strict=True))

    def at_fraction(self, u: float) -> MixPoint:
        """Every bin at the fraction u of its own capacity: the mix at rate u x full_rate."""
        points = [analytic_load.at_rate(self.replica, max(u * c, 1e-9), i, o, poisson=self.poisson,
                                        burstiness=self.burstiness)
                  for (i, o, _), c in zip(self.bins, self.caps, strict=True)]
        return _combine(points, self.bins, u * self.full_rate, self.percentile)

    def at_rate(self, rate: float) -> MixPoint:
        return self.at_fraction(rate / self.full_rate)

    def meets(self, m: MixPoint) -> bool:
        ttft = m.ttft_percentile_ms if m.ttft_percentile_ms is not None else m.point.ttft_ms
        tpot = m.tpot_percentile_ms if m.tpot_percentile_ms is not None else m.point.tpot_ms
        return (m.point.stable and (self.ttft_slo is None or ttft <= self.ttft_slo)
                and (self.tpot_slo is None or tpot <= self.tpot_slo * (1 + 1e-9)))

    def capacity(self) -> MixPoint:
        """The largest rate at which the mixed stream meets the targets (InfeasibleError when none does)."""
        if self.dead:
            i, o, share = max(self.dead, key=lambda b: b[2])
            none = self.at_fraction(0.0)
            return replace(none, point=replace(none.point, stable=False, limit=(
                f"requests of {i:,} + {o:,} tokens ({share:.1%} of the mix) run at no rate on this replica")))
        full = self.at_fraction(1.0)
        if self.meets(full):
            return full
        lo, hi = 0.0, 1.0
        if not self.meets(self.at_fraction(1e-6)):
            alone = self.at_fraction(1e-6)
            what = "p" + str(self.percentile) if self.percentile else "mean"
            lone = alone.ttft_percentile_ms or alone.point.ttft_ms
            target = self.ttft_slo or 0.0
            raise SloUnreachableError("ttft", target, lone, f"TTFT target {target:g} ms missed over the length mix "
                                      f"even at no load ({what} {lone:,.0f} ms)")
        while hi - lo > U_TOLERANCE * hi:
            mid = (lo + hi) / 2
            if self.meets(self.at_fraction(mid)):
                lo = mid
            else:
                hi = mid
        return self.at_fraction(lo)

    def at_concurrency(self, clients: float) -> MixPoint:
        """The mix in a closed loop of `clients` (the rate whose Little's-law concurrency is `clients`)."""
        lo, hi = 0.0, 1.0
        while self.at_fraction(hi).point.concurrency < clients and hi < 1e3:
            lo, hi = hi, hi * 2
        while hi - lo > analytic_load.CONCURRENCY_TOLERANCE * hi:
            mid = (lo + hi) / 2
            if self.at_fraction(mid).point.concurrency < clients:
                lo = mid
            else:
                hi = mid
        return self.at_fraction(max(lo, 1e-9))


def capacity_point(replica: Replica, w: ServingTarget, poisson: bool = True) -> LoadPoint:
    """The replica's capacity for the workload: analytic_load.max_rate for one request size (steady_state.closed_top
    for a closed loop, `poisson` False: at most the clients whose KV swings stay within the cache), the rate at
    which the mixed stream meets the targets for a histogram. `poisson`: as MixModel."""
    if not has_mix(w):
        if not poisson:  # a closed loop: at most the clients whose KV swings stay within the cache
            return steady_state.closed_top(replica, w.input_tokens, w.output_tokens, w.slo.ttft_ms, w.slo.tpot_ms)
        return analytic_load.max_rate(replica, w.input_tokens, w.output_tokens, w.slo.ttft_ms, w.slo.tpot_ms, poisson,
                                      w.arrival_burstiness)
    return MixModel(replica, w, poisson).capacity().point
