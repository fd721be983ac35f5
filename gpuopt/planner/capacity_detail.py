"""What a reviewer needs to sign a capacity plan, per period: which replicas run on what (model, GPU, TP,
precision, the `vllm serve` command), and what the period costs per price kind.

Pure functions over the solved schedule: the program (planner/capacity.py) is not touched.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Protocol

from pydantic import BaseModel, ConfigDict

from gpuopt.hardware import get_gpu
from gpuopt.inputs.capacity import RENEWABLE
from gpuopt.planner.candidates import CandidateResult, resolve_model
from gpuopt.planner.commitments import CommitmentSpan, PurchaseLike, cents, period_charges
from gpuopt.planner.plan import HOURS_PER_MONTH, KnownPriceKind, plain
from gpuopt.planner.serve_command import vllm_command


class RunningLine(BaseModel):
    """Replicas of one shape on one offering in one period."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)  # read back from plan files

    workload: str
    model: str
    provider: str
    sku: str
    region: str
    price_kind: KnownPriceKind
    gpu: str
    gpus_per_instance: int
    replicas: int
    tensor_parallel: int
    pipeline_parallel: int
    weight_precision: str
    kv_cache_dtype: str
    capacity: float  # sustainable load of these replicas (before headroom), in the workload's demand unit
    vllm_command: str
    tags: dict[str, str] = {}  # the workload's tags, as the capacity file set them (solve's deployments carry them)


def running_lines(candidates: Sequence[CandidateResult], replicas: Mapping[tuple[int, int], int],
                  period: int) -> list[RunningLine]:
    """The replicas the schedule runs in `period` ((candidate index, period) -> count), one line per shape."""
    out = []
    for (i, t), n in sorted(replicas.items()):
        if t != period or n <= 0:
            continue
        c = candidates[i]
        o, shape, memory = c.offering, c.shape, c.evaluation.memory
        if shape is None or memory is None:
            continue
        out.append(RunningLine(
            workload=c.workload.name, model=c.workload.model_id, provider=o.provider, sku=o.sku, region=o.region,
            price_kind=o.price_kind, gpu=o.gpu, gpus_per_instance=o.gpu_count or 0, replicas=n,
            tensor_parallel=shape.tensor_parallel, pipeline_parallel=shape.pipeline_parallel,
            weight_precision=shape.precision, kv_cache_dtype=shape.kv_cache_dtype,
            capacity=round(c.capacity * n, 4),
            vllm_command=vllm_command(resolve_model(c.workload), memory.config,
                                      compute_capability=get_gpu(o.gpu).compute_capability),
            tags=dict(c.workload.tags)))
    return sorted(out, key=lambda r: (r.workload, r.provider, r.sku, r.region, r.price_kind, r.tensor_parallel))


def active_commitments(commitments: Sequence[CommitmentSpan], period: int, months_per_period: int) -> list[
        CommitmentSpan]:
    """Commitments running in `period`: bought in it or before, term not yet over."""
    return [c for c in commitments if runs_in(c, period, months_per_period)]


def runs_in(c: CommitmentSpan, period: int, months_per_period: int) -> bool:
    """Whether commitment `c` holds its instances in `period`: bought at its start or before, term not over."""
    return c.start_month <= period * months_per_period < c.start_month + c.term_months


