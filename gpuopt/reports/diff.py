"""Compare two saved plans in one currency.

Solve plans: per deployment and in total, monthly cost before and after, what was added, removed or changed
(GPU, precision, TP, replicas). A deployment is identified by (workload, provider, SKU, region, price kind);
the shapes it runs (replicas x GPU, TP/PP, formats) are what "changed" compares.
Capacity plans: per period, cost before and after, the purchases and the commitments already running that
changed; then, when either plan's commitments owe anything past the horizon, that obligation as its own line,
in both charge modes (the provider bills it whatever the program charged; under inside-horizon it showed
0.00 -> 0.00 "unchanged" against a plan owing 29,931.07), so the totals are what each schedule costs over
the horizon and owes after it: a full-term plan's total_cost, an inside-horizon plan's total_cost plus its
obligation, comparable across charge modes.

Totals are the sums of the printed lines (in cents, after conversion), so a diff adds up as a reviewer checks it.

Infeasible plans: a plan that found no solution has no cost -- not a cost of 0.00. When either plan is
infeasible the diff has no lines and no delta: it shows the priced plan's total, says which plan is infeasible
(its file) and why (its own explanation), and the command exits 1, the code of an infeasible result; before,
such a diff printed the whole old plan as a saving (-587.50 USD/month, every deployment `removed`).

Currencies: figures are shown in the new plan's currency. The old plan's figures are converted at the rate
the old plan recorded (its `fx`), else at the new plan's, else -- capacity plans record none -- at the
shipped FX table, and the diff says which. A pair no table knows is refused (exit 2), never subtracted raw.
"""

from __future__ import annotations

import json
import math
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, computed_field

from gpuopt.errors import InputError
from gpuopt.planner.plan import HOURS_PER_MONTH, Deployment, Plan, PlanStatus, fx_rates, list_price_gap_pct, plain
from gpuopt.reports.formatting import md
from gpuopt.text import printable

if TYPE_CHECKING:
    from gpuopt.planner.capacity import CapacityPlan, PurchaseLine


class DiffLine(BaseModel):
    model_config = ConfigDict(frozen=True)

    workload: str
    deployment: str  # the deployment, "period 2027Q1", or "after the horizon"
    change: str  # added | removed | changed | unchanged
    monthly_before: float  # per month (solve plans) or per period (capacity plans), in `currency_after`
    monthly_after: float
    delta: float
    details: list[str]
    line_kind: str = "deployment"  # deployment (solve plans), period or after-horizon (capacity plans)


class InfeasiblePlan(BaseModel):
    """A plan of the diff that found no solution: which one, its file, and why (the plan's own explanation)."""

    model_config = ConfigDict(frozen=True)

    plan: Literal["old", "new"]
    file: str
    explanation: list[str]


class PlanDiff(BaseModel):
    model_config = ConfigDict(frozen=True)

    currency_before: str  # the old plan's own currency (its figures here are converted)
    currency_after: str  # the currency of every figure in the diff
    # null for an infeasible plan (it has no cost), and the delta then too: see `infeasible`
    total_monthly_before: float | None
    total_monthly_after: float | None
    total_delta: float | None
    lines: list[DiffLine]  # none when either plan is infeasible
    fx_note: str | None = None  # how the old plan's figures were converted, when they were
    kind: str = "gpuopt-plan"  # or gpuopt-capacity-plan: lines are periods (+ after the horizon), totals their sums
    unit: str = "month"  # what line figures are per: month, or period
    status_before: PlanStatus = "optimal"
    status_after: PlanStatus = "optimal"
    infeasible: list[InfeasiblePlan] = []  # the plans without a cost, old first
    # a capacity total includes what commitments owe after the horizon (the label says so; not in the JSON,
    # whose lines show it)
    owed_after_horizon: bool = Field(default=False, exclude=True)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def currency(self) -> str:
        """The currency every figure of the diff is in, both plans' (a reader of `currency_before` alone took
        the old plan's converted figures for its own currency)."""
        return self.currency_after


def recorded_rate(fx: str, source: str, target: str) -> float | None:
    """The rate source -> target in a plan's recorded FX text (`1 USD = 7.1 CNY (2026-10-01)`), either way (a
    plan read from a file has only positive finite rates; one built otherwise skips any other)."""
    for base, rate, quote in fx_rates(fx):
        if math.isnan(rate):
            continue
        if (base, quote) == (source, target):
            return rate
        if (base, quote) == (target, source):
            return 1.0 / rate
    return None


