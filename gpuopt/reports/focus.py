"""FOCUS 1.0 cost rows (FinOps Open Cost and Usage Specification) for solve plans and capacity plans.

What the rows mean
- One row set per calendar month: ChargePeriod and BillingPeriod are that month (`2027-01-01T00:00:00Z` to
  `2027-02-01T00:00:00Z`), and the quantities are that month's real hours per instance (672 in February, 696
  in a leap February, 720 in a 30-day month, 744 in a 31-day one), costs = rate x those hours: what the
  provider bills for the period, so a row's ConsumedQuantity never contradicts its ChargePeriod. The plan's
  own costs use the FinOps planning month of 730 hours (8,760 / 12), so a FOCUS month differs from the plan's
  month by -58 h (February) to +14 h (31-day months), -7.9% to +1.9%; a whole non-leap year is 8,760 hours
  either way.
- Rented instances (on-demand, spot, community): a Usage row, BilledCost = EffectiveCost.
- A commitment (reservation, savings plan, subscription): a Purchase row per month of its term, billed
  monthly (no upfront), EffectiveCost 0 as FOCUS asks of a purchase that covers future usage, priced at the
  commitment's own list and contracted prices; and, for each of its months inside the horizon, a Usage row
  carrying the amortised cost in EffectiveCost (BilledCost 0, CommitmentDiscountStatus Used) -- split, when
  only some of its instances run replicas that month, into a Used row for their hours and an Unused row for
  the idle rest (ConsumedQuantity null, the commitment's own prices), which sum to the month's charge. FOCUS 1.0
  defines ListUnitPrice as the SKU's public price and ContractedUnitPrice as the price with negotiated
  discounts but without commitment discounts, so that Usage row is priced at the same SKU's on-demand prices
  (List* the catalog's list price, Contracted* after --discount and overlays; SkuPriceId the on-demand one),
  and EffectiveCost alone carries the commitment's rate: ListCost - EffectiveCost is what the commitment
  saves. Without an on-demand row for the SKU in the catalog, the commitment's own prices stand in. Months
  after the horizon carry only the Purchase rows: the obligation. So summing EffectiveCost per month (or
  period) gives the plan's cost of that month at the calendar's hours, and summing BilledCost gives what the
  provider bills, after the horizon included.
- A monthly subscription is priced per month (the catalog's price_per_hour is its fee / 730): a flat fee per
  calendar month (PricingUnit Months, quantity the instances), not its hourly equivalent x the month's hours.
- The account is a projection: BillingAccountId `gpuopt-projection`, no sub-account, no resource id, and so
  no ResourceType (FOCUS 1.0: null where ResourceId is); the GPU instance is in ChargeDescription.
- InvoiceIssuerName is the provider, or the operator that invoices its region (AWS China: Sinnet for
  cn-north-1, NWCD for cn-northwest-1; regions.csv). A capacity block's Purchase is One-Time (paid in full when
  booked); a `contract` is a commitment of spend.

`focus-validator` 1.0.0 (the newest on Python 3.11) checks the 1.0-preview names of five columns: Provider,
Publisher, InvoiceIssuer, ResourceID and ChargeType (its SkuPriceId rule reads ChargeType). The rows carry
both those and the 1.0 names (ProviderName, PublisherName, InvoiceIssuerName, ResourceId, ChargeCategory),
with the same values.
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass, field
from typing import Any

from gpuopt.errors import InputError
from gpuopt.planner.plan import month_charge as month_of
from gpuopt.planner.plan import plain
from gpuopt.pricing.regions import region_info

FOCUS_COLUMNS = (
    "AvailabilityZone", "BilledCost", "BillingAccountId", "BillingAccountName", "BillingCurrency",
    "BillingPeriodEnd", "BillingPeriodStart", "ChargeCategory", "ChargeClass", "ChargeDescription",
    "ChargeFrequency", "ChargePeriodEnd", "ChargePeriodStart", "CommitmentDiscountCategory",
    "CommitmentDiscountId", "CommitmentDiscountName", "CommitmentDiscountStatus", "CommitmentDiscountType",
    "ConsumedQuantity", "ConsumedUnit", "ContractedCost", "ContractedUnitPrice", "EffectiveCost",
    "InvoiceIssuerName", "ListCost", "ListUnitPrice", "PricingCategory", "PricingQuantity", "PricingUnit",
    "ProviderName", "PublisherName", "RegionId", "RegionName", "ResourceId", "ResourceName", "ResourceType",
    "ServiceCategory", "ServiceName", "SkuId", "SkuPriceId", "SubAccountId", "SubAccountName", "Tags",
    # the 1.0-preview names focus-validator 1.0.0 still requires (same values as their 1.0 names)
    "ChargeType", "InvoiceIssuer", "Provider", "Publisher", "ResourceID",
)
COMMITTED = ("reserved", "savings-plan", "subscription", "capacity-block", "contract")
ACCOUNT_ID = "gpuopt-projection"
ACCOUNT_NAME = "gpuopt projected plan (not a billing account)"


def pricing_category(price_kind: str) -> str:
    """FOCUS PricingCategory: Standard (on-demand, community), Dynamic (spot), Committed (commitments)."""
    if price_kind == "spot":
        return "Dynamic"
    if price_kind.startswith(COMMITTED):
        return "Committed"
    return "Standard"


def commitment_type(price_kind: str) -> tuple[str, str]:
    """(CommitmentDiscountCategory, CommitmentDiscountType): savings plans commit spend, the rest usage."""
    if price_kind.startswith("savings-plan"):
        return "Spend", "Savings Plan"
    if price_kind.startswith("reserved"):
        return "Usage", "Reserved Instance"
    if price_kind.startswith("subscription"):
        return "Usage", "Subscription"
    if price_kind == "contract":
        # Replicate: "committed spend contracts"; DigitalOcean: "per contract after contacting sales"
        return "Spend", "Contract"
    return "Usage", price_kind.replace("-", " ").title()


def add_months(day: dt.date, months: int) -> dt.date:
    """The first day of the month `months` after `day`'s; a plan dated so late that a billing period ends past
    the year 9999 (a hand-edited as_of_date of 9999-12-15) is refused rather than ending in a ValueError."""
    total = day.year * 12 + day.month - 1 + months
    if not 1 <= total // 12 <= 9999:
        raise InputError(f"the plan's dates run past the year 9999 ({day.isoformat()} + {months} months): FOCUS "
                         "billing periods cannot be dated")
    return dt.date(total // 12, total % 12 + 1, 1)


def stamp(day: dt.date) -> str:
    return f"{day.isoformat()}T00:00:00Z"


@dataclass(frozen=True)
class Charge:
    """One offering's instances in one calendar month: the renderers' input to `rows`."""

    month: dt.date  # first day of the month
    currency: str
    provider: str
    service: str
    sku: str
    region: str
    region_name: str
    price_kind: str
    instances: float  # instance count (fractional for a deployment's share of shared instances)
    unit_price: float  # per instance-hour, after overlays and discounts
    list_unit_price: float
    description: str
    tags: dict[str, str] = field(default_factory=dict)
    commitment_id: str | None = None  # set for a commitment
    commitment_name: str | None = None
    usage: bool = True  # a Usage row (False: a commitment month after the horizon, Purchase row only)
    # a commitment: the on-demand twin's (contracted, list) prices per instance-hour, at which FOCUS 1.0 prices
    # the usage the commitment covers (None: the catalog has no on-demand twin; the commitment's own prices)
    covered_prices: tuple[float, float] | None = None
    # a commitment: how many of its instances run replicas this month (None: all of them, or unknown); the
    # rest is idle, a Usage row with CommitmentDiscountStatus Unused
    used_instances: float | None = None
    # priced per month (a monthly subscription: the catalog's price_per_hour is its monthly fee / 730): billed
    # as a flat fee per calendar month, PricingUnit Months, whatever the month's hours
    monthly_fee: bool = False
    # a monthly fee: the month's charge as the plan prints it, when the plan apportions a machine's bill between
    # deployments to the cent (solve's shared instances); None: the instances' own month (monthly_fee)
    month_charge: float | None = None


def month_hours(month: dt.date) -> int:
    """The real hours of the calendar month starting on `month` (UTC, no daylight saving): 672 to 744."""
    return (add_months(month, 1) - month).days * 24


def monthly_fee(price_per_hour: float, instances: float, month_charge: float | None = None) -> float:
    """A monthly subscription's fee per instance-month: the month's charge as the plan prices it -- `month_charge`
    when the plan apportions a shared machine's bill to the cent, else the catalog's hourly price x the 730-hour
    month it was derived from x the instances, to the cent -- over the instances, so the row's cost is the
    plan's month to the cent. Rounding each instance's fee to the cent first billed 3 x 4,132.93 = 12,398.79 USD
    for a plan month of 12,398.80 (a 27,496 CNY fee converted; QA); recomputing a share's month billed 375.78
    for a deployment the plan charged 375.77 (review); in the catalog's own currency the fee is whole."""
    if instances <= 0:
        return month_of(price_per_hour, 1)
    month = month_charge if month_charge is not None else month_of(price_per_hour, instances)
    return plain(month / instances, 6)


