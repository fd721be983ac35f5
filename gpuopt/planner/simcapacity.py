"""Simulation-backed replica capacity for workloads whose targets are percentiles or whose lengths are a mix.

The analytic model predicts a steady state's means; a percentile target, a heavy-tailed length mix or a
shared prefix served from the prefix cache needs the serving simulator (physics/simulator.py): Poisson
arrivals at the rate, `NUM_PROMPTS` measured requests drawn from the workload's lengths in a steady state, TTFT
and TPOT read at the workload's percentile (the mean when none is set) as `vllm bench serve` reports them. A
`concurrency` workload is a closed loop of clients instead (steady_state.closed_capacity): its capacity is the
most clients that meet the targets, its rate Little's law.

Which candidates are simulated (a simulation costs 0.1-0.4 s for one length, up to a few seconds for a mix with
long-lived requests, whose warm-up covers their lifetime (at most 3,200 requests); a capacity search about
seven of them):
the analytic model stays the screen. Per workload, among the candidates that can enter the program (after
the pre-solve pruning), the `SIMULATED_SHAPES` replica shapes with the lowest analytic cost per unit of load
(what packs best beside other workloads) and the `SIMULATED_SMALLEST` cheapest per replica (a small workload is
bound by min_replicas, not load) are simulated; then every shape some plan with a replica of it could still
undercut the best simulated shape served alone with, up to `MAX_SIMULATED_SHAPES`: that replica at its price
plus the demand it leaves at the cheapest cost per unit of load of any shape (simulated capacities, else the
analytic one times the highest simulated/analytic ratio seen, RATIO_MARGIN above). A shape left out is in no
cheaper plan, mixed or alone, so a wider choice of offerings does not make a one-workload plan dearer (with
the first five shapes only, allowing DigitalOcean beside RunPod pushed the H100 PCIe and every L40S out of a
p95 workload's set and raised its plan from 2.89 to 2.96 USD/h; bounding only each shape served alone, a p90
plan of an L40S and an RTX 4090 replica, 1.83, became one MI300X at 1.99). It costs simulations: 8-12 shapes
where the alone-bound simulated 5-6, 11-13 s instead of 7-9 for a p90-p99 workload over RunPod (2026-12-04;
benchmarks/solve_scaling.py --simulated-only: 5-9 CPU seconds a workload, 23-26 for a three-bin chat mix).
The program chooses among the simulated shapes only, and every other shape of the workload is marked
`reason_kind: simulation`. Results are cached per shape and traffic for
the process (the residency-free re-solve, alternatives and sensitivity reuse them). Workloads with neither
`slo.percentile` nor `lengths` are planned on the analytic steady state, the simulator's measured surrogate:
on 90 mean-target workloads its capacity is 0.96-1.06x the simulated steady-state capacity (p10-p90, median
1.020; benchmarks/surrogate_capacity.py, 2026-12-04, docs/simulator.md), at microseconds instead of seconds a shape.

The capacity is physics/steady_state.py's: the largest rate at which the replica in steady state (a warm-up
and a tail around the measured requests, the queue bounded) meets the targets; the search starts at the
analytic capacity times the median simulated/analytic ratio of the workload's shapes done so far, on a fixed
grid of rates, so the start decides only how many runs it takes (steady_state.steady_capacity).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import replace

from gpuopt.hardware import get_gpu
from gpuopt.inputs.workload import Quota, ServingTarget, Workload
from gpuopt.physics import latency
from gpuopt.physics.analytic_load import LoadPoint
from gpuopt.physics.architecture import ModelArchitecture
from gpuopt.physics.latency import Replica
from gpuopt.physics.steady_state import (
    closed_capacity,
    closed_run,
    percentile_key,
    steady_capacity,
    steady_run,
    whole_clients,
)
from gpuopt.physics.steady_state import meets as steady_meets
from gpuopt.physics.traffic import FixedLengths, HistogramLengths, LengthDistribution, ShareGPTLengths
from gpuopt.planner.candidates import CandidateResult, Evaluation, Shape, capacity_in
from gpuopt.planner.program import dominant_shapes, instance_cap, prune

NUM_PROMPTS = 400  # measured requests per steady-state run (physics/steady_state.py adds warm-up and tail)
SEED = 0
SIMULATED_SHAPES = 4  # simulated whatever the screen says
SIMULATED_SMALLEST = 1
MAX_SIMULATED_SHAPES = 12  # by the screen's order; beyond the first SIMULATED_SHAPES only those that could win
RATIO_MARGIN = 1.1  # on the highest simulated / analytic capacity ratio seen, for the shapes not yet simulated
Summary = dict[str, float | int]


def needs_simulation(w: Workload) -> bool:
    """Percentile targets, a length mix or arrivals other than Poisson (`burstiness`; the analytic clumps are the
    screen, benchmarks/bursty_traffic.py): Poisson (or gamma) traffic for a request-rate workload, a closed loop of
    clients for a concurrency one (simulated since 2026-12-03; a percentile on a concurrency workload was planned on
    the analytic means before, printed beside its p99 target). A workload without a latency target has nothing for
    the simulator to confirm -- its replicas serve any load, queueing -- so its analytic capacity is the plan's (QA:
    a ShareGPT-shaped `concurrency: 8` without targets simulated 1,280 clients on every candidate, 5 minutes and 5
    GB; before, a search from 3.7e10 clients ran out of memory)."""
    if w.slo.ttft_ms is None and w.slo.tpot_ms is None:
        return False
    # a shared prefix: the simulator serves it from the prefix cache, the analytic screen prefills it every time
    # (conservative); planned on the screen, a Poisson workload with a 1,500-token system prompt cost 1,336
    # USD/month where the same traffic in clumps, simulated, cost 796 (QA)
    return (w.slo.percentile is not None or w.lengths is not None or w.arrival_burstiness != 1.0
            or w.shared_prefix_tokens > 0)


def replica_of(c: CandidateResult, arch: ModelArchitecture) -> Replica:
    mem, shape = c.evaluation.memory, c.shape
    assert mem is not None and shape is not None  # only feasible candidates are planned or simulated
    return latency.build_replica(arch, get_gpu(shape.gpu), mem, shape.interconnect)


def length_distribution(w: ServingTarget) -> LengthDistribution:
    if w.lengths is not None and w.lengths.histogram is not None:
        return HistogramLengths(tuple((b.input_tokens, b.output_tokens, b.share) for b in w.lengths.histogram))
    if w.lengths is not None and w.lengths.dataset == "sharegpt":
        return ShareGPTLengths(float(w.input_tokens), float(w.output_tokens))
    return FixedLengths(w.input_tokens, w.output_tokens)


def run(replica: Replica, w: ServingTarget, rate: float) -> tuple[Summary, bool]:
    """One simulated steady-state run of the workload's traffic at `rate` requests/s: the measured requests'
    summary and whether the queue stayed bounded (physics/steady_state.py)."""
    res, stable = steady_run(replica, length_distribution(w), rate, w.slo.ttft_ms, w.slo.tpot_ms,
                             measured=NUM_PROMPTS, seed=SEED, shared_prefix_tokens=w.shared_prefix_tokens,
                             burstiness=w.arrival_burstiness)
    return res.summary(), stable


def meets(w: ServingTarget, s: Summary, stable: bool = True) -> bool:
    return steady_meets(s, stable, w.slo.ttft_ms, w.slo.tpot_ms, w.slo.percentile)


def run_closed(replica: Replica, w: ServingTarget, clients: float) -> Summary:
    """One simulated closed loop of the workload's traffic with `clients` (steady_state.whole_clients): the
    measured requests' summary (physics/steady_state.closed_run)."""
    return closed_run(replica, length_distribution(w), whole_clients(clients), measured=NUM_PROMPTS, seed=SEED,
                      shared_prefix_tokens=w.shared_prefix_tokens).summary()