def conversion(source: str, target: str, recorded: list[tuple[str, str]]) -> tuple[float, str | None]:
    """(factor, note) converting `source` amounts into `target`: from the first recorded FX text that has
    the pair (label, text), else the shipped table; InputError when none has it."""
    if source == target:
        return 1.0, None
    for label, fx in recorded:
        rate = recorded_rate(fx, source, target)
        if rate is not None:
            return rate, f"before converted from {source} to {target} at {rate:g} ({label}: {fx})"
    from gpuopt.pricing.fx import load_fx

    table = load_fx()
    try:
        rate = table.rate(source, target)
    except InputError:
        raise InputError(f"diff: no FX rate from {source} to {target} in either plan or the shipped table: "
                         "re-plan one of them in the other's currency") from None
    return rate, (f"before converted from {source} to {target} at {rate:g} (the shipped FX table, as of "
                  f"{table.as_of}: the plans record no rate)")


def _key(d: Deployment) -> tuple[str, str, str, str, str]:
    return (d.workload, d.provider, d.sku, d.region, d.price_kind)


def _shape(d: Deployment) -> str:
    return (f"{d.replicas} x {d.gpu} TP={d.tensor_parallel}" + (f" PP={d.pipeline_parallel}" if d.pipeline_parallel > 1
                                                                   else "")
            + f" {d.weight_precision}/KV {d.kv_cache_dtype}")


def _group(plan: Plan) -> dict[tuple[str, ...], list[Deployment]]:
    """Deployments by identity; one offering may host several shapes of a workload (e.g. fp8 and int4)."""
    groups: dict[tuple[str, ...], list[Deployment]] = {}
    for d in plan.deployments:
        groups.setdefault(_key(d), []).append(d)
    return groups


def _change(before: list[str], after: list[str], mb: float, ma: float) -> tuple[str, list[str]]:
    if not before:
        return "added", after
    if not after:
        return "removed", before
    if before != after:
        return "changed", [f"{'; '.join(before)} -> {'; '.join(after)}"]
    return ("changed" if abs(ma - mb) > 0.005 else "unchanged"), []


def _price_details(before: list[Deployment], after: list[Deployment], factor: float, currency: str, fx_before: str,
                   fx_after: str) -> list[str]:
    """Why a line whose schedule is the same costs another amount: its unit price, in the new plan's currency,
    and the FX rates each plan used where they differ (QA: a plan saved again at another USD:CNY read "+1,001.67
    USD/month", changed, with no detail -- a currency swing taken for a cost change)."""
    def prices(ds: list[Deployment], f: float) -> str:
        return ", ".join(f"{p:,.4f}" for p in sorted({plain(d.instance_price_per_hour * f, 4) for d in ds}))

    out = []
    old_price, new_price = prices(before, factor), prices(after, 1.0)
    if old_price != new_price:
        out.append(f"instance price {old_price} -> {new_price} {currency}/h")
        if fx_before != fx_after:  # only beside a price that moved: a line priced in one currency used no rate
            out.append(f"FX {fx_before} -> {fx_after}")
    old_gap, new_gap = _list_gap(before), _list_gap(after)
    if old_gap != new_gap:  # a discount or an overlay moved the price off its list price (QA: it read as FX)
        out.append(f"price {old_gap} -> {new_gap}")
    if sum(d.instances for d in before) != sum(d.instances for d in after):
        out.append(f"instances {sum(d.instances for d in before):g} -> {sum(d.instances for d in after):g}")
    return out


def _list_gap(ds: list[Deployment]) -> str:
    """Where a line's instance prices stand against their list prices (plan.list_price_gap_pct): "10 % below
    list", "5 % above list", "at list", each where the deployments differ."""
    gaps = sorted({g for d in ds if (g := list_price_gap_pct(d.instance_price_per_hour, d.list_price_per_hour))
                   is not None})
    shown = [f"{-g:g} % below list" if g < 0 else f"{g:g} % above list" for g in gaps if g != 0]
    return ", ".join(shown) if shown else "at list"


def _monthly(deployments: list[Deployment], factor: float) -> float:
    """A diff line's monthly figure: its deployments' monthly costs, converted, to the cent."""
    return plain(sum(d.cost_per_month for d in deployments) * factor, 2)


