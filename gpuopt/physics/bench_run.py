"""What a `vllm bench serve` run measures against a replica that starts idle, beside the steady state a plan is
sized for.

`vllm bench serve` sends its prompts to an idle server. Its `--num-warmups` requests do not change that: they are
sent all at once and gathered before the timed run starts (vllm/benchmarks/serve.py of 0.19, `benchmark`:
"Warming up with N requests...", `asyncio.gather`, then "Starting main benchmark run..."), so they warm the
kernels and the caches, not the running batch. The first requests of the run decode beside a batch that is still
filling, the last ones beside one draining, and both read a shorter TPOT than the steady state. How long the
filling lasts is the population's relaxation time, not one lifetime: each sequence decoding lengthens every step
(the step reads its KV), so the population approaches its steady state at (1 - beta) / lifetime
(analytic_load.relaxation; near a loose TPOT target beta is 0.6-0.9). A run of the default 1,000 prompts of
Llama-3.1-8B at 200 / 800 tokens on an H100 at 13.5 requests/s (77 % of its capacity) reads a mean TPOT of
18.3 ms in `gpuopt simulate` where 30,000 prompts read 22.0 and the steady state is 21.8 (at 14 requests/s,
benchmarks/bench_warmup.py: 0.840 of the steady state in the simulator, 0.847 in the fluid).

The run is followed here as a fluid: requests arrive evenly at the run's rate, in classes of prompt and output
length (the traffic's, grouped by output length), and every request in flight advances one token a step, so all
share one step clock phi(t) = integral of dt / T(t), and a request of O tokens that arrives at s leaves when
phi has grown by O. The step T(t) is the replica's (latency.step_time_s) at the population and mean context in
flight then, with the prompt tokens spread evenly over the steps while requests arrive. Each request's TPOT is its
lifetime over its tokens. The fluid has no swings, so its steady state is the mean-field one (N = rate O T), and
its transient the mean-field relaxation. Against the simulator's runs from an idle replica (8 replicas and shapes
at 80 % of capacity, 1,000 and 3,000 prompts, benchmarks/bench_warmup.py) the fluid's run over its steady state is
within 0.6 points of the simulator's or above it in every run (the simulator reads as light or lighter: median
+1.0 point, at most +4.3), so the shortfall a plan's note quotes is about the least a run will show. What it does
not follow: the prompt queue's own start (Llama-3.1-8B at 1,000 / 250 tokens at 17.6 requests/s on an H100: the
simulator's 1,000 prompts read 5.3 % light, the fluid's 1.0 %).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from gpuopt.physics.analytic_load import replica_held_tokens
from gpuopt.physics.latency import Replica, step_time_s

STEPS_PER_LIFE = 50  # time steps of the fluid per mean request lifetime (figures move < 0.5 % from 50 to 400)
MAX_CLASSES = 16  # length classes of a mix (equal shares of requests, by output length)
SETTLED = 0.03  # a request has settled when its TPOT is within 3 % of the steady state's
PROBE_LIVES = 40  # the long run that measures the whole fill and drain lasts this many mean lifetimes at least
MAX_STEADY_FACTOR = 1e3  # no steady state when the step would exceed this many times the idle one
MAX_GRID = 20_000  # time steps of one run at most: coarser than STEPS_PER_LIFE for runs of many lifetimes


@dataclass(frozen=True)
class LengthClass:
    input_tokens: float
    output_tokens: float
    share: float  # of the requests


@dataclass(frozen=True)
class BenchRun:
    """A fluid `vllm bench serve` run of `prompts` requests from an idle replica."""

    prompts: int
    rate: float
    steady_tpot_s: float  # the fluid's steady state (every request's TPOT once the population has settled)
    mean_tpot_s: float  # the run's mean TPOT over its requests, as `vllm bench serve` averages it
    settled_after: int  # requests sent before the first whose TPOT is within SETTLED of the steady state (the fill)
    light_at_end: int  # the last requests, which read SETTLED or more light again as the batch drains

    @property
    def ratio(self) -> float:
        """The run's mean TPOT over the steady state's: below 1 where the run reads a lighter load."""
        return self.mean_tpot_s / self.steady_tpot_s


def length_classes(ins: NDArray[np.float64], outs: NDArray[np.float64], weight: NDArray[np.float64],
                   most: int = MAX_CLASSES) -> list[LengthClass]:
    """The traffic's lengths as at most `most` classes: each bin of a short histogram, else groups of equal
    share by output length (the fill's time scale is the outputs'), each at its group's mean lengths."""
    share = weight / weight.sum()
    if len(ins) <= most:
        return [LengthClass(float(i), float(o), float(s)) for i, o, s in zip(ins, outs, share, strict=True) if s > 0]
    order = np.argsort(outs, kind="stable")
    edges = np.searchsorted(np.cumsum(share[order]), np.linspace(0, 1, most + 1)[1:-1], side="right")
    out = []
    for group in np.split(order, edges):
        s = float(share[group].sum())
        if s > 0:
            out.append(LengthClass(float(share[group] @ ins[group] / s), float(share[group] @ outs[group] / s), s))
    return out


