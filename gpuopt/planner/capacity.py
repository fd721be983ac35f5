"""Quarterly (or monthly) capacity planning: what to commit to in which period, what to rent as it comes.

The program is the one `solve` uses (program.optimise, formulation in its docstring), with T periods of
H = 730 x months per period hours and commitments: a reservation, savings plan or subscription bought at the
start of period t holds capacity for its term (term_periods) and is charged commitment_hours: its whole term
(charge: full-term, the default: a commitment is paid in full whether used or not, also after the horizon)
or only its hours inside the horizon (charge: inside-horizon, stated in the output). This module builds the
problem (candidates for each workload's peak demand, its price kinds), reads the schedule back as costs per
period and purchases, and describes it as a typed CapacityPlan with scenarios and the all-on-demand baseline.

Candidates and their sustainable loads come from the same memory and latency models as `solve`; the
capacity of a replica does not depend on the demand, so they are evaluated once.
"""

from __future__ import annotations

import datetime as dt
import math
import re
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from gpuopt.errors import FieldError
from gpuopt.inputs.capacity import (
    MONTHS_PER_PERIOD,
    RENEWABLE,
    TERM_MONTHS,
    UNCOMMITTED,
    CapacityFile,
    CapacityWorkload,
    demand_series,
)
from gpuopt.inputs.workload import Workload
from gpuopt.physics.latency_factors import borrowed_notes
from gpuopt.planner.candidates import CANONICAL_CURRENCY, CandidateResult, Placement, enumerate_candidates
from gpuopt.planner.capacity_detail import (
    RunningLine,
    assess,
    commitment_use,
    cost_by_price_kind,
    merged_tags,
    running_lines,
)
from gpuopt.planner.checkpoints import cautions
from gpuopt.planner.commitments import (
    CommitmentSpan,
    CommitmentSummary,
    cents,
    kept_in_scenarios,
    period_charges,
    spans,
    term_months,
)
from gpuopt.planner.commitments import summarise as summarise_commitments
from gpuopt.planner.plan import (
    HOURS_PER_MONTH,
    CurrencyCode,
    FxText,
    IsoDate,
    KnownPriceKind,
    Money,
    PlanStatus,
    Sensitivity,
    check_priced,
    check_sum,
    plain,
)
from gpuopt.planner.program import Commitment, OfferingKey, dominant_shapes, optimise, prune, quota_problems
from gpuopt.planner.simcapacity import with_simulated_capacity
from gpuopt.planner.solve import explain_infeasible
from gpuopt.pricing.catalog import Catalog, Offering
from gpuopt.pricing.staleness import fx_staleness, oldest_price_date, stale_commitments, staleness


@dataclass(frozen=True)
class CapacityOptions(Placement):
    """The placement, and what only `plan` adds (sensitivity runs after solving: planner/sensitivity.py)."""

    max_price_age: int | None = None  # --max-price-age: a chosen price older than this is an error


PeriodKind = Literal["quarter", "month"]  # the capacity file's horizon.period


@dataclass
class CapacityProblem:
    cf: CapacityFile
    currency: str
    labels: list[str]
    hours_per_period: float
    demand: dict[str, list[float]]  # workload -> per period (base scenario)
    workloads: dict[str, CapacityWorkload]
    candidates: list[CandidateResult]  # feasible, priced, pruned
    all_candidates: list[CandidateResult]
    catalog: Catalog


@dataclass(frozen=True)
class Purchase:
    period: int
    offering: CandidateResult
    count: int
    committed: bool


@dataclass
class CapacitySolution:
    status: PlanStatus
    total_cost: float | None
    period_costs: list[float]
    beyond_horizon: float
    purchases: list[Purchase]
    replicas: dict[tuple[int, int], int]  # (candidate index, period) -> replicas
    capacity: dict[str, list[float]]  # workload -> sustainable load per period (before headroom)
    seconds: float
    binding: str | None = None
    explanation: tuple[str, ...] = ()  # why infeasible, line by line, where more than `binding` is known
    commitments_fixed: dict[tuple[tuple[str, ...], int], int] = field(default_factory=dict)
    proven_optimal: bool = True  # False when the solver stopped at its time limit with a feasible schedule


def term_periods(kind: str, months_per_period: int) -> int:
    if kind in UNCOMMITTED:
        return 1
    if kind in RENEWABLE:
        return 1  # renewed month by month to fill the period
    return TERM_MONTHS[kind] // months_per_period


def commitment_hours(kind: str, start: int, periods: int, months_per_period: int, charge: str) -> float:
    """Hours a commitment bought at the start of period `start` is paid for."""
    if kind in RENEWABLE:
        return HOURS_PER_MONTH * months_per_period
    term_months = TERM_MONTHS[kind]
    if charge == "inside-horizon":
        inside = min(term_months, (periods - start) * months_per_period)
        return HOURS_PER_MONTH * inside
    return HOURS_PER_MONTH * term_months


