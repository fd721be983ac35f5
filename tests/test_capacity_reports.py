"""Capacity plans a reviewer can sign: the obligation after the horizon in every charge mode, savings on
stated bases, what runs in each period, units, report and diff of capacity plans, diffs in one currency."""

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from gpuopt.cli.main import cli
from gpuopt.planner.commitments import CHARGE_MODES, kept_in_scenarios
from tests.conftest import run

EXAMPLES = Path(__file__).parent.parent / "examples"
EIGHT_QUARTERS = """schema_version: 1
residency: us
currency: USD
providers: [aws]
horizon: {periods: 8, period: quarter, start: 2027Q1}
charge: CHARGE
workloads:
  - name: assistant
    model: meta-llama/Llama-3.1-8B-Instruct
    demand: {requests_per_second: {base: 4, growth: 0.5}}
    input_tokens: 1000
    output_tokens: 250
    max_model_len: 8192
    slo: {ttft_ms: 1500, tpot_ms: 40}
    price_kinds: [on-demand, reserved-3y]
"""


pytestmark = pytest.mark.usefixtures("fixed_day")


def plan_json(tmp_path, charge):
    path = tmp_path / f"{charge}.yaml"
    path.write_text(EIGHT_QUARTERS.replace("CHARGE", charge))
    out = tmp_path / f"{charge}.json"
    result = run("plan", path, "--format", "json", "-o", out)
    assert result.exit_code == 0, result.output
    return out, json.loads(out.read_text())


def test_each_warning_is_printed_once_on_the_stream_that_shows_it(tmp_path):
    """The table keeps stdout for the schedule and the warnings go to stderr (as solve's table does); a Markdown
    document on stdout carries them in its own Warnings section, so stderr does not repeat them."""
    path = tmp_path / "w.yaml"
    path.write_text(EIGHT_QUARTERS.replace("CHARGE", "inside-horizon"))
    table, document = run("plan", path), run("plan", path, "--format", "markdown")
    assert table.exit_code == document.exit_code == 0
    warnings = [line for line in table.stderr.splitlines() if line.startswith("warning: ")]
    assert warnings and "warning" not in table.stdout
    assert "## Warnings" in document.stdout and "warning:" not in document.stderr


def test_an_infeasible_capacity_document_keeps_its_warnings(tmp_path):
    """deliver leaves a Markdown document's warnings off stderr, so an infeasible document must carry them."""
    from gpuopt.planner.capacity import CapacityPlan
    from gpuopt.reports.capacity import render_capacity_markdown

    out, _ = plan_json(tmp_path, "inside-horizon")
    plan = CapacityPlan.model_validate_json(out.read_text())
    assert plan.warnings
    infeasible = plan.model_copy(update={"status": "infeasible", "explanation": ["no offering meets the TPOT"]})
    text = render_capacity_markdown(infeasible)
    assert "**Infeasible**" in text and "## Warnings" in text
    assert all(f"- {w}" in text or w[:20] in text for w in plan.warnings)


@pytest.mark.parametrize("charge", ["inside-horizon", "full-term"])
def test_late_3_year_reservations_report_what_they_owe_after_the_horizon(tmp_path, charge):
    _, plan = plan_json(tmp_path, charge)
    owed = 0.0
    for index, period in enumerate(plan["periods"]):  # hand rule: price x 730 h x count x months past Q8's end
        for x in period["purchases"]:
            if x["committed"]:
                owed += x["price_per_hour"] * 730 * x["count"] * max(0, 36 - (8 - index) * 3)
    assert owed > 0  # the plan buys 3-year reservations late in the horizon
    assert plan["committed_after_horizon"] == pytest.approx(owed, abs=0.05)
    s = plan["commitment_summary"]
    assert s["obligation_after_horizon"] == plan["committed_after_horizon"]
    assert s["cost_inside_horizon"] == pytest.approx(sum(p["cost"] for p in plan["periods"]), abs=0.01)
    assert s["savings_amortised"] == pytest.approx(plan["all_on_demand_cost"] - s["cost_inside_horizon"], abs=0.01)
    assert s["savings_cash"] == pytest.approx(s["savings_amortised"] - owed, abs=0.05)


def test_each_charge_mode_is_explained_with_its_own_text(tmp_path):
    for charge, other in (("inside-horizon", "full-term"), ("full-term", "inside-horizon")):
        saved, _ = plan_json(tmp_path, charge)
        text = run("report", saved, "--format", "markdown").stdout
        assert CHARGE_MODES[charge] in text and CHARGE_MODES[other] not in text


def test_scenarios_keep_commitments_but_not_monthly_subscriptions():
    fixed = {(("tencent", "cvm", "GN7", "ap-guangzhou", "subscription-monthly"), 0): 2,
             (("aws", "ec2", "g6e.xlarge", "us-east-1", "reserved-1y"), 1): 1}
    assert kept_in_scenarios(fixed) == {(("aws", "ec2", "g6e.xlarge", "us-east-1", "reserved-1y"), 1): 1}