def _exact_month(deployments: list[Deployment]) -> tuple[float, float]:
    """A diff line's month before its cents, and its instance-hours: instance price x instances x 730 (the
    prices carry 8 decimals, the month 2), as _same compares them."""
    hours = sum(d.instances for d in deployments) * HOURS_PER_MONTH
    return sum(d.instance_price_per_hour * d.instances for d in deployments) * HOURS_PER_MONTH, hours


def _fx(old: Plan | CapacityPlan, new: Plan | CapacityPlan) -> tuple[float, str | None]:
    return conversion(old.currency, new.currency, [("old plan's FX", old.fx), ("new plan's FX", new.fx)])


def diff_plans(old: Plan, new: Plan) -> PlanDiff:
    factor, note = _fx(old, new)
    before, after = _group(old), _group(new)
    lines = []
    for key in sorted(set(before) | set(after)):
        a, b = before.get(key, []), after.get(key, [])
        mb, ma = _monthly(a, factor), _monthly(b, 1.0)
        change, details = _change(sorted(_shape(d) for d in a), sorted(_shape(d) for d in b), mb, ma)
        if change == "changed" and not details and _same(_exact_month(a), _exact_month(b), factor):
            # one schedule saved in two currencies: each plan rounded its own month to the cent, so the old
            # one's converted cents differ (12,475.91 USD x 6.6529 = 83,000.98 against 83,001.00 CNY)
            change, details = "unchanged", [f"{ma - mb:+,.2f} from rounding each plan's figures to the cent, "
                                            "not a change"]
        elif change == "changed" and not details:
            details = _price_details(a, b, factor, new.currency, old.fx, new.fx)
        lines.append(DiffLine(workload=key[0], deployment=f"{key[1]} {key[2]} ({key[3]}, {key[4]})", change=change,
                              monthly_before=mb, monthly_after=ma, delta=plain(ma - mb, 2), details=details))
    # the sums of the printed lines (a plan's total_cost_per_month is its deployments' sum; converted, each
    # line is rounded before it is added, as a reader adds them); never -0.00
    tb = plain(sum(x.monthly_before for x in lines), 2)
    ta = plain(sum(x.monthly_after for x in lines), 2)
    return PlanDiff(currency_before=old.currency, currency_after=new.currency, total_monthly_before=tb,
                    total_monthly_after=ta, total_delta=plain(ta - tb, 2), lines=lines, fx_note=note)


def _purchase(x: PurchaseLine) -> str:
    return f"{x.count} x {x.provider} {x.sku} ({x.region}, {x.price_kind})"


def _running(plan: CapacityPlan, index: int) -> list[str]:
    """Commitments bought before period `index` and still running in it: a period that buys nothing may still
    pay for them (it is not `removed` for that)."""
    from gpuopt.planner.capacity_detail import active_commitments

    mpp = plan.months_per_period
    return sorted(f"{c.count} x {c.provider} {c.sku} ({c.region}, {c.price_kind}) from {c.bought}"
                  for c in active_commitments(plan.commitments, index, mpp) if c.start_month < index * mpp)


def _holdings(plan: CapacityPlan, index: int) -> tuple[list[str], list[str]]:
    return sorted(_purchase(x) for x in plan.periods[index].purchases), _running(plan, index)


def _owed_text(plan: CapacityPlan, which: str, factor: float, currency: str) -> str | None:
    if not plan.committed_after_horizon:
        return None
    owed = plan.committed_after_horizon * factor
    spans = "; ".join(f"{c.count} x {c.provider} {c.sku} ({c.region}, {c.price_kind}) from {c.bought}, "
                      f"{c.months_after} months" for c in plan.commitments if c.months_after > 0)
    if plan.charge == "full-term":
        return f"{which}: {owed:,.2f} {currency} owed after the horizon ({spans})"
    return (f"{which}: {owed:,.2f} {currency} owed after the horizon ({spans}); its plan's total_cost leaves it "
            "out (charge: inside-horizon), this diff's total includes it")


HALF_CENT = 0.005  # below this, in the report currency, two figures print the same to the cent


PRICE_ROUNDING = 5e-9  # a plan's prices per hour carry 8 decimals: at most this off per instance-hour