def build_problem(cf: CapacityFile, catalog: Catalog, opts: CapacityOptions) -> CapacityProblem:
    kinds = tuple(sorted({k for w in cf.workloads for k in w.price_kinds}))
    policy = opts.policy(cf.residency, cf.providers, cf.currency, kinds)
    currency = policy.currency
    demand = {w.name: demand_series(w, cf.horizon) for w in cf.workloads}
    proxies = []
    for w in cf.workloads:
        peak = max(max(demand[w.name]), 1e-6)
        load = {"requests_per_second": peak} if w.demand.unit == "requests_per_second" else \
            {"concurrency": max(1, math.ceil(peak))}
        # the serving fields as the file set them; the others take the same defaults (one ServingTarget) and stay
        # unset, which matters where unset means something (precisions: a quantized checkpoint's own format)
        fields = {k: v for k, v in w.model_dump(exclude_unset=True).items() if k in Workload.model_fields}
        proxies.append(Workload.model_validate({**fields, **load, "model": w.model}))
    per_workload = enumerate_candidates(proxies, catalog, policy)
    by_name = {w.name: w for w in cf.workloads}
    allowed = [c for wc in per_workload for c in wc.results
               if c.offering.price_kind in by_name[c.workload.name].price_kinds]
    # percentile targets and length mixes: the simulator's capacity, as in solve (planner/simcapacity.py);
    # a replica's capacity does not depend on the demand, so the peak-demand proxy serves every period
    allowed = with_simulated_capacity(proxies, allowed, (), {wc.workload.name: wc.arch for wc in per_workload},
                                      opts.headroom)
    problems: list[tuple[tuple[str | int, ...], str]] = []
    for i, w in enumerate(cf.workloads):
        for k, kind in enumerate(w.price_kinds):
            if not any(c.workload.name == w.name and c.offering.price_kind == kind and c.offering.price_per_hour
                       is not None and c.evaluation.reason_kind not in ("residency", "provider")
                       for c in allowed):
                problems.append((("workloads", i, "price_kinds", k),
                                 f"{kind}: no priced offering has it within the residency and provider policy "
                                 f"(workload {w.name})"))
    if cf.quotas:
        problems += quota_problems(cf.quotas, catalog)  # a misspelt SKU or region would cap nothing
    if problems:
        raise FieldError(problems)  # located at each price kind's YAML line by the command (fields_located_in)
    feasible = dominant_shapes(prune([c for c in allowed if c.feasible and c.instance_price is not None],
                                     cf.quotas))
    return CapacityProblem(cf=cf, currency=currency, labels=cf.horizon.labels(),
                           hours_per_period=HOURS_PER_MONTH * cf.horizon.months_per_period, demand=demand,
                           workloads=by_name, candidates=feasible, all_candidates=allowed, catalog=catalog)


