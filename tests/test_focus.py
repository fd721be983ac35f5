"""FOCUS exports: the FinOps Foundation's focus-validator passes them, charge periods are calendar months,
and EffectiveCost per period reproduces the plan's cost per period."""

import csv
import datetime as dt
import io
import json
import os
from collections import defaultdict
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path

import pytest

from gpuopt.planner.capacity import CapacityPlan, PeriodLine, PurchaseLine
from gpuopt.planner.capacity_detail import RunningLine, commitment_use
from gpuopt.planner.commitments import spans
from gpuopt.planner.commitments import summarise as summarise_commitments
from gpuopt.reports.capacity import render_capacity_focus
from gpuopt.reports.focus import add_months
from tests.conftest import run

EXAMPLES = Path(__file__).parent.parent / "examples"


pytestmark = pytest.mark.usefixtures("fixed_day")


def focus_failures(path: Path, monkeypatch) -> list[str]:
    """Every check of focus-validator's FOCUS 1.0 rules that does not pass."""
    try:
        import focus_validator
    except ImportError:
        if os.environ.get("CI"):
            pytest.fail("focus-validator is missing: it is in the dev extra")
        pytest.skip("focus-validator not installed (pip install -e '.[dev]')")
    from focus_validator.data_loaders.data_loader import DataLoader
    from focus_validator.rules.spec_rules import SpecRules
    from focus_validator.validator import DEFAULT_VERSION_SETS_PATH

    # 1.0.0 reads its ISO 4217 list from a path relative to the working directory
    monkeypatch.chdir(Path(focus_validator.__file__).parent.parent)
    rules = SpecRules(override_filename=None, rule_set_path=DEFAULT_VERSION_SETS_PATH, rules_version="1.0",
                      column_namespace=None)
    rules.load()
    result = rules.validate(DataLoader(data_filename=str(path)).load())
    return [f"{name}: {check.friendly_name}" for name, check in result.checklist.items()
            if check.status.value != "passed"]


def rows_of(text: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(text)))


SOLVES = {"cn": ("cn-chat-70b.yaml", ["--region", "cn"]), "two": ("two-models.yaml", [])}
PLANS = ("capacity-global.yaml", "capacity-cn.yaml")


@pytest.mark.parametrize("name", sorted(SOLVES))
def test_solve_focus_passes_the_validator(name, tmp_path, monkeypatch):
    file, extra = SOLVES[name]
    out = tmp_path / "focus.csv"
    assert run("solve", EXAMPLES / file, *extra, "--format", "focus", "-o", out).exit_code == 0
    assert focus_failures(out, monkeypatch) == []


@pytest.mark.parametrize("file", PLANS)
def test_plan_focus_passes_the_validator_and_sums_to_the_period_costs(file, tmp_path, monkeypatch):
    out, saved = tmp_path / "focus.csv", tmp_path / "plan.json"
    assert run("plan", EXAMPLES / file, "--format", "json", "-o", saved).exit_code == 0
    assert run("report", saved, "--format", "focus", "-o", out).exit_code == 0
    assert focus_failures(out, monkeypatch) == []
    plan = json.loads(saved.read_text())
    by_month: dict[str, float] = defaultdict(float)
    for row in rows_of(out.read_text()):
        start, end = dt.date.fromisoformat(row["ChargePeriodStart"][:10]), row["ChargePeriodEnd"]
        assert start.day == 1 and end.endswith("-01T00:00:00Z")  # calendar months, never T10:00:00Z
        by_month[row["ChargePeriodStart"][:7]] += float(row["EffectiveCost"])
    months = sorted(by_month)
    for index, period in enumerate(plan["periods"]):
        inside = months[3 * index:3 * index + 3]
        # the period's 730-hour months re-priced at the calendar's hours: the period cost x real hours / 2,190
        # (2027Q1: Jan 744 + Feb 672 + Mar 744 = 2,160 h; Q2 2,184; Q3 and Q4 2,208); a monthly subscription is
        # a flat fee per month, its share of the period cost whatever the hours
        real = sum((add_months(dt.date.fromisoformat(m + "-01"), 1) - dt.date.fromisoformat(m + "-01")).days * 24
                   for m in inside)
        flat = period["cost_by_price_kind"].get("subscription-monthly", 0.0)
        assert sum(by_month[m] for m in inside) == pytest.approx(
            (period["cost"] - flat) * real / 2190 + flat, abs=0.05), period["period"]


