import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from gpuopt.cli.main import cli
from tests.conftest import check_golden, run
from tests.test_focus import RESERVED

EXAMPLES = Path(__file__).parent.parent / "examples"
PLANS = {"cn": (EXAMPLES / "cn-chat-70b.yaml", ["--region", "cn"]), "two": (EXAMPLES / "two-models.yaml", [])}


pytestmark = pytest.mark.usefixtures("fixed_day")


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    os.environ["GPUOPT_TODAY"] = "2026-11-29"
    folder = tmp_path_factory.mktemp("plans")
    out = {}
    for name, (path, extra) in PLANS.items():
        target = folder / f"{name}.json"
        result = CliRunner().invoke(cli, ["solve", str(path), *extra, "--format", "json", "-o", str(target)])
        assert result.exit_code == 0, result.output
        out[name] = target
    return out


@pytest.mark.parametrize("name", sorted(PLANS))
@pytest.mark.parametrize("fmt, ext", [("markdown", "md"), ("csv", "csv"), ("focus", "focus.csv")])
def test_report_goldens(saved, name, fmt, ext):
    result = run("report", saved[name], "--format", fmt)
    assert result.exit_code == 0, result.output
    check_golden(f"report_{name}.{ext}", result.stdout)


def test_json_to_report_round_trip_gives_the_same_markdown_as_solving(saved):
    path, extra = PLANS["cn"]
    direct = run("solve", path, *extra, "--format", "markdown")
    assert direct.stdout == run("report", saved["cn"], "--format", "markdown").stdout


def test_markdown_has_every_section(saved):
    text = run("report", saved["cn"]).stdout
    for heading in ("## Summary", "## Instances", "## Unit economics", "## Workload `support-chat`",
                    "## Alternatives", "## Residency premium", "## Top rejections", "## Assumptions"):
        assert heading in text
    assert "vllm serve " in text and "Llama-3.1-70B-Instruct" in text and "--quantization awq" not in text
    assert "per 1M output tokens" in text


def test_csv_has_one_row_per_deployment_with_the_json_fields(saved):
    plan = json.loads(saved["two"].read_text())
    lines = run("report", saved["two"], "--format", "csv").stdout.splitlines()
    assert len(lines) == 1 + len(plan["deployments"])
    header = lines[0].split(",")
    expected = {"workload", "sku", "cost_per_hour", "predicted_ttft_ms", "memory_kv_cache_gib", "vllm_command"}
    assert expected <= set(header)


def test_focus_export_columns_and_costs(saved):
    import csv
    import io

    plan = json.loads(saved["two"].read_text())
    rows = list(csv.DictReader(io.StringIO(run("report", saved["two"], "--format", "focus").stdout)))
    assert len(rows) == len(plan["deployments"])
    required = {"BillingCurrency", "ChargeCategory", "ChargePeriodStart", "ChargePeriodEnd", "ConsumedQuantity",
                "ConsumedUnit", "ContractedCost", "ContractedUnitPrice", "EffectiveCost", "ListCost", "ListUnitPrice",
                "PricingCategory", "PricingQuantity", "PricingUnit", "ProviderName", "RegionId", "RegionName",
                "ResourceType", "ServiceCategory", "ServiceName", "SkuId", "Tags"}
    assert required <= set(rows[0])
    total = sum(float(r["EffectiveCost"]) for r in rows)
    # December 2026 has 31 x 24 = 744 hours: the FOCUS month is the plan's 730-hour month x 744/730
    assert total == pytest.approx(plan["total_cost_per_month"] * 744 / 730, abs=0.05)
    assert {float(r["ConsumedQuantity"]) for r in rows} <= {744.0 * d["instances"] for d in plan["deployments"]}
    assert {r["PricingCategory"] for r in rows} == {"Standard"}
    assert rows[0]["ChargePeriodStart"] == "2026-12-01T00:00:00Z"
    assert json.loads(rows[0]["Tags"])["gpuopt-workload"] in {"chat", "code"}


def test_overlay_prices_fill_the_contracted_columns(tmp_path):
    import csv
    import io

    overlay = tmp_path / "negotiated.csv"
    overlay.write_text("provider,sku,region,price_kind,price_per_hour,currency\n"
                       "aws,g6e.xlarge,us-east-1,on-demand,0.5,USD\n")
    path, _ = PLANS["two"]
    result = run("solve", path, "--catalog", overlay, "--format", "focus")
    assert result.exit_code == 0, result.output
    rows = list(csv.DictReader(io.StringIO(result.stdout)))
    g6e = next(r for r in rows if r["SkuId"] == "g6e.xlarge")
    assert float(g6e["ContractedUnitPrice"]) == 0.5
    assert float(g6e["ListUnitPrice"]) == 1.861