@pytest.fixture(scope="module")
def global_plan(tmp_path_factory):
    import os

    os.environ["GPUOPT_TODAY"] = "2026-11-29"
    out = tmp_path_factory.mktemp("cap") / "global.json"
    result = CliRunner().invoke(cli, ["plan", str(EXAMPLES / "capacity-global.yaml"), "--format", "json", "-o",
                                      str(out)])
    assert result.exit_code == 0, result.output
    return out


def test_capacity_markdown_says_what_runs_with_units_and_the_cost_split(global_plan):
    plan = json.loads(global_plan.read_text())
    text = run("report", global_plan, "--format", "markdown").stdout
    for heading in ("## Summary", "## Schedule", "## What runs", "## Commitments", "## Scenarios"):
        assert heading in text
    assert "vllm serve " in text and "meta-llama/Llama-3.1-8B-Instruct" in text
    assert "req/s" in text and "concurrent requests" in text
    q2 = next(p for p in plan["periods"] if p["period"] == "2027Q2")
    assert sum(q2["cost_by_price_kind"].values()) == pytest.approx(q2["cost"], abs=0.01)
    assert "reserved-1y" in q2["cost_by_price_kind"] and not any(x["committed"] for x in q2["purchases"])
    row = next(line for line in text.splitlines() if line.startswith("| 2027Q2 |"))
    assert "reserved-1y from 2027Q1" in row  # the commitment already running, not only the period's spot
    assert plan["catalog_as_of"] in text and plan["fx"] in text


def test_capacity_html_has_the_solve_style_and_two_charts(global_plan):
    from gpuopt.reports.html import STYLE

    page = run("report", global_plan, "--format", "html").stdout
    assert page.startswith("<!DOCTYPE html>") and STYLE in page and page.count("<svg") == 2
    assert 'id="chart-cost"' in page and 'id="chart-capacity"' in page and 'id="total-cost"' in page
    assert not re.search(r"<script[^>]+src=|<link[^>]+href=|url\(\s*['\"]?https?:", page)


def test_diff_of_capacity_plans_in_two_currencies_converts_at_the_recorded_fx(global_plan, tmp_path):
    cny = tmp_path / "cny.json"
    assert run("plan", EXAMPLES / "capacity-global.yaml", "--currency", "CNY", "--format", "json", "-o",
               cny).exit_code == 0
    diff = json.loads(run("diff", global_plan, cny, "--format", "json").stdout)
    old, new = json.loads(global_plan.read_text()), json.loads(cny.read_text())
    rate = float(re.search(r"1 USD = ([0-9.]+) CNY", old["fx"]).group(1))
    assert diff["currency_after"] == "CNY" and "at 6.6529" in diff["fx_note"] and "old plan's FX" in diff["fx_note"]
    # the totals are the sums of the printed lines, each converted and rounded: within half a cent per line
    # of the converted total
    lines = diff["lines"]
    assert diff["total_monthly_before"] == round(sum(x["monthly_before"] for x in lines), 2)
    slack = 0.005 * len(lines)
    assert diff["total_monthly_before"] == pytest.approx(old["total_cost"] * rate, abs=slack)
    assert diff["total_delta"] == pytest.approx(new["total_cost"] - old["total_cost"] * rate, abs=slack + 0.01)
    assert abs(diff["total_delta"]) < 1.0  # the same schedule, priced in another currency


def test_diff_of_solve_plans_in_two_currencies_is_in_one_currency(tmp_path):
    usd, cny = tmp_path / "usd.json", tmp_path / "cny.json"
    assert run("solve", EXAMPLES / "two-models.yaml", "--format", "json", "-o", usd).exit_code == 0
    assert run("solve", EXAMPLES / "two-models.yaml", "--currency", "CNY", "--format", "json", "-o",
               cny).exit_code == 0
    md = run("diff", usd, cny, "--format", "markdown").stdout
    old = json.loads(usd.read_text())
    rate = float(re.search(r"1 USD = ([0-9.]+) CNY", old["fx"]).group(1))
    assert f"{old['total_cost_per_month'] * rate:,.2f} ->" in md and "converted from USD to CNY" in md
    diff = json.loads(run("diff", usd, cny, "--format", "json").stdout)
    # every figure is in CNY, the old plan's too: `currency` says so (currency_before is the old plan's own)
    assert (diff["currency"], diff["currency_before"], diff["currency_after"]) == ("CNY", "USD", "CNY")
    lines = diff["lines"]
    # the totals are the sums of the printed lines, each converted and rounded: within half a cent per line
    assert diff["total_monthly_before"] == round(sum(x["monthly_before"] for x in lines), 2)
    assert diff["total_monthly_after"] == round(sum(x["monthly_after"] for x in lines), 2) == \
        json.loads(cny.read_text())["total_cost_per_month"]
    assert diff["total_monthly_before"] == pytest.approx(old["total_cost_per_month"] * rate, abs=0.005 * len(lines))
    assert "-0.00" not in md  # a zero delta is +0.00, never negative zero