def solve_capacity(p: CapacityProblem, headroom: float, kinds: tuple[str, ...] | None = None,
                   scale: float = 1.0, fixed_commitments: dict[tuple[OfferingKey, int], int] | None = None,
                   time_limit: float = 120.0) -> CapacitySolution:
    """The multi-period program (program.optimise); `kinds` restricts price kinds (all-on-demand baseline),
    `scale` multiplies demand (scenarios), `fixed_commitments` pins y[o,t] (a scenario run of a chosen
    schedule)."""
    cands = [c for c in p.candidates if kinds is None or c.offering.price_kind in kinds]
    T = len(p.labels)
    mpp = p.cf.horizon.months_per_period
    offerings: dict[OfferingKey, CandidateResult] = {}
    for c in cands:
        offerings.setdefault(c.offering.key, c)
    commitments = {k: Commitment(periods=term_periods(c.offering.price_kind, mpp),
                                 hours=tuple(commitment_hours(c.offering.price_kind, t, T, mpp, p.cf.charge)
                                             for t in range(T)))
                   for k, c in offerings.items() if c.offering.price_kind not in UNCOMMITTED}
    result = optimise({w: [d * scale for d in series] for w, series in p.demand.items()},
                      {w: p.workloads[w].min_replicas for w in p.demand}, cands, headroom,
                      hours_per_period=p.hours_per_period, commitments=commitments, fixed=fixed_commitments,
                      quotas=p.cf.quotas, time_limit=time_limit)
    if result.status != "optimal":
        explanation: tuple[str, ...] = ()
        if result.unserved is not None:
            binding = f"workload {result.unserved}: no feasible candidate with the allowed price kinds"
            # every workload no candidate serves (review: only the first the program met was explained), each
            # as solve explains it; when candidates serve it, the price kinds the run allowed are why
            groups: dict[str, list[CandidateResult]] = {}
            for c in p.all_candidates:
                groups.setdefault(c.workload.name, []).append(c)
            unserved = [(mine[0].workload, mine) for mine in groups.values() if not any(c.feasible for c in mine)]
            if unserved:
                explanation = tuple(explain_infeasible(unserved))
        elif p.cf.quotas:  # every workload has candidates: only the quotas cap what a period can run
            caps = "; ".join(f"{q.max_instances} x {q.provider}" + (f" {q.sku}" if q.sku else "")
                             + (f" in {q.region}" if q.region else "") for q in p.cf.quotas)
            binding = (f"the quotas ({caps}): no schedule serves every period's demand with the instances they "
                       "allow; raise them or allow other providers, SKUs or price kinds")
        else:
            binding = f"solver status {result.solver_status}"
        return CapacitySolution("infeasible", None, [], 0.0, [], {}, {}, result.seconds, binding, explanation)
    period_costs = [0.0] * T
    beyond = 0.0
    purchases = []
    for t, period in enumerate(result.periods):
        for k, n in period.bought.items():
            o = offerings[k]
            price = float(o.instance_price or 0.0)
            purchases.append(Purchase(period=t, offering=o, count=n, committed=k in commitments))
            if k in commitments:
                term = commitments[k].periods
                per_period = price * p.hours_per_period * n
                for s in range(t, min(T, t + term)):
                    period_costs[s] += per_period
                beyond += price * commitments[k].hours[t] * n - per_period * (min(T, t + term) - t)
            else:
                period_costs[t] += price * p.hours_per_period * n
    index = {id(c): i for i, c in enumerate(p.candidates)}
    replicas = dict(sorted(((index[id(a.candidate)], t), a.replicas)
                           for t, period in enumerate(result.periods) for a in period.assignments))
    capacity_out: dict[str, list[float]] = {w: [0.0] * T for w in p.demand}
    for t, period in enumerate(result.periods):
        for a in period.assignments:
            capacity_out[a.candidate.workload.name][t] += a.candidate.capacity * a.replicas
    # what a scenario keeps (kept_in_scenarios): every commitment bought, and in the first period nothing else
    # -- that purchase is the decision taken now, so a scenario that bought more then would be re-planned with
    # hindsight (QA: x40 demand added a second 2027Q1 reservation the schedule does not buy and read 4,075.59
    # below the schedule kept); later periods are still the future, re-planned
    fixed = {(k, 0): 0 for k in commitments}
    fixed.update({(k, t): n for t, period in enumerate(result.periods) for k, n in period.bought.items()
                  if k in commitments})
    total = sum(period_costs) + beyond
    return CapacitySolution("optimal", total, period_costs, max(0.0, beyond), purchases, replicas, capacity_out,
                            result.seconds, None, commitments_fixed=fixed, proven_optimal=result.proven_optimal)


# ---- the typed result -------------------------------------------------------------------------------------



class _Frozen(BaseModel):
    """Base of the capacity plan's models: no NaN or Infinity (a plan file read back by report and diff is
    JSON people edit; plan.Frozen says why)."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)


INT64_MAX = 2**63 - 1
Count = Annotated[int, Field(ge=0, le=INT64_MAX)]
"""A count of a purchase line (instances, GPUs per instance, months of term): never negative, and within the
64-bit integer the capacity CSV writes it as (pandas Int64; a hand-edited 10^30 was an OverflowError, exit 70)."""


class PurchaseLine(_Frozen):
    provider: str
    service: str
    sku: str
    region: str
    gpu: str
    gpus_per_instance: Count  # 0 when the catalog does not say
    price_kind: KnownPriceKind
    count: Count
    committed: bool
    term_months: Count | None
    price_per_hour: Money  # 8 decimals: FOCUS rows rebuild the period costs from it to the cent
    hours: float = Field(ge=0)  # instance-hours this line pays for (count x period or term hours)
    cost: Money  # what this line costs (a commitment: its whole charge; rented: this period)
    break_even_utilisation: float | None  # commitment price / on-demand price of the same SKU and region
    workloads: list[str]
    # the catalog's list price of this offering in the plan currency, before --discount and overlays (None when
    # an overlay added the offering): FOCUS ListUnitPrice/ListCost must not show the discounted price
    list_price_per_hour: Money | None = None
    # a commitment: the on-demand price of the same SKU and region (after --discount and overlays) and its list
    # price, in the plan currency: FOCUS prices the usage the commitment covers at them (None when rented, or
    # when the catalog has no on-demand twin)
    on_demand_price_per_hour: Money | None = None
    on_demand_list_price_per_hour: Money | None = None
    tags: dict[str, str] = {}  # its workloads' tags (capacity_detail.merged_tags): FOCUS Tags and the CSV carry them


PERIOD_LABEL = r"[QM]\d{1,2}|(?!0000)\d{4}(Q[1-4]|-(0[1-9]|1[0-2]))"
"""The labels a horizon gives its periods (inputs/capacity.py Horizon.labels): Q1, M3, 2027Q1, 2027-01. A saved
plan's other labels (2027Q5, 2027-13, 0000Q1) were read, and the FOCUS export dated them: exit 70."""


