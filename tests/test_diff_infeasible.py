"""`gpuopt diff` with an infeasible plan on either side: an infeasible plan has no cost, not a cost of 0.00. The
diff has no lines and no delta, shows the priced plan's total, names the infeasible plan's file with its reasons
in every format, and exits 1 (before: `-587.50 USD/month`, every deployment `removed`, exit 0)."""

import json
from pathlib import Path

import pytest

from tests.conftest import run
from tests.test_plan_json import ONE, RESERVED, _write

pytestmark = pytest.mark.usefixtures("fixed_day")

NO_DELTA = "no delta: an infeasible plan has no cost, not a cost of 0.00"


@pytest.fixture(scope="module")
def plans(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A solve plan and a capacity plan, each feasible and with a TPOT target of 1 ms (infeasible, exit 1)."""
    folder = tmp_path_factory.mktemp("plans")
    out = {}
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("GPUOPT_TODAY", "2026-11-29")
        patch.setenv("GPUOPT_CACHE_DIR", str(folder / "cache"))
        for name, command, text, code in (("solve", "solve", ONE, 0), ("capacity", "plan", RESERVED, 0),
                                          ("solve_inf", "solve", ONE.replace("tpot_ms: 40", "tpot_ms: 1"), 1),
                                          ("capacity_inf", "plan", RESERVED.replace("tpot_ms: 40", "tpot_ms: 1"), 1)):
            out[name] = folder / f"{name}.json"
            result = run(command, _write(folder, f"{name}.yaml", text), "--format", "json", "-o", out[name])
            assert result.exit_code == code, result.output
    # the figures below by hand: 1 x aws g5.xlarge at 1.006/h x 730 h = 734.38 a month; 1 x reserved-1y
    # g6e.xlarge at 1.17243/h bought in 2027Q3: 1.17243 x 8,760 h = 10,270.4868 -> 10,270.49, spread over its
    # 4 quarters as 2,567.62 + 2,567.63 inside the horizon and 5,135.24 owed after it
    solve = json.loads(out["solve"].read_text())
    assert [(d["sku"], d["instances"], d["instance_price_per_hour"]) for d in solve["deployments"]] == [
        ("g5.xlarge", 1.0, 1.006)]
    capacity = json.loads(out["capacity"].read_text())
    assert [p["cost"] for p in capacity["periods"]] == [2567.62, 2567.63]
    assert capacity["committed_after_horizon"] == 5135.24
    return out


def _reasons(path: Path) -> list[str]:
    return json.loads(path.read_text())["explanation"]


def test_a_diff_against_an_infeasible_plan_has_no_delta_and_says_why_in_json(plans):
    new = plans["solve_inf"]
    result = run("diff", plans["solve"], new, "--format", "json")
    assert result.exit_code == 1
    d = json.loads(result.stdout)
    assert (d["total_monthly_before"], d["total_monthly_after"], d["total_delta"], d["lines"]) == (734.38, None, None,
                                                                                                   [])
    assert (d["status_before"], d["status_after"]) == ("optimal", "infeasible")
    reasons = _reasons(new)
    assert any("binding constraint: tpot" in r for r in reasons)
    assert d["infeasible"] == [{"plan": "new", "file": str(new), "explanation": reasons}]
    # JSON on stdout does not show the reasons to a person: stderr does, one line each, naming the file
    assert result.stderr.splitlines() == [f"infeasible: {new}: {r}" for r in reasons]


def test_the_markdown_for_a_pull_request_names_the_infeasible_plan_and_prints_no_saving(plans):
    new = plans["solve_inf"]
    result = run("diff", plans["solve"], new, "--format", "markdown")
    assert result.exit_code == 1 and result.stderr == ""  # the document shows the reasons
    head = result.stdout.splitlines()[:6]
    assert head == ["### gpuopt plan diff: no delta, the new plan is infeasible", "",
                    f"Total per month: 734.38 USD -> infeasible ({NO_DELTA})", "",
                    f"**The new plan ({str(new).replace('_', chr(92) + '_')}) is infeasible:**", ""]
    assert result.stdout.splitlines()[6:] == [f"- {r}" for r in _reasons(new)]
    assert "removed" not in result.stdout and "-734.38" not in result.stdout and "0.00 USD" not in result.stdout


def test_either_side_or_both_infeasible_in_the_table(plans):
    old, new = plans["solve_inf"], plans["solve"]
    result = run("diff", old, new)
    assert result.exit_code == 1
    lines = result.stdout.splitlines()
    assert lines[0] == f"Plan diff, total per month: infeasible -> 734.38 USD ({NO_DELTA})"
    assert lines[1] == f"The old plan ({old}) is infeasible:"
    both = run("diff", old, old, "--format", "markdown")
    assert both.exit_code == 1
    assert both.stdout.startswith("### gpuopt plan diff: no delta, both plans are infeasible\n\n"
                                  f"Total per month: infeasible -> infeasible ({NO_DELTA})")
    assert both.stdout.count("is infeasible:") == 2


def test_a_diff_written_to_a_file_still_exits_1_with_the_reasons_on_stderr(plans, tmp_path):
    out = tmp_path / "diff.md"
    new = plans["solve_inf"]
    result = run("diff", plans["solve"], new, "--format", "markdown", "-o", out)
    assert result.exit_code == 1 and result.stdout == ""
    assert out.read_text().startswith("### gpuopt plan diff: no delta, the new plan is infeasible")
    assert result.stderr.splitlines() == [f"wrote {out}"] + [f"infeasible: {new}: {r}" for r in _reasons(new)]


def test_a_capacity_diff_against_an_infeasible_plan_labels_no_period_removed(plans):
    """Before: 10,270.49 -> 0.00 (-10,270.49), and 2027Q3 and 2027Q4, which both horizons hold, `removed`."""
    old, new = plans["capacity"], plans["capacity_inf"]
    result = run("diff", old, new, "--format", "markdown")
    assert result.exit_code == 1
    assert result.stdout.splitlines()[:3] == [
        "### gpuopt plan diff: no delta, the new plan is infeasible", "",
        f"Total over the horizon and owed after it: 10,270.49 USD -> infeasible ({NO_DELTA})"]
    assert "removed" not in result.stdout and "period 2027Q3" not in result.stdout
    d = json.loads(run("diff", old, new, "--format", "json").stdout)
    assert (d["kind"], d["total_monthly_before"], d["total_delta"], d["lines"]) == ("gpuopt-capacity-plan", 10270.49,
                                                                                    None, [])
    assert d["infeasible"] == [{"plan": "new", "file": str(new), "explanation": _reasons(new)}]


def test_a_priced_diff_states_both_plans_optimal(plans):
    """The same plan against itself: every line unchanged, delta 0.00, and the statuses that say it is priced."""
    d = json.loads(run("diff", plans["solve"], plans["solve"], "--format", "json").stdout)
    assert (d["status_before"], d["status_after"], d["infeasible"], d["total_delta"]) == ("optimal", "optimal", [],
                                                                                           0.0)
    assert d["total_monthly_before"] == d["total_monthly_after"] == 734.38


def test_a_solve_plan_against_an_infeasible_capacity_plan_is_still_refused_as_two_kinds(plans):
    result = run("diff", plans["solve"], plans["capacity_inf"])
    assert result.exit_code == 2 and "compare plans of one kind" in result.stderr


def test_a_line_whose_only_change_is_its_price_says_so(tmp_path):
    """QA: cn-chat saved in USD at the shipped USD:CNY and again at 7.1 diffed as "+1,001.67 USD/month", both
    lines `changed` with no detail: the schedule is the same, the CNY prices converted at another rate. The
    details now say the unit price and the FX each plan used."""
    example = Path(__file__).parent.parent / "examples" / "cn-chat-70b.yaml"
    shipped, swung = tmp_path / "a.json", tmp_path / "b.json"
    for out, extra in ((shipped, ()), (swung, ("--fx-rate", "USD:CNY=7.1"))):
        assert run("solve", example, "--region", "cn", "--currency", "USD", "--format", "json", "-o", out,
                   *extra).exit_code == 0
    result = run("diff", swung, shipped, "--format", "json")
    lines = json.loads(result.stdout)["lines"]
    assert lines and all(x["change"] == "changed" for x in lines)
    for x in lines:
        price, fx = x["details"]
        assert price.startswith("instance price ") and price.endswith(" USD/h")
        old, new = (float(v) for v in price.removeprefix("instance price ").removesuffix(" USD/h").split(" -> "))
        assert old * 7.1 == pytest.approx(new * 6.6529, rel=1e-4)  # one CNY price converted at each rate
        assert fx == "FX 1 USD = 7.1 CNY (user override) -> 1 USD = 6.6529 CNY (2026-10-30)"


def test_a_total_delta_of_unchanged_lines_is_said_to_be_rounding():
    from gpuopt.reports.diff import DiffLine, PlanDiff, diff_markdown
    line = DiffLine(workload="w", deployment="aws x (us-east-1, on-demand)", change="unchanged", monthly_before=1.0,
                    monthly_after=1.03, delta=0.03, details=["+0.03 from rounding each plan's figures to the cent, "
                                                             "not a change"])
    d = PlanDiff(currency_before="USD", currency_after="CNY", total_monthly_before=1.0, total_monthly_after=1.03,
                 total_delta=0.03, lines=[line], fx_note=None)
    assert diff_markdown(d).splitlines()[0] == (
        "### gpuopt plan diff: +0.03 CNY/month, every line unchanged: rounding, not a change")