def test_one_solve_schedule_in_two_currencies_is_unchanged_a_cent_apart(tmp_path):
    """QA: cn-chat-70b saved in USD and in CNY diffed as two `changed` lines, +0.02 and +0.01 CNY, with no
    details: each plan rounds its own month to the cent. They are unchanged, the cents said to be rounding."""
    usd, cny = tmp_path / "usd.json", tmp_path / "cny.json"
    for path, extra in ((usd, ["--currency", "USD"]), (cny, [])):
        assert run("solve", EXAMPLES / "cn-chat-70b.yaml", "--region", "cn", *extra, "--format", "json",
                   "-o", path).exit_code == 0
    lines = json.loads(run("diff", usd, cny, "--format", "json").stdout)["lines"]
    assert {x["change"] for x in lines} == {"unchanged"}
    gaps = [round(x["monthly_after"] - x["monthly_before"], 2) for x in lines]
    assert any(gaps)  # the case: the converted cents differ
    for x, gap in zip(lines, gaps, strict=True):
        assert x["details"] == ([f"{gap:+,.2f} from rounding each plan's figures to the cent, not a change"] if gap
                                else [])


def test_diff_refuses_a_solve_plan_against_a_capacity_plan(global_plan, tmp_path):
    solve = tmp_path / "s.json"
    assert run("solve", EXAMPLES / "two-models.yaml", "--format", "json", "-o", solve).exit_code == 0
    result = run("diff", solve, global_plan)
    assert result.exit_code == 2 and "one kind" in result.output and "Traceback" not in result.output


def test_diff_refuses_a_currency_pair_no_table_knows():
    from gpuopt.errors import InputError
    from gpuopt.reports.diff import conversion

    assert conversion("USD", "CNY", [("old plan's FX", "1 USD = 7 CNY (2026-01-01)")])[0] == 7.0
    assert conversion("CNY", "USD", [("old plan's FX", "1 USD = 8 CNY (2026-01-01)")])[0] == 0.125
    with pytest.raises(InputError, match="no FX rate from USD to EUR"):
        conversion("USD", "EUR", [("old plan's FX", "1 USD = 7 CNY (2026-01-01)")])


def test_a_low_scenario_does_not_pay_for_monthly_subscriptions_it_does_not_renew(tmp_path):
    out = tmp_path / "cn.json"
    assert run("plan", EXAMPLES / "capacity-cn.yaml", "--format", "json", "-o", out).exit_code == 0
    plan = json.loads(out.read_text())
    kinds = {x["price_kind"] for p in plan["periods"] for x in p["purchases"]}
    # monthly subscriptions and on-demand only: no commitment binds a scenario past the month it is renewed
    assert "subscription-monthly" in kinds and kinds <= {"subscription-monthly", "on-demand"}
    low = next(s for s in plan["scenarios"] if s["name"] == "low")
    assert low["total_cost"] < plan["total_cost"]  # before: the base schedule's subscriptions were all kept


@pytest.mark.parametrize("columns", [80, 160])
def test_the_capacity_table_fits_the_terminal(global_plan, monkeypatch, columns):
    monkeypatch.setenv("COLUMNS", str(columns))
    text = run("report", global_plan, "--format", "table").stdout
    assert max(len(line) for line in text.splitlines() if not line.startswith("[")) <= columns
    assert "2027Q2" in text and "already running" in text
    if columns < 140:  # the block layout keeps each fact on its line
        assert "already running: 1 x aws g6e.xlarge (us-east-1) reserved-1y from 2027Q1" in text