def rows(charge: Charge) -> list[dict[str, Any]]:
    start, end = stamp(charge.month), stamp(add_months(charge.month, 1))
    # the charge period's real hours, not the 730-hour planning month (module docstring)
    hours = float(round(charge.instances * month_hours(charge.month), 4))  # decimal, never an integer column
    # a monthly fee is priced per instance-month, everything else per instance-hour of the calendar month
    unit_price, list_unit_price = ((monthly_fee(charge.unit_price, charge.instances, charge.month_charge),
                                    monthly_fee(charge.list_unit_price, charge.instances)) if charge.monthly_fee
                                   else (charge.unit_price, charge.list_unit_price))
    quantity = float(charge.instances) if charge.monthly_fee else hours
    cost = plain(unit_price * quantity, 4)
    list_cost = plain(list_unit_price * quantity, 4)
    # the region's operator invoices it where it is not the provider (AWS China: Sinnet, NWCD; regions.csv)
    issuer = region_info(charge.region, charge.provider).operator or charge.provider
    common: dict[str, Any] = {
        "AvailabilityZone": None, "BillingAccountId": ACCOUNT_ID, "BillingAccountName": ACCOUNT_NAME,
        "BillingCurrency": charge.currency, "BillingPeriodStart": start, "BillingPeriodEnd": end,
        "ChargeClass": None, "ChargePeriodStart": start, "ChargePeriodEnd": end,
        "ContractedUnitPrice": unit_price, "ListUnitPrice": list_unit_price,
        "PricingQuantity": quantity, "PricingUnit": "Months" if charge.monthly_fee else "Hours",
        "InvoiceIssuerName": issuer, "InvoiceIssuer": issuer,
        "ProviderName": charge.provider, "Provider": charge.provider,
        "PublisherName": charge.provider, "Publisher": charge.provider,
        "RegionId": charge.region, "RegionName": charge.region_name, "ResourceId": None, "ResourceID": None,
        "ResourceName": None, "ResourceType": None, "ServiceCategory": "Compute",
        "ServiceName": charge.service or charge.provider, "SkuId": charge.sku,
        "SkuPriceId": f"{charge.provider}:{charge.service}:{charge.sku}:{charge.region}:{charge.price_kind}",
        "SubAccountId": None, "SubAccountName": None,
        "Tags": json.dumps(charge.tags, sort_keys=True),
        "CommitmentDiscountCategory": None, "CommitmentDiscountId": None, "CommitmentDiscountName": None,
        "CommitmentDiscountStatus": None, "CommitmentDiscountType": None,
    }
    out: list[dict[str, Any]] = []
    if charge.commitment_id is not None:
        category, kind = commitment_type(charge.price_kind)
        commitment = {"CommitmentDiscountCategory": category, "CommitmentDiscountId": charge.commitment_id,
                      "CommitmentDiscountName": charge.commitment_name, "CommitmentDiscountType": kind}
        # a capacity block is paid in full when booked (catalog notes); the other commitments monthly
        frequency = "One-Time" if charge.price_kind == "capacity-block" else "Recurring"
        out.append({**common, **commitment, "ChargeCategory": "Purchase", "ChargeFrequency": frequency,
                    "ChargeDescription": f"commitment fee: {charge.description}", "BilledCost": cost,
                    "ContractedCost": cost, "ListCost": list_cost, "EffectiveCost": 0.0,
                    "ConsumedQuantity": None, "ConsumedUnit": None, "PricingCategory": "Committed"})
        if charge.usage:
            out += _commitment_usage(charge, common | commitment, hours, cost)
    elif charge.usage:
        out.append({**common, "ChargeCategory": "Usage", "ChargeFrequency": "Usage-Based",
                    "ChargeDescription": charge.description, "BilledCost": cost, "ContractedCost": cost,
                    "ListCost": list_cost, "EffectiveCost": cost, "ConsumedQuantity": hours,
                    "ConsumedUnit": "Hours", "PricingCategory": pricing_category(charge.price_kind)})
    return [{**row, "ChargeType": row["ChargeCategory"]} for row in out]