def simulated_clients(replica: Replica, w: ServingTarget, start: float) -> tuple[float, Summary | None]:
    """The most clients of a closed loop at which the simulated replica meets the targets, and its run (0,
    None: not even one client does). `start`: the analytic capacity in clients."""
    return closed_capacity(replica, length_distribution(w), w.slo.ttft_ms, w.slo.tpot_ms, w.slo.percentile, start,
                           measured=NUM_PROMPTS, seed=SEED, shared_prefix_tokens=w.shared_prefix_tokens)


def simulated_capacity(replica: Replica, w: ServingTarget, start: float) -> tuple[float, Summary | None]:
    """The largest Poisson rate at which the simulated replica, in steady state, meets the targets, and its
    run (0, None: not even a trickle does). `start`: the analytic capacity, where the search begins."""
    return steady_capacity(replica, length_distribution(w), w.slo.ttft_ms, w.slo.tpot_ms, w.slo.percentile, start,
                           measured=NUM_PROMPTS, seed=SEED, shared_prefix_tokens=w.shared_prefix_tokens,
                           burstiness=w.arrival_burstiness)


def point_of(rate: float, s: Summary, w: ServingTarget, clients: float | None = None) -> LoadPoint:
    """A LoadPoint from a simulated run (means; concurrency by Little's law on the mean end-to-end time). A
    closed loop of `clients`: its rate by Little's law instead, clients / the mean end-to-end time."""
    tpot = float(s["mean_tpot_ms"])
    if clients is not None:
        rate = clients / max(float(s["mean_e2el_ms"]) / 1e3, 1e-12)
    return LoadPoint(requests_per_second=rate, concurrency=clients if clients is not None
                     else rate * float(s["mean_e2el_ms"]) / 1e3,
                     running=rate * (max(w.output_tokens - 1, 0) * tpot + float(s["mean_itl_ms"])) / 1e3,
                     step_ms=float(s["mean_itl_ms"]),
                     tpot_ms=tpot, ttft_ms=float(s["mean_ttft_ms"]),
                     output_tokens_per_second=float(s["output_throughput"]), stable=True, limit=None)