def period_index(label: str) -> tuple[str, int]:
    """A period label's form and its place: ("quarter" | "month", dated?) folded into the form's name, and the
    index of the period (2027Q1 -> 2027 x 4, 2027-02 -> 2027 x 12 + 1, Q3 -> 2, M1 -> 0)."""
    if re.fullmatch(r"\d{4}Q[1-4]", label):
        return "dated quarter", int(label[:4]) * 4 + int(label[5]) - 1
    if re.fullmatch(r"\d{4}-\d{2}", label):
        return "dated month", int(label[:4]) * 12 + int(label[5:]) - 1
    return ("undated quarter" if label[0] == "Q" else "undated month"), int(label[1:]) - 1


def horizon_problems(labels: Sequence[str], period: str) -> list[str]:
    """What is wrong with a plan's period labels as a horizon (inputs/capacity.py Horizon.labels makes them):
    one form, of the plan's `period`, consecutive, each once, an undated horizon from Q1 / M1. A saved plan
    with a label given twice, swapped or skipped was read: diff keyed periods by label (a duplicate's cost
    vanished from its total) and FOCUS dated every period from the first label (a swapped 2027Q1 billed in
    July-September; QA)."""
    if not labels:
        return []
    places = [period_index(label) for label in labels]
    forms = {form for form, _ in places}
    if len(forms) > 1:
        return [f"periods mix label forms ({', '.join(sorted(forms))}): a horizon has one"]
    form = forms.pop()
    if not form.endswith(period):
        return [f"period is {period!r} but the periods are labelled as {form}s ({labels[0]})"]
    problems = []
    if form.startswith("undated") and places[0][1] != 0:
        problems.append(f"an undated horizon starts at {'Q1' if period == 'quarter' else 'M1'}, not {labels[0]}")
    for i in range(1, len(places)):
        if places[i][1] != places[i - 1][1] + 1:
            problems.append(f"periods.{i}.period: {labels[i]} does not follow {labels[i - 1]} (a horizon's "
                            "periods are consecutive, each once)")
            break
    return problems


class PeriodLine(_Frozen):
    period: str

    @field_validator("period")
    @classmethod
    def _label(cls, value: str) -> str:
        if not re.fullmatch(PERIOD_LABEL, value):
            raise ValueError(f"expected a period label like 2027Q1, 2027-01, Q1 or M1, got {value!r}")
        return value
    demand: dict[str, float]
    capacity: dict[str, float]  # sustainable load of the planned replicas (before headroom)
    cost: Money  # committed instances amortised over their active periods + rented instances
    purchases: list[PurchaseLine]
    cost_by_price_kind: dict[str, Money] = {}  # the cost split: rented kinds + active commitments amortised
    running: list[RunningLine] = []  # replicas of the period: model, GPU, TP, precision, `vllm serve`


class ScenarioLine(_Frozen):
    name: str
    multiplier: float
    total_cost: Money | None  # the schedule's commitments kept, the rest re-planned for this demand
    shortfall: dict[str, list[float]]  # demand the base plan's replicas cannot carry, per period
    idle: dict[str, list[float]]  # capacity of the base plan's replicas left unused, per period