def _line(kind: str, count: int, price: float, committed: bool) -> PurchaseLine:
    hours = count * (8760.0 if committed else 2190.0)  # a commitment's whole term, a rented quarter
    return PurchaseLine(provider="aws", service="ec2", sku="g6e.xlarge", region="us-east-1", gpu="L40S-48GB",
                        gpus_per_instance=1, price_kind=kind, count=count, committed=committed,
                        term_months=12 if committed else None, price_per_hour=price,
                        hours=hours, cost=price * hours,
                        break_even_utilisation=None, workloads=["chat"])


def _plan(charge: str) -> CapacityPlan:
    """Four quarters; 2 reserved-1y instances at 1.00/h bought in Q3 (6 months inside, 6 after); 1 on-demand
    instance at 2.00/h rented in Q1. Hand-computed: a reserved month costs 2 x 730 x 1.00 = 1,460."""
    rented = _line("on-demand", 1, 2.0, False)
    reserved = _line("reserved-1y", 2, 1.0, True)
    costs = [2 * 730 * 3, 0.0, 1460.0 * 3, 1460.0 * 3]
    labels = ["2027Q1", "2027Q2", "2027Q3", "2027Q4"]
    buys = [[rented], [], [reserved], []]
    periods = [PeriodLine(period=label, demand={"chat": 1.0}, capacity={"chat": 1.0}, cost=cost, purchases=buy)
               for label, cost, buy in zip(labels, costs, buys, strict=True)]
    ledger = spans([(p.period, p.purchases) for p in periods], 3)
    owed = sum(c.obligation_after_horizon for c in ledger)  # what a plan file states: its figures add up
    return CapacityPlan(status="optimal", currency="USD", horizon="4 quarters from 2027Q1", charge=charge,
                        headroom=0.8, periods=periods, total_cost=sum(costs) + (owed if charge == "full-term" else 0),
                        all_on_demand_cost=30000.0, savings=None, committed_after_horizon=owed, scenarios=[],
                        explanation=[],
                        as_of_date="2026-11-29", period="quarter", commitments=ledger,
                        commitment_summary=summarise_commitments(charge, costs, ledger, 30000.0))


@pytest.mark.parametrize("charge", ["full-term", "inside-horizon"])
def test_a_late_reservation_owes_its_months_after_the_horizon_whatever_the_charge_mode(charge):
    plan = _plan(charge)
    (span,) = plan.commitments
    assert (span.months_inside, span.months_after) == (6, 6)
    assert span.cost_inside_horizon == 6 * 1460 and span.obligation_after_horizon == 6 * 1460
    summary = plan.commitment_summary
    assert summary.obligation_after_horizon == 8760.0
    assert summary.savings_amortised == 30000.0 - (4380 + 8760)
    assert summary.savings_cash == 30000.0 - (4380 + 8760) - 8760


def test_commitments_become_monthly_purchase_rows_plus_usage_rows_inside_the_horizon():
    """2 reserved instances at 1.00/h from July 2027 to June 2028: each month bills 2 x 1.00 x its real hours
    (July 744, September 720, February 2028 a leap month: 29 x 24 = 696)."""
    rows = rows_of(render_capacity_focus(_plan("full-term")))
    purchases = [r for r in rows if r["ChargeCategory"] == "Purchase"]
    usage = [r for r in rows if r["ChargeCategory"] == "Usage" and r["PricingCategory"] == "Committed"]
    assert len(purchases) == 12 and len(usage) == 6
    billed = {r["ChargePeriodStart"][:7]: float(r["BilledCost"]) for r in purchases}
    assert (billed["2027-07"], billed["2027-09"], billed["2028-02"]) == (1488.0, 1440.0, 1392.0)
    # the term: Jul-Dec 2027 184 days + Jan-Jun 2028 182 days = 366 days = 8,784 h (a leap year's February)
    assert sum(billed.values()) == 2 * 8784
    assert {float(r["EffectiveCost"]) for r in purchases} == {0.0}
    assert {r["ChargePeriodStart"][:7]: float(r["EffectiveCost"]) for r in usage}["2027-09"] == 1440.0
    assert purchases[-1]["ChargePeriodStart"] == "2028-06-01T00:00:00Z"  # the term's last month, after the horizon
    assert {r["CommitmentDiscountStatus"] for r in usage} == {"Used"}
    effective: dict[str, float] = defaultdict(float)
    for r in rows:
        effective[r["ChargePeriodStart"][:7]] += float(r["EffectiveCost"])
    # January: 1 on-demand instance at 2.00/h x 744 h; April: nothing runs; September: the reservation
    assert effective["2027-01"] == 1488.0 and effective["2027-04"] == 0.0 and effective["2027-09"] == 1440.0
    # rented: Jan 744 + Feb 672 + Mar 744 = 2,160 h x 2.00 = 4,320; reservations billed 2 x 8,784 = 17,568
    assert sum(float(r["BilledCost"]) for r in rows) == 4320 + 17568