def cost_by_price_kind(purchases: Sequence[PurchaseLike], commitments: Sequence[CommitmentSpan], period: int,
                       months_per_period: int) -> dict[str, float]:
    """The period's cost split by price kind: the printed cost of each rented purchase of the period, plus
    every active commitment's charge for this period (`period_charges`, whole cents of its whole-term
    charge). The period's cost is the sum of these figures."""
    split: dict[str, list[float]] = defaultdict(list)
    for p in purchases:
        if not p.committed:
            split[p.price_kind].append(p.cost)
    for c in active_commitments(commitments, period, months_per_period):
        charges = period_charges(c.price_per_hour, c.count, c.term_months, months_per_period,
                                 monthly_fee=c.price_kind in RENEWABLE)
        split[c.price_kind].append(charges[period - c.start_month // months_per_period])
    return {k: cents(v) for k, v in sorted(split.items())}


def merged_tags(workloads: Sequence[str], tags: Mapping[str, Mapping[str, str]]) -> dict[str, str]:
    """The tags of a line several workloads share (a commitment, a purchase): per key, the value its workloads
    give it, or their distinct values sorted and joined with "," when they differ (`team: assistant,data`), so
    a cost allocated by tag still finds every team that uses the line."""
    values: dict[str, set[str]] = defaultdict(set)
    for w in workloads:
        for key, value in tags.get(w, {}).items():
            values[key].add(value)
    return {key: ",".join(sorted(v)) for key, v in sorted(values.items())}


RunKey = tuple[str, str, str, str]  # provider, sku, region, price kind: what a running line and a commitment share


def instances_in_use(running: Sequence[RunningLine]) -> dict[RunKey, int]:
    """Instances of each offering the period's replicas occupy: ceil(GPUs used / GPUs per instance), the rule
    the program packs them by (program.instances_needed)."""
    gpus: dict[RunKey, int] = defaultdict(int)
    per_instance: dict[RunKey, int] = {}
    for r in running:
        key = (r.provider, r.sku, r.region, r.price_kind)
        gpus[key] += r.replicas * r.tensor_parallel * r.pipeline_parallel
        per_instance[key] = r.gpus_per_instance or 1
    return {k: math.ceil(n / per_instance[k]) for k, n in gpus.items()}


def commitment_use(commitments: Sequence[CommitmentSpan], running: Sequence[Sequence[RunningLine]],
                   months_per_period: int) -> list[dict[int, int]] | None:
    """Per commitment, per period of the horizon it runs in: how many of its instances run replicas (the rest
    idle: a reservation kept for a later dip in demand is paid whether used or not). Several commitments of one
    offering running in one period fill in the order they were bought (the oldest first). None when the plan
    lists no replicas at all (a plan file from before `running`): the use is unknown, not zero."""
    if not any(running):
        return None
    out: list[dict[int, int]] = [{} for _ in commitments]
    for t, lines in enumerate(running):
        left = instances_in_use(lines)
        for j, c in enumerate(commitments):
            if runs_in(c, t, months_per_period):
                key = (c.provider, c.sku, c.region, c.price_kind)
                out[j][t] = min(c.count, left.get(key, 0))
                left[key] = left.get(key, 0) - out[j][t]
    return out


class BreakEvenInputs(Protocol):
    """What `assess` reads of a commitment's purchase line (planner.capacity.PurchaseLine)."""

    @property
    def break_even_utilisation(self) -> float | None: ...
    @property
    def on_demand_price_per_hour(self) -> float | None: ...


def assess(commitments: Sequence[CommitmentSpan], lines: Sequence[BreakEvenInputs],
           use: Sequence[Mapping[int, int]], on_demand_allowed: Mapping[str, bool], charge: str,
           months_per_period: int, currency: str) -> list[CommitmentSpan]:
    """Each commitment (`lines[j]` its purchase line) with its utilisation -- instance-hours running replicas
    inside the horizon over the instance-hours of its whole term -- and, when that is below its break-even, a
    note: its charge is more than renting the hours it is used on demand, and why the program bought it anyway
    (on-demand not allowed for its workloads; or `charge: inside-horizon` counted only its months inside a
    horizon its term outlives). The program is right to buy it in both cases; a reviewer should know."""
    out = []
    hours = HOURS_PER_MONTH * months_per_period
    for c, line, used in zip(commitments, lines, use, strict=True):
        term_hours = c.count * HOURS_PER_MONTH * c.term_months
        used_hours = sum(used.values()) * hours
        utilisation = round(used_hours / term_hours, 4) if term_hours else None
        update: dict[str, object] = {"utilisation": utilisation,
                                     "break_even_utilisation": line.break_even_utilisation}
        od = line.on_demand_price_per_hour
        billed = cents((c.cost_inside_horizon, c.obligation_after_horizon))
        rented = plain(od * used_hours, 2) if od is not None else None
        if rented is not None and line.break_even_utilisation is not None and billed > rented:
            if not any(on_demand_allowed.get(w, True) for w in c.workloads):
                why = f"on-demand is not allowed for {', '.join(c.workloads)} (price_kinds)"
            elif charge == "inside-horizon" and c.months_after > 0:
                why = (f"charge: inside-horizon counted only its {c.months_inside} months inside the horizon, "
                       f"not the {c.months_after} after it")
            else:
                why = "no cheaper schedule met the demand with the offerings allowed"
            update["note"] = (f"used below break-even: {used_hours:,.0f} of its {term_hours:,.0f} instance-hours "
                              f"({utilisation:.0%}) run replicas inside the horizon, break-even "
                              f"{line.break_even_utilisation:.0%}; its charge {billed:,.2f} {currency} is more "
                              f"than renting those hours on demand ({rented:,.2f}); bought because {why}")
        out.append(c.model_copy(update=update))
    return out