class CapacityPlan(_Frozen):
    schema_version: int = 1
    kind: Literal["gpuopt-capacity-plan"] = "gpuopt-capacity-plan"
    status: PlanStatus
    currency: CurrencyCode
    horizon: str  # for people: "4 quarters from 2027Q1"
    period: PeriodKind  # for programs: what one period is (FOCUS charge periods count from it)
    charge: Literal["full-term", "inside-horizon"]
    headroom: float = Field(gt=0, le=1)
    periods: list[PeriodLine]
    total_cost: Money | None
    all_on_demand_cost: Money | None
    savings: float | None
    committed_after_horizon: Money
    scenarios: list[ScenarioLine]
    sensitivity: Sensitivity | None = None
    explanation: list[str]
    as_of_date: IsoDate  # the day the plan was made: FOCUS months count from it
    warnings: list[str] = []  # e.g. a schedule the solver stopped on at its time limit
    oldest_price_as_of: str = ""  # the oldest price the schedule chose ("unknown" if one is undated)
    fx: FxText = ""  # the rates used, each with its date
    fx_as_of: str = ""
    commitments: list[CommitmentSpan] = []  # every commitment, with its months and cost inside/after the horizon
    commitment_summary: CommitmentSummary | None = None  # obligation after the horizon and savings on both bases
    demand_units: dict[str, str] = {}  # workload -> requests_per_second | concurrency (demand and capacity)
    catalog_as_of: str = ""  # newest price date of the catalog the plan used
    price_age_errors: list[str] = []  # chosen prices older than --max-price-age (the CLI exits 2 on them)
    profile: str | None = None  # the calibration profile the GPUs were read through (`--profile`), if any
    workload_tags: dict[str, dict[str, str]] = {}  # workload -> its tags, as the capacity file set them
    # what all_on_demand_cost is (a reference priced at the chosen SKUs' on-demand rates when a workload excludes
    # on-demand), or why it is null (planner/capacity.on_demand_reference)
    all_on_demand_note: str = ""

    @property
    def months_per_period(self) -> int:
        return MONTHS_PER_PERIOD[self.period]

    @model_validator(mode="after")
    def _holds_together(self) -> CapacityPlan:
        """What report and diff rely on (a hand-edited plan may not hold it): an optimal plan has its total, an
        infeasible one none; a scenario has one shortfall and idle figure per period (the table looks each period
        up by its index)."""
        check_priced(self.status, {"total_cost": self.total_cost})
        if problems := horizon_problems([p.period for p in self.periods], self.period):
            raise ValueError("; ".join(problems))
        hours = HOURS_PER_MONTH * self.months_per_period
        for j, period in enumerate(self.periods):
            for k, x in enumerate(period.purchases):
                if not x.committed and not math.isclose(x.hours, x.count * hours, rel_tol=1e-9, abs_tol=1e-6):
                    raise ValueError(f"periods.{j}.purchases.{k}.hours: {x.hours:g} for {x.count} rented "
                                     f"instance(s) over a {self.period} of {hours:g} h (expected {x.count * hours:g})")
        for i, sc in enumerate(self.scenarios):
            for name, series in (("shortfall", sc.shortfall), ("idle", sc.idle)):
                for workload, values in series.items():
                    if len(values) != len(self.periods):
                        raise ValueError(f"scenarios.{i}.{name}.{workload}: {len(values)} values for "
                                         f"{len(self.periods)} periods")
        return self

    @model_validator(mode="after")
    def _figures_add_up(self) -> CapacityPlan:
        """Every total is the sum of its printed lines, to the cent, and a line's cost its price x its hours
        (docs/capacity.md): the figures diff, the tables and FOCUS each read agree, or the file is refused."""
        for j, period in enumerate(self.periods):
            for k, x in enumerate(period.purchases):
                check_sum(f"periods.{j}.purchases.{k}.cost", x.cost, x.price_per_hour * x.hours,
                          "price_per_hour x hours",
                          0.01 + 1e-7 * x.hours + _monthly_rounding(x.price_kind, self.months_per_period))
            if period.cost_by_price_kind:
                check_sum(f"periods.{j}.cost", period.cost, sum(period.cost_by_price_kind.values()),
                          "the sum of its cost_by_price_kind", 0.005 * len(period.cost_by_price_kind) + 0.005)
        if self.commitments:
            check_sum("committed_after_horizon", self.committed_after_horizon,
                      sum(c.obligation_after_horizon for c in self.commitments),
                      "the sum of the commitments' obligation_after_horizon", 0.005 * len(self.commitments) + 0.005)
        if self.total_cost is not None:
            # full-term: what the commitments still owe after the horizon is part of the total
            owed = self.committed_after_horizon if self.charge == "full-term" else 0.0
            check_sum("total_cost", self.total_cost, sum(p.cost for p in self.periods) + owed,
                      "the sum of the periods' cost" + (" and committed_after_horizon" if owed else ""),
                      0.005 * len(self.periods) + 0.01)
            if self.all_on_demand_cost is not None and self.savings is not None:
                check_sum("savings", self.savings, self.all_on_demand_cost - self.total_cost,
                          "all_on_demand_cost - total_cost", 0.01)
        for i, c in enumerate(self.commitments):
            # a purchase's two parts are its whole term's charge (commitments.period_charges: price x count x 730
            # x its months, to the cent); QA: an edited cost_inside_horizon and price_per_hour read back
            check_sum(f"commitments.{i}.cost_inside_horizon", c.cost_inside_horizon + c.obligation_after_horizon,
                      c.price_per_hour * c.count * HOURS_PER_MONTH * c.term_months,
                      "price_per_hour x count x 730 x term_months, less obligation_after_horizon",
                      0.01 + _monthly_rounding(c.price_kind, c.term_months))
        s = self.commitment_summary
        if s is not None:
            # the lines finance reads (QA: an edited savings_cash of 999 printed as "savings, cash basis")
            check_sum("commitment_summary.cost_inside_horizon", s.cost_inside_horizon,
                      sum(p.cost for p in self.periods), "the sum of the periods' cost", 0.005 * len(self.periods))
            check_sum("commitment_summary.obligation_after_horizon", s.obligation_after_horizon,
                      self.committed_after_horizon, "committed_after_horizon", 0.005)
            if s.all_on_demand_cost is not None:
                if s.savings_amortised is not None:
                    check_sum("commitment_summary.savings_amortised", s.savings_amortised,
                              s.all_on_demand_cost - s.cost_inside_horizon,
                              "all_on_demand_cost - cost_inside_horizon", 0.01)
                if s.savings_cash is not None:
                    check_sum("commitment_summary.savings_cash", s.savings_cash,
                              s.all_on_demand_cost - s.cost_inside_horizon - s.obligation_after_horizon,
                              "all_on_demand_cost - cost_inside_horizon - obligation_after_horizon", 0.01)
        return self