def test_diff_of_two_saved_plans(saved, tmp_path):
    result = run("diff", saved["cn"], saved["cn"], "--format", "json")
    data = json.loads(result.stdout)
    assert data["total_delta"] == 0 and {line["change"] for line in data["lines"]} == {"unchanged"}
    path, extra = PLANS["cn"]
    # a plan on one provider the saved plan does not use alone: every line of one side is new to the other
    used = {d["provider"] for d in json.loads(saved["cn"].read_text())["deployments"]}
    restrict = "tencent" if used == {"alibaba"} else "alibaba"
    other = tmp_path / f"{restrict}.json"
    assert run("solve", path, *extra, "--provider", restrict, "--format", "json", "-o", other).exit_code == 0
    diff = json.loads(run("diff", saved["cn"], other, "--format", "json").stdout)
    old, new = json.loads(saved["cn"].read_text()), json.loads(other.read_text())
    assert diff["total_delta"] == pytest.approx(new["total_cost_per_month"] - old["total_cost_per_month"], abs=0.01)
    kinds = {line["change"] for line in diff["lines"]}
    assert "added" in kinds and "removed" in kinds
    md = run("diff", saved["cn"], other, "--format", "markdown").stdout
    assert md.startswith("### gpuopt plan diff:")


def test_budget_in_the_workload_file_gates_with_exit_3(tmp_path):
    text = (EXAMPLES / "two-models.yaml").read_text() + "budget: {max_monthly: 1000, currency: USD}\n"
    path = tmp_path / "w.yaml"
    path.write_text(text)
    result = run("solve", path)
    assert result.exit_code == 3
    assert "over budget" in result.output


@pytest.mark.parametrize("content, needle", [
    ('{"a": 1}', "not a gpuopt plan"),
    ('{"kind": "gpuopt-plan", "schema_version": 99}', "schema_version 99 is not supported"),
    ("not json", "not JSON"),
])
def test_bad_plan_files_are_exit_2(tmp_path, content, needle):
    path = tmp_path / "p.json"
    path.write_text(content)
    result = run("report", path)
    assert result.exit_code == 2
    assert needle in result.output and "Traceback" not in result.output


def test_html_is_self_contained_with_three_charts(saved):
    html = run("report", saved["cn"], "--format", "html").stdout
    assert html.startswith("<!DOCTYPE html>")
    assert html.count("<svg") == 3
    assert 'id="total-cost"' in html
    assert not re.search(r"<script[^>]+src=|<link[^>]+href=|url\(\s*['\"]?https?:", html)


PROBE = """<script>
window.addEventListener('load', () => {
  const box = (el) => { const r = el.getBoundingClientRect(); return [Math.round(r.width), Math.round(r.height)]; };
  const total = document.getElementById('total-cost');
  const charts = Array.from(document.querySelectorAll('figure.chart svg')).map(box);
  const out = document.createElement('pre');
  out.id = 'probe';
  out.textContent = JSON.stringify({total: total ? total.innerText : null, totalBox: total ? box(total) : null,
                                    charts: charts});
  document.body.appendChild(out);
});
</script>"""


def test_html_renders_in_headless_chromium(saved, tmp_path):
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        if os.environ.get("CI"):
            pytest.fail("chromium is missing: .ci/run installs Debian's chromium package")
        pytest.skip("chromium not installed (apt-get install chromium)")
    html = run("report", saved["cn"], "--format", "html").stdout
    page = tmp_path / "plan.html"
    page.write_text(html.replace("</body>", PROBE + "</body>"))
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             f"--user-data-dir={tmp_path / 'profile'}", "--window-size=1280,2000"]
    dom = subprocess.run([browser, *flags, "--virtual-time-budget=5000", "--dump-dom", page.as_uri()],
                         capture_output=True, text=True, timeout=120)
    match = re.search(r'<pre id="probe">(.*?)</pre>', dom.stdout, re.S)
    assert match, dom.stderr[-2000:]
    probe = json.loads(match.group(1).replace("&quot;", '"'))
    plan = json.loads(saved["cn"].read_text())
    assert f"{plan['total_cost_per_hour']:,.2f}" in probe["total"]
    assert probe["totalBox"][0] > 0 and probe["totalBox"][1] > 0
    assert len(probe["charts"]) == 3 and all(w > 0 and h > 0 for w, h in probe["charts"])
    shot = tmp_path / "plan.png"
    subprocess.run([browser, *flags, f"--screenshot={shot}", page.as_uri()], capture_output=True, timeout=120)
    assert shot.exists() and shot.stat().st_size > 10_000


