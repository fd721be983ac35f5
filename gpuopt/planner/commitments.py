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

Cents: a commitment's whole-term charge is rounded to the cent once, then spread over its periods in whole
cents (`period_charges`, cumulative rounding), so its per-period amortisation, its cost inside the horizon and
its obligation after it are printed figures that add up to its charge exactly; the plan's period costs and
totals are sums of such figures (a total rounded on its own drifted a cent from its printed lines).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Protocol

from pydantic import BaseModel, ConfigDict, Field, model_validator

from gpuopt.inputs.capacity import MAX_HORIZON_MONTHS, RENEWABLE, TERM_MONTHS, UNCOMMITTED
from gpuopt.planner.plan import HOURS_PER_MONTH, KnownPriceKind, Money, month_charge, plain, whole

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
    def cost(self) -> float: ...
    @property
    def workloads(self) -> list[str]: ...
    @property
    def tags(self) -> dict[str, str]: ...


class CommitmentSpan(BaseModel):
    """One commitment purchase: when it runs, and what it costs inside and after the horizon."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)  # read back from plan files

    bought: str  # label of the period it starts in
    provider: str
    service: str
    sku: str
    region: str
    price_kind: KnownPriceKind
    count: int
    price_per_hour: Money
    start_month: int = Field(ge=0, le=MAX_HORIZON_MONTHS)  # months from the start of the horizon
    term_months: int
    months_inside: int
    months_after: int
    cost_inside_horizon: Money
    obligation_after_horizon: Money
    workloads: list[str]
    tags: dict[str, str] = {}  # its workloads' tags (capacity_detail.merged_tags)
    # share of its term's instance-hours that run replicas inside the horizon, its break-even share (price /
    # on-demand price of the same SKU and region), and, when the first is below the second, why it was bought
    # anyway (capacity_detail.assess): None/"" when unknown (no on-demand twin, a plan file from before)
    utilisation: float | None = None
    break_even_utilisation: float | None = None
    note: str = ""

    @model_validator(mode="after")
    def _term_holds_together(self) -> CommitmentSpan:
        """A saved plan's term as the planner writes it: its kind's term (a monthly subscription renews for one
        period of 1 or 3 months), split into months inside and after the horizon, starting inside it (QA: a
        hand-edited `term_months: 0` rendered "term 0 months" beside a 10,270.49 charge)."""
        term = TERM_MONTHS.get(self.price_kind)
        problems = []
        if self.price_kind in RENEWABLE and self.term_months not in (1, 3):
            problems.append(f"term_months {self.term_months}: a {self.price_kind} runs one period (1 or 3 months)")
        elif self.price_kind not in RENEWABLE and term is not None and self.term_months != term:
            problems.append(f"term_months {self.term_months}: a {self.price_kind} runs {term} months")
        elif (self.months_inside < 1 or self.months_after < 0
              or self.months_inside + self.months_after != self.term_months):
            problems.append(f"months_inside {self.months_inside} + months_after {self.months_after} are not its "
                            f"term_months {self.term_months} (at least one month inside the horizon)")
        if problems:
            raise ValueError(problems[0])
        return self


class CommitmentSummary(BaseModel):
    """The plan's commitments on both bases (see the module docstring)."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)  # read back from plan files

    charge: str
    charge_explained: str
    cost_inside_horizon: Money  # sum of the period costs (commitments amortised)
    obligation_after_horizon: Money  # billed after the horizon, whatever the charge mode
    all_on_demand_cost: Money | None
    savings_amortised: float | None  # all on-demand - cost inside the horizon
    savings_cash: float | None  # all on-demand - (cost inside + obligation after)
    basis: str


def term_months(price_kind: str, months_per_period: int) -> int:
    """Months a commitment runs: its term, or one period for a subscription renewed month by month."""
    if price_kind in RENEWABLE:
        return months_per_period
    return TERM_MONTHS.get(price_kind, months_per_period)


def period_charges(price_per_hour: float, count: int, months: int, months_per_period: int, *,
                   monthly_fee: bool = False) -> list[float]:
    """A commitment's charge per period of its term, in cents that sum exactly to its whole-term charge
    (price x 730 h x months x count, rounded once): period k gets round(C k+1/P) - round(C k/P) in cents
    (round half up, integers), so no period drifts more than a cent from the exact amortisation.

    `monthly_fee`: a subscription renewed month by month is billed each month, so its charge is the month's
    (price x 730 h x count, to the cent) times the months -- what FOCUS bills month by month. A quarter
    rounded once charged 12,398.80 USD for three months that FOCUS billed 4,132.93 each (a 27,496 CNY fee
    converted; QA); in the fee's own currency the two agree."""
    periods = max(1, months // months_per_period)
    if monthly_fee:
        total = whole(month_charge(price_per_hour, count) * 100) * months
    else:
        total = whole(price_per_hour * count * HOURS_PER_MONTH * months * 100)  # whole cents, half up
    edges = [(2 * total * k + periods) // (2 * periods) for k in range(periods + 1)]
    return [(edges[k + 1] - edges[k]) / 100 for k in range(periods)]


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
            charges = period_charges(p.price_per_hour, p.count, term, months_per_period,
                                     monthly_fee=p.price_kind in RENEWABLE)
            split = inside // months_per_period
            out.append(CommitmentSpan(
                bought=label, provider=p.provider, service=p.service, sku=p.sku, region=p.region,
                price_kind=p.price_kind, count=p.count, price_per_hour=p.price_per_hour, start_month=start,
                term_months=term, months_inside=inside, months_after=term - inside,
                cost_inside_horizon=cents(charges[:split]), obligation_after_horizon=cents(charges[split:]),
                workloads=sorted(p.workloads), tags=dict(p.tags)))
    return out


def cents(amounts: Iterable[float]) -> float:
    """The sum of printed cent amounts, itself to the cent (float sums of cents carry 1e-12 noise; never -0.0)."""
    return plain(sum(amounts), 2)


def summarise(charge: str, period_costs: Sequence[float], commitments: Sequence[CommitmentSpan],
              all_on_demand: float | None) -> CommitmentSummary:
    """Both bases from the printed figures: the period costs and each commitment's obligation (cents), so the
    cash savings equal all on-demand - the total under full-term to the cent (one quantity, one figure)."""
    inside = cents(period_costs)
    after = cents(c.obligation_after_horizon for c in commitments)
    return CommitmentSummary(
        charge=charge, charge_explained=CHARGE_MODES.get(charge, charge), cost_inside_horizon=inside,
        obligation_after_horizon=after, all_on_demand_cost=all_on_demand,
        savings_amortised=None if all_on_demand is None else plain(all_on_demand - inside, 2),
        savings_cash=None if all_on_demand is None else plain(all_on_demand - cents((inside, after)), 2),
        basis="amortised: commitments counted for their months inside the horizon, against renting the same "
              "demand on demand over the same periods; cash: the same plus every obligation after the horizon")


def kept_in_scenarios(fixed: Mapping[tuple[tuple[str, ...], int], int]) -> dict[tuple[tuple[str, ...], int], int]:
    """The commitments a scenario must keep: not the monthly subscriptions, which are simply not renewed
    when demand is lower (the offering key ends with the price kind)."""
    return {k: n for k, n in fixed.items() if k[0][-1] not in RENEWABLE}
