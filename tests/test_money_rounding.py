"""Money rounds half up, as a hand computation does (planner/plan.py plain): QA found a cent short on about 5 %
of four-decimal prices, Python's round() being half-to-even on the float's binary value."""

from __future__ import annotations

import json
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from gpuopt.planner.commitments import period_charges
from gpuopt.planner.plan import plain, split_exactly
from tests.conftest import run


@given(st.integers(-10**12, 10**12), st.integers(0, 6))
def test_a_decimal_one_digit_past_the_printed_ones_rounds_half_up(k: int, digits: int) -> None:
    exact = Decimal(k).scaleb(-(digits + 1))
    expected = float(exact.quantize(Decimal(1).scaleb(-digits), rounding=ROUND_HALF_UP))
    assert plain(float(exact), digits) == expected


def test_products_that_land_on_a_half_cent_round_up() -> None:
    assert 0.5125 * 730 == 374.12499999999994  # the float product, below the half
    assert plain(0.5125 * 730, 2) == 374.13
    assert plain(1.0125 * 730, 2) == 739.13  # exactly 739.125: half-to-even gave 739.12
    assert plain(3.9875 * 730, 2) == 2910.88
    assert plain(-0.125, 2) == -0.13 and plain(-0.0001, 2) == 0.0  # symmetric; never -0.0


def test_split_and_period_charges_round_their_total_half_up() -> None:
    assert sum(split_exactly([374.125], 2)) == 374.13
    # a reservation of 0.5125/h for one month: 374.125 -> 374.13 (half-even's whole cents gave 374.12)
    assert period_charges(0.5125, 1, 1, 1) == [374.13]
    # a monthly subscription is the month's charge times the months (12,398.80339 rounded once is 12,398.80)
    assert period_charges(5.66155406, 1, 3, 3, monthly_fee=True) == [12398.79]
    assert period_charges(5.66155406, 1, 3, 3) == [12398.8]


def test_a_plan_prices_a_half_cent_month_up(tmp_path: Path) -> None:
    """QA's case: 0.5125 USD/h x 730 h = 374.125 -> 374.13 in the plan (it printed 374.12)."""
    overlay, workload = tmp_path / "ov.csv", tmp_path / "one.yaml"
    overlay.write_text("provider,service,sku,region,price_kind,price_per_hour,currency,as_of\n"
                       "aws,ec2,g6e.xlarge,us-east-1,on-demand,0.5125,USD,2026-11-20\n")
    workload.write_text("schema_version: 1\nresidency: us\ncurrency: USD\nworkloads:\n"
                        "  - {name: one, model: meta-llama/Llama-3.1-8B-Instruct, requests_per_second: 1,"
                        " input_tokens: 1000, output_tokens: 200, max_model_len: 4096,"
                        " slo: {ttft_ms: 2000, tpot_ms: 60}, precisions: [bf16]}\n")
    result = run("solve", workload, "--provider", "aws", "--catalog", overlay, "--format", "json")
    assert result.exit_code == 0, result.stderr
    plan = json.loads(result.stdout)
    [deployment] = plan["deployments"]
    assert deployment["sku"] == "g6e.xlarge" and deployment["instance_price_per_hour"] == 0.5125
    assert deployment["cost_per_month"] == 374.13 and plan["total_cost_per_month"] == 374.13
