"""How to benchmark a planned deployment so that the benchmark measures the load the plan is sized for.

A plan's latencies are the replica's steady state at its planned load. `vllm bench serve` measures from an idle
server, and where requests live long and slow each other down (long outputs near a loose TPOT target) its
default run of 1,000 prompts ends before the running batch has settled: it reads a lighter load than the plan's
and a user would conclude the plan has headroom it does not have (physics/bench_run.py). For such deployments
the plan says how many prompts a run needs, and which of its requests to judge.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping

from gpuopt.physics.architecture import ModelArchitecture
from gpuopt.physics.bench_run import BenchFluid, length_classes, prompts_within
from gpuopt.physics.steady_state import length_population
from gpuopt.planner.program import Solution
from gpuopt.planner.simcapacity import length_distribution, replica_of

DEFAULT_PROMPTS = 1000  # `vllm bench serve --num-prompts` (vllm/benchmarks/serve.py: "Default 1000")
NOTE_SHORTFALL = 0.05  # said when the default run's mean TPOT reads this much below the steady state or more
AIM_SHORTFALL = 0.02  # the run it recommends is within this of the steady state


def _round_up(n: float) -> int:
    """Up to two significant digits (6,630 -> 6,700): a count to type, not a figure to trust to the request."""
    if n <= 100:
        return int(math.ceil(n))
    scale = 10 ** (int(math.log10(n)) - 1)
    return int(math.ceil(n / scale) * scale)


def bench_notes(solution: Solution, archs: Mapping[str, ModelArchitecture]) -> list[str]:
    """One note per request-rate workload and instance type whose replicas a default `vllm bench serve` run would
    measure more than NOTE_SHORTFALL light, at the plan's per-replica load. A closed loop (`concurrency:`) starts
    its clients at once and fills in one lifetime: nothing to say beyond the convoy note (solve.convoy_notes)."""
    carried: dict[str, float] = defaultdict(float)
    for a in solution.assignments:
        carried[a.candidate.workload.name] += a.candidate.capacity * a.replicas
    notes: list[str] = []
    seen: set[tuple[str, str, str]] = set()
    for a in solution.assignments:
        c = a.candidate
        w, o = c.workload, c.offering
        key = (w.name, o.provider, o.sku)
        if w.requests_per_second is None or c.evaluation.point is None or key in seen:
            continue
        seen.add(key)
        rate = c.capacity * w.demand / max(carried[w.name], 1e-9)  # what the plan sends one replica
        if rate <= 0:
            continue
        classes = length_classes(*length_population(length_distribution(w)))
        fluid = BenchFluid(replica_of(c, archs[w.name]), classes, rate)
        # most deployments hold too few requests for their fill to weigh on 1,000 prompts: no run needed
        if fluid.deficit_bound() < NOTE_SHORTFALL * DEFAULT_PROMPTS:
            continue
        short = fluid.run(DEFAULT_PROMPTS)
        if short is None or short.ratio > 1 - NOTE_SHORTFALL:
            continue
        probe = fluid.run(fluid.probe_prompts(DEFAULT_PROMPTS))
        if probe is None:
            continue
        prompts = _round_up(prompts_within(probe, AIM_SHORTFALL))
        skip, tail = _round_up(probe.settled_after), _round_up(probe.light_at_end)
        burst = f" --burstiness {w.arrival_burstiness:g}" if w.arrival_burstiness != 1.0 else ""
        notes.append(
            f"workload {w.name} on {o.provider} {o.sku}: `vllm bench serve` starts from an idle server (its "
            f"--num-warmups requests run at once, before the timed run); at the planned {rate:,.3g} requests/s per "
            f"replica the running batch takes about {skip:,} requests to fill and settle, so the default "
            f"{DEFAULT_PROMPTS:,} prompts read a mean TPOT about {1 - short.ratio:.0%} below the plan's, and a "
            f"lighter TTFT; benchmark one replica with at least {prompts:,} prompts (`--request-rate {rate:.3g}{burst} "
            f"--num-prompts {prompts}`, about {prompts / rate / 60:,.0f} min), or judge only the requests after the "
            f"first {skip:,} and before the last {tail:,} of a longer run (`--save-result --save-detailed` keeps "
            f"each request's TTFT and ITLs)")
    return notes