def test_a_premium_with_no_excluded_offering_never_prints_none():
    """The unrestricted plan may choose offerings inside the region: then there is no cheapest excluded one."""
    from gpuopt.planner.plan import Plan, ResidencyPremium
    from gpuopt.reports.markdown import render_markdown
    from gpuopt.reports.plan_table import render_table

    os.environ["GPUOPT_TODAY"] = "2026-11-29"
    result = run("solve", EXAMPLES / "cn-chat-70b.yaml", "--region", "cn", "--format", "json", "--candidates", "none")
    plan = Plan.model_validate_json(result.stdout)
    rp = ResidencyPremium(selector="cn", cost_per_hour_with_policy=10.0, cost_per_hour_without_policy=10.0,
                          premium_per_hour=0.0, premium_fraction=0.0, cheapest_excluded_offering=None)
    same = plan.model_copy(update={"residency_premium": rp})
    for text in (render_markdown(same), render_table(same)):
        assert "None" not in text and "premium" in text.lower()


def test_csv_states_its_currency_fx_and_price_dates_and_flattens_the_latency_points(saved):
    """Every row says what its figures are in (the cn plan is in CNY at the plan's recorded FX) and how old
    its prices are; at_planned_load and capacity (optional nested fields) are flattened like `predicted`."""
    import csv
    import io

    plan = json.loads(saved["cn"].read_text())
    rows = list(csv.DictReader(io.StringIO(run("report", saved["cn"], "--format", "csv").stdout)))
    for row, d in zip(rows, plan["deployments"], strict=True):
        assert (row["currency"], row["fx"], row["fx_as_of"]) == ("CNY", plan["fx"], plan["fx_as_of"])
        assert (row["catalog_as_of"], row["oldest_price_as_of"]) == (plan["catalog_as_of"], plan["oldest_price_as_of"])
        for name in ("at_planned_load", "capacity"):
            assert d[name] is not None and json.loads(row[name]) == d[name]
            assert float(row[f"{name}_tpot_ms"]) == d[name]["tpot_ms"]
            assert float(row[f"{name}_requests_per_second"]) == d[name]["requests_per_second"]
            assert row[f"{name}_source"] == d[name]["source"]
    header = run("report", saved["cn"], "--format", "csv").stdout.splitlines()[0].split(",")
    # columns added after the published ones, never before them (readers by position read the same)
    assert header.index("memory_lora_gib") < header.index("currency") < header.index("at_planned_load_tpot_ms")


def test_capacity_csv_states_its_currency_and_list_price(tmp_path):
    """A purchase row names the plan's currency, FX and price dates; the list price sits beside the paid one."""
    import csv
    import io

    saved = tmp_path / "cn.json"
    result = run("plan", EXAMPLES / "capacity-cn.yaml", "--currency", "USD", "--format", "json", "-o", saved)
    assert result.exit_code == 0
    plan = json.loads(saved.read_text())
    rows = list(csv.DictReader(io.StringIO(run("report", saved, "--format", "csv").stdout)))
    assert rows and {(r["currency"], r["fx"], r["fx_as_of"]) for r in rows} == {("USD", plan["fx"], plan["fx_as_of"])}
    assert {r["oldest_price_as_of"] for r in rows} == {plan["oldest_price_as_of"]}
    first = plan["periods"][0]["purchases"][0]
    assert float(rows[0]["list_price_per_hour"]) == first["list_price_per_hour"]


TWO_RESERVED = RESERVED + """  - name: code
    model: Qwen/Qwen2.5-Coder-7B-Instruct
    requests_per_second: 3
    input_tokens: 2000
    output_tokens: 200
    max_model_len: 8192
    slo: {ttft_ms: 1000, tpot_ms: 30}
"""