def _plan(charge, periods, commitments=(), total=None, period="quarter"):
    """A two-quarter capacity plan by hand: periods are (label, cost, purchases as (count, kind, price))."""
    from gpuopt.planner.capacity import CapacityPlan

    rented = 2190.0 if period == "quarter" else 730.0
    lines = [{"period": label, "demand": {"chat": 1.0}, "capacity": {"chat": 1.0}, "cost": cost,
              "purchases": [{"provider": "aws", "service": "ec2", "sku": "g6e.xlarge", "region": "us-east-1",
                             "gpu": "L40S-48GB", "gpus_per_instance": 1, "price_kind": kind, "count": n,
                             "committed": kind != "on-demand", "term_months": None if kind == "on-demand" else 12,
                             # a rented quarter, or a commitment's whole year; its cost price x hours
                             "price_per_hour": price, "hours": n * (rented if kind == "on-demand" else 8760.0),
                             "cost": price * n * (rented if kind == "on-demand" else 8760.0),
                             "break_even_utilisation": None,
                             "workloads": ["chat"]} for n, kind, price in bought]}
             for label, cost, bought in periods]
    spans = [{"bought": "2027Q1", "provider": "aws", "service": "ec2", "sku": "g6e.xlarge", "region": "us-east-1",
              "price_kind": "reserved-1y", "count": 2, "price_per_hour": 0.5, "start_month": 0, "term_months": 12,
              "months_inside": 6, "months_after": 6, "cost_inside_horizon": 8760.0 - owed,  # with `owed`, the term's
              "obligation_after_horizon": owed, "workloads": ["chat"]} for owed in commitments]  # 2 x 0.5 x 8,760 h
    owed = sum(commitments)
    inside = sum(cost for _, cost, _ in periods)
    total = total if total is not None else inside + (owed if charge == "full-term" else 0.0)
    return CapacityPlan.model_validate({
        "status": "optimal", "currency": "USD", "horizon": "2 quarters from 2027Q1", "period": period,
        "charge": charge, "headroom": 0.8, "periods": lines, "total_cost": total,
        "all_on_demand_cost": 8760.0, "savings": 8760.0 - total, "committed_after_horizon": owed, "scenarios": [],
        "explanation": [], "as_of_date": "2026-11-29", "commitments": spans})


@pytest.mark.parametrize("charge", ["full-term", "inside-horizon"])
def test_a_capacity_diff_shows_the_obligation_after_the_horizon_as_a_line_the_total_sums(charge):
    """Old: 2 on-demand instances at 1.00/h in both quarters: 2 x 1.00 x 2,190 h = 4,380.00 each, 8,760.00.
    New: 2 x reserved-1y at 0.50/h bought in 2027Q1: 2 x 0.50 x 2,190 = 2,190.00 per quarter; its 6 months
    after the horizon owe 2 x 0.50 x 730 x 6 = 4,380.00, in the plan's total under full-term only but owed in
    both modes, so the diff's line shows it in both (inside-horizon showed 0.00 -> 0.00).
    2027Q2 buys nothing new but pays the running reservation: changed, not removed."""
    from gpuopt.reports.diff import diff_capacity, diff_markdown

    old = _plan("full-term", [("2027Q1", 4380.0, [(2, "on-demand", 1.0)]), ("2027Q2", 4380.0, [(2, "on-demand", 1.0)])])
    new = _plan(charge, [("2027Q1", 2190.0, [(2, "reserved-1y", 0.5)]), ("2027Q2", 2190.0, [])], [4380.0])
    d = diff_capacity(old, new)
    q1, q2, after = d.lines
    assert (q1.delta, q2.delta) == (-2190.0, -2190.0)
    assert q2.change == "changed" and any("running: nothing -> 2 x aws g6e.xlarge" in x for x in q2.details)
    assert (after.deployment, after.line_kind) == ("after the horizon", "after-horizon")
    assert (after.monthly_before, after.monthly_after, after.change) == (0.0, 4380.0, "added")
    assert "4,380.00 USD owed after the horizon" in after.details[0]
    assert ("total_cost leaves it out" in after.details[0]) == (charge == "inside-horizon")
    # either mode: 2,190 + 2,190 + 4,380 = 8,760.00 over the horizon and owed after it, delta 0
    assert d.total_monthly_after == sum(x.monthly_after for x in d.lines) == 8760.0
    assert d.total_delta == sum(x.delta for x in d.lines) == 0.0
    assert "| after the horizon |" in diff_markdown(d)


def test_a_capacity_diff_without_commitments_has_no_after_horizon_line():
    """Both plans rent only: period lines only, and an identical period is unchanged (4,380.00 both sides)."""
    from gpuopt.reports.diff import diff_capacity

    plan = _plan("full-term", [("2027Q1", 4380.0, [(2, "on-demand", 1.0)]), ("2027Q2", 4380.0, [])])
    d = diff_capacity(plan, plan)
    assert [x.line_kind for x in d.lines] == ["period", "period"]
    assert {x.change for x in d.lines} == {"unchanged"} and d.total_delta == 0.0


def test_a_commitment_is_spread_over_its_periods_in_cents_that_sum_to_its_charge():
    """1 x 1.17243/h for 12 months: 1.17243 x 8,760 h = 10,270.4868 -> 10,270.49 (1,027,049 cents). Over 4
    quarters, cumulative rounding: 256,762.25 -> 256,762; 513,524.5 -> 513,525; 770,286.75 -> 770,287;
    1,027,049: 2,567.62 + 2,567.63 + 2,567.62 + 2,567.62 = 10,270.49."""
    from gpuopt.planner.commitments import period_charges

    assert period_charges(1.17243, 1, 12, 3) == [2567.62, 2567.63, 2567.62, 2567.62]
    # 2 x 0.5/h for one quarter (a monthly subscription renewed for it): 2 x 0.5 x 2,190 h = 2,190.00
    assert period_charges(0.5, 2, 3, 3) == [2190.0]