_CACHE: dict[tuple[Shape, str, str], Evaluation] = {}  # shape, traffic, the resolved vLLM config


def _traffic_key(w: Workload) -> str:
    return w.model_dump_json(include={"model", "input_tokens", "output_tokens", "slo", "lengths",
                                      "shared_prefix_tokens", "max_model_len", "burstiness"})


def _replica_price(c: CandidateResult) -> float:
    """What one replica of `c` costs: its share of the instance's price (in the canonical currency, as the
    program compares prices: which shapes are simulated does not depend on the plan's currency)."""
    return (c.canonical_price or 0.0) * (c.gpus_per_replica or 0) / (c.offering.gpu_count or 1)


def _alone(c: CandidateResult, rate: float, headroom: float, cap: float = math.inf) -> float:
    """The hourly cost of serving `c`'s workload on `c`'s shape and offering alone at a replica capacity of
    `rate` requests/s: enough replicas for the demand at `headroom` (at least min_replicas), on whole
    instances; inf when that takes more instances than `cap` (its quota) allows."""
    if rate <= 0 or c.canonical_price is None or not c.gpus_per_replica:
        return math.inf
    w = c.workload
    replicas = max(w.min_replicas, math.ceil(w.demand / (headroom * rate) - 1e-9))
    instances = math.ceil(replicas * c.gpus_per_replica / (c.offering.gpu_count or 1) - 1e-9)
    return math.inf if instances > cap else instances * c.canonical_price


def _load_of(ev: Evaluation, demand_unit: str) -> float:
    """The evaluation's capacity in its workload's demand unit (candidates.capacity_in), 0 when infeasible."""
    return capacity_in(ev, demand_unit) if ev.feasible else 0.0


def _sure(cands: list[CandidateResult]) -> list[int]:
    """The shapes simulated whatever else: the SIMULATED_SHAPES cheapest per unit of analytic load (what packs
    best beside other workloads) and the SIMULATED_SMALLEST cheapest per replica (a small workload is bound by
    min_replicas, not load). Ids of their evaluations."""
    per_load: dict[int, float] = {}
    per_replica: dict[int, float] = {}
    for c in cands:
        if c.canonical_price is None or c.capacity <= 0:
            continue
        e = id(c.evaluation)
        per_load[e] = min(per_load.get(e, math.inf), _replica_price(c) / c.capacity)
        per_replica[e] = min(per_replica.get(e, math.inf), _replica_price(c))
    by_load = sorted(per_load, key=lambda e: per_load[e])[:SIMULATED_SHAPES]
    by_replica = [e for e in sorted(per_replica, key=lambda e: per_replica[e]) if e not in by_load]
    return by_load + by_replica[:SIMULATED_SMALLEST]