DISCOUNTED = """schema_version: 1
residency: us
currency: USD
providers: [aws]
horizon: {periods: 3, period: quarter, start: 2027Q2}
workloads:
  - name: assistant
    model: meta-llama/Llama-3.1-8B-Instruct
    demand: {requests_per_second: [20, 20, 30]}
    input_tokens: 1000
    output_tokens: 250
    max_model_len: 8192
    slo: {ttft_ms: 1500, tpot_ms: 40}
    price_kinds: [on-demand, reserved-1y]
"""


def test_a_discounted_capacity_plan_keeps_the_list_price_in_focus_list_columns(tmp_path):
    """--discount aws=0.2: g6e.xlarge on-demand is listed at 1.861 USD/h and paid 1.861 x 0.8 = 1.4888; FOCUS
    ListUnitPrice is the list price (it showed 1.4888), ContractedUnitPrice the discounted one."""
    path, saved = tmp_path / "c.yaml", tmp_path / "c.json"
    path.write_text(DISCOUNTED)
    assert run("plan", path, "--discount", "aws=0.2", "--format", "json", "-o", saved).exit_code == 0
    plan = json.loads(saved.read_text())
    rented = [x for p in plan["periods"] for x in p["purchases"] if x["price_kind"] == "on-demand"]
    assert rented and {(x["list_price_per_hour"], x["price_per_hour"]) for x in rented} == {(1.861, 1.4888)}
    out = run("report", saved, "--format", "focus").stdout
    od = [r for r in rows_of(out) if r["SkuPriceId"] == "aws:ec2:g6e.xlarge:us-east-1:on-demand"]
    assert od and {(r["ListUnitPrice"], r["ContractedUnitPrice"]) for r in od} == {("1.861", "1.4888")}
    for r in od:  # the list cost is the list price x the quantity, not the discounted cost
        assert float(r["ListCost"]) == pytest.approx(1.861 * float(r["PricingQuantity"]), abs=1e-4)
        assert float(r["ListCost"]) > float(r["EffectiveCost"])


RESERVED = """schema_version: 1
residency: us
currency: USD
providers: [aws]
price_kinds: [reserved-1y, on-demand]
workloads:
  - name: chat
    model: meta-llama/Llama-3.1-8B-Instruct
    requests_per_second: 12
    input_tokens: 1000
    output_tokens: 250
    max_model_len: 8192
    slo: {ttft_ms: 1500, tpot_ms: 40}
"""


def test_solve_unit_prices_keep_the_catalog_digits_so_focus_reproduces_the_plan(tmp_path):
    """g6e.xlarge reserved-1y is 1.17243 USD/h in the catalog; written as 1.1724 its FOCUS month came to
    1.1724 x 730 = 855.852 instead of 1.17243 x 730 = 855.8739 (0.02 short per instance)."""
    path, saved = tmp_path / "r.yaml", tmp_path / "r.json"
    path.write_text(RESERVED)
    assert run("solve", path, "--format", "json", "-o", saved).exit_code == 0
    plan = json.loads(saved.read_text())
    prices = {(d["sku"], d["price_kind"]): d["instance_price_per_hour"] for d in plan["deployments"]}
    assert prices.get(("g6e.xlarge", "reserved-1y")) == 1.17243, prices
    rows = rows_of(run("report", saved, "--format", "focus").stdout)
    usage = [r for r in rows if r["ChargeCategory"] == "Usage"]
    hours = {float(r["PricingQuantity"]) / d["instances"] for r, d in zip(usage, plan["deployments"], strict=True)}
    (month_hours,) = hours  # every instance runs the whole charge month
    expected = plan["total_cost_per_month"] / 730 * month_hours
    assert sum(float(r["EffectiveCost"]) for r in usage) == pytest.approx(expected, abs=0.01)