@pytest.mark.parametrize("charge", ["inside-horizon", "full-term"])
def test_every_capacity_total_is_the_sum_of_its_printed_lines(tmp_path, charge):
    """Per period: cost = the sum of its split by price kind; a commitment's cost inside + owed after = its
    purchase line's cost (full-term); total = the period costs (+ the obligation after, full-term); savings and
    cash savings of the same quantity are one figure. All to the cent, not approximately."""
    _, plan = plan_json(tmp_path, charge)
    for p in plan["periods"]:
        assert p["cost"] == round(sum(p["cost_by_price_kind"].values()), 2), p["period"]
        rented = [x for x in p["purchases"] if not x["committed"]]
        for kind in {x["price_kind"] for x in rented}:
            assert p["cost_by_price_kind"][kind] == round(sum(x["cost"] for x in rented if x["price_kind"] == kind), 2)
    s = plan["commitment_summary"]
    inside = round(sum(p["cost"] for p in plan["periods"]), 2)
    after = round(sum(c["obligation_after_horizon"] for c in plan["commitments"]), 2)
    assert (s["cost_inside_horizon"], s["obligation_after_horizon"], plan["committed_after_horizon"]) == (
        inside, after, after)
    assert plan["total_cost"] == round(inside + (after if charge == "full-term" else 0.0), 2)
    assert plan["savings"] == round(plan["all_on_demand_cost"] - plan["total_cost"], 2)
    if charge == "full-term":
        assert plan["savings"] == s["savings_cash"]
        bought = {(p["period"], x["sku"], x["price_kind"]): x["cost"] for p in plan["periods"] for x in p["purchases"]
                  if x["committed"]}
        for c in plan["commitments"]:
            assert round(c["cost_inside_horizon"] + c["obligation_after_horizon"], 2) == bought[
                (c["bought"], c["sku"], c["price_kind"])]
    else:
        assert plan["savings"] == s["savings_amortised"]


def test_an_all_on_demand_plan_saves_exactly_nothing(tmp_path):
    """The schedule is its own baseline: savings 0.00, not a cent either way."""
    path, out = tmp_path / "od.yaml", tmp_path / "od.json"
    path.write_text(EIGHT_QUARTERS.replace("CHARGE", "full-term").replace("[on-demand, reserved-3y]", "[on-demand]"))
    assert run("plan", path, "--format", "json", "-o", out).exit_code == 0
    plan = json.loads(out.read_text())
    assert plan["total_cost"] == plan["all_on_demand_cost"] and plan["savings"] == 0.0


def test_workload_tags_reach_the_capacity_json_csv_and_focus(global_plan):
    """capacity-global.yaml tags assistant `team: assistant` and batch-extract `team: data`; solve's FOCUS Tags
    and CSV carry a workload's tags, and the capacity outputs dropped them."""
    import csv
    import io

    plan = json.loads(global_plan.read_text())
    assert plan["workload_tags"] == {"assistant": {"team": "assistant"}, "batch-extract": {"team": "data"}}
    lines = [x for p in plan["periods"] for x in p["purchases"]]
    assert lines and all(x["tags"] == {"team": "data" if x["workloads"] == ["batch-extract"] else "assistant"}
                         for x in lines)
    assert [(c["workloads"], c["tags"]) for c in plan["commitments"]] == [(["assistant"], {"team": "assistant"})]
    runs = [r for p in plan["periods"] for r in p["running"]]
    assert {(r["workload"], r["tags"]["team"]) for r in runs} == {("assistant", "assistant"), ("batch-extract", "data")}
    rows = list(csv.DictReader(io.StringIO(run("report", global_plan, "--format", "csv").stdout)))
    assert [json.loads(r["tags"]) for r in rows] == [x["tags"] for x in lines]
    focus = list(csv.DictReader(io.StringIO(run("report", global_plan, "--format", "focus").stdout)))
    reserved = [json.loads(r["Tags"]) for r in focus if r["SkuPriceId"].endswith(":reserved-1y")]
    assert reserved and all(t == {"gpuopt-period": "2027Q1", "gpuopt-workloads": "assistant", "team": "assistant"}
                            for t in reserved)
    spot = [json.loads(r["Tags"]) for r in focus if r["SkuPriceId"].endswith(":spot")]
    assert spot and all(t["team"] == "data" and t["gpuopt-workloads"] == "batch-extract" for t in spot)


def test_a_line_shared_by_workloads_lists_every_value_of_a_tag():
    from gpuopt.planner.capacity_detail import merged_tags

    tags = {"a": {"team": "data", "env": "prod"}, "b": {"team": "assistant", "env": "prod"}, "c": {}}
    assert merged_tags(["a", "b", "c"], tags) == {"env": "prod", "team": "assistant,data"}
    assert merged_tags(["c"], tags) == {}