def _exact_cost(plan: CapacityPlan, index: int) -> tuple[float, float]:
    """A period's cost before its cents, and its instance-hours: rented lines at price x hours, commitments
    running in it at price x count x the period's hours. Two plans of one schedule in two currencies differ
    in their cents (each rounds its own lines, and a commitment's whole-term cents are spread in whole cents),
    not here. The printed cost when the plan file lists no commitments (saved before the ledger) but buys
    some."""
    from gpuopt.planner.capacity_detail import active_commitments

    period = plan.periods[index]
    if not plan.commitments and any(x.committed for x in period.purchases):
        return period.cost, 0.0
    mpp = plan.months_per_period
    running = active_commitments(plan.commitments, index, mpp)
    rented = [x for x in period.purchases if not x.committed]
    return (sum(x.price_per_hour * x.hours for x in rented)
            + sum(c.price_per_hour * c.count * HOURS_PER_MONTH * mpp for c in running),
            sum(x.hours for x in rented) + sum(c.count * HOURS_PER_MONTH * mpp for c in running))


def _exact_owed(plan: CapacityPlan) -> tuple[float, float]:
    if not plan.commitments:
        return plan.committed_after_horizon, 0.0
    return (sum(c.price_per_hour * c.count * HOURS_PER_MONTH * c.months_after for c in plan.commitments),
            sum(c.count * HOURS_PER_MONTH * c.months_after for c in plan.commitments))


def _same(old: tuple[float, float], new: tuple[float, float], factor: float) -> bool:
    """Two exact figures (cost, instance-hours) within half a cent of the report currency, plus what the prices'
    8 decimals can account for over those hours: the same cost, printed apart only by rounding."""
    slack = HALF_CENT + PRICE_ROUNDING * (new[1] + old[1] * factor)
    return abs(new[0] - old[0] * factor) < slack


def period_order(old: list[str], new: list[str]) -> list[str]:
    """Both horizons' period labels in the order the plans list them: the old plan's, each period only the new
    one has placed after the new plan's period before it (labels sorted as text put M10 before M2)."""
    order = list(old)
    at = -1
    for label in new:
        if label in order:
            at = order.index(label)
        else:
            at += 1
            order.insert(at, label)
    return order


def diff_capacity(old: CapacityPlan, new: CapacityPlan) -> PlanDiff:
    """Per period (matched by label) the cost, the purchases and the commitments already running, before and
    after; then the obligation after the horizon that each total includes, as its own line. The totals are the
    sums of the printed (rounded) lines, so they add up as a reviewer checks them."""
    factor, note = _fx(old, new)
    before = {p.period: i for i, p in enumerate(old.periods)}
    after = {p.period: i for i, p in enumerate(new.periods)}
    lines = []
    for label in period_order([p.period for p in old.periods], [p.period for p in new.periods]):
        i, j = before.get(label), after.get(label)
        mb = plain(old.periods[i].cost * factor, 2) if i is not None else 0.0
        ma = plain(new.periods[j].cost, 2) if j is not None else 0.0
        if i is None or j is None:  # a period only one horizon has
            change = "added" if i is None else "removed"
            bought, running = _holdings(new, j) if j is not None else _holdings(old, i or 0)
            details = bought + [f"running: {x}" for x in running]
        else:
            (bb, rb), (ba, ra) = _holdings(old, i), _holdings(new, j)
            details = []
            if bb != ba:
                details.append(f"bought: {'; '.join(bb) or 'nothing'} -> {'; '.join(ba) or 'nothing'}")
            if rb != ra:
                details.append(f"running: {'; '.join(rb) or 'nothing'} -> {'; '.join(ra) or 'nothing'}")
            # the converted exact figures, not the printed ones: a USD plan re-priced in CNY differs by its
            # cents x the rate (Q2 2027: 3,136.81 USD x 6.6529 = 20,868.88 against 20,868.83 CNY)
            change = "changed" if details or not _same(_exact_cost(old, i), _exact_cost(new, j), factor) \
                else "unchanged"
            if change == "unchanged" and plain(ma - mb, 2):
                details = [f"{ma - mb:+,.2f} from rounding each plan's figures to the cent, not a change"]
        lines.append(DiffLine(workload="(all)", deployment=f"period {label}", change=change, monthly_before=mb,
                              monthly_after=ma, delta=plain(ma - mb, 2), details=details, line_kind="period"))
    notes = [t for t in (_owed_text(old, "before", factor, new.currency), _owed_text(new, "after", 1.0, new.currency))
             if t is not None]
    if notes:  # what the commitments owe after the horizon in either charge mode: the provider bills it
        ob, oa = plain(old.committed_after_horizon * factor, 2), plain(new.committed_after_horizon, 2)
        change = "unchanged" if _same(_exact_owed(old), _exact_owed(new), factor) else (
            "added" if not ob else "removed" if not oa else "changed")  # the line's vocabulary, as before
        if change == "unchanged" and plain(oa - ob, 2):
            notes.append(f"{oa - ob:+,.2f} from rounding each plan's figures to the cent, not a change")
        lines.append(DiffLine(workload="(all)", deployment="after the horizon", change=change, monthly_before=ob,
                              monthly_after=oa, delta=plain(oa - ob, 2), details=notes, line_kind="after-horizon"))
    tb = plain(sum(x.monthly_before for x in lines), 2)
    ta = plain(sum(x.monthly_after for x in lines), 2)
    return PlanDiff(currency_before=old.currency, currency_after=new.currency, total_monthly_before=tb,
                    total_monthly_after=ta, total_delta=plain(ta - tb, 2), lines=lines, fx_note=note,
                    kind="gpuopt-capacity-plan", unit="period")