def with_simulated_capacity(workloads: Sequence[Workload], candidates: Sequence[CandidateResult],
                            quotas: Sequence[Quota], archs: dict[str, ModelArchitecture],
                            headroom: float = 0.8) -> list[CandidateResult]:
    """`candidates` with the simulated capacity on the shapes simulated and the other shapes of those
    workloads marked infeasible (see the module docstring). Workloads that need no simulation are
    untouched."""
    simulated = {w.name for w in workloads if needs_simulation(w)}
    if not simulated:
        return list(candidates)
    # an offering a quota closes (max_instances 0) can run nothing: screened, it took the places of usable
    # shapes and a p95 workload with its providers closed by quotas was reported infeasible
    entering = dominant_shapes(prune([c for c in candidates if c.feasible and c.instance_price is not None
                                      and c.workload.name in simulated and instance_cap(c, quotas) > 0], quotas))
    by_workload: dict[str, list[CandidateResult]] = defaultdict(list)
    for c in entering:
        by_workload[c.workload.name].append(c)
    replaced: dict[int, Evaluation] = {}
    for name, cands in by_workload.items():
        replaced.update(_simulated_shapes(cands, archs[name], headroom, quotas))
    not_simulated = Evaluation(False, "not simulated for this workload: on the analytic screen it cannot undercut "
                                      "the shapes simulated (served alone, or per unit of load)", "simulation")
    out = []
    for c in candidates:
        if c.workload.name in simulated and c.feasible:
            c = c._replace(evaluation=replaced.get(id(c.evaluation), not_simulated))
        out.append(c)
    return out