RESERVED_ONLY = """schema_version: 1
residency: us
currency: USD
providers: [aws]
horizon: {periods: 2, period: quarter, start: 2027Q1}
charge: CHARGE
workloads:
  - name: assistant
    model: meta-llama/Llama-3.1-8B-Instruct
    demand: {requests_per_second: DEMAND}
    input_tokens: 1000
    output_tokens: 250
    max_model_len: 8192
    slo: {ttft_ms: 1500, tpot_ms: 40}
    price_kinds: KINDS
"""


def _capacity(tmp_path, name, charge, demand, kinds):
    path, out = tmp_path / f"{name}.yaml", tmp_path / f"{name}.json"
    path.write_text(RESERVED_ONLY.replace("CHARGE", charge).replace("DEMAND", demand).replace("KINDS", kinds))
    result = run("plan", path, "--format", "json", "-o", out)
    assert result.exit_code == 0, result.output
    return out, json.loads(out.read_text())


def test_a_commitment_used_below_break_even_says_so_and_why(tmp_path):
    """Only reserved-1y allowed, 2 quarters of 7 req/s on one g6e.xlarge: its 1-year term costs 1.17243 x 8,760 h
    = 10,270.49 while the 2 x 2,190 = 4,380 h it runs would rent for 1.861 x 4,380 = 8,151.18 on demand (use
    50%, break-even 1.17243 / 1.861 = 63%). Before: no word of it, and all_on_demand_cost/savings null. (8 req/s
    until 2026-12-05, when one replica's 10.02 requests/s at the 0.8 headroom, 0.2 % above the 10 it needed, fell
    to 9.97 with the decode batch's wider swing and a second instance came in.)"""
    saved, plan = _capacity(tmp_path, "r", "full-term", "[7, 7]", "[reserved-1y]")
    (span,) = plan["commitments"]
    assert (span["utilisation"], span["break_even_utilisation"]) == (0.5, 0.63)
    assert span["note"] == (
        "used below break-even: 4,380 of its 8,760 instance-hours (50%) run replicas inside the horizon, "
        "break-even 63%; its charge 10,270.49 USD is more than renting those hours on demand (8,151.18); bought "
        "because on-demand is not allowed for assistant (price_kinds)")
    # the all-on-demand reference: the chosen SKU's on-demand rate, said to be a reference
    assert (plan["total_cost"], plan["all_on_demand_cost"], plan["savings"]) == (10270.49, 8151.18, -2119.31)
    assert plan["commitment_summary"]["savings_amortised"] == round(8151.18 - 5135.25, 2)
    assert plan["all_on_demand_note"].startswith("a reference figure: assistant excludes on-demand")
    markdown = run("report", saved, "--format", "markdown").stdout
    assert "| all on-demand reference | a reference figure" in markdown
    assert "reserved-1y from 2027Q1: used below break-even: 4,380 of its 8,760" in markdown
    table = run("report", saved, "--format", "table").stdout
    assert "commitment 1 x aws g6e.xlarge (us-east-1) reserved-1y from 2027Q1: used below break-even" in table
    assert "used below break-even" in run("report", saved, "--format", "html").stdout


def test_an_inside_horizon_commitment_below_break_even_names_the_charge_mode(tmp_path):
    """inside-horizon, 8 req/s then 16: a 3-year reservation bought in 2027Q2 runs 3 of its 36 months inside
    the horizon (2,190 of 26,280 h, 8%), below its break-even; the program counted only those 3 months."""
    _, plan = _capacity(tmp_path, "i", "inside-horizon", "[8, 16]", "[on-demand, reserved-3y]")
    late = [c for c in plan["commitments"] if c["bought"] == "2027Q2"]
    assert late, plan["commitments"]
    assert all(c["utilisation"] == round(c["count"] * 2190 / (c["count"] * 26280), 4) for c in late)
    assert all(c["note"].endswith("bought because charge: inside-horizon counted only its 3 months inside the "
                                  "horizon, not the 33 after it") for c in late)
    assert plan["all_on_demand_note"] == "every workload rented on demand, from the offerings it allows"


def test_a_fully_used_reservation_has_no_note(global_plan):
    """capacity-global: the 2027Q1 reservations run replicas in all 4 quarters (use 100%)."""
    (span,) = json.loads(global_plan.read_text())["commitments"]
    assert (span["utilisation"], span["note"]) == (1.0, "")


def test_an_absent_all_on_demand_reference_says_why():
    from gpuopt.planner.capacity import CapacityPlan
    from gpuopt.reports.capacity import render_capacity_markdown

    why = "no all-on-demand reference: workload a excludes on-demand and the catalog has no on-demand price"
    plan = CapacityPlan(status="optimal", currency="USD", horizon="1 quarters from 2027Q1", period="quarter",
                        charge="full-term", headroom=0.8, periods=[], total_cost=0.0, all_on_demand_cost=None,
                        savings=None, committed_after_horizon=0.0, scenarios=[], explanation=[],
                        as_of_date="2026-11-29", all_on_demand_note=why)
    assert f"| all on-demand, same demand | {why} |" in render_capacity_markdown(plan)