def test_usage_a_commitment_covers_is_priced_at_the_on_demand_list_and_contracted_prices():
    """FOCUS 1.0: ListUnitPrice is the public on-demand price, ContractedUnitPrice excludes commitment discounts.
    2 reserved instances at 1.00/h whose SKU lists 2.50/h on demand and is contracted at 2.00/h: September 2027
    (30 x 24 = 720 h x 2 = 1,440 h) lists 2.50 x 1,440 = 3,600, contracts 2.00 x 1,440 = 2,880 and costs
    1.00 x 1,440 = 1,440 effectively; the Purchase row keeps the reservation's own prices (1,440 billed)."""
    plan = _plan("full-term")
    periods = [p.model_copy(update={"purchases": [x.model_copy(update={
        "on_demand_price_per_hour": 2.0, "on_demand_list_price_per_hour": 2.5}) if x.committed else x
        for x in p.purchases]}) for p in plan.periods]
    rows = rows_of(render_capacity_focus(plan.model_copy(update={"periods": periods})))
    september = [r for r in rows if r["ChargePeriodStart"].startswith("2027-09")]
    usage = next(r for r in september if r["ChargeCategory"] == "Usage")
    purchase = next(r for r in september if r["ChargeCategory"] == "Purchase")
    assert (float(usage["ListUnitPrice"]), float(usage["ContractedUnitPrice"])) == (2.5, 2.0)
    assert (float(usage["ListCost"]), float(usage["ContractedCost"]), float(usage["EffectiveCost"])) == (
        3600.0, 2880.0, 1440.0)
    assert usage["SkuPriceId"].endswith(":on-demand") and usage["CommitmentDiscountId"] == purchase[
        "CommitmentDiscountId"]
    assert (float(purchase["ListUnitPrice"]), float(purchase["BilledCost"])) == (1.0, 1440.0)
    assert purchase["SkuPriceId"].endswith(":reserved-1y")


def test_a_solved_reservation_lists_its_covered_usage_at_the_on_demand_price(tmp_path):
    """--discount aws=0.2: g6e.xlarge lists 1.861/h on demand, contracted 1.861 x 0.8 = 1.4888; its 1-year
    reservation lists 1.17243, costs 1.17243 x 0.8 = 0.937944. December 2026: 744 h per instance."""
    path, saved = tmp_path / "r.yaml", tmp_path / "r.json"
    path.write_text(RESERVED)
    assert run("solve", path, "--discount", "aws=0.2", "--format", "json", "-o", saved).exit_code == 0
    plan = json.loads(saved.read_text())
    d = next(d for d in plan["deployments"] if (d["sku"], d["price_kind"]) == ("g6e.xlarge", "reserved-1y"))
    assert (d["on_demand_price_per_hour"], d["on_demand_list_price_per_hour"]) == (1.4888, 1.861)
    rows = rows_of(run("report", saved, "--format", "focus").stdout)
    usage = next(r for r in rows if r["ChargeCategory"] == "Usage" and r["SkuId"] == "g6e.xlarge")
    hours = 744 * d["instances"]
    assert float(usage["ConsumedQuantity"]) == hours
    assert (float(usage["ListUnitPrice"]), float(usage["ContractedUnitPrice"])) == (1.861, 1.4888)
    assert float(usage["EffectiveCost"]) == pytest.approx(0.937944 * hours, abs=1e-4)
    purchase = next(r for r in rows if r["ChargeCategory"] == "Purchase" and r["SkuId"] == "g6e.xlarge")
    assert (float(purchase["ListUnitPrice"]), float(purchase["ContractedUnitPrice"])) == (1.17243, 0.937944)


def _runs(replicas: int) -> list[RunningLine]:
    """`replicas` TP-1 replicas of chat on the reservation's 1-GPU g6e.xlarge instances."""
    return [RunningLine(workload="chat", model="m", provider="aws", sku="g6e.xlarge", region="us-east-1",
                        price_kind="reserved-1y", gpu="L40S-48GB", gpus_per_instance=1, replicas=replicas,
                        tensor_parallel=1, pipeline_parallel=1, weight_precision="bf16", kv_cache_dtype="auto",
                        capacity=1.0, vllm_command="vllm serve m")] if replicas else []