def test_the_monthly_total_is_the_sum_of_the_deployments_monthly_costs(tmp_path):
    """At 2026-11 physics this plan is 1 x g5 at 0.63378, 1 x g6 at 0.52392 and 2 x g6e at 1.17243 (USD/h,
    reserved-1y): lines 462.66 + 382.46 + 855.87 + 855.87 = 2,556.86, while 3.50256 x 730 = 2,556.8688 was
    printed as 2,556.87. Whatever the plan, the total is its lines' sum."""
    path, saved = tmp_path / "w.yaml", tmp_path / "w.json"
    path.write_text(TWO_RESERVED)
    assert run("solve", path, "--format", "json", "-o", saved).exit_code == 0
    plan = json.loads(saved.read_text())
    assert plan["total_cost_per_month"] == round(sum(d["cost_per_month"] for d in plan["deployments"]), 2)
    assert plan["total_cost_per_month"] == pytest.approx(plan["total_cost_per_hour"] * 730, abs=0.05)


def test_unit_economics_of_a_rate_workload_are_per_its_whole_demand(saved):
    """cn-chat-70b asks 2 requests/s: cost per request = cost per hour / (2 x 3,600), not / (1.9999 x 3,600)
    from the replicas' rounded rates (0.020135 became 0.020134 CNY at 144.967 CNY/h)."""
    plan = json.loads(saved["cn"].read_text())
    (u,) = plan["unit_economics"]
    assert u["requests_per_second"] == 2.0
    assert u["cost_per_request"] == round(u["cost_per_hour"] / 7200, 8)


def test_a_closed_loops_requests_per_second_are_littles_law_at_its_planned_clients():
    """batch-summarisation keeps 64 clients (2,000 in / 500 out): its unit economics and each replica's planned
    rate are the planned point's own -- clients / (TTFT + 499 x TPOT) -- not the capacity's rate times the
    clients' share of it (0.75 x 1.18 = 0.88 requests/s where the 64 clients send 1.13: every cost per request
    was 28 % high)."""
    plan = json.loads(run("solve", EXAMPLES / "batch-summarisation.yaml", "--format", "json").stdout)
    for d in plan["deployments"]:
        at = d["at_planned_load"]
        assert at["requests_per_second"] * (at["ttft_ms"] + 499 * at["tpot_ms"]) / 1e3 == pytest.approx(
            at["concurrency"], rel=2e-3)
        assert d["predicted"]["planned_requests_per_second_per_replica"] == at["requests_per_second"]
    (u,) = plan["unit_economics"]
    planned = sum(d["replicas"] * d["at_planned_load"]["requests_per_second"] for d in plan["deployments"])
    assert u["requests_per_second"] == pytest.approx(planned, abs=1e-4)
    assert u["cost_per_request"] == round(u["cost_per_hour"] / (3600 * planned), 8)


def test_every_workload_has_its_rejections_explained(saved):
    """two-models' rejections are listed by workload, then count: its table's five and Markdown's twelve were all
    `chat`'s, and `code`'s 1,052 residency rejections appeared in neither."""
    for fmt, first_cell in (("table", "│ code "), ("markdown", "| code |")):
        out = run("report", saved["two"], "--format", fmt).stdout
        rejections = out[out.index("Top rejections"):]
        assert first_cell in rejections, fmt
        assert "│ chat " in rejections or "| chat |" in rejections


def test_a_discounted_plan_says_so_in_its_assumptions_and_a_diff_names_the_discount(saved, tmp_path):
    """QA: with --discount alibaba=0.1 the Assumptions read "prices are list prices", and a diff against the
    undiscounted plan blamed FX for a change that was all the discount (102.33 = 113.70 x 0.9 CNY/h)."""
    path, extra = PLANS["cn"]
    discounted = tmp_path / "discounted.json"
    assert run("solve", path, *extra, "--discount", "alibaba=0.1", "--format", "json", "-o",
               discounted).exit_code == 0
    md = run("report", discounted, "--format", "markdown").stdout
    assert "prices are list prices" not in md
    assert "prices are after discounts and overlays: 2 of 2 deployments below their list price" in md
    # an overlay above the list price says so (review: diff printed "below list price -5 %")
    assert _list_gap_of(110.0, 100.0) == "10 % above list" and _list_gap_of(90.0, 100.0) == "10 % below list"
    assert "prices are list prices unless an overlay says otherwise" in run("report", saved["cn"], "--format",
                                                                            "markdown").stdout
    diff = json.loads(run("diff", discounted, saved["cn"], "--format", "json").stdout)
    details = [d for line in diff["lines"] for d in line["details"]]
    assert "price 10 % below list -> at list" in details


def _list_gap_of(price: float, listed: float) -> str:
    from gpuopt.reports.diff import _list_gap

    class Priced:
        instance_price_per_hour, list_price_per_hour = price, listed

    return _list_gap([Priced()])  # type: ignore[list-item]
