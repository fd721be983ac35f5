"""How to benchmark a planned deployment so that the benchmark measures the load the plan is sized for.

A plan's latencies are the replica's steady state at its planned load. `vllm bench serve` measures from an idle
server, and where requests live long and slow each other down (long outputs near a loose TPOT target) its
default run of 1,000 prompts ends before the running batch has settled: it reads a lighter load than the plan's
and a user would conclude the plan has headroom it does not have (physics/bench_run.py). For such deployments
the plan says how many prompts a run needs, and which of its requests to judge.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from gpuopt.inputs.workload import Workload
from gpuopt.physics.architecture import ModelArchitecture
from gpuopt.physics.bench_run import BenchFluid, BenchRun, length_classes, prompts_within
from gpuopt.physics.steady_state import length_population
from gpuopt.planner.load import planned_latency
from gpuopt.planner.program import Solution
from gpuopt.planner.simcapacity import length_distribution, replica_of

DEFAULT_PROMPTS = 1000  # `vllm bench serve --num-prompts` (vllm/benchmarks/serve.py: "Default 1000")
NOTE_SHORTFALL = 0.05  # said when the default run's mean TPOT reads this much below the steady state or more
AIM_SHORTFALL = 0.02  # the run it recommends is within this of the steady state
AGREE = 0.25  # the fluid's steady TPOT within this of the plan's at the planned load, or it is not said
LONGEST_RUN_S = 3600.0  # a recommended run longer than this becomes a window to judge in a shorter one


def _round_up(n: float) -> int:
    """Up to two significant digits (6,630 -> 6,700): a count to type, not a figure to trust to the request."""
    if n <= 100:
        return int(math.ceil(n))
    scale = 10 ** (int(math.log10(n)) - 1)
    return int(math.ceil(n / scale) * scale)


def _rate_text(rate: float) -> str:
    """A request rate to type: three significant digits, never in exponent form."""
    return f"{rate:.0f}" if rate >= 100 else f"{rate:.3g}"


def _duration(seconds: float) -> str:
    if seconds < 60:
        return "under a minute"
    if seconds < 3600:
        return f"about {seconds / 60:,.0f} min"
    return f"about {seconds / 3600:,.1f} h"


def bench_notes(solution: Solution, archs: Mapping[str, ModelArchitecture]) -> list[str]:
    """One note per request-rate workload and instance type whose replicas a default `vllm bench serve` run would
    measure more than NOTE_SHORTFALL light, at the plan's per-replica load. A closed loop (`concurrency:`) starts
    its clients at once and fills in one lifetime: nothing to say beyond the convoy note (solve.convoy_notes).

    Said only where the fluid follows the plan's replica: its steady population fits the KV cache and
    max_num_seqs (BenchFluid.holds) and its steady TPOT is within AGREE of the plan's at the planned load (the
    review found a mix with a 1 % tail of 30,000-token outputs whose fluid TPOT was 132 ms beside the plan's
    25.8, and advised 3.7 million prompts)."""
    carried = solution.carried()
    notes: list[str] = []
    seen: set[tuple[str, ...]] = set()
    for a in solution.assignments:
        c = a.candidate
        w, o = c.workload, c.offering
        key = (w.name, o.provider, o.sku, o.region)
        if w.requests_per_second is None or c.evaluation.point is None or key in seen:
            continue
        seen.add(key)
        share = w.demand / max(carried[w.name], 1e-9)
        rate = c.capacity * share  # what the plan sends one replica
        if rate <= 0:
            continue
        classes = length_classes(*length_population(length_distribution(w)))
        fluid = BenchFluid(replica_of(c, archs[w.name]), classes, rate)
        # most deployments hold too few requests for their fill to weigh on 1,000 prompts: no run needed
        if not fluid.holds() or fluid.deficit_bound() < NOTE_SHORTFALL * DEFAULT_PROMPTS:
            continue
        short = fluid.run(DEFAULT_PROMPTS)
        if short is None or short.ratio > 1 - NOTE_SHORTFALL:
            continue
        plan_tpot = planned_latency(c, archs[w.name], share).tpot_ms * 1e-3
        if not abs(short.steady_tpot_s / max(plan_tpot, 1e-12) - 1) <= AGREE:
            continue
        probe = fluid.run(fluid.probe_prompts(DEFAULT_PROMPTS))
        if probe is None:
            continue
        notes.append(_note(w, f"{o.provider} {o.sku} ({o.region})", rate, short, probe))
    return notes


def _note(w: Workload, where: str, rate: float, short: BenchRun, probe: BenchRun) -> str:
    prompts = _round_up(prompts_within(probe, AIM_SHORTFALL))
    skip, tail = _round_up(probe.settled_after), _round_up(probe.light_at_end)
    burst = f" --burstiness {w.arrival_burstiness:g}" if w.arrival_burstiness != 1.0 else ""
    flags = f"--request-rate {_rate_text(rate)}{burst}"
    window = f"after the first {skip:,}" + (f" and before the last {tail:,}" if tail else "")
    head = (f"workload {w.name} on {where}: `vllm bench serve` starts from an idle server (its --num-warmups "
            f"requests run at once, before the timed run); at the planned {_rate_text(rate)} requests/s per replica "
            f"the running batch takes about {skip:,} requests to fill and settle, so the default "
            f"{DEFAULT_PROMPTS:,} prompts read a mean TPOT about {1 - short.ratio:.0%} below the plan's, and a "
            "lighter TTFT; ")
    if prompts / rate <= LONGEST_RUN_S:
        return (head + f"benchmark one replica with at least {prompts:,} prompts (`{flags} --num-prompts "
                f"{prompts}`, {_duration(prompts / rate)}), or judge only the requests {window} of a longer run "
                "(`--save-result --save-detailed` keeps each request's TTFT and ITLs)")
    # a run that long is not a benchmark anyone runs: judge a window of a shorter one instead
    least = _round_up(2 * (probe.settled_after + probe.light_at_end))
    return (head + f"a run within {AIM_SHORTFALL:.0%} of it on average needs about {prompts:,} prompts "
            f"({_duration(prompts / rate)}): judge only the requests {window} of a run of at least {least:,} "
            f"(`{flags} --num-prompts {least} --save-result --save-detailed` keeps each request's TTFT and ITLs)")
