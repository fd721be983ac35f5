"""The latency a planned replica shows at the load the plan puts on it, and at its capacity, labelled apart.

A plan sends each replica demand x (its capacity / the workload's planned capacity): with headroom 0.8 and
integer replicas that is at most 80 % of what it sustains, often much less. Reporting the latency at the
capacity instead (the SLO itself whenever TPOT binds) hides how much slack the plan has, and makes every
deployment look alike. Both are reported: `at_planned_load` and `capacity`.
"""

from __future__ import annotations

from dataclasses import replace

from gpuopt.physics import analytic_load
from gpuopt.physics.analytic_load import LoadPoint
from gpuopt.physics.architecture import ModelArchitecture
from gpuopt.physics.steady_state import percentile_key
from gpuopt.planner.candidates import CandidateResult
from gpuopt.planner.mix import MixModel, MixPoint, has_mix
from gpuopt.planner.plan import LatencyAt, plain
from gpuopt.planner.simcapacity import Summary, needs_simulation, replica_of, run, run_closed


def _latency_at(m: MixPoint, source: str = "analytic") -> LatencyAt:
    p = m.point
    return LatencyAt(requests_per_second=plain(p.requests_per_second), concurrency=plain(p.concurrency, 2),
                     ttft_ms=plain(p.ttft_ms, 2), tpot_ms=plain(p.tpot_ms, 3), percentile=m.percentile,
                     ttft_percentile_ms=None if m.ttft_percentile_ms is None else plain(m.ttft_percentile_ms, 2),
                     tpot_percentile_ms=None if m.tpot_percentile_ms is None else plain(m.tpot_percentile_ms, 3),
                     source="simulated" if source == "simulated" else "analytic")


def _simulated(s: Summary, rate: float, percentile: int | None) -> LatencyAt:
    key = None if percentile is None else percentile_key(percentile)
    return LatencyAt(requests_per_second=plain(rate), concurrency=plain(rate * float(s["mean_e2el_ms"]) / 1e3, 2),
                     ttft_ms=plain(float(s["mean_ttft_ms"]), 2), tpot_ms=plain(float(s["mean_tpot_ms"]), 3),
                     percentile=percentile,
                     ttft_percentile_ms=None if key is None else plain(float(s[f"{key}_ttft_ms"]), 2),
                     tpot_percentile_ms=None if key is None else plain(float(s[f"{key}_tpot_ms"]), 3),
                     source="simulated")


def _simulated_loop(s: Summary, clients: float, percentile: int | None) -> LatencyAt:
    """A simulated closed loop: the latencies of the whole clients run_closed ran (`clients` rounded), the
    planned `clients` themselves as the concurrency (a replica's share of the workload's clients need not be
    whole) and its rate by Little's law, clients / the mean end-to-end time."""
    at = _simulated(s, clients / max(float(s["mean_e2el_ms"]) / 1e3, 1e-12), percentile)
    return at.model_copy(update={"concurrency": plain(clients, 2)})


def planned_and_capacity(c: CandidateResult, arch: ModelArchitecture, load_share: float) -> tuple[LatencyAt, LatencyAt]:
    """(latency at the planned load, latency at capacity) of one replica of candidate `c`, which the plan
    loads at `load_share` of its capacity (in the workload's demand unit)."""
    return planned_latency(c, arch, load_share), capacity_latency(c, arch)


def planned_latency(c: CandidateResult, arch: ModelArchitecture, load_share: float) -> LatencyAt:
    """One replica of `c` at `load_share` of its capacity: simulated when its capacity was (planner/
    simcapacity.py), else the analytic steady state (over the length mix when there is one)."""
    w, point = c.workload, c.evaluation.point
    assert point is not None
    replica = replica_of(c, arch)
    if needs_simulation(w) and not w.open_loop:
        return _simulated_loop(run_closed(replica, w, point.concurrency * load_share), point.concurrency * load_share,
                               w.slo.percentile)
    if needs_simulation(w):
        rate = point.requests_per_second * load_share
        return _simulated(run(replica, w, max(rate, 1e-6))[0], rate, w.slo.percentile)
    if has_mix(w):
        model = MixModel(replica, w, poisson=w.open_loop)
        return _latency_at(model.at_rate(point.requests_per_second * load_share)
                           if w.open_loop
                           else model.at_concurrency(point.concurrency * load_share))
    if w.open_loop:
        at: LoadPoint = analytic_load.at_rate(replica, max(point.requests_per_second * load_share, 1e-9),
                                              w.input_tokens, w.output_tokens, burstiness=w.arrival_burstiness)
    else:  # the loop has exactly its share of the clients (the search lands within 0.1 % below it: 3 x 21.31
        # clients planned for 64)
        clients = max(point.concurrency * load_share, 1e-9)
        at = replace(analytic_load.at_concurrency(replica, clients, w.input_tokens, w.output_tokens),
                     concurrency=clients)
    # one request size: the analytic model has no spread to take a percentile of
    return _latency_at(MixPoint(at, w.slo.percentile, None, None))


def capacity_latency(c: CandidateResult, arch: ModelArchitecture) -> LatencyAt:
    """One replica of `c` at its capacity (the evaluation's point; the simulated run there when simulated)."""
    w, point = c.workload, c.evaluation.point
    assert point is not None
    if needs_simulation(w) and not w.open_loop:
        return _simulated_loop(run_closed(replica_of(c, arch), w, point.concurrency), point.concurrency,
                               w.slo.percentile)
    if needs_simulation(w):
        rate = point.requests_per_second
        return _simulated(run(replica_of(c, arch), w, rate)[0], rate, w.slo.percentile)
    if has_mix(w):
        return _latency_at(MixModel(replica_of(c, arch), w, poisson=w.open_loop)
                           .at_rate(point.requests_per_second))
    return _latency_at(MixPoint(point, w.slo.percentile, None, None))
