"""Typed results of `solve`: what renderers receive (never dicts with string keys).

The JSON contract of `gpuopt solve --format json` is `Plan.model_dump_json(indent=2)`: stable key names,
plain floats, and the same bytes for the same inputs.
"""

from __future__ import annotations

import math
import re
from decimal import ROUND_HALF_EVEN, ROUND_HALF_UP, Context, Decimal
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    model_serializer,
    model_validator,
    with_config,
)
from typing_extensions import TypedDict

from gpuopt.clock import iso_date
from gpuopt.vocabulary import CURRENCIES, PRICE_KINDS, PROVIDERS, RejectionKind


def _one_of(known: tuple[str, ...], what: str) -> AfterValidator:
    """A check that a name read back from a plan file is one of `known` (plans are built from catalog rows,
    whose names are)."""
    def check(value: str) -> str:
        if value not in known:
            raise ValueError(f"unknown {what} '{value}' (known: {', '.join(known)})")
        return value

    return AfterValidator(check)


KnownPriceKind = Annotated[str, _one_of(PRICE_KINDS, "price kind")]
"""A price kind in a plan file: typed as str where plans are built from catalog rows, checked where a plan is read
back (a hand-edited `reserved-1yy` fell out of every FOCUS charge category and dropped 41 % of the bill)."""
KnownProvider = Annotated[str, _one_of(PROVIDERS, "provider")]
"""A provider in a plan file (QA: an edited `azure` was deployed with SkyPilot's region `mars-1`)."""

PLAN_SCHEMA_VERSION = 1
PlanStatus = Literal["optimal", "infeasible"]
"""What a solve ends in: a plan meeting every constraint (proven optimal or not: see the warnings), or none."""
HOURS_PER_MONTH = 730  # the FinOps convention for monthly cost
DEFAULT_HEADROOM = 0.8  # a replica is planned for at most this share of the load it sustains
# unit prices and a deployment's share of instances are written with 8 decimals (at least the catalog's own
# digits, and converted prices' too): FOCUS rows and readers of the JSON rebuild the plan's costs from them to
# the cent (at 4 decimals 1.17243 became 1.1724, 0.02 per instance-month short). Costs stay at cents.
PRICE_DIGITS = 8


_EXACT = Context(prec=80)
NOISE_DIGITS = 6
"""Decimals past the printed ones at which a float's binary noise is dropped before the half is rounded."""


def plain(value: float, digits: int = 4) -> float:
    """Round a number for output as a hand computation does, half up: 0.5125 USD/h x 730 h = 374.125 -> 374.13.
    Python's round() is half-to-even on the float's binary value (the product is 374.12499999999994 and an
    exact 739.125 rounds to 739.12: a cent under what a finance team computes, QA), so the noise is dropped
    first, at `NOISE_DIGITS` decimals past `digits`, then the half rounds away from zero. A plain Python float,
    never -0.0, the same on every run."""
    v = float(value)
    if not math.isfinite(v) or abs(v) >= 1e15:  # a float this large has no digit below the unit to round
        out = round(v, digits) if math.isfinite(v) else v
        return 0.0 if out == 0 else out
    noise_free = Decimal(v).quantize(Decimal(1).scaleb(-(digits + NOISE_DIGITS)), ROUND_HALF_EVEN, _EXACT)
    out = float(noise_free.quantize(Decimal(1).scaleb(-digits), ROUND_HALF_UP, _EXACT))
    return 0.0 if out == 0 else out


def whole(value: float) -> int:
    """`value` rounded to a whole number half up, as plain rounds (cents of a charge, 100 x an amount); callers
    pass finite amounts (a plan's prices and counts are validated finite)."""
    return int(plain(value, 0))


def month_charge(price_per_hour: float, count: float) -> float:
    """A monthly subscription's month, billed as one: `count` instances x the hourly price x the 730-hour month
    the catalog derived it from, to the cent (commitments.period_charges charges periods of these; FOCUS bills
    them month by month)."""
    return plain(price_per_hour * count * HOURS_PER_MONTH, 2)


def list_price_gap_pct(instance_price: float, list_price: float | None) -> float | None:
    """How far a price is from its list price, in % to the hundredth: negative below it (a --discount, a workload
    file's `discounts`, an overlay), positive above (an overlay); None without a list price. One definition
    for the report's assumptions and diff's details (review: they disagreed on a rounding-level gap)."""
    if not list_price:
        return None
    return plain(100 * (instance_price / list_price - 1), 2)


