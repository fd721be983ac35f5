"""The budget on the typed Plan, shown in every format; `--candidates none|summary|all`."""

import csv
import io
import json
from collections import Counter
from pathlib import Path

import pytest
from click.testing import CliRunner

from gpuopt.cli.main import cli
from gpuopt.planner.candidate_summary import summarise
from gpuopt.planner.plan import Budget
from tests.conftest import run

EXAMPLES = Path(__file__).parent.parent / "examples"
TWO = EXAMPLES / "two-models.yaml"


pytestmark = pytest.mark.usefixtures("fixed_day")


@pytest.fixture(scope="module")
def forms(tmp_path_factory):
    import os

    os.environ["GPUOPT_TODAY"] = "2026-11-29"
    folder = tmp_path_factory.mktemp("forms")
    out = {}
    for form in ("none", "summary", "all"):
        out[form] = folder / f"{form}.json"
        result = CliRunner().invoke(cli, ["solve", str(TWO), "--format", "json", "--candidates", form,
                                          "-o", str(out[form])])
        assert result.exit_code == 0, result.output
    return out


def test_budget_check_by_hand():
    b = Budget.check(1000.0, "USD", "--max-monthly", 7.0, 6000.0)  # 1,000 USD = 7,000 in the plan currency
    assert (b.max_monthly_in_plan_currency, b.margin, b.margin_fraction, b.over) == (7000.0, 1000.0, 0.1429, False)
    over = Budget.check(1000.0, "USD", "workload file", 1.0, 1250.0)
    assert (over.margin, over.margin_fraction, over.over) == (-250.0, -0.25, True)


def test_budget_under_is_shown_in_every_format(tmp_path):
    saved = tmp_path / "p.json"
    assert run("solve", TWO, "--max-monthly", 20000, "--format", "json", "-o", saved).exit_code == 0
    plan = json.loads(saved.read_text())
    margin = round(20000 - plan["total_cost_per_month"], 2)
    assert plan["budget"]["margin"] == margin and plan["budget"]["over"] is False
    shown = f"under by {margin:,.2f} USD"
    for fmt in ("markdown", "html", "table"):
        assert shown in run("report", saved, "--format", fmt).stdout, fmt
    rows = list(csv.DictReader(io.StringIO(run("report", saved, "--format", "csv").stdout)))
    assert {float(r["budget_margin"]) for r in rows} == {margin}
    focus = list(csv.DictReader(io.StringIO(run("report", saved, "--format", "focus").stdout)))
    assert {float(r["x_BudgetMargin"]) for r in focus} == {margin}


def test_budget_over_in_another_currency_exits_3_and_says_by_how_much(tmp_path):
    workload = tmp_path / "w.yaml"
    workload.write_text(TWO.read_text() + "budget: {max_monthly: 20000, currency: CNY}\n")
    result = run("solve", workload, "--format", "json")
    assert result.exit_code == 3
    plan = json.loads(result.stdout)
    b = plan["budget"]
    rate = float(plan["fx"].split("1 USD = ")[1].split(" CNY")[0])
    assert b["max_monthly_in_plan_currency"] == pytest.approx(20000 / rate, abs=0.01)
    assert b["margin"] == pytest.approx(b["max_monthly_in_plan_currency"] - plan["total_cost_per_month"], abs=0.01)
    assert b["over"] is True and "over budget" in result.stderr


def test_candidate_forms(forms):
    every = json.loads(forms["all"].read_text())
    summary = json.loads(forms["summary"].read_text())
    none = json.loads(forms["none"].read_text())
    assert summary["candidates"] == [] and none["candidates"] == [] and none["candidate_summary"] is None
    assert (every["candidates_form"], summary["candidates_form"], none["candidates_form"]) == ("all", "summary", "none")
    s = summary["candidate_summary"]
    assert s["considered"] == len(every["candidates"])
    assert s["feasible"] == sum(c["feasible"] for c in every["candidates"])
    reasons = Counter((c["workload"], c["reason_kind"]) for c in every["candidates"] if not c["feasible"])
    assert {(g["workload"], g["group"]): g["count"] for g in s["by_reason"]} == dict(reasons)
    for group in s["by_reason"] + s["by_gpu"]:
        assert 1 <= len(group["cheapest"]) <= s["per_group"]
    # without the candidate list, the rest of the plan is the same
    drop = {"candidates", "candidates_form", "candidate_summary"}
    assert {k: v for k, v in every.items() if k not in drop} == {k: v for k, v in none.items() if k not in drop}


def test_cheapest_per_group_are_the_cheapest_per_replica():
    base = {"workload": "w", "provider": "aws", "service": "ec2", "region": "r", "country": "US", "gpu": "L4",
            "price_kind": "on-demand", "tensor_parallel": 1, "pipeline_parallel": 1, "weight_precision": "fp8",
            "kv_cache_dtype": "auto", "replica_requests_per_second": None, "replica_concurrency": None,
            "ttft_ms": None, "tpot_ms": None, "kv_cache_tokens": None, "feasible": False, "reason": "x",
            "reason_kind": "fit"}
    # price per replica = instance price / GPUs per instance x GPUs per replica: 4/4x1=1, 3/1x1=3, 8/8x2=2, None
    cands = [{**base, "sku": "a", "instance_price_per_hour": 4.0, "gpus_per_instance": 4, "gpus_per_replica": 1},
             {**base, "sku": "b", "instance_price_per_hour": 3.0, "gpus_per_instance": 1, "gpus_per_replica": 1},
             {**base, "sku": "c", "instance_price_per_hour": 8.0, "gpus_per_instance": 8, "gpus_per_replica": 2},
             {**base, "sku": "d", "instance_price_per_hour": None, "gpus_per_instance": 1, "gpus_per_replica": 1}]
    (group,) = summarise(cands, per_group=3).by_reason
    assert group.count == 4 and [c["sku"] for c in group.cheapest] == ["a", "c", "b"]


@pytest.mark.parametrize("example, extra", [("two-models.yaml", []), ("cn-chat-70b.yaml", ["--region", "cn"]),
                                            ("batch-summarisation.yaml", []), ("rag-long-context.yaml", [])])
def test_default_json_of_each_example_is_at_most_200_kb(example, extra):
    result = run("solve", EXAMPLES / example, *extra, "--format", "json")
    assert result.exit_code == 0, result.output
    assert len(result.stdout.encode()) <= 200_000


@pytest.mark.parametrize("form", ["none", "summary", "all"])
def test_report_and_diff_read_every_form(forms, form):
    assert run("report", forms[form], "--format", "markdown").stdout == \
        run("report", forms["all"], "--format", "markdown").stdout
    diff = json.loads(run("diff", forms["all"], forms[form], "--format", "json").stdout)
    assert diff["total_delta"] == 0 and {line["change"] for line in diff["lines"]} == {"unchanged"}


def test_a_budget_without_a_currency_is_in_the_files_currency(tmp_path):
    """cn-chat-70b (currency: CNY) costs 105,825.91 CNY a month: a budget of 100,000 is over it in CNY (exit 3);
    read as USD (until 2026-12-04) it was 665,290 CNY and passed."""
    workload = tmp_path / "w.yaml"
    workload.write_text((EXAMPLES / "cn-chat-70b.yaml").read_text() + "budget: {max_monthly: 100000}\n")
    result = run("solve", workload, "--region", "cn", "--format", "json")
    assert result.exit_code == 3
    b = json.loads(result.stdout)["budget"]
    assert (b["max_monthly_in_plan_currency"], b["margin"], b["over"]) == (100000.0, -5825.91, True)
