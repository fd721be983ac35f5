"""The capacity file: demand that grows over a horizon, and what each workload may buy (`gpuopt plan`).

    schema_version: 1
    residency: cn
    currency: CNY
    horizon: {periods: 4, period: quarter, start: 2027Q1}     # start optional: labels the periods
    charge: full-term                  # or inside-horizon: count only the part of a commitment inside the horizon
    scenarios: {low: 0.7, base: 1.0, high: 1.4}               # optional demand multipliers
    workloads:
      - name: cn-chat
        model: Qwen/Qwen2.5-32B-Instruct
        demand: {requests_per_second: [1, 2, 3, 5]}         # one per period; or {base: 1, growth: 0.5}
                                                             # (x1.5 each period); or {2027Q1: 1, ...}
        input_tokens: 1200
        output_tokens: 300
        max_model_len: 16384
        slo: {ttft_ms: 3000, tpot_ms: 60}
        price_kinds: [on-demand, subscription-monthly, reserved-1y]
        interruptible: false           # spot only when true

All other workload fields (precisions, kv_cache_dtypes, min_replicas, tags, providers) work as in the
workload file. Errors: one line per problem with the field path and YAML line, exit code 2.
"""

from __future__ import annotations

import datetime as dt
import re
from pathlib import Path
from typing import Annotated, Literal

from pydantic import AfterValidator, Discriminator, Field, Tag, ValidationInfo, field_validator, model_validator

from gpuopt.errors import FieldError
from gpuopt.inputs.workload import (
    MAX_CONCURRENCY,
    MAX_REQUESTS_PER_SECOND,
    PriceKindList,
    ProviderList,
    Quota,
    ResidencySelector,
    ServingTarget,
    Strict,
    burstiness_field,
    known_quota_providers,
    load_versioned,
    locate_fields,
    no_burstiness_in_loop,
    one_line,
    one_load_unit,
    relative_model_configs,
    unique_names,
)
from gpuopt.vocabulary import Currency

MONTHS_PER_PERIOD = {"month": 1, "quarter": 3}
# Commitment terms in months (catalog_notes / commit_notes): what a purchase pays for, whether used or not.
TERM_MONTHS = {"reserved-1y": 12, "reserved-3y": 36, "savings-plan": 12, "savings-plan-3y": 36,
               "subscription-1y": 12, "subscription-monthly": 1}
RENEWABLE = {"subscription-monthly"}  # renewed month by month: fills any period of whole months
UNCOMMITTED = {"on-demand", "spot", "community"}


class GrowthDemand(Strict):
    base: float = Field(gt=0)
    growth: float = Field(ge=-0.9, description="Fractional change per period: 0.5 means x1.5 each period")


def _series_form(value: object) -> str:
    """Which of the three demand forms a value is meant to be, read from its shape: a mapping with `base` or
    `growth` is a growth series even when a value is wrong, so `{base: 0, growth: 0.5}` is told "base must be
    greater than 0" instead of being re-read as two period labels that do not match the horizon."""
    if isinstance(value, GrowthDemand):  # pydantic asks again when serialising a validated model
        return "growth-series"
    if isinstance(value, dict):
        return "growth-series" if {"base", "growth"} & set(value) else "values-by-period"
    return "list-of-values"


def _not_negative(value: float) -> float:
    if value < 0:
        raise ValueError(f"demand must not be negative (got {value:g})")
    return value


# checked with the rest of the file (pydantic), so a negative value is named beside any other mistake in it
# (QA: after an unknown price kind the file's negative demands went unsaid)
Load = Annotated[float, AfterValidator(_not_negative)]
DemandSeries = Annotated[
    Annotated[list[Load], Tag("list-of-values")]
    | Annotated[GrowthDemand, Tag("growth-series")]
    | Annotated[dict[str, Load], Tag("values-by-period")],
    Discriminator(_series_form),
]


class Demand(Strict):
    requests_per_second: DemandSeries | None = None
    concurrency: DemandSeries | None = None

    @model_validator(mode="after")
    def _one(self) -> Demand:
        one_load_unit(self.requests_per_second, self.concurrency)
        return self

    @property
    def unit(self) -> str:
        return "requests_per_second" if self.requests_per_second is not None else "concurrency"

    @property
    def series(self) -> DemandSeries:
        value = self.requests_per_second if self.requests_per_second is not None else self.concurrency
        assert value is not None  # guaranteed by _one
        return value