def split_exactly(amounts: list[float], digits: int) -> list[float]:
    """`amounts` rounded to `digits` decimals so that they sum to their total rounded so (largest remainder; ties
    to the earlier): a plan's shares that must add up to what they split (a machine's bill, a workload's
    demand)."""
    unit = 10 ** digits
    scaled = [a * unit for a in amounts]
    floors = [math.floor(x + 1e-9) for x in scaled]
    short = whole(sum(scaled)) - sum(floors)
    for i in sorted(range(len(scaled)), key=lambda i: (floors[i] - scaled[i], i))[:max(short, 0)]:
        floors[i] += 1
    return [f / unit for f in floors]


Money = Annotated[float, Field(ge=0)]
"""A cost or a unit price: never negative. A plan read back from a file (report, diff, deploy) sums, converts
and bills them as they stand, so a hand-edited -5 must be refused, not printed as a credit."""


def _iso_date(text: str) -> str:
    """A calendar day written YYYY-MM-DD (clock.iso_date): FOCUS counts its charge periods from it."""
    if not iso_date(text):
        raise ValueError(f"expected a date YYYY-MM-DD, got {text!r}")
    return text


IsoDate = Annotated[str, AfterValidator(_iso_date)]


def _known_currency(code: str) -> str:
    """One of the currencies gpuopt prices in: every money figure of a plan is in it, and diff converts by it."""
    if code not in CURRENCIES:
        raise ValueError(f"{code!r} is not a currency gpuopt prices in ({', '.join(CURRENCIES)})")
    return code


CurrencyCode = Annotated[str, AfterValidator(_known_currency)]

FX_RATE = re.compile(r"1 ([A-Z]{3}) = (\S+) ([A-Z]{3})")
"""A rate in a plan's `fx` text, as FxTable.describe writes it: `1 USD = 6.6529 CNY (2026-10-30)`."""


def _rate(value: str) -> float:
    """A rate as the text writes it; NaN unless it is a positive finite number."""
    try:
        rate = float(value)
    except ValueError:
        return math.nan
    return rate if math.isfinite(rate) and rate > 0 else math.nan


def fx_rates(text: str) -> list[tuple[str, float, str]]:
    """The (base, rate, quote) a plan's `fx` text records; a rate that is not a positive finite number is NaN."""
    return [(base, _rate(value), quote) for base, value, quote in FX_RATE.findall(text)]


def _fx_text(text: str) -> str:
    """Every rate the text records is a positive finite number: diff converts the old plan's figures at it (a
    hand-edited `1 USD = 1.2.3 CNY` was a ValueError, exit 70; `1e400` converted every figure to nan)."""
    for base, value, quote in FX_RATE.findall(text):
        if math.isnan(_rate(value)):
            raise ValueError(f"1 {base} = {value} {quote}: the rate is not a positive finite number")
    return text


FxText = Annotated[str, AfterValidator(_fx_text)]