def test_a_reservation_month_with_idle_instances_splits_into_used_and_unused_rows():
    """The 2 reservations at 1.00/h from 2027Q3 run 2 replicas in Q3 but 1 in Q4: October (744 h per instance)
    is 744 h Used (EffectiveCost 744.00, priced at the on-demand twin) and 744 h Unused (744.00, ConsumedQuantity
    empty), together the month's charge 2 x 744 x 1.00 = 1,488.00; September stays one Used row of 1,440 h.
    Before: October was one Used row of 1,488 h, as if both instances served."""
    plan = _plan("full-term")
    runs = {"2027Q3": 2, "2027Q4": 1}
    periods = [p.model_copy(update={"running": _runs(runs.get(p.period, 0)), "purchases": [x.model_copy(update={
        "on_demand_price_per_hour": 2.0, "on_demand_list_price_per_hour": 2.5}) if x.committed else x
        for x in p.purchases]}) for p in plan.periods]
    rows = rows_of(render_capacity_focus(plan.model_copy(update={"periods": periods})))
    usage = [r for r in rows if r["ChargeCategory"] == "Usage" and r["PricingCategory"] == "Committed"]
    october = {r["CommitmentDiscountStatus"]: r for r in usage if r["ChargePeriodStart"].startswith("2027-10")}
    assert sorted(october) == ["Unused", "Used"]
    used, idle = october["Used"], october["Unused"]
    assert (float(used["ConsumedQuantity"]), float(used["PricingQuantity"]), float(used["EffectiveCost"])) == (
        744.0, 744.0, 744.0)
    assert (float(used["ListCost"]), float(used["ContractedCost"])) == (2.5 * 744, 2.0 * 744)
    assert (idle["ConsumedQuantity"], idle["ConsumedUnit"]) == ("", "")
    assert (float(idle["PricingQuantity"]), float(idle["EffectiveCost"]), float(idle["ListCost"])) == (
        744.0, 744.0, 744.0)
    assert idle["SkuPriceId"].endswith(":reserved-1y") and idle["CommitmentDiscountId"] == used["CommitmentDiscountId"]
    purchase = next(r for r in rows if r["ChargeCategory"] == "Purchase" and r["ChargePeriodStart"].startswith(
        "2027-10"))
    assert float(purchase["BilledCost"]) == float(used["EffectiveCost"]) + float(idle["EffectiveCost"]) == 1488.0
    september = [r for r in usage if r["ChargePeriodStart"].startswith("2027-09")]
    assert [(r["CommitmentDiscountStatus"], float(r["ConsumedQuantity"])) for r in september] == [("Used", 1440.0)]
    assert {r["CommitmentDiscountStatus"] for r in usage if r["ChargePeriodStart"] >= "2027-10"} == {"Used", "Unused"}


def test_commitment_use_fills_the_oldest_commitment_first():
    """2 reservations bought in Q1 and 3 in Q2 of one offering; Q2 runs 4 instances' replicas (2 replicas of
    TP 2 on 1-GPU instances): the Q1 pair runs 2, the Q2 trio 2 of 3."""
    line = _line("reserved-1y", 2, 1.0, True)
    ledger = spans([("2027Q1", [line]), ("2027Q2", [line.model_copy(update={"count": 3})])], 3)
    q2 = [_runs(2)[0].model_copy(update={"tensor_parallel": 2})]
    assert commitment_use(ledger, [_runs(2), q2], 3) == [{0: 2, 1: 2}, {1: 2}]
    assert commitment_use(ledger, [[], []], 3) is None  # a plan file without `running`: unknown, not idle


UNDERUSED = """schema_version: 1
residency: us
currency: USD
providers: [aws]
horizon: {periods: 4, period: quarter, start: 2027Q1}
workloads:
  - name: assistant
    model: meta-llama/Llama-3.1-8B-Instruct
    demand: {requests_per_second: [15, 15, 15, 2]}
    input_tokens: 1000
    output_tokens: 250
    max_model_len: 8192
    slo: {ttft_ms: 1500, tpot_ms: 40}
    price_kinds: [on-demand, reserved-1y, reserved-3y]
"""


def test_an_idle_reservation_in_a_plan_passes_the_validator_as_unused(tmp_path, monkeypatch):
    """2 g6e.xlarge reserved-1y at 1.17243/h for 2027; Q4's demand of 2 req/s runs 1 replica: October is
    744 h Used + 744 h Unused, each 1.17243 x 744 = 872.2879, the Purchase row's 1,744.5758 together. (15 req/s in
    Q1-Q3: 16 until 2026-12-05 needed 20.0 of two replicas' 20.04 at the 0.8 headroom, and 19.97 since.)"""
    path, out = tmp_path / "u.yaml", tmp_path / "focus.csv"
    path.write_text(UNDERUSED)
    assert run("plan", path, "--format", "focus", "-o", out).exit_code == 0
    rows = rows_of(out.read_text())
    october = [r for r in rows if r["ChargePeriodStart"].startswith("2027-10") and r["ChargeCategory"] == "Usage"]
    assert sorted((r["CommitmentDiscountStatus"], r["PricingQuantity"], r["EffectiveCost"]) for r in october) == [
        ("Unused", "744.0", "872.2879"), ("Used", "744.0", "872.2879")]
    assert focus_failures(out, monkeypatch) == []