def test_a_diff_across_charge_modes_shows_the_obligation_the_new_plan_owes():
    """Old full-term: 2 reserved-1y at 0.50/h bought in 2027Q1 and held 2 quarters of 2, nothing after (a
    6-month-term stand-in: months_after 0). New inside-horizon: the same with 6 months after the horizon owing
    2 x 0.50 x 730 x 6 = 4,380.00 outside its total_cost: an obligation added. Before: after the horizon
    0.00 -> 0.00 unchanged."""
    from gpuopt.reports.diff import diff_capacity, diff_table

    periods = [("2027Q1", 2190.0, [(2, "reserved-1y", 0.5)]), ("2027Q2", 2190.0, [])]
    old = _plan("full-term", periods, [0.0])
    old = old.model_copy(update={"commitments": [c.model_copy(update={"term_months": 6, "months_after": 0})
                                                 for c in old.commitments]})
    new = _plan("inside-horizon", periods, [4380.0])
    *_, after = diff_capacity(old, new).lines
    assert (after.deployment, after.change, after.monthly_before, after.monthly_after, after.delta) == (
        "after the horizon", "added", 0.0, 4380.0, 4380.0)
    assert "4,380.00" in diff_table(diff_capacity(old, new), width=200)


def test_a_capacity_diff_lists_periods_in_the_plans_order():
    """A 12-month horizon without `start` is labelled M1..M12; sorted as text, M10-M12 came before M2."""
    from gpuopt.reports.diff import diff_capacity, period_order

    months = [(f"M{i}", 730.0, [(1, "on-demand", 1.0)] if i == 1 else []) for i in range(1, 13)]
    plan = _plan("full-term", months, period="month")
    assert [x.deployment for x in diff_capacity(plan, plan).lines] == [f"period M{i}" for i in range(1, 13)]
    # a period only one horizon has sits where its plan lists it
    assert period_order(["M1", "M2", "M3"], ["M2", "M3", "M4"]) == ["M1", "M2", "M3", "M4"]
    assert period_order(["2027Q2", "2027Q3"], ["2027Q1", "2027Q2"]) == ["2027Q1", "2027Q2", "2027Q3"]


def test_one_schedule_in_two_currencies_is_unchanged_in_every_period(global_plan, tmp_path):
    """capacity-global in USD and in CNY at its recorded 6.6529: 2027Q2 prints 3,136.81 USD x 6.6529 =
    20,868.88 against 20,868.83 CNY (each plan rounds its own cents; the reservation's 2,567.63 USD carries one
    more), but its exact cost is 0.2599 x 2,190 + 1.17243 x 2,190 = 3,136.8027 USD x 6.6529 = 20,868.83 CNY both
    ways. Before: every period `changed` by +0.01 or -0.05."""
    cny = tmp_path / "cny.json"
    assert run("plan", EXAMPLES / "capacity-global.yaml", "--currency", "CNY", "--format", "json", "-o",
               cny).exit_code == 0
    lines = json.loads(run("diff", global_plan, cny, "--format", "json").stdout)["lines"]
    assert [x["change"] for x in lines] == ["unchanged"] * 4
    q2 = next(x for x in lines if x["deployment"] == "period 2027Q2")
    assert (q2["monthly_before"], q2["monthly_after"]) == (20868.88, 20868.83)
    assert q2["details"] == ["-0.05 from rounding each plan's figures to the cent, not a change"]


def test_a_cent_of_real_difference_is_still_a_change():
    """1 on-demand instance at 1.00/h against 1.0000046/h for 2,190 h: 2,190.00 -> 2,190.01, exactly 0.010074
    apart (more than half a cent and the 8-decimal prices' 5e-9 x 4,380 h): changed."""
    from gpuopt.reports.diff import diff_capacity

    old = _plan("full-term", [("2027Q1", 2190.0, [(1, "on-demand", 1.0)])])
    new = _plan("full-term", [("2027Q1", 2190.01, [(1, "on-demand", 1.0000046)])])
    hours = {"hours": 2190.0}
    old, new = (p.model_copy(update={"periods": [p.periods[0].model_copy(update={"purchases": [
        p.periods[0].purchases[0].model_copy(update=hours)]})]}) for p in (old, new))
    (line,) = diff_capacity(old, new).lines
    assert (line.change, line.delta) == ("changed", 0.01)