def _break_even(p: CapacityProblem, c: CandidateResult) -> float | None:
    o = c.offering
    if o.price_kind in UNCOMMITTED or c.instance_price is None:
        return None
    prices = p.catalog.on_demand_prices(o, p.currency)
    return None if not prices or not prices[0] else round(c.instance_price / prices[0], 4)


def _monthly_rounding(price_kind: str, months: int) -> float:
    """What a saved plan's check allows a line beyond its product for cents: a monthly subscription is rounded
    to the cent each month (commitments.period_charges), half a cent a month; other lines once."""
    return 0.005 * months if price_kind in RENEWABLE else 0.0


def _on_demand(p: CapacityProblem, o: Offering, committed: bool) -> dict[str, float]:
    """A commitment's on-demand twin prices for its PurchaseLine (8 decimals); nothing for a rented line."""
    prices = p.catalog.on_demand_prices(o, p.currency) if committed else None
    if prices is None:
        return {}
    return {"on_demand_price_per_hour": plain(prices[0], 8), "on_demand_list_price_per_hour": plain(prices[1], 8)}


def _charge(p: CapacityProblem, pu: Purchase, price: float) -> float:
    """What a purchase line costs, to the cent: rented, price x the period's hours x count; a commitment, its
    period charges (commitments.period_charges) over its whole term (charge: full-term) or over its periods
    inside the horizon (inside-horizon) -- the same cents the period costs and the commitment ledger print."""
    if not pu.committed:
        return plain(price * p.hours_per_period * pu.count, 2)
    mpp = p.cf.horizon.months_per_period
    kind = pu.offering.offering.price_kind
    charges = period_charges(price, pu.count, term_months(kind, mpp), mpp, monthly_fee=kind in RENEWABLE)
    return cents(charges if p.cf.charge == "full-term" else charges[:len(p.labels) - pu.period])


def printed_total(p: CapacityProblem, sol: CapacitySolution) -> float | None:
    """A schedule's total by the rule its plan prints: the sum of its purchase lines' cents (= the period costs
    plus, under full-term, the obligation after the horizon). The all-on-demand baseline and the scenarios use
    it too, so a schedule compared with itself saves exactly 0.00."""
    if sol.total_cost is None:
        return None
    return cents(_charge(p, pu, plain(float(pu.offering.instance_price or 0.0), 8)) for pu in sol.purchases)


def _list_price(p: CapacityProblem, o: Offering) -> float | None:
    """The offering's catalog list price in the plan currency (8 decimals, as price_per_hour)."""
    if o.list_price_per_hour is None or not o.currency:
        return None
    return plain(p.catalog.fx.convert(o.list_price_per_hour, o.currency, p.currency), 8)


@dataclass(frozen=True)
class Schedule:
    """A solved capacity problem: what plan_capacity describes, and what sensitivity.analyse_capacity
    stretches after solving (it needs the unrounded capacities and the problem to re-solve)."""

    problem: CapacityProblem
    opts: CapacityOptions
    solution: CapacitySolution
    baseline: CapacitySolution | None  # every workload on on-demand offerings only
    catalog: Catalog | None = None  # its FX, for the plan's header
    baseline_note: str = ""  # what the all-on-demand reference is, or why there is none (on_demand_reference)


def schedule(cf: CapacityFile, catalog: Catalog, opts: CapacityOptions) -> Schedule:
    p = build_problem(cf, catalog, opts)
    sol = solve_capacity(p, opts.headroom)
    reference, note = on_demand_reference(p, sol)
    baseline = solve_capacity(reference, opts.headroom, kinds=("on-demand",)) if reference is not None else None
    if baseline is not None and baseline.status != "optimal":
        note = f"no all-on-demand reference: {baseline.binding}"
    return Schedule(p, opts, sol, baseline, catalog, note)