def test_every_row_costs_its_contracted_unit_price_times_its_quantity(tmp_path):
    """QA: reserved-1y only with demand falling from 20 to 2 requests/s leaves reservations idle; May 2027's
    Unused row gave the rounding remainder to ContractedCost too: 1,744.5759 beside 1.17243 x 1,488 h =
    1,744.5758 (and above its ListCost). Only EffectiveCost takes it."""
    path, out = tmp_path / "r.yaml", tmp_path / "focus.csv"
    path.write_text(UNDERUSED.replace("[15, 15, 15, 2]", "[20, 2, 2, 2]").replace(
        "[on-demand, reserved-1y, reserved-3y]", "[reserved-1y]"))
    assert run("plan", path, "--format", "focus", "-o", out).exit_code == 0
    rows = [r for r in rows_of(out.read_text()) if r["ContractedUnitPrice"] and r["PricingQuantity"]]
    unused = [r for r in rows if r["CommitmentDiscountStatus"] == "Unused"]
    assert unused  # the case this is about
    for r in rows:
        expected = round(float(r["ContractedUnitPrice"]) * float(r["PricingQuantity"]), 4)
        assert abs(float(r["ContractedCost"]) - expected) < 1e-9, r


def test_a_monthly_subscription_is_a_flat_fee_per_calendar_month(tmp_path):
    """capacity-cn subscribes GT4.8XLARGE192 from 2027Q2 at 27,496 CNY a month (the catalog's 37.665753/h is
    27,496 / 730): every month bills 27,496.00 per instance, February and May alike. Before: priced by the
    month's hours, 37.665753 x 720 = 27,119.34 in April, x 744 = 28,023.32 in May."""
    out = tmp_path / "cn.csv"
    assert run("plan", EXAMPLES / "capacity-cn.yaml", "--format", "focus", "-o", out).exit_code == 0
    rows = [r for r in rows_of(out.read_text()) if "GT4.8XLARGE192 subscription-monthly" in r["ChargeDescription"]]
    purchases = {r["ChargePeriodStart"][:7]: r for r in rows if r["ChargeCategory"] == "Purchase"}
    assert (purchases["2027-04"]["PricingUnit"], purchases["2027-04"]["PricingQuantity"]) == ("Months", "1.0")
    assert {float(purchases[m]["BilledCost"]) for m in ("2027-04", "2027-05", "2027-06")} == {27496.0}
    assert float(purchases["2027-05"]["ContractedUnitPrice"]) == 27496.0
    usage = {r["ChargePeriodStart"][:7]: r for r in rows if r["ChargeCategory"] == "Usage"}
    assert float(usage["2027-05"]["EffectiveCost"]) == 27496.0  # the fee, the 744 h it ran as ConsumedQuantity
    assert (usage["2027-05"]["ConsumedQuantity"], usage["2027-05"]["PricingUnit"]) == ("744.0", "Hours")


def test_a_workload_tag_named_like_gpuopts_own_is_refused_and_never_overwrites_it(tmp_path):
    """FOCUS Tags carry gpuopt-workload (solve) beside the workload's tags; a user tag of that name replaced it,
    so a cost could not be traced to its workload. Such a key is refused when the file is read (exit 2), and a
    hand-edited plan that carries one still exports gpuopt's own value."""
    path, saved = tmp_path / "w.yaml", tmp_path / "w.json"
    path.write_text("schema_version: 1\nproviders: [runpod]\nworkloads:\n- name: chat\n"
                    "  model: meta-llama/Llama-3.1-8B-Instruct\n  requests_per_second: 1\n  input_tokens: 500\n"
                    "  output_tokens: 100\n  max_model_len: 4096\n  tags: {gpuopt-workload: other, team: a}\n")
    refused = run("solve", path, "--format", "json", "-o", saved)
    assert refused.exit_code == 2 and "workloads.0.tags: tag key gpuopt-workload: keys starting 'gpuopt-'" in \
        refused.stderr
    path.write_text(path.read_text().replace("gpuopt-workload: other, ", ""))
    assert run("solve", path, "--format", "json", "-o", saved).exit_code == 0
    plan = json.loads(saved.read_text())
    for d in plan["deployments"]:
        d["tags"]["gpuopt-workload"] = "other"
    saved.write_text(json.dumps(plan))
    rows = rows_of(run("report", saved, "--format", "focus").stdout)
    tags = [json.loads(r["Tags"]) for r in rows]
    assert tags and all(t["gpuopt-workload"] == "chat" and t["team"] == "a" for t in tags)