MAX_PERIODS = 60
MAX_HORIZON_MONTHS = MAX_PERIODS * 3  # 60 quarters: the latest month a commitment of a plan can start in


class Horizon(Strict):
    periods: int = Field(ge=1, le=MAX_PERIODS)
    period: Literal["quarter", "month"] = "quarter"
    start: str | None = Field(default=None, description="First period label: 2027Q1 or 2027-01")

    @field_validator("start")
    @classmethod
    def _start(cls, value: str | None) -> str | None:
        if value is not None and not re.fullmatch(r"(?!0000)\d{4}(Q[1-4]|-(0[1-9]|1[0-2]))", value):
            # year 0000 names no calendar date (FOCUS dates every period)
            raise ValueError("start must look like 2027Q1 (quarters) or 2027-01 (months), in a year from 0001")
        return value

    @model_validator(mode="after")
    def _matches_period(self) -> Horizon:
        if self.start and ("Q" in self.start) != (self.period == "quarter"):
            raise ValueError(f"start {self.start} does not name a {self.period}")
        if self.start:
            # the horizon and a 5-year commitment bought in its last period are dated (FOCUS billing periods):
            # past 9999 no calendar date exists (9999Q4 ended `plan --format focus` in a ValueError, exit 70)
            first = int(self.start[:4]) * 12 + ((int(self.start[5]) - 1) * 3 if "Q" in self.start
                                                else int(self.start[5:]) - 1)
            last = first + self.periods * self.months_per_period + 60
            if last // 12 > 9999:
                raise ValueError(f"start {self.start}: the horizon and the commitments it can buy run past the "
                                 "year 9999, which no calendar dates")
        return self

    @property
    def months_per_period(self) -> int:
        return MONTHS_PER_PERIOD[self.period]

    def starts_before(self, today: dt.date) -> bool:
        """Whether the first period is over before the one `today` is in: a horizon in the past, planned at
        today's prices (a warning: nothing checks a back-test, but a typo in the year reads as a plan)."""
        if self.start is None:
            return False
        year = int(self.start[:4])
        if self.period == "quarter":
            return (year, int(self.start[5])) < (today.year, (today.month - 1) // 3 + 1)
        return (year, int(self.start[5:])) < (today.year, today.month)

    def labels(self) -> list[str]:
        if self.start is None:
            return [f"{'Q' if self.period == 'quarter' else 'M'}{i + 1}" for i in range(self.periods)]
        year = int(self.start[:4])
        if self.period == "quarter":  # years of four digits, as the start is written (0001Q1 was "1Q1")
            q = int(self.start[5]) - 1
            return [f"{year + (q + i) // 4:04d}Q{(q + i) % 4 + 1}" for i in range(self.periods)]
        m = int(self.start[5:]) - 1
        return [f"{year + (m + i) // 12:04d}-{(m + i) % 12 + 1:02d}" for i in range(self.periods)]


class CapacityWorkload(ServingTarget):
    demand: Demand
    price_kinds: PriceKindList = Field(default_factory=lambda: ["on-demand"], min_length=1)
    interruptible: bool = False

    burstiness: float | None = burstiness_field()

    @field_validator("burstiness")
    @classmethod
    def _open_loop_only(cls, burstiness: float | None, info: ValidationInfo) -> float | None:
        demand = info.data.get("demand")
        return no_burstiness_in_loop(burstiness, demand is not None and demand.unit == "concurrency")

    @model_validator(mode="after")
    def _spot_needs_tolerance(self) -> CapacityWorkload:
        if "spot" in self.price_kinds and not self.interruptible:
            raise ValueError("spot capacity can be taken back at any time: allow it only with interruptible: true")
        return self


class CapacityFile(Strict):
    schema_version: Literal[1]
    residency: ResidencySelector = None
    providers: ProviderList | None = None
    currency: Currency | None = None
    horizon: Horizon
    charge: Literal["full-term", "inside-horizon"] = "full-term"
    scenarios: dict[str, float] = Field(default_factory=dict)
    workloads: list[CapacityWorkload] = Field(min_length=1)
    # as in a workload file: the most instances of an offering any period may run (a GPU quota is a capacity
    # plan's first constraint); each period's running instances count against it
    quotas: list[Quota] = Field(default_factory=list)

    @field_validator("quotas")
    @classmethod
    def _quota_providers(cls, value: list[Quota]) -> list[Quota]:
        return known_quota_providers(value)

    @field_validator("scenarios")
    @classmethod
    def _scenarios(cls, value: dict[str, float]) -> dict[str, float]:
        for name, factor in value.items():
            one_line(name)  # a scenario's name heads a report column and a FOCUS tag
            if not name.strip():  # QA: {"": 0.7} was a scenario named nothing
                raise ValueError("a scenario needs a name (got an empty one)")
            if factor <= 0:
                raise ValueError(f"scenario {name}: the demand multiplier must be positive (got {factor})")
        return value

    @field_validator("workloads")
    @classmethod
    def _unique_names(cls, value: list[CapacityWorkload]) -> list[CapacityWorkload]:
        return unique_names(value)


def demand_series(w: CapacityWorkload, horizon: Horizon) -> list[float]:
    """Demand per period (validated by load_capacity_file)."""
    series = w.demand.series
    if isinstance(series, GrowthDemand):
        return [series.base * (1 + series.growth) ** t for t in range(horizon.periods)]
    if isinstance(series, dict):
        return [float(series[label]) for label in horizon.labels()]
    return [float(v) for v in series]


Located = list[tuple[tuple[str | int, ...], str]]


def _series_problems(w: CapacityWorkload, index: int, horizon: Horizon) -> Located:
    """A demand series that does not fit the horizon, each problem at its field (or its period's value)."""
    where: tuple[str | int, ...] = ("workloads", index, "demand", w.demand.unit)
    series = w.demand.series
    labels = horizon.labels()
    problems: Located = []
    if isinstance(series, list):
        if len(series) != horizon.periods:
            problems.append((where, f"{len(series)} values for {horizon.periods} periods"))
    elif isinstance(series, dict):
        keys = list(series)
        if sorted(keys, key=lambda k: labels.index(k) if k in labels else -1) != keys or set(keys) != set(labels):
            if set(keys) != set(labels):
                problems.append((where, f"periods {', '.join(keys)} do not match the horizon {', '.join(labels)}"))
            else:
                problems.append((where, f"periods out of order ({', '.join(keys)}; expected {', '.join(labels)})"))
    return problems


def _ceiling_problems(w: CapacityWorkload, index: int, horizon: Horizon) -> Located:
    """Demand above the sanity ceilings of a workload file (a growth series compounds: base 1e3 growing 100x a
    period passes 1e6 requests/s in the third period)."""
    ceiling = MAX_REQUESTS_PER_SECOND if w.demand.unit == "requests_per_second" else MAX_CONCURRENCY
    where: tuple[str | int, ...] = ("workloads", index, "demand", w.demand.unit)
    try:
        series = demand_series(w, horizon)
    except (KeyError, OverflowError):
        series = []  # wrong period labels are reported by _series_problems; overflow is above the ceiling anyway
        if isinstance(w.demand.series, GrowthDemand):
            return [(where, f"demand grows past {ceiling:g}, above what gpuopt plans for")]
    return [(where, f"demand {v:g} in period {i + 1} is above what gpuopt plans for ({ceiling:g})")
            for i, v in enumerate(series) if v > ceiling][:1]


def load_capacity_file(path: Path) -> CapacityFile:
    cf = load_versioned(path, CapacityFile, "schema_version, horizon and workloads")
    problems = [p for i, w in enumerate(cf.workloads) for p in _series_problems(w, i, cf.horizon)]
    if not problems:
        problems = [p for i, w in enumerate(cf.workloads) for p in _ceiling_problems(w, i, cf.horizon)]
    for i, w in enumerate(cf.workloads):
        for k, kind in enumerate(w.price_kinds):
            if kind in UNCOMMITTED:
                continue
            term = TERM_MONTHS.get(kind)
            if term is None:
                problems.append((("workloads", i, "price_kinds", k), f"{kind} has no term gpuopt knows, so it "
                                 f"cannot be a whole number of {cf.horizon.period}s"))
            elif kind not in RENEWABLE and term % cf.horizon.months_per_period:
                problems.append((("workloads", i, "price_kinds", k), f"the {term}-month term of {kind} is not a "
                                 f"whole number of {cf.horizon.period}s"))
    if problems:
        raise locate_fields(path, FieldError(problems))  # each at its YAML line
    return cf.model_copy(update={"workloads": relative_model_configs(cf.workloads, path)})
