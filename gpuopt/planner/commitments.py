"""What a capacity plan's commitments really oblige, whatever `charge` the program optimised with.

The program may charge a commitment for its whole term (`charge: full-term`) or only for its months inside
the horizon (`charge: inside-horizon`); the provider bills the whole term either way. So every plan reports,
per commitment, its months inside and after the horizon, what it costs inside (amortised: price x 730 h x
months x count) and what it still owes after; and compares with renting on demand on two stated bases:

    amortised  plan cost inside the horizon (commitments for their months inside it) vs all on-demand:
               like for like, the same demand over the same periods;
    cash       the same plus every obligation after the horizon vs all on-demand: what the company signs for
               (the capacity bought after the horizon is not credited).

A monthly subscription is renewed month by month: it never outlives its period, and a scenario re-plan need
not keep it (`kept_in_scenarios`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

from pydantic import BaseModel, ConfigDict

from gpuopt.inputs.capacity import RENEWABLE, TERM_MONTHS, UNCOMMITTED
from gpuopt.planner.plan import HOURS_PER_MONTH

CHARGE_MODES = {
    "full-term": "every commitment is charged for its whole term, also the months after the horizon "
                 "(the total includes the obligation after the horizon)",
    "inside-horizon": "the program charged commitments only for their months inside the horizon, so late "
                      "purchases look cheap; the provider bills the whole term, and the obligation after the "
                      "horizon is reported beside the total (not in it)",
}


class PurchaseLike(Protocol):
    """The purchase line fields this module reads (planner.capacity.PurchaseLine)."""

    @property
    def provider(self) -> str: ...
    @property
    def service(self) -> str: ...
    @property
    def sku(self) -> str: ...
    @property
    def region(self) -> str: ...
    @property
    def price_kind(self) -> str: ...
    @property
    def count(self) -> int: ...
    @property
    def committed(self) -> bool: ...
    @property
    def price_per_hour(self) -> float: ...
    @property
    def workloads(self) -> list[str]: ...


class CommitmentSpan(BaseModel):
    """One commitment purchase: when it runs, and what it costs inside and after the horizon."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    bought: str  # label of the period it starts in
    provider: str
    service: str
    sku: str
    region: str
    price_kind: str
    count: int
    price_per_hour: float
    start_month: int  # months from the start of the horizon
    term_months: int
    months_inside: int
    months_after: int
    cost_inside_horizon: float
    obligation_after_horizon: float
    workloads: list[str]


class CommitmentSummary(BaseModel):
    """The plan's commitments on both bases (see the module docstring)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    charge: str
    charge_explained: str
    cost_inside_horizon: float  # sum of the period costs (commitments amortised)
    obligation_after_horizon: float  # billed after the horizon, whatever the charge mode
    all_on_demand_cost: float | None
    savings_amortised: float | None  # all on-demand - cost inside the horizon
    savings_cash: float | None  # all on-demand - (cost inside + obligation after)
    basis: str


def term_months(price_kind: str, months_per_period: int) -> int:
    """Months a commitment runs: its term, or one period for a subscription renewed month by month."""
    if price_kind in RENEWABLE:
        return months_per_period
    return TERM_MONTHS.get(price_kind, months_per_period)


def spans(periods: Sequence[tuple[str, Sequence[PurchaseLike]]], months_per_period: int) -> list[CommitmentSpan]:
    """Every commitment purchase of a schedule; `periods` are (label, purchases) in order."""
    horizon_months = len(periods) * months_per_period
    out = []
    for index, (label, purchases) in enumerate(periods):
        start = index * months_per_period
        for p in purchases:
            if not p.committed or p.price_kind in UNCOMMITTED:
                continue
            term = term_months(p.price_kind, months_per_period)
            inside = min(term, horizon_months - start)
            monthly = p.price_per_hour * HOURS_PER_MONTH * p.count
            out.append(CommitmentSpan(
                bought=label, provider=p.provider, service=p.service, sku=p.sku, region=p.region,
                price_kind=p.price_kind, count=p.count, price_per_hour=p.price_per_hour, start_month=start,
                term_months=term, months_inside=inside, months_after=term - inside,
                cost_inside_horizon=round(monthly * inside, 2),
                obligation_after_horizon=round(monthly * (term - inside), 2),
                workloads=sorted(p.workloads)))
    return out


def summarise(charge: str, period_costs: Sequence[float], commitments: Sequence[CommitmentSpan],
              all_on_demand: float | None) -> CommitmentSummary:
    inside = round(sum(period_costs), 2)
    after = round(sum(c.obligation_after_horizon for c in commitments), 2)
    return CommitmentSummary(
        charge=charge, charge_explained=CHARGE_MODES.get(charge, charge), cost_inside_horizon=inside,
        obligation_after_horizon=after, all_on_demand_cost=all_on_demand,
        savings_amortised=None if all_on_demand is None else round(all_on_demand - inside, 2),
        savings_cash=None if all_on_demand is None else round(all_on_demand - inside - after, 2),
        basis="amortised: commitments counted for their months inside the horizon, against renting the same "
              "demand on demand over the same periods; cash: the same plus every obligation after the horizon")


def kept_in_scenarios(fixed: Mapping[tuple[tuple[str, ...], int], int]) -> dict[tuple[tuple[str, ...], int], int]:
    """The commitments a scenario must keep: not the monthly subscriptions, which are simply not renewed
    when demand is lower (the offering key ends with the price kind)."""
    return {k: n for k, n in fixed.items() if k[0][-1] not in RENEWABLE}