def _charge(**update: object):  # type: ignore[no-untyped-def]
    from gpuopt.reports.focus import Charge
    base = dict(month=dt.date(2027, 1, 1), currency="USD", provider="aws", service="ec2", sku="g6e.xlarge",
                region="us-east-1", region_name="us-east-1 (US)", price_kind="on-demand", instances=1.0,
                unit_price=1.0, list_unit_price=1.0, description="d")
    return Charge(**{**base, **update})  # type: ignore[arg-type]


def test_who_invoices_how_a_commitment_is_paid_and_no_resource_type_without_a_resource():
    """AWS China is invoiced by its operators (../shared/data/catalog_notes.md: cn-north-1 operated by Sinnet,
    cn-northwest-1 by NWCD); a capacity block is paid when booked (One-Time); Replicate's and DigitalOcean's
    `contract` is committed spend; a projection has no ResourceId, so no ResourceType (FOCUS 1.0)."""
    from gpuopt.reports.focus import rows
    assert [r["InvoiceIssuerName"] for r in rows(_charge(region="cn-north-1", currency="CNY"))] == ["Sinnet"]
    assert [r["InvoiceIssuerName"] for r in rows(_charge(region="cn-northwest-1", currency="CNY"))] == ["NWCD"]
    (plain,) = rows(_charge())
    assert (plain["InvoiceIssuerName"], plain["ResourceId"], plain["ResourceType"]) == ("aws", None, None)
    block = rows(_charge(price_kind="capacity-block", commitment_id="c", commitment_name="c"))
    assert [(r["ChargeCategory"], r["ChargeFrequency"]) for r in block] == [("Purchase", "One-Time"),
                                                                             ("Usage", "Usage-Based")]
    reserved = rows(_charge(price_kind="reserved-1y", commitment_id="c", commitment_name="c"))
    assert reserved[0]["ChargeFrequency"] == "Recurring"
    contract = rows(_charge(provider="replicate", price_kind="contract", commitment_id="c", commitment_name="c"))
    assert (contract[0]["CommitmentDiscountCategory"], contract[0]["CommitmentDiscountType"]) == ("Spend", "Contract")


def _solved_term_focus(tmp_path: Path, price_kind: str) -> list[dict[str, str]]:
    """The FOCUS rows of a one-workload AWS solve bought as `price_kind`."""
    path = tmp_path / "w.yaml"
    path.write_text("schema_version: 1\nresidency: us\ncurrency: USD\nproviders: [aws]\n"
                    f"price_kinds: [{price_kind}]\nworkloads:\n"
                    "  - {name: assistant, model: meta-llama/Llama-3.1-8B-Instruct, requests_per_second: 4,"
                    " input_tokens: 1000, output_tokens: 250, max_model_len: 8192,"
                    " slo: {ttft_ms: 1500, tpot_ms: 40}}\n")
    result = run("solve", path, "--format", "focus")
    assert result.exit_code == 0, result.output
    return rows_of(result.stdout)


def test_a_solve_plans_reservation_exports_every_month_of_its_term(tmp_path):
    """QA: a 3-year reservation exported one Purchase row (January 2027) of its 36. Now one per month of the
    term, the first with the projected month's Usage, the other 35 Purchase rows alone (the obligation); each
    month billed at its calendar hours, 0.80395 USD/h x 744 h = 598.1388 in December 2026 (the month after the
    plan date; conftest pins today to 2026-11-29)."""
    out = _solved_term_focus(tmp_path, "reserved-3y")
    purchases = [r for r in out if r["ChargeCategory"] == "Purchase"]
    months = [r["ChargePeriodStart"][:7] for r in purchases]
    assert len(purchases) == 36 and months[0] == "2026-12" and months[-1] == "2029-11"
    assert months == sorted(set(months))
    assert [r["ChargePeriodStart"][:7] for r in out if r["ChargeCategory"] == "Usage"] == ["2026-12"]
    assert float(purchases[0]["BilledCost"]) == pytest.approx(0.80395 * 744, abs=1e-4)
    hours = sum((add_months(dt.date(2026, 12, 1), m + 1) - add_months(dt.date(2026, 12, 1), m)).days * 24
                for m in range(36))
    assert sum(float(r["BilledCost"]) for r in purchases) == pytest.approx(0.80395 * hours, abs=0.01)