def on_demand_reference(p: CapacityProblem, sol: CapacitySolution) -> tuple[CapacityProblem | None, str]:
    """The problem the all-on-demand reference is solved on, and what it is. A workload that allows on-demand
    rents any on-demand offering it allows; one that excludes it (`price_kinds: [reserved-1y]`) is priced at
    the on-demand rates of the SKUs the plan chose for it (the same provider, service, SKU and region, the same
    replica shapes and capacities): a reference figure to judge its commitments by, not a schedule it allows.
    None, with the reason, when such a SKU has no on-demand price in the catalog."""
    chosen: dict[str, set[tuple[str, ...]]] = defaultdict(set)
    for (i, _t), n in sol.replicas.items():
        o = p.candidates[i].offering
        if n > 0:
            chosen[p.candidates[i].workload.name].add((o.provider, o.service, o.sku, o.region))
    excluded = sorted(w for w, cw in p.workloads.items() if "on-demand" not in cw.price_kinds)
    twins: list[CandidateResult] = []
    missing = []
    for w in excluded:
        found = []
        for c in p.candidates:
            o = c.offering
            if c.workload.name != w or (o.provider, o.service, o.sku, o.region) not in chosen[w]:
                continue
            twin = p.catalog.on_demand_twin(o)
            price = None if twin is None else p.catalog.price_in(twin, p.currency)
            if twin is not None and price is not None:
                found.append(c._replace(offering=twin, instance_price=price,
                                        canonical_price=p.catalog.price_in(twin, CANONICAL_CURRENCY)))
        if not found:
            skus = ", ".join(sorted(f"{x[0]} {x[2]} ({x[3]})" for x in chosen[w])) or "none"
            missing.append(f"workload {w} excludes on-demand and the catalog has no on-demand price for the SKUs "
                           f"chosen for it ({skus})")
        twins += found
    if missing:
        return None, "no all-on-demand reference: " + "; ".join(missing)
    if not excluded:
        return p, "every workload rented on demand, from the offerings it allows"
    return replace(p, candidates=p.candidates + twins), (
        "a reference figure: " + ", ".join(excluded) + (" excludes" if len(excluded) == 1 else " exclude")
        + " on-demand, so " + ("its" if len(excluded) == 1 else "their") + " demand is priced at the on-demand "
        "rates of the SKUs the plan chose (not a schedule the file allows)"
        + ("; the other workloads rent any on-demand offering they allow" if len(excluded) < len(p.workloads)
           else ""))


def plan_capacity(cf: CapacityFile, catalog: Catalog, opts: CapacityOptions, today: str) -> CapacityPlan:
    """The schedule with the lowest cost over the horizon, as a typed plan (without sensitivity: the caller
    runs sensitivity.analyse_capacity on `schedule(...)` when asked)."""
    return describe(schedule(cf, catalog, opts), today)