def diff_any(old: Plan | CapacityPlan, new: Plan | CapacityPlan, old_file: str = "old plan",
             new_file: str = "new plan") -> PlanDiff:
    """Two solve plans or two capacity plans; a mix has no common unit (exit 2). When either is infeasible, no
    lines and no delta (`unpriced`); the files name the plans in what the diff says about them."""
    one_kind = isinstance(old, Plan) == isinstance(new, Plan)
    if one_kind and (old.status != "optimal" or new.status != "optimal"):
        return unpriced(old, new, old_file, new_file)
    if isinstance(old, Plan) and isinstance(new, Plan):
        return diff_plans(old, new)
    if not isinstance(old, Plan) and not isinstance(new, Plan):
        return diff_capacity(old, new)
    raise InputError("diff: one file is a solve plan and the other a capacity plan: compare plans of one kind")


def _total(plan: Plan | CapacityPlan, factor: float) -> float:
    """A priced plan's total as its diff lines would sum it, converted: per deployment group (solve plans), or
    per period plus what its commitments owe after the horizon (capacity plans), each line to the cent."""
    if isinstance(plan, Plan):
        return plain(sum(_monthly(ds, factor) for ds in _group(plan).values()), 2)
    return plain(sum(plain(p.cost * factor, 2) for p in plan.periods)
                 + plain(plan.committed_after_horizon * factor, 2), 2)


def unpriced(old: Plan | CapacityPlan, new: Plan | CapacityPlan, old_file: str, new_file: str) -> PlanDiff:
    """The diff of two plans one of which (or both) is infeasible: the priced plan's total (the old one's
    converted into the new plan's currency), null for the other and for the delta, no lines -- comparing a plan
    with no plan is not a saving of all it costs (the diff read -587.50 USD/month, every deployment removed,
    and labelled capacity periods both horizons hold `removed`) -- and why each infeasible plan is."""
    factor, note = _fx(old, new) if old.status == "optimal" else (1.0, None)
    before = _total(old, factor) if old.status == "optimal" else None
    after = _total(new, 1.0) if new.status == "optimal" else None
    sides: tuple[tuple[Literal["old", "new"], Plan | CapacityPlan, str], ...] = (("old", old, old_file),
                                                                              ("new", new, new_file))
    infeasible = [InfeasiblePlan(plan=which, file=file, explanation=plan.explanation or ["(the plan gives no reason)"])
                  for which, plan, file in sides if plan.status != "optimal"]
    capacity = not isinstance(new, Plan)
    owed = capacity and any(p.status == "optimal" and not isinstance(p, Plan) and p.committed_after_horizon > 0
                            for p in (old, new))
    return PlanDiff(currency_before=old.currency, currency_after=new.currency, total_monthly_before=before,
                    total_monthly_after=after, total_delta=None, lines=[], fx_note=note,
                    kind="gpuopt-capacity-plan" if capacity else "gpuopt-plan", unit="period" if capacity else "month",
                    status_before=old.status, status_after=new.status, infeasible=infeasible,
                    owed_after_horizon=owed)


def _figure(total: float | None, currency: str) -> str:
    return "infeasible" if total is None else f"{total:,.2f} {currency}"


def _rounding_only(d: PlanDiff) -> str:
    """Said beside a non-zero total delta when every line is unchanged: the delta is the cents of each plan's
    own rounding, converted (QA: the same plan saved in USD and CNY headed its diff "+0.03 CNY/month")."""
    if d.total_delta and d.lines and all(x.change == "unchanged" for x in d.lines):
        return ", every line unchanged: rounding, not a change"
    return ""