def test_a_converted_monthly_fee_bills_the_plans_month_to_the_cent(tmp_path):
    """QA: capacity-cn in USD subscribes GT4.8XLARGE192 (27,496 CNY a month, 5.66155406 USD/h at the plan's
    rate); the plan charged a quarter 5.66155406 x 730 x 3 = 12,398.80 (rounded once) while FOCUS billed each
    month 4,132.93. A monthly subscription is billed month by month: each month's charge to the cent (one
    instance: 4,132.934 -> 4,132.93; two: 8,265.869 -> 8,265.87), the quarter three of them; FOCUS's months
    add up to every period's subscription cost. And a solved deployment of 3 such instances (QA's sub.yaml)
    bills the plan's month: 3 x 4,132.934 = 12,398.80, not 3 x 4,132.93."""
    plan_json, out = tmp_path / "p.json", tmp_path / "f.csv"
    assert run("plan", EXAMPLES / "capacity-cn.yaml", "--currency", "USD", "--json", "-o", plan_json).exit_code == 0
    assert run("plan", EXAMPLES / "capacity-cn.yaml", "--currency", "USD", "--format", "focus", "-o",
               out).exit_code == 0
    plan = json.loads(plan_json.read_text())
    rows = [r for r in rows_of(out.read_text()) if r["ChargeCategory"] == "Purchase"
            and "subscription-monthly" in r["ChargeDescription"]]
    periods = {p["period"]: p for p in plan["periods"]}
    checked = 0
    for label, period in periods.items():
        expected = period["cost_by_price_kind"].get("subscription-monthly")
        if expected is None:
            continue
        lines = [x for x in period["purchases"] if x["price_kind"] == "subscription-monthly"]
        by_hand = sum(3 * int(Decimal(str(x["price_per_hour"] * 730 * x["count"])).quantize(Decimal("0.01"),
                      rounding=ROUND_HALF_UP) * 100) for x in lines) / 100  # three months, each to the cent
        assert expected == pytest.approx(by_hand, abs=1e-9)
        billed = sum(float(r["BilledCost"]) for r in rows if f"{label}: " in r["ChargeDescription"])
        assert round(billed, 2) == expected, label
        checked += 1
    assert checked >= 2  # one instance in 2027Q2, two in 2027Q4
    assert periods["2027Q2"]["cost_by_price_kind"]["subscription-monthly"] == 3 * 4132.93
    assert periods["2027Q4"]["cost_by_price_kind"]["subscription-monthly"] == pytest.approx(3 * 8265.87)
    sub = tmp_path / "sub.yaml"
    sub.write_text((EXAMPLES / "cn-chat-70b.yaml").read_text().replace("currency: CNY", "currency: USD")
                   + "price_kinds: [subscription-monthly]\n")
    solved = run("solve", sub, "--region", "cn", "--format", "json")
    assert solved.exit_code == 0, solved.stderr
    deployments = json.loads(solved.stdout)["deployments"]
    focus = rows_of(run("solve", sub, "--region", "cn", "--format", "focus").stdout)
    purchases = [r for r in focus if r["ChargeCategory"] == "Purchase"]
    assert len(purchases) == len(deployments)
    for d, r in zip(sorted(deployments, key=lambda d: d["cost_per_month"]),
                    sorted(purchases, key=lambda r: float(r["BilledCost"])), strict=True):
        assert round(float(r["BilledCost"]), 2) == d["cost_per_month"]
        assert float(r["BilledCost"]) == pytest.approx(float(r["ContractedUnitPrice"]) * d["instances"], abs=1e-4)


def test_every_month_of_a_solved_term_says_which_it_is(tmp_path):
    """QA: the first Purchase row of a solved reservation had no "month 1 of 12"; the others did."""
    purchases = [r for r in _solved_term_focus(tmp_path, "reserved-1y") if r["ChargeCategory"] == "Purchase"]
    assert [r["ChargeDescription"].rsplit("; ", 1)[1] for r in purchases] == [
        f"month {m} of 12 of the term" for m in range(1, 13)]