def _commitment_usage(charge: Charge, common: dict[str, Any], hours: float, cost: float) -> list[dict[str, Any]]:
    """A commitment month inside the horizon: a Used row for the hours of the instances that run replicas and
    an Unused row for the idle rest (FOCUS 1.0 CommitmentDiscountStatus), their EffectiveCost summing to the
    month's charge exactly (the Unused row's EffectiveCost takes the remainder of the 4-decimal rounding; its
    ContractedCost stays unit price x quantity).

    FOCUS 1.0: ListUnitPrice is the SKU's public (on-demand) price, ContractedUnitPrice includes negotiated
    discounts but not commitment discounts, so covered usage is priced at the on-demand twin's prices and only
    EffectiveCost carries the commitment's rate. Idle hours consume nothing (ConsumedQuantity null, as FOCUS
    asks of Unused rows) and are priced at the commitment's own prices: they save nothing on demand. A monthly
    fee's Used row is still measured in the hours its instances ran, its Unused row in idle instance-months."""
    used = charge.instances if charge.used_instances is None else min(charge.instances, charge.used_instances)
    split = used != charge.instances
    used_hours = float(round(used * month_hours(charge.month), 4)) if split else hours
    # the commitment's own pricing: per instance-hour, or per instance-month for a monthly fee (`rows`)
    quantity, used_quantity = (float(charge.instances), float(used)) if charge.monthly_fee else (hours, used_hours)
    used_cost = plain(common["ContractedUnitPrice"] * used_quantity, 4) if split else cost
    out: list[dict[str, Any]] = []
    if used > 0:
        contracted, listed = charge.covered_prices or (charge.unit_price, charge.list_unit_price)
        twin = {} if charge.covered_prices is None else {
            "SkuPriceId": f"{charge.provider}:{charge.service}:{charge.sku}:{charge.region}:on-demand"}
        out.append({**common, **twin, "CommitmentDiscountStatus": "Used",
                    "ChargeCategory": "Usage", "ChargeFrequency": "Usage-Based",
                    "ChargeDescription": charge.description
                    + (f", {used:g} of {charge.instances:g} instances in use" if split else ""), "BilledCost": 0.0,
                    "ContractedUnitPrice": contracted, "ListUnitPrice": listed, "PricingQuantity": used_hours,
                    "PricingUnit": "Hours", "ContractedCost": plain(contracted * used_hours, 4),
                    "ListCost": plain(listed * used_hours, 4),
                    "EffectiveCost": used_cost, "ConsumedQuantity": used_hours, "ConsumedUnit": "Hours",
                    "PricingCategory": "Committed"})
    if split:
        idle = float(round(quantity - used_quantity, 4))
        idle_cost = plain(cost - used_cost, 4)
        out.append({**common, "CommitmentDiscountStatus": "Unused", "ChargeCategory": "Usage",
                    "ChargeFrequency": "Usage-Based",
                    "ChargeDescription": f"{charge.description}, {charge.instances - used:g} of "
                                         f"{charge.instances:g} instances idle",
                    # ContractedCost is its unit price x quantity (FOCUS); only EffectiveCost takes the remainder that
                    # makes the month's rows sum to its charge (QA: 1,744.5759 beside 1.17243 x 1,488 = 1,744.5758)
                    "BilledCost": 0.0, "PricingQuantity": idle,
                    "ContractedCost": plain(common["ContractedUnitPrice"] * idle, 4),
                    "ListCost": plain(common["ListUnitPrice"] * idle, 4), "EffectiveCost": idle_cost,
                    "ConsumedQuantity": None, "ConsumedUnit": None, "PricingCategory": "Committed"})
    return out


def is_commitment(price_kind: str) -> bool:
    return pricing_category(price_kind) == "Committed"