def describe(solved: Schedule, today: str) -> CapacityPlan:
    p, opts, sol, baseline = solved.problem, solved.opts, solved.solution, solved.baseline
    cf = p.cf
    horizon = f"{cf.horizon.periods} {cf.horizon.period}{'s' if cf.horizon.periods != 1 else ''} from {p.labels[0]}"
    if sol.status != "optimal" or sol.total_cost is None:
        return CapacityPlan(status="infeasible", currency=p.currency, horizon=horizon, period=cf.horizon.period,
                            charge=cf.charge, headroom=opts.headroom, periods=[], total_cost=None,
                            all_on_demand_cost=None, savings=None, committed_after_horizon=0.0, scenarios=[],
                            explanation=list(sol.explanation) or [sol.binding or "no plan"], as_of_date=today)
    users: dict[tuple[tuple[str, ...], int], set[str]] = defaultdict(set)
    for (i, t), _n in sol.replicas.items():
        c = p.candidates[i]
        users[(c.offering.key, t)].add(c.workload.name)
        if c.offering.price_kind not in UNCOMMITTED:
            for s in range(t - term_periods(c.offering.price_kind, cf.horizon.months_per_period) + 1, t + 1):
                users[(c.offering.key, s)].add(c.workload.name)
    mpp = cf.horizon.months_per_period
    tags = {w.name: dict(w.tags) for w in cf.workloads}
    bought: list[list[PurchaseLine]] = []
    for t in range(len(p.labels)):
        lines = []
        for pu in (x for x in sol.purchases if x.period == t):
            o = pu.offering.offering
            price = plain(float(pu.offering.instance_price or 0.0), 8)
            hours = commitment_hours(o.price_kind, t, len(p.labels), mpp, cf.charge) if pu.committed \
                else p.hours_per_period
            lines.append(PurchaseLine(
                provider=o.provider, service=o.service, sku=o.sku, region=o.region, gpu=o.gpu,
                gpus_per_instance=o.gpu_count or 0, price_kind=o.price_kind, count=pu.count,
                committed=pu.committed, term_months=TERM_MONTHS.get(o.price_kind), price_per_hour=price,
                hours=round(hours * pu.count, 2), cost=_charge(p, pu, price),
                break_even_utilisation=_break_even(p, pu.offering), workloads=sorted(users[(o.key, t)]),
                tags=merged_tags(sorted(users[(o.key, t)]), tags),
                list_price_per_hour=_list_price(p, o), **_on_demand(p, o, pu.committed)))
        bought.append(lines)
    ledger = spans(list(zip(p.labels, bought, strict=True)), mpp)
    periods = []
    for t, label in enumerate(p.labels):
        split = cost_by_price_kind(bought[t], ledger, t, mpp)
        periods.append(PeriodLine(period=label, demand={w: round(v[t], 4) for w, v in p.demand.items()},
                                  capacity={w: round(v[t], 4) for w, v in sol.capacity.items()},
                                  cost=cents(split.values()), purchases=bought[t], cost_by_price_kind=split,
                                  running=running_lines(p.candidates, sol.replicas, t)))
    scenarios = []
    for name, factor in sorted(cf.scenarios.items(), key=lambda kv: kv[1]):
        run = solve_capacity(p, opts.headroom, scale=factor, fixed_commitments=kept_in_scenarios(sol.commitments_fixed))
        shortfall = {w: [round(max(0.0, d * factor - sol.capacity[w][t] * opts.headroom), 4)
                         for t, d in enumerate(series)] for w, series in p.demand.items()}
        idle = {w: [round(max(0.0, sol.capacity[w][t] * opts.headroom - d * factor), 4)
                    for t, d in enumerate(series)] for w, series in p.demand.items()}
        scenarios.append(ScenarioLine(name=name, multiplier=factor, total_cost=printed_total(p, run),
                                      shortfall=shortfall, idle=idle))
    use = commitment_use(ledger, [x.running for x in periods], mpp)
    if use is not None:
        line_of = {(label, x.provider, x.service, x.sku, x.region, x.price_kind): x
                   for label, xs in zip(p.labels, bought, strict=True) for x in xs}
        ledger = assess(ledger, [line_of[(c.bought, c.provider, c.service, c.sku, c.region, c.price_kind)]
                                 for c in ledger], use,
                        {w.name: "on-demand" in w.price_kinds for w in cf.workloads}, cf.charge, mpp, p.currency)
    od = None if baseline is None else printed_total(p, baseline)
    summary = summarise_commitments(cf.charge, [x.cost for x in periods], ledger, od)
    # the sum of the printed lines: the period costs, plus the obligation after the horizon when it is charged
    total = cents((summary.cost_inside_horizon,
                   summary.obligation_after_horizon if cf.charge == "full-term" else 0.0))
    warnings = [f"the solver stopped at its time limit on the {what}: feasible, not proven optimal"
                for what, run in (("plan", sol), ("all-on-demand baseline", baseline))
                if run is not None and run.status == "optimal" and not run.proven_optimal]
    chosen = [pu.offering.offering for pu in sol.purchases]
    day = dt.date.fromisoformat(today)
    old_commitments = stale_commitments([pu.offering.offering for pu in sol.purchases if pu.committed], day)
    flagged = {o for o, _ in old_commitments}  # said once, as a commitment warning
    stale, age_errors = staleness([o for o in chosen if o not in flagged], day, opts.max_price_age)
    if opts.max_price_age is not None:
        age_errors += staleness(flagged, day, opts.max_price_age)[1]
    warnings += stale + [w for _, w in old_commitments]
    warnings += borrowed_notes(o.gpu for o in chosen)  # latency from another architecture's calibration
    # a checkpoint the table of known ones marks avoid, served as the model or as the one named for a precision:
    # solve's warnings (review: plan said nothing of either)
    warnings += cautions((name, c.gpus_per_replica or 1) for i, _t in sol.replicas for c in (p.candidates[i],)
                         for name in (c.workload.model if isinstance(c.workload.model, str) else None,
                                      c.workload.checkpoints.get(c.shape.precision) if c.shape else None))
    if cf.horizon.starts_before(day):
        warnings.append(f"the horizon starts in {cf.horizon.labels()[0]}, before the plan date {today}: past periods "
                        f"are planned and priced at today's prices (set horizon.start to the period you will buy in)")
    fx = solved.catalog.fx if solved.catalog is not None else None
    if fx is not None:  # the rates that converted the chosen prices age with them (staleness.fx_staleness)
        fx_stale, fx_errors = fx_staleness(fx, chosen, p.currency, day, opts.max_price_age)
        warnings += fx_stale
        age_errors += fx_errors
    return CapacityPlan(status="optimal", currency=p.currency, horizon=horizon, period=cf.horizon.period,
                        charge=cf.charge,
                        headroom=opts.headroom, periods=periods, total_cost=total, all_on_demand_cost=od,
                        savings=None if od is None else plain(od - total, 2),
                        committed_after_horizon=summary.obligation_after_horizon, scenarios=scenarios,
                        explanation=[], as_of_date=today, warnings=warnings,
                        oldest_price_as_of=oldest_price_date(chosen), fx="" if fx is None else fx.describe(),
                        fx_as_of="" if fx is None else fx.as_of, price_age_errors=age_errors,
                        commitments=ledger, commitment_summary=summary,
                        demand_units={w.name: w.demand.unit for w in cf.workloads},
                        workload_tags={w.name: dict(w.tags) for w in cf.workloads if w.tags},
                        all_on_demand_note=solved.baseline_note,
                        catalog_as_of="" if solved.catalog is None else solved.catalog.as_of)