def _headline(d: PlanDiff) -> str:
    """The title of a diff without a delta: which plan has no cost."""
    which = [x.plan for x in d.infeasible]
    return f"no delta, {'both plans are' if len(which) > 1 else f'the {which[0]} plan is'} infeasible"


NO_DELTA = "no delta: an infeasible plan has no cost, not a cost of 0.00"


def _infeasible_lines(d: PlanDiff) -> list[tuple[str, list[str]]]:
    """(heading, reasons) per infeasible plan."""
    return [(f"The {x.plan} plan ({x.file}) is infeasible:", x.explanation) for x in d.infeasible]


def _totals_label(d: PlanDiff) -> str:
    if d.unit == "month":
        return "Total per month"
    if d.owed_after_horizon or any(x.line_kind == "after-horizon" for x in d.lines):
        return "Total over the horizon and owed after it"
    return "Total over the horizon"


def diff_json(d: PlanDiff) -> str:
    data: dict[str, Any] = d.model_dump(mode="json")
    return json.dumps(data, indent=2) + "\n"


def diff_markdown(d: PlanDiff) -> str:
    c = md(d.currency_after)
    per = "month" if d.unit == "month" else "horizon"
    if d.total_delta is None:
        out = [f"### gpuopt plan diff: {_headline(d)}", "",
               f"{_totals_label(d)}: {_figure(d.total_monthly_before, c)} -> {_figure(d.total_monthly_after, c)} "
               f"({NO_DELTA})", ""]
        if d.fx_note:
            out += [f"Currency: {md(d.fx_note)}.", ""]
        for heading, reasons in _infeasible_lines(d):
            out += [f"**{md(heading)}**", "", *(f"- {md(r)}" for r in reasons), ""]
        return "\n".join(out)
    out = [f"### gpuopt plan diff: {d.total_delta:+,.2f} {c}/{per}{_rounding_only(d)}", "",
           f"{_totals_label(d)}: {d.total_monthly_before:,.2f} -> {d.total_monthly_after:,.2f} {c} "
           f"({d.total_delta:+,.2f})", ""]
    if d.fx_note:
        out += [f"Currency: {md(d.fx_note)}.", ""]
    out += [f"| workload | deployment | change | before/{d.unit} | after/{d.unit} | delta | details |",
            "|---|---|---|---|---|---|---|"]
    for line in d.lines:
        out.append(f"| {md(line.workload)} | {md(line.deployment)} | {line.change} | {line.monthly_before:,.2f} | "
                   f"{line.monthly_after:,.2f} | {line.delta:+,.2f} | {md('; '.join(line.details))} |")
    return "\n".join(out) + "\n"


def diff_table(d: PlanDiff, width: int | None = None) -> str:
    import io

    from rich.table import Table

    from gpuopt.reports.formatting import console

    per = "month" if d.unit == "month" else "horizon"
    buf = io.StringIO()
    con = console(buf, width)
    if d.total_delta is None:
        c = d.currency_after
        con.print(f"Plan diff, {_totals_label(d).lower()}: {_figure(d.total_monthly_before, c)} -> "
                  f"{_figure(d.total_monthly_after, c)} ({NO_DELTA})")
        if d.fx_note:
            con.print(f"Currency: {printable(d.fx_note)}")
        for heading, reasons in _infeasible_lines(d):
            con.print(printable(heading))
            for reason in reasons:
                con.print(f"  {printable(reason)}")
        return buf.getvalue()
    table = Table(title=f"Plan diff: {d.total_monthly_before:,.2f} -> {d.total_monthly_after:,.2f} "
                        f"{d.currency_after}/{per} ({d.total_delta:+,.2f}){_rounding_only(d)}", title_justify="left")
    numbers = (f"before/{d.unit}", f"after/{d.unit}", "delta")
    for col in ("workload", "deployment", "change", *numbers, "details"):
        table.add_column(col, justify="right" if col in numbers else "left", overflow="fold")
    for line in d.lines:
        table.add_row(line.workload, line.deployment, line.change, f"{line.monthly_before:,.2f}",
                      f"{line.monthly_after:,.2f}", f"{line.delta:+,.2f}", "; ".join(line.details))
    con.print(table)
    if d.fx_note:
        con.print(f"Currency: {d.fx_note}")
    return buf.getvalue()