def _simulated_shapes(cands: list[CandidateResult], arch: ModelArchitecture, headroom: float,
                      quotas: Sequence[Quota] = ()) -> dict[int, Evaluation]:
    """One workload's shapes to simulate, simulated (ids of their analytic evaluations -> simulated ones)."""
    offerings: dict[int, list[CandidateResult]] = defaultdict(list)  # shape -> its candidates
    for c in cands:
        if c.shape is not None:
            offerings[id(c.evaluation)].append(c)
    done: dict[int, Evaluation] = {}
    unit = cands[0].workload.demand_unit if cands else "requests_per_second"
    ratios: list[float] = []  # simulated / analytic capacity of the shapes done so far

    def simulate(e: int) -> None:
        c = offerings[e][0]
        mem = c.evaluation.memory
        assert c.shape is not None  # offerings holds shaped candidates only
        key = (c.shape, _traffic_key(c.workload), repr(mem.config) if mem is not None else "")
        if key not in _CACHE:  # the search starts at the median ratio so far (on a grid: only its speed moves)
            _CACHE[key] = _simulate_one(c, arch, sorted(ratios)[len(ratios) // 2] if ratios else 1.0)
        done[e] = _CACHE[key]
        simulated, analytic = _load_of(done[e], unit), _load_of(c.evaluation, unit)
        if simulated > 0 and analytic > 0:
            ratios.append(simulated / analytic)

    def alone(e: int, rate: float) -> float:
        return min(_alone(c, rate, headroom, instance_cap(c, quotas)) for c in offerings[e])

    def optimistic(e: int) -> float:
        """The shape's capacity: simulated, else the analytic one times the highest simulated / analytic ratio
        seen, RATIO_MARGIN above."""
        if e in done:
            return _load_of(done[e], unit)
        return _load_of(offerings[e][0].evaluation, unit) * max(ratios, default=1.0) * RATIO_MARGIN

    price = {e: min(_replica_price(c) for c in cs) for e, cs in offerings.items()}  # a replica, its cheapest
    demand = cands[0].workload.demand if cands else 0.0

    def cheapest_per_unit() -> float:
        """The lowest cost per unit of load of any shape at its optimistic capacity (it moves as shapes are
        simulated)."""
        return min((price[d] / (cap * headroom) for d in offerings if (cap := optimistic(d)) > 0), default=math.inf)

    def joined(e: int, per_unit: float) -> float:
        """A cost per hour no plan with a replica of shape `e` beats: that replica at its share of the instance
        price, the demand it leaves at `per_unit` (cheapest_per_unit), fractional replicas allowed. Bounding only
        the workload served by `e` alone (until 2026-12-04) left out plans that mix a small shape in: a p90
        Llama-3.1-8B workload of 4 requests/s was 1.99 USD/h on an MI300X with DigitalOcean allowed and 1.83 (an
        L40S and an RTX 4090 replica) on RunPod alone, the L40S and the 4090 never simulated beside the MI300X
        (QA)."""
        left = max(demand - optimistic(e) * headroom, 0.0)
        return price[e] + (left * per_unit if left > 0 else 0.0)

    for e in _sure(cands):
        if e in offerings:
            simulate(e)
    # then, by that bound, every shape some plan including it could still undercut the best simulated shape
    # served alone with (up to MAX_SIMULATED_SHAPES, and a ratio within the margin): a shape left out is in no
    # cheaper plan, so allowing more offerings does not make a one-workload plan dearer. Ties keep the
    # offerings' order (the keys are object ids, whose order would differ from run to run)
    per_unit = cheapest_per_unit()
    rest = sorted((e for e in offerings if e not in done), key=lambda e: joined(e, per_unit))
    for e in rest:
        best = min((alone(d, _load_of(ev, unit)) for d, ev in done.items()), default=math.inf)
        if len(done) >= MAX_SIMULATED_SHAPES:
            break
        if joined(e, cheapest_per_unit()) < best:
            simulate(e)
    return done


def with_estimated_capacity(workloads: Sequence[Workload], analytic: Sequence[CandidateResult],
                            simulated: Sequence[CandidateResult]) -> list[CandidateResult]:
    """`simulated` (with_simulated_capacity's answer for `analytic`, the same candidates in the same order) with
    each shape left unsimulated priced at its analytic capacity times the median simulated/analytic ratio of its
    workload's simulated shapes: an estimate, for solve's alternatives -- restricted to a GPU type or provider,
    the unrestricted plan's simulated shapes are often absent (a p95 workload's AWS alternative read 6.88 USD/h
    where `--provider aws` plans 3.72), and simulating each restriction's own screen took the solve from 9 to
    42 s CPU. Without a simulated workload, `simulated` as it is (no pass over 10^5 candidates)."""
    if not any(needs_simulation(w) for w in workloads):
        return list(simulated)
    ratios: dict[str, list[float]] = defaultdict(list)
    sibling: dict[tuple[object, ...], float] = {}
    # a shape's simulated sibling (the same workload, offering and GPUs per replica: another precision or KV
    # dtype, which dominant_shapes dropped before the screen) scales it better than the workload's median: the
    # fp8 / KV-auto TP 8 sibling of a simulated fp8 / KV-fp8 MI300X shape was estimated at 1.10 requests/s with
    # the median ratio, above the 0.79 its dominating sibling sustains in the simulator, and its alternative read
    # 13.12 USD/h below the plan (QA; `--provider digitalocean` plans 191.04, not 127.36)
    for a, c in zip(analytic, simulated, strict=True):
        unit = c.workload.demand_unit
        if c.feasible and c.evaluation is not a.evaluation and _load_of(a.evaluation, unit) > 0:
            ratio = _load_of(c.evaluation, unit) / _load_of(a.evaluation, unit)
            ratios[c.workload.name].append(ratio)
            key = (c.workload.name, c.offering.key, c.gpus_per_replica)
            sibling[key] = min(sibling.get(key, ratio), ratio)
    median = {w: sorted(r)[len(r) // 2] for w, r in ratios.items()}
    out = []
    for a, c in zip(analytic, simulated, strict=True):
        point = a.evaluation.point
        if c.evaluation.reason_kind == "simulation" and a.feasible and point is not None and \
                c.workload.name in median:
            k = sibling.get((c.workload.name, c.offering.key, c.gpus_per_replica), median[c.workload.name])
            scaled = replace(point, requests_per_second=point.requests_per_second * k,
                             concurrency=point.concurrency * k)
            c = c._replace(evaluation=replace(a.evaluation, point=scaled, estimated=True))
        out.append(c)
    return out


def _simulate_one(c: CandidateResult, arch: ModelArchitecture, guess: float) -> Evaluation:
    """`guess`: the expected simulated / analytic ratio (the median of the workload's shapes done so far)."""
    ev, w = c.evaluation, c.workload
    assert ev.point is not None
    if not w.open_loop:
        clients, summary = simulated_clients(replica_of(c, arch), w, ev.point.concurrency * guess)
        if summary is None or clients < 1:
            what = percentile_key(w.slo.percentile)
            return Evaluation(False, f"the simulated replica misses the {what} targets even with one client",
                              "simulation", memory=ev.memory)
        return Evaluation(True, None, None, memory=ev.memory, point=point_of(0.0, summary, w, clients))
    rate, summary = simulated_capacity(replica_of(c, arch), w, ev.point.requests_per_second * guess)
    if summary is None or rate <= 0:
        what = percentile_key(w.slo.percentile)
        return Evaluation(False, f"the simulated replica misses the {what} targets even at a trickle",
                          "simulation", memory=ev.memory)
    return Evaluation(True, None, None, memory=ev.memory, point=point_of(rate, summary, w))