class BenchFluid:
    """The fluid run of one replica's traffic at one rate (see the module docstring); `steady` is None past the
    replica's capacity."""

    def __init__(self, r: Replica, classes: list[LengthClass], rate: float) -> None:
        self.r, self.rate = r, rate
        self.ins = np.array([c.input_tokens for c in classes])
        self.outs = np.maximum(np.array([c.output_tokens for c in classes]), 1.0)
        self.share = np.array([c.share for c in classes])
        self.share = self.share / self.share.sum()
        self.mean_in = float(self.share @ self.ins)
        self.mean_out = float(self.share @ self.outs)
        self.budget = float(r.config.max_num_batched_tokens)
        self.context = float((self.share * self.outs) @ (self.ins + self.outs / 2) / (self.share @ self.outs))
        self.steady = self._steady() if rate > 0 else None

    def _prompts(self, t_step: float) -> float:
        return min(self.rate * self.mean_in * t_step, self.budget)

    def _steady(self) -> float | None:
        """The step T with T = step(rate O T running, their mean context, the prompts of T): None past the
        replica's capacity (the step grows without bound)."""
        excess = self._excess
        lo = step_time_s(self.r, 0.0, self.context, 0.0, self.mean_in / 2)
        hi = 2 * lo
        while excess(hi) > 0:
            hi *= 2
            if hi > MAX_STEADY_FACTOR * lo:
                return None
        for _ in range(100):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if excess(mid) > 0 else (lo, mid)
            if hi - lo < 1e-9 * hi:
                break
        return (lo + hi) / 2

    def _excess(self, t: float) -> float:
        """The steady state's step at a step of t (its population rate O t at their time-weighted mean context,
        the prompts of t) less t: positive below the steady step, negative above."""
        running = self.rate * self.mean_out * t
        return step_time_s(self.r, running, self.context, self._prompts(t), self.mean_in / 2) - t

    def holds(self) -> bool:
        """Whether the replica holds the fluid's steady population: what its classes hold on average (in the
        cache's units: analytic_load.replica_held_tokens) within the KV cache, their number within max_num_seqs.
        Past either, vLLM queues the rest and the fluid, which runs them all, reads a step the replica never takes
        (review: a 1 % tail of 30,000-token outputs held 2.24 M tokens in a 1.25 M cache)."""
        if self.steady is None:
            return False
        running = self.rate * self.share * self.outs * self.steady
        held = sum(n * replica_held_tokens(self.r, i, o)
                   for n, i, o in zip(running, self.ins, self.outs, strict=True))
        return held <= self.r.kv_capacity_tokens and float(running.sum()) <= self.r.config.max_num_seqs

    def deficit_bound(self) -> float:
        """An upper bound on a run's deficit (requests x their relative shortfall) in its fill and drain, cheap:
        the rate x the longest class's lifetime x (2 + the relaxation time in lifetimes). The fill lasts the
        longest lifetime plus the relaxation's exponential tail (whose integral is one relaxation time), the drain
        one longest lifetime, and no request reads more than all of the steady step light. The relaxation is
        1 / (1 - s), s the slope of the steady step in itself (each sequence and prompt token a step adds
        lengthens the step). The mean lifetime in place of the longest (until the review) let a mix with a rare
        long tail read 15 % light where the bound said 2.5 %."""
        steady = self.steady
        if steady is None:
            return math.inf
        h = 1e-4 * steady
        slope = 1 + (self._excess(steady + h) - self._excess(steady - h)) / (2 * h)
        if slope >= 1:
            return math.inf
        return self.rate * float(self.outs.max()) * steady * (2 + 1 / (1 - slope))

    def probe_prompts(self, prompts: int) -> int:
        """A run long enough to hold the whole fill and drain: PROBE_LIVES lifetimes of the mean request, plus as
        many of the longest, and at least `prompts`."""
        if self.steady is None:
            return prompts
        lives = PROBE_LIVES * (1 + float(self.outs.max()) / self.mean_out)
        return max(prompts, int(math.ceil(self.rate * self.steady * self.mean_out * lives)))

    def run(self, prompts: int) -> BenchRun | None:
        steady = self.steady
        if steady is None:
            return None
        rate, ins, outs, share = self.rate, self.ins, self.outs, self.share
        counted = share * (outs > 1)  # `vllm bench serve` leaves one-token outputs out of its TPOT
        if not counted.any():
            return None
        sending = prompts / rate  # the last request is sent then
        longest = float(outs.max())
        span = sending + 4 * longest * steady
        dt = max(steady * self.mean_out / STEPS_PER_LIFE, span / MAX_GRID)
        cap = int(math.ceil(span / dt)) + 2
        times = np.arange(cap + 1) * dt
        phi = np.zeros(cap + 1)  # the step clock: tokens a request in flight has made since t = 0
        area = np.zeros(cap + 1)  # the integral of phi over [0, t]
        t_step = step_time_s(self.r, 0.0, self.mean_in, 0.0, self.mean_in / 2)
        j = 0
        while True:
            t = times[j]
            end = min(t, sending)  # arrivals so far
            # the oldest request of each class still in flight arrived when phi was phi(t) - O
            born = np.interp(phi[j] - outs, phi[:j + 1], times[:j + 1], left=0.0)
            span = np.maximum(end - born, 0.0)
            if t >= sending and not span.any():
                break
            area_end = np.interp(end, times[:j + 1], area[:j + 1])
            area_born = np.interp(born, times[:j + 1], area[:j + 1])
            running = rate * share * span
            held = rate * share * np.where(span > 0, (ins + phi[j]) * span - (area_end - area_born), 0.0)
            n = float(running.sum())
            context = float(held.sum()) / n if n > 0 else self.mean_in
            prompts_now = self._prompts(t_step) if t < sending else 0.0
            t_step = step_time_s(self.r, n, context, prompts_now, self.mean_in / 2)
            if j + 1 > cap:  # cannot happen while the steps stay below the steady one; a guard for the arrays
                break
            phi[j + 1] = phi[j] + dt / t_step
            area[j + 1] = area[j] + dt * (phi[j] + phi[j + 1]) / 2
            j += 1
        # each arrival instant's requests, class by class: they leave when phi has grown by their output
        sent = times[times < sending]
        left = np.interp(np.add.outer(np.interp(sent, times[:j + 1], phi[:j + 1]), outs), phi[:j + 1],
                         times[:j + 1])
        tpot = (left - sent[:, None]) / outs  # seconds per token, by arrival instant and class
        per_instant = tpot @ counted / counted.sum()
        light = per_instant < (1 - SETTLED) * steady
        # the fill: the instants before the first settled one; the drain: the light instants at the end
        first = int(np.argmin(light)) if not light.all() else len(light)
        last = len(light) - int(np.argmin(light[::-1])) if not light.all() else 0
        return BenchRun(prompts=prompts, rate=rate, steady_tpot_s=steady, mean_tpot_s=float(per_instant.mean()),
                        settled_after=int(math.ceil(first * dt * rate)),
                        light_at_end=int(math.ceil((len(light) - max(last, first)) * dt * rate)))


def bench_runs(r: Replica, classes: list[LengthClass], rate: float, prompts: int) -> tuple[BenchRun, BenchRun] | None:
    """(a run of `prompts` requests at `rate`, a run long enough to hold the whole fill and drain) from an idle
    replica; None where the rate has no steady state."""
    fluid = BenchFluid(r, classes, rate)
    short = fluid.run(prompts)
    probe = fluid.run(fluid.probe_prompts(prompts))
    if short is None or probe is None:
        return None
    return short, probe


def prompts_within(probe: BenchRun, shortfall: float) -> int:
    """The fewest prompts whose run's mean TPOT is within `shortfall` of the steady state: the probe's whole
    deficit (its fill and drain, requests x their relative shortfall) over `shortfall`, as long as the fill and
    the drain do not overlap (a run longer than both)."""
    deficit = probe.prompts * (1 - probe.ratio)
    return int(math.ceil(max(deficit / shortfall, 2 * (probe.settled_after + probe.light_at_end))))