def test_the_capacity_table_lists_the_commitment_ledger(global_plan, monkeypatch):
    """docs/capacity.md: the table shows the commitments as Markdown does: capacity-global's 1 reserved-1y
    g6e.xlarge from 2027Q1, 12 months all inside the horizon, 1.17243 x 8,760 h = 10,270.49 inside, 0.00 after."""
    monkeypatch.setenv("COLUMNS", "200")
    text = run("report", global_plan, "--format", "table").stdout
    ledger = text[text.index("Commitments"):]
    row = next(line for line in ledger.splitlines() if "from 2027Q1" in line)
    assert all(x in row for x in ("2027Q1", "12", "12 / 0", "10,270.49", "0.00", "assistant")), row


def test_a_shared_vllm_command_is_labelled_with_every_user():
    """Two workloads run one `vllm serve` command: its Markdown label named only the first."""
    from gpuopt.planner.capacity import CapacityPlan, PeriodLine
    from gpuopt.planner.capacity_detail import RunningLine
    from gpuopt.reports.capacity import render_capacity_markdown

    def line(workload):
        return RunningLine(workload=workload, model="m", provider="aws", sku="g6e.xlarge", region="us-east-1",
                           price_kind="on-demand", gpu="L40S-48GB", gpus_per_instance=1, replicas=1,
                           tensor_parallel=1, pipeline_parallel=1, weight_precision="bf16", kv_cache_dtype="auto",
                           capacity=1.0, vllm_command="vllm serve m")

    period = PeriodLine(period="2027Q1", demand={"a": 1.0, "b": 1.0}, capacity={"a": 1.0, "b": 1.0}, cost=1.0,
                        purchases=[], running=[line("b"), line("a")])
    plan = CapacityPlan(status="optimal", currency="USD", horizon="1 quarters from 2027Q1", period="quarter",
                        charge="full-term", headroom=0.8, periods=[period], total_cost=1.0, all_on_demand_cost=1.0,
                        savings=0.0, committed_after_horizon=0.0, scenarios=[], explanation=[],
                        as_of_date="2026-11-29")
    text = render_capacity_markdown(plan)
    assert "a on g6e.xlarge, b on g6e.xlarge\n\n```bash\nvllm serve m" in text


def test_the_capacity_csv_writes_a_term_as_an_integer_beside_empty_cells(global_plan):
    """capacity-global rents spot (no term) and reserves 1 year: term_months 12, not 12.0."""
    import csv
    import io

    text = run("report", global_plan, "--format", "csv").stdout
    rows = list(csv.DictReader(io.StringIO(text)))
    assert sorted({r["term_months"] for r in rows}) == ["", "12"]
    assert {r["count"] for r in rows} <= {"1", "2", "3", "4"} and {r["gpus_per_instance"] for r in rows} == {"1"}


@pytest.mark.parametrize(("labels", "period", "needle"), [
    (["2027Q1", "2027Q1"], "quarter", "periods.1.period: 2027Q1 does not follow 2027Q1"),  # diff lost its cost
    (["2027Q2", "2027Q1"], "quarter", "2027Q1 does not follow 2027Q2"),  # FOCUS billed 2027Q1 in July
    (["2027Q1", "2028Q3"], "quarter", "2028Q3 does not follow 2027Q1"),
    (["2027Q1", "2027-04"], "quarter", "periods mix label forms (dated month, dated quarter)"),
    (["2027Q1", "2027Q2"], "month", "period is 'month' but the periods are labelled as dated quarters"),
    (["Q2", "Q3"], "quarter", "an undated horizon starts at Q1, not Q2"),
])
def test_a_saved_plan_is_a_horizon_of_consecutive_periods_of_its_kind(labels, period, needle):
    """QA: edited plans with a label twice, swapped, skipped or of the other period kind were read; diff keyed
    periods by label and FOCUS dated them from the first."""
    with pytest.raises(ValueError, match=re.escape(needle)):
        _plan("full-term", [(label, 0.0, []) for label in labels], period=period)
    assert _plan("full-term", [("2027Q1", 0.0, []), ("2027Q2", 0.0, [])]).periods[1].period == "2027Q2"
    assert _plan("full-term", [("M1", 0.0, []), ("M2", 0.0, [])], period="month").periods[0].period == "M1"


def test_a_rented_line_pays_for_its_period_hours():
    """A rented instance is paid for the period it runs: count x 730 x months. A plan file whose line says
    otherwise (2,190 h in a month plan) made FOCUS bill other hours than the plan's."""
    from gpuopt.planner.capacity import CapacityPlan

    good = _plan("full-term", [("2027Q1", 2190.0, [(1, "on-demand", 1.0)]), ("2027Q2", 0.0, [])])
    data = json.loads(good.model_dump_json())
    data["periods"][0]["purchases"][0].update(hours=730.0, cost=730.0)
    data["periods"][0]["cost"], data["total_cost"], data["savings"] = 730.0, 730.0, 8760.0 - 730.0
    with pytest.raises(ValueError, match=re.escape("periods.0.purchases.0.hours: 730 for 1 rented instance(s) over "
                                                   "a quarter of 2190 h (expected 2190)")):
        CapacityPlan.model_validate(data)