class Frozen(BaseModel):
    """Base of the plan's models. allow_inf_nan=False: a plan file is JSON that people edit and pydantic reads
    `NaN` and `Infinity` in it; they would print as `nan USD/month` and bill `inf` in FOCUS."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)


class Predicted(Frozen):
    ttft_ms: float
    tpot_ms: float
    replica_requests_per_second: float  # sustainable within both SLOs, before headroom
    replica_concurrency: float
    kv_cache_tokens: int
    planned_requests_per_second_per_replica: float  # what the plan actually sends to each replica


class LatencyAt(Frozen):
    """One replica's predicted latency at one load: means over requests and, when the workload sets
    slo.percentile, that percentile. `source` says which model produced it: "analytic" (the steady-state
    model; its percentile is the spread of the length mix only, None without a mix) or "simulated"."""

    requests_per_second: float  # per replica
    concurrency: float  # requests in the replica (Little's law)
    ttft_ms: float  # mean
    tpot_ms: float  # mean
    percentile: int | None
    ttft_percentile_ms: float | None
    tpot_percentile_ms: float | None
    source: Literal["analytic", "simulated"]


class GpuMemory(Frozen):
    """Per-GPU memory of the most loaded GPU of a replica (GiB)."""

    total_gib: float
    weights_gib: float
    lora_gib: float = 0.0  # of weights_gib: LoRA adapter slots' buffers (vLLM logs them inside the weights)
    activation_gib: float
    non_torch_gib: float
    cuda_graph_gib: float
    kv_cache_gib: float
    free_gib: float


class Deployment(Frozen):
    workload: str
    model: str
    provider: KnownProvider
    service: str
    sku: str
    region: str
    country: str
    gpu: str
    # at least one each: a plan read back from a file (report, diff, deploy) divides by them
    gpus_per_instance: int = Field(ge=1)
    instances: float  # this deployment's share of the offering's instances (fractional when shared)
    replicas: int = Field(ge=1)
    tensor_parallel: int = Field(ge=1)
    pipeline_parallel: int = Field(ge=1)
    gpus_per_replica: int = Field(ge=1)
    weight_precision: str
    kv_cache_dtype: str
    max_model_len: int
    max_num_seqs: int
    gpu_memory_utilization: float
    price_kind: KnownPriceKind
    instance_price_per_hour: Money
    list_price_per_hour: Money | None  # the catalog's list price (differs when an overlay or discount applies)
    cost_per_hour: Money
    cost_per_month: Money
    predicted: Predicted  # ttft_ms/tpot_ms there are at the replica's capacity (kept for compatibility)
    memory: GpuMemory
    utilisation: float  # planned load / sustainable capacity of the deployment's replicas
    kv_utilisation: float  # share of the KV cache the planned concurrency occupies (1 - KV headroom)
    vllm_command: str
    price_source: str
    price_as_of: str
    price_origin: str
    tags: dict[str, str]
    at_planned_load: LatencyAt | None = None  # at the load the plan sends each replica (demand / capacity share)
    capacity: LatencyAt | None = None  # at the most a replica sustains within the SLOs (before headroom)
    # a commitment (reservation, savings plan, subscription): the on-demand price of the same SKU and region
    # (after --discount and overlays) and its list price, in the plan currency; FOCUS prices the usage the
    # commitment covers at them. None for rented capacity or when the catalog has no on-demand twin.
    on_demand_price_per_hour: Money | None = None
    on_demand_list_price_per_hour: Money | None = None
    # an offering sold as `global` that the plan's residency admits only through the data-centre countries its
    # source lists (solve.pin_notes): the countries to create it in (ISO codes); None: no pinning needed.
    # Deploy targets pin the machine there (SkyPilot's RunPod regions are these codes)
    pinned_countries: list[str] | None = None

    @model_validator(mode="after")
    def _shape_holds_together(self) -> Deployment:
        """The shape deploy launches is the one the plan priced (QA: an edited `gpus_per_replica: 7` became a Ray
        LeaderWorkerSet of 3 GPUs a pod running --tensor-parallel-size 2; `replicas: 10` ran on one 4-GPU
        machine at the same cost; a line break in the command dropped its last flags): TP x PP GPUs a
        replica, the replicas within the machines paid for, and a command of the plan's own shape (one
        `vllm serve` line on one node, its --tensor-parallel-size and --pipeline-parallel-size the fields')."""
        problems = []
        if self.tensor_parallel * self.pipeline_parallel != self.gpus_per_replica:
            problems.append(f"gpus_per_replica: {self.gpus_per_replica}, where tensor_parallel x pipeline_parallel "
                            f"is {self.tensor_parallel * self.pipeline_parallel}")
        if self.replicas * self.gpus_per_replica > self.instances * self.gpus_per_instance + 1e-6:
            problems.append(f"replicas: {self.replicas} of {self.gpus_per_replica} GPUs, on {self.instances:g} "
                            f"instance(s) of {self.gpus_per_instance} GPUs")
        command = self.vllm_command
        one_node = self.gpus_per_replica <= self.gpus_per_instance
        if one_node and ("\n" in command or "\r" in command or not command.startswith("vllm serve ")):
            problems.append("vllm_command: not the one `vllm serve` line of a replica on one node")
        for flag, value in (("--tensor-parallel-size", self.tensor_parallel),
                            ("--pipeline-parallel-size", self.pipeline_parallel)):
            found = {int(n) for n in re.findall(rf"{flag} (\d+)", command)}
            if found - {value} or (value > 1 and not found):
                problems.append(f"vllm_command: {flag} {', '.join(map(str, sorted(found))) or 'absent'}, where "
                                f"the deployment's is {value}")
        if problems:
            raise ValueError("; ".join(problems) + ": the file contradicts itself (edited by hand?)")
        return self

    @model_serializer(mode="wrap")
    def _without_unpinned(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """`pinned_countries` only where a residency needs it: other plans' JSON stays what releases before the
        field wrote (their plan models refuse a key they do not know)."""
        data: dict[str, Any] = handler(self)
        if data.get("pinned_countries") is None:
            data.pop("pinned_countries", None)
        return data


class InstanceLine(Frozen):
    """Instances bought per offering (what the bill shows); several deployments may share them."""

    provider: KnownProvider
    service: str
    sku: str
    region: str
    price_kind: KnownPriceKind
    gpu: str
    gpus_per_instance: int
    instances: int
    price_per_hour: Money
    cost_per_hour: Money
    workloads: list[str]


@with_config(ConfigDict(extra="forbid", allow_inf_nan=False))
class Candidate(TypedDict):
    """One considered candidate. A TypedDict, not a model: a plan holds 10^4-10^5 of them, and validating
    plain dicts is four times faster than building model instances."""

    workload: str
    provider: str
    service: str
    sku: str
    region: str
    country: str
    gpu: str
    gpus_per_instance: int | None
    price_kind: KnownPriceKind
    tensor_parallel: int | None
    pipeline_parallel: int | None
    weight_precision: str | None
    kv_cache_dtype: str | None
    gpus_per_replica: int | None
    replica_requests_per_second: float | None
    replica_concurrency: float | None
    instance_price_per_hour: Money | None
    ttft_ms: float | None
    tpot_ms: float | None
    kv_cache_tokens: int | None
    feasible: bool
    reason: str | None
    reason_kind: RejectionKind | None


class Alternative(Frozen):
    label: str  # e.g. "gpu L40S-48GB" or "provider aws"
    status: PlanStatus
    total_cost_per_hour: Money | None
    total_cost_per_month: Money | None
    delta_per_hour: float | None
    deployments: list[str]  # short descriptions
    max_ttft_ms: float | None
    max_tpot_ms: float | None
    reason: str | None


class ResidencyPremium(Frozen):
    selector: str
    cost_per_hour_with_policy: Money | None
    cost_per_hour_without_policy: Money | None
    premium_per_hour: float | None
    premium_fraction: float | None
    cheapest_excluded_offering: str | None


class WorkloadSummary(Frozen):
    name: str
    model: str
    demand: float
    demand_unit: str
    input_tokens: int
    output_tokens: int
    ttft_slo_ms: float | None
    tpot_slo_ms: float | None
    min_replicas: int
    tags: dict[str, str]
    slo_percentile: int | None = None  # the targets hold at this percentile (None: the mean)
    burstiness: float | None = None  # gamma shape of the arrivals the plan was made for (None: Poisson)

    @model_serializer(mode="wrap")
    def _without_poisson(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """`burstiness` only where the workload set it: a Poisson plan's JSON stays what releases before the
        field wrote and read (their plan models refuse a key they do not know, `burstiness: null` included)."""
        data: dict[str, Any] = handler(self)
        if data.get("burstiness") is None:
            data.pop("burstiness", None)
        return data


class UnitEconomics(Frozen):
    """What the planned capacity costs per unit of work, at the planned load. Each per-token figure charges
    the workload's whole cost to that token type (they are alternatives, not parts of a split)."""

    workload: str
    cost_per_hour: Money
    requests_per_second: float
    cost_per_request: Money
    cost_per_million_output_tokens: Money
    cost_per_million_input_tokens: Money
    utilisation: float  # planned load / sustainable capacity (the headroom left is 1 - this)


class Rejections(Frozen):
    """Rejected candidates of one workload grouped by reason kind, with one example."""

    workload: str
    reason_kind: RejectionKind
    count: int
    example: str


class SweepPoint(Frozen):
    tpot_factor: float  # multiplier on every workload's TPOT target
    status: PlanStatus
    cost: Money | None  # per hour (solve) or over the horizon (plan)


class Sensitivity(Frozen):
    """How far the plan stretches, and what tighter or looser TPOT targets would cost."""

    traffic_multiplier_limit: float  # demand x this is the most the planned replicas carry within the SLOs
    next_plan_cost: Money | None  # the cheapest plan for demand just above that multiplier
    tpot_sweep: list[SweepPoint]


class Budget(Frozen):
    """The monthly budget a plan was checked against (`--max-monthly` or the workload file's `budget`), and
    how far the plan is under or over it. `margin` is in the plan's currency: positive under, negative over."""

    max_monthly: float  # the limit as given, in `currency`
    currency: CurrencyCode
    source: Literal["--max-monthly", "workload file"]
    max_monthly_in_plan_currency: float  # converted at the plan's FX
    monthly_cost: Money | None  # the plan's cost per 730-hour month (None when infeasible)
    margin: float | None  # limit - cost, in the plan's currency
    margin_fraction: float | None  # margin / limit
    over: bool

    @classmethod
    def check(cls, max_monthly: float, currency: str, source: Literal["--max-monthly", "workload file"],
              rate_to_plan: float, monthly_cost: float | None) -> Budget:
        """The budget verdict: `rate_to_plan` converts the limit's currency into the plan's."""
        limit = plain(max_monthly * rate_to_plan, 2)
        margin = None if monthly_cost is None else plain(limit - monthly_cost, 2)
        return cls(max_monthly=max_monthly, currency=currency, source=source, max_monthly_in_plan_currency=limit,
                   monthly_cost=monthly_cost, margin=margin,
                   margin_fraction=None if margin is None or limit <= 0 else plain(margin / limit),
                   over=margin is not None and margin < 0)


class CandidateGroup(Frozen):
    """Candidates of one workload sharing a rejection reason (or, for feasible ones, a GPU type)."""

    workload: str
    group: str  # the reason kind, or the GPU type
    count: int
    cheapest: list[Candidate]  # the cheapest few of the group (unpriced ones last)


class CandidateSummary(Frozen):
    """What `--candidates summary` keeps of the candidate list: counts and the cheapest few per group."""

    considered: int
    feasible: int
    per_group: int  # how many of each group are kept in `cheapest`
    by_reason: list[CandidateGroup]  # rejected candidates, per workload and reason kind
    by_gpu: list[CandidateGroup]  # feasible candidates, per workload and GPU type


CandidatesForm = Literal["all", "summary", "none"]


class Plan(Frozen):
    schema_version: int = PLAN_SCHEMA_VERSION
    kind: Literal["gpuopt-plan"] = "gpuopt-plan"
    status: PlanStatus
    currency: CurrencyCode
    total_cost_per_hour: Money | None
    total_cost_per_month: Money | None
    deployments: list[Deployment]
    instances: list[InstanceLine]
    alternatives: list[Alternative]
    candidates: list[Candidate]
    residency_premium: ResidencyPremium | None
    catalog_as_of: str
    oldest_price_as_of: str = ""  # the oldest price the plan chose ("unknown" if one is undated)
    fx: FxText  # the rates used, each with its date
    fx_as_of: str
    headroom: float = Field(gt=0, le=1)  # the share of each replica's capacity planned (QA: -5 read "-500 %")
    # numbers only: a plan read back from a file puts it in a pip pin and an image tag (deploy)
    vllm_version: str = Field(pattern=r"^\d+(\.\d+){1,3}$")
    workloads: list[WorkloadSummary]
    unit_economics: list[UnitEconomics]
    rejections: list[Rejections]
    as_of_date: IsoDate  # the day the plan was made (price ages and FOCUS periods count from it)
    sensitivity: Sensitivity | None = None
    explanation: list[str]  # why infeasible: binding constraint and nearest miss, per workload
    warnings: list[str]
    solver: str
    budget: Budget | None = None  # set when the plan was checked against a monthly budget
    candidates_form: CandidatesForm = "all"  # what `candidates` holds: every candidate, or none (see summary)
    candidate_summary: CandidateSummary | None = None
    profile: str | None = None  # the calibration profile the GPUs were read through (`--profile`), if any

    def instance_line(self, d: Deployment) -> InstanceLine | None:
        """The `instances` line of the offering `d` runs on: the machines bought for it and every deployment
        sharing them (None in a plan without one)."""
        key = (d.provider, d.service, d.sku, d.region, d.price_kind)
        return next((x for x in self.instances if (x.provider, x.service, x.sku, x.region, x.price_kind) == key),
                    None)

    @model_validator(mode="after")
    def _deployments_serve_its_workloads(self) -> Plan:
        """A deployment names a workload of the plan (a hand-edited plan may not): reports, diffs and deploy
        artifacts look the workload up."""
        names = {w.name for w in self.workloads}
        for i, d in enumerate(self.deployments):
            if d.workload not in names:
                raise ValueError(f"deployments.{i}.workload: {d.workload!r} is not one of the plan's workloads "
                                 f"({', '.join(sorted(names)) or 'none'})")
        return self

    @model_validator(mode="after")
    def _priced_if_optimal(self) -> Plan:
        """An optimal plan has its cost and an infeasible one none (a hand-edited status may say otherwise):
        diff prices only an optimal plan, and must not read a missing total as 0.00."""
        check_priced(self.status, {"total_cost_per_hour": self.total_cost_per_hour,
                                   "total_cost_per_month": self.total_cost_per_month})
        return self

    @model_validator(mode="after")
    def _figures_add_up(self) -> Plan:
        """Each money figure is the one the plan's others make, within the rounding gpuopt writes them with
        (hourly figures to 4 decimals, monthly to the cent): what reports, FOCUS and diff each read."""
        for i, d in enumerate(self.deployments):
            check_sum(f"deployments.{i}.cost_per_hour", d.cost_per_hour, d.instance_price_per_hour * d.instances,
                      "instance_price_per_hour x instances", 2e-4 + 1e-5 * d.cost_per_hour)
            check_sum(f"deployments.{i}.cost_per_month", d.cost_per_month, d.cost_per_hour * HOURS_PER_MONTH,
                      f"cost_per_hour x {HOURS_PER_MONTH}", 0.05)
        bought: dict[tuple[str, ...], tuple[int, int]] = {}  # offering -> (its first line, machines of its lines)
        for k, x in enumerate(self.instances):
            # what the bill shows and deploy launches: its cost its price x count, and at least the machines its
            # deployments run on (review: an edited line of 7 instances at 100.00 printed beside a 9.26 total)
            check_sum(f"instances.{k}.cost_per_hour", x.cost_per_hour, x.price_per_hour * x.instances,
                      "price_per_hour x instances", 2e-4 + 1e-5 * x.cost_per_hour)
            line = (x.provider, x.service, x.sku, x.region, x.price_kind)
            first, count = bought.get(line, (k, 0))
            bought[line] = (first, count + x.instances)
        for key, (k, count) in bought.items():
            used = sum(d.instances for d in self.deployments
                       if (d.provider, d.service, d.sku, d.region, d.price_kind) == key)
            if count < math.ceil(used - 1e-6):
                raise ValueError(f"instances.{k}.instances: {count} machines, where its deployments run on "
                                 f"{used:g}: the file contradicts itself (edited by hand?)")
        b = self.budget
        cost = None if b is None else b.monthly_cost
        if b is not None and cost is not None and self.total_cost_per_month is not None:
            check_sum("budget.monthly_cost", cost, self.total_cost_per_month, "total_cost_per_month", 0.005)
            if b.margin is not None:
                check_sum("budget.margin", b.margin, b.max_monthly_in_plan_currency - cost,
                          "max_monthly_in_plan_currency - monthly_cost", 0.01)
                if b.over != (b.margin < 0):
                    raise ValueError(f"budget.over: {b.over} with a margin of {b.margin:,.2f}: the file contradicts "
                                     "itself (edited by hand?)")
        if self.status == "optimal" and self.total_cost_per_hour is not None and self.total_cost_per_month is not None:
            n = len(self.deployments)
            check_sum("total_cost_per_hour", self.total_cost_per_hour, sum(d.cost_per_hour for d in self.deployments),
                      "the sum of the deployments' cost_per_hour", 1e-4 * (n + 1))
            check_sum("total_cost_per_month", self.total_cost_per_month,
                      sum(d.cost_per_month for d in self.deployments), "the sum of the deployments' cost_per_month",
                      0.01)
            if self.instances:
                check_sum("total_cost_per_hour", self.total_cost_per_hour, sum(x.cost_per_hour for x in self.instances),
                          "the sum of the instances' cost_per_hour", 1e-4 * (len(self.instances) + n + 1))
        return self


def check_sum(name: str, value: float, expected: float, how: str, tolerance: float) -> None:
    """ValueError when a figure a plan file states is not the one its other figures make (`how`): gpuopt writes
    each from the others, so a difference beyond rounding is a hand edit, and the formats that read one figure or
    the other would disagree (QA: one edited unit price billed 74,400.00 in FOCUS beside 4,956.70 everywhere
    else; an edited period cost was called "rounding" by diff)."""
    if abs(value - expected) > tolerance:
        raise ValueError(f"{name}: {value:,.10g} is not {how} ({expected:,.10g}): the file contradicts itself "
                         "(edited by hand?); correct one figure from the others, or solve again")


def check_priced(status: PlanStatus, totals: dict[str, float | None]) -> None:
    """ValueError naming the first total that contradicts `status`: null in an optimal plan, a figure in an
    infeasible one."""
    for name, value in totals.items():
        if status == "optimal" and value is None:
            raise ValueError(f"{name}: null in a plan whose status is optimal (an optimal plan has its cost)")
        if status == "infeasible" and value is not None:
            raise ValueError(f"{name}: {value!r} in a plan whose status is infeasible (an infeasible plan has no "
                             "cost)")
