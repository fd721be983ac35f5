"""Plan files read back by `report`, `diff` (and `deploy`, through the same loader): a hand-edited plan is input,
so every bad field is exit 2 with one `error:` line naming the file and the field's path -- never `nan USD`, a
silently coerced string, a negative cost, or exit 70 (a bad date crashed FOCUS, deep nesting the JSON parser)."""

import json
import math
from pathlib import Path

import pytest

from tests.conftest import run

pytestmark = pytest.mark.usefixtures("fixed_day")

ONE = """schema_version: 1
residency: us
currency: USD
providers: [aws]
workloads:
  - name: chat
    model: meta-llama/Llama-3.1-8B-Instruct
    requests_per_second: 1
    input_tokens: 1000
    output_tokens: 250
    max_model_len: 8192
    slo: {ttft_ms: 1500, tpot_ms: 40}
"""
RESERVED = """schema_version: 1
residency: us
currency: USD
providers: [aws]
horizon: {periods: 2, period: quarter, start: 2027Q3}
workloads:
  - name: assistant
    model: meta-llama/Llama-3.1-8B-Instruct
    demand: {requests_per_second: [4, 6]}
    input_tokens: 1000
    output_tokens: 250
    max_model_len: 8192
    slo: {ttft_ms: 1500, tpot_ms: 40}
    price_kinds: [reserved-1y]
scenarios: {high: 1.5}
"""


def _write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A solve plan (one workload on aws), the same workload with a TPOT target of 1 ms (infeasible, exit 1) and
    a capacity plan (a reservation running two quarters, one scenario), as written."""
    folder = tmp_path_factory.mktemp("plans")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("GPUOPT_TODAY", "2026-11-29")
        patch.setenv("GPUOPT_CACHE_DIR", str(folder / "cache"))
        solve, plan = folder / "solve.json", folder / "capacity.json"
        result = run("solve", _write(folder, "one.yaml", ONE), "--candidates", "summary", "--format", "json",
                     "-o", solve)
        assert result.exit_code == 0, result.output
        infeasible = folder / "infeasible.json"
        result = run("solve", _write(folder, "fast.yaml", ONE.replace("tpot_ms: 40", "tpot_ms: 1")), "--format",
                     "json", "-o", infeasible)
        assert result.exit_code == 1, result.output
        result = run("plan", _write(folder, "reserved.yaml", RESERVED), "--format", "json", "-o", plan)
        assert result.exit_code == 0, result.output
    return {"solve": solve, "infeasible": infeasible, "capacity": plan}


def _edited(source: Path, folder: Path, path: tuple[str | int, ...], value: object) -> Path:
    """A copy of the plan with one field set: Python's json writes NaN and Infinity as JS literals (as a text
    editor would); the marker BIG becomes 1e400, a number JSON can spell and a double cannot hold."""
    data = json.loads(source.read_text(encoding="utf-8"))
    node = data
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = "__BIG__" if value == "BIG" else value
    out = folder / "edited.json"
    out.write_text(json.dumps(data, indent=2).replace('"__BIG__"', "1e400"), encoding="utf-8")
    return out


# (plan, field path, value written, pydantic's message for it)
FINITE = "Input should be a finite number"
NUMBER = "Input should be a valid number"
NOT_NEGATIVE = "Input should be greater than or equal to 0"
CASES = [
    ("solve", ("deployments", 0, "cost_per_month"), math.nan, FINITE),
    ("solve", ("deployments", 0, "instance_price_per_hour"), math.inf, FINITE),
    ("solve", ("total_cost_per_month",), -math.inf, FINITE),
    ("solve", ("workloads", 0, "demand"), "BIG", FINITE),
    ("solve", ("deployments", 0, "predicted", "ttft_ms"), math.nan, FINITE),
    ("solve", ("deployments", 0, "memory", "kv_cache_gib"), math.inf, FINITE),
    ("solve", ("unit_economics", 0, "cost_per_request"), math.nan, FINITE),
    ("solve", ("deployments", 0, "cost_per_month"), "12", NUMBER),
    ("solve", ("headroom",), True, NUMBER),
    ("solve", ("deployments", 0, "replicas"), "1", "Input should be a valid integer"),
    ("solve", ("deployments", 0, "replicas"), 1.0, "Input should be a valid integer"),
    ("solve", ("deployments", 0, "cost_per_month"), -5, NOT_NEGATIVE),
    ("solve", ("instances", 0, "price_per_hour"), -0.01, NOT_NEGATIVE),
    ("solve", ("currency",), "EUR", "'EUR' is not a currency gpuopt prices in (USD, CNY)"),
    ("solve", ("as_of_date",), "not-a-date", "expected a date YYYY-MM-DD, got 'not-a-date'"),
    ("solve", ("as_of_date",), "20261129", "expected a date YYYY-MM-DD, got '20261129'"),
    ("solve", ("as_of_date",), "2026-02-30", "expected a date YYYY-MM-DD, got '2026-02-30'"),
    ("solve", ("fx",), "1 USD = 1.2.3 CNY (2026-10-30)", "1 USD = 1.2.3 CNY: the rate is not a positive finite number"),
    ("solve", ("fx",), "1 USD = 6.6529 CNY (2026-10-30); 1 CNY = -0.15 USD (2026-10-30)",
     "1 CNY = -0.15 USD: the rate is not a positive finite number"),
    ("capacity", ("periods", 0, "cost"), math.nan, FINITE),
    ("capacity", ("fx",), "1 USD = 1e400 CNY (2026-10-30)",
     "1 USD = 1e400 CNY: the rate is not a positive finite number"),
    ("capacity", ("periods", 0, "purchases", 0, "price_per_hour"), -1.17243, NOT_NEGATIVE),
    ("capacity", ("periods", 0, "cost_by_price_kind", "reserved-1y"), "2567.62", NUMBER),
    ("capacity", ("periods", 0, "running", 0, "capacity"), math.inf, FINITE),
    ("capacity", ("commitments", 0, "price_per_hour"), math.inf, FINITE),
    ("capacity", ("commitments", 0, "obligation_after_horizon"), -5135.24, NOT_NEGATIVE),
    ("capacity", ("commitment_summary", "obligation_after_horizon"), math.nan, FINITE),
    ("capacity", ("committed_after_horizon",), "BIG", FINITE),
    ("capacity", ("periods", 0, "purchases", 0, "count"), 10**30,
     "Input should be less than or equal to 9223372036854775807"),
    ("capacity", ("periods", 0, "purchases", 0, "term_months"), -12, NOT_NEGATIVE),
    ("capacity", ("currency",), "usd", "'usd' is not a currency gpuopt prices in (USD, CNY)"),
    ("capacity", ("as_of_date",), "2026-11-31", "expected a date YYYY-MM-DD, got '2026-11-31'"),
    # QA: labels no horizon gives were read and dated by the FOCUS export (exit 70)
    *[("capacity", ("periods", 0, "period"), label,
       f"expected a period label like 2027Q1, 2027-01, Q1 or M1, got '{label}'")
      for label in ("2027Q5", "2027-13", "0000Q1", "abcdQ1", "2027Q1x")],
    # a misspelt price kind fell out of every FOCUS charge category (41 % of capacity-global's bill)
    ("capacity", ("commitments", 0, "price_kind"), "reserved-1yy",
     "unknown price kind 'reserved-1yy' (known: on-demand, spot, community, reserved-1y, reserved-3y, "
     "savings-plan, savings-plan-3y, subscription-monthly, subscription-1y, capacity-block, contract)"),
]


@pytest.mark.parametrize(("kind", "field", "value", "message"), CASES,
                         ids=[f"{c[0]}:{'.'.join(map(str, c[1]))}={c[2]!r}" for c in CASES])
def test_a_bad_field_is_one_error_line_naming_the_file_and_its_path(saved, tmp_path, kind, field, value, message):
    good = saved[kind]
    bad = _edited(good, tmp_path, field, value)
    expected = f"error: {bad}: not a valid gpuopt plan: {'.'.join(map(str, field))}: {message}\n"
    for command in (["report", bad, "--format", "focus"], ["report", bad, "--format", "markdown"],
                    ["diff", good, bad], ["diff", bad, good, "--format", "markdown"]):
        result = run(*command)
        assert (result.exit_code, result.stdout, result.stderr) == (2, "", expected), command


@pytest.mark.parametrize(("kind", "edit", "message"), [
    ("solve", {"total_cost_per_month": None},
     "total_cost_per_month: null in a plan whose status is optimal (an optimal plan has its cost)"),
    ("infeasible", {"status": "optimal"},
     "total_cost_per_hour: null in a plan whose status is optimal (an optimal plan has its cost)"),
    ("infeasible", {"total_cost_per_hour": 0.0, "total_cost_per_month": 0.0},
     "total_cost_per_hour: 0.0 in a plan whose status is infeasible (an infeasible plan has no cost)"),
    ("capacity", {"total_cost": None}, "total_cost: null in a plan whose status is optimal (an optimal plan has its "
                                       "cost)"),
    ("capacity", {"status": "infeasible"}, "total_cost: 10270.49 in a plan whose status is infeasible (an "
                                           "infeasible plan has no cost)"),
    ("capacity", {"periods": []}, "scenarios.0.shortfall.assistant: 2 values for 0 periods"),
    ("capacity", {"scenarios": [{"name": "high", "multiplier": 1.5, "total_cost": 15822.4,
                                 "shortfall": {"assistant": [0.0, 0.9433, 5.0]},
                                 "idle": {"assistant": [2.0567, 0.0]}}]},
     "scenarios.0.shortfall.assistant: 3 values for 2 periods"),
])
def test_a_plan_that_contradicts_its_status_is_one_error_line(saved, tmp_path, kind, edit, message):
    """An optimal plan without its cost would be priced 0.00 by diff; an infeasible one with a cost would be
    priced; a scenario with a figure for a period the plan lacks (periods emptied, or a figure added) was an
    IndexError in the table (exit 70). 10,270.49: 1 reserved-1y g6e.xlarge at 1.17243/h x 8,760 h = 10,270.4868."""
    data = json.loads(saved[kind].read_text())
    data.update(edit)
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(data))
    for command in (["report", bad, "--format", "table"], ["diff", saved[kind], bad]):
        result = run(*command)
        assert (result.exit_code, result.stdout, result.stderr) == (
            2, "", f"error: {bad}: not a valid gpuopt plan: {message}\n"), command


def test_every_problem_of_a_file_is_its_own_line(saved, tmp_path):
    data = json.loads(saved["solve"].read_text())
    data["deployments"][0]["cost_per_month"] = -5
    data["currency"] = "EUR"
    bad = tmp_path / "two.json"
    bad.write_text(json.dumps(data))
    result = run("report", bad)
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [
        f"error: {bad}: not a valid gpuopt plan: currency: 'EUR' is not a currency gpuopt prices in (USD, CNY)",
        f"error: {bad}: not a valid gpuopt plan: deployments.0.cost_per_month: {NOT_NEGATIVE}"]


def test_a_file_failing_everywhere_lists_twenty_problems_then_counts_the_rest(saved, tmp_path):
    """25 extra keys: 20 lines, then `and 5 more problems` (a plan of 60,000 candidates may fail 60,000 times)."""
    data = json.loads(saved["solve"].read_text())
    data.update({f"x{i:02d}": i for i in range(25)})
    bad = tmp_path / "extra.json"
    bad.write_text(json.dumps(data))
    lines = run("report", bad).stderr.splitlines()
    assert len(lines) == 21
    assert lines[0] == f"error: {bad}: not a valid gpuopt plan: x00: Extra inputs are not permitted"
    assert lines[-1] == f"error: {bad}: and 5 more problems"


# pydantic's parser takes 201 levels: the 202nd `[` (column 202) is refused; after the 29 characters up to "x"'s
# value the object is one level, so its 201st `[` is: column 29 + 201 = 230
@pytest.mark.parametrize(("text", "message"), [
    ("[" * 100_000, "not JSON (recursion limit exceeded at line 1 column 202)"),
    ('{"kind": "gpuopt-plan", "x": ' + "[" * 300 + "]" * 300 + "}", "not JSON (recursion limit exceeded at line 1 "
                                                                   "column 230)"),
    ("\ufeff{}", "not JSON (it starts with a byte order mark, U+FEFF: save it as UTF-8 without one)"),
    ('{"kind": "gpuopt-plan", "schema_version": "1"}', "plan schema_version '1' is not supported (this gpuopt "
                                                        "reads 1)"),
    ('{"kind": "gpuopt-plan", "schema_version": true}', "plan schema_version True is not supported (this gpuopt "
                                                         "reads 1)"),
])
def test_json_that_is_no_plan_is_one_error_line(saved, tmp_path, text, message):
    """Nesting deeper than pydantic's parser goes (a plan needs 6 levels) was a RecursionError, exit 70."""
    bad = tmp_path / "bad.json"
    bad.write_text(text, encoding="utf-8")
    for command in (["report", bad], ["diff", saved["solve"], bad], ["diff", bad, saved["solve"]]):
        result = run(*command)
        assert (result.exit_code, result.stdout, result.stderr) == (2, "", f"error: {bad}: {message}\n"), command


@pytest.mark.parametrize("kind", ["solve", "capacity"])
def test_a_key_given_twice_is_refused(saved, tmp_path, kind):
    """QA: `"currency": "USD", "currency": "CNY"` read as CNY, a reviewer seeing USD; any money field likewise."""
    text = saved[kind].read_text(encoding="utf-8")
    bad = tmp_path / "twice.json"
    bad.write_text(text.replace('"currency": "USD",', '"currency": "USD", "currency": "CNY",', 1), encoding="utf-8")
    for command in (["report", bad], ["diff", saved[kind], bad]):
        result = run(*command)
        assert (result.exit_code, result.stdout) == (2, ""), command
        assert result.stderr == (f"error: {bad}: key 'currency' appears twice in one object: which one a JSON reader "
                                 "keeps is not defined (gpuopt read the last), so a file that shows one value and "
                                 "means another is refused; keep one\n")


def test_the_plans_gpuopt_writes_read_back_strictly(saved):
    """Strict reading refuses nothing solve and plan write: both plans report in every format."""
    for kind, formats in (("solve", ("markdown", "csv", "focus", "json")), ("capacity", ("markdown", "csv", "focus"))):
        for fmt in formats:
            result = run("report", saved[kind], "--format", fmt)
            assert result.exit_code == 0, (kind, fmt, result.output)
    assert run("report", saved["solve"], "--format", "json").stdout == saved["solve"].read_text()


def _held_models(tp: object, seen: dict[str, object]) -> None:
    """Every pydantic model and TypedDict a plan file holds, from the top-level model down."""
    from typing import get_args, get_type_hints

    from pydantic import BaseModel
    from typing_extensions import is_typeddict

    if isinstance(tp, type) and issubclass(tp, BaseModel) and tp.__name__ not in seen:
        seen[tp.__name__] = tp.model_config
        for field in tp.model_fields.values():
            _held_models(field.annotation, seen)
    elif is_typeddict(tp) and tp.__name__ not in seen:
        seen[tp.__name__] = tp.__pydantic_config__
        for hint in get_type_hints(tp).values():
            _held_models(hint, seen)
    for arg in get_args(tp):
        _held_models(arg, seen)


def test_every_model_a_plan_file_holds_refuses_nan_and_infinity():
    """allow_inf_nan is per model: a model added to the plan later must say it too, or NaN gets in through it."""
    from gpuopt.planner.capacity import CapacityPlan
    from gpuopt.planner.plan import Plan

    seen: dict[str, object] = {}
    _held_models(Plan, seen)
    _held_models(CapacityPlan, seen)
    assert {"Deployment", "Candidate", "CommitmentSpan", "CommitmentSummary", "RunningLine", "Sensitivity"} <= set(seen)
    assert [name for name, config in seen.items() if config.get("allow_inf_nan") is not False] == []


def test_a_recorded_rate_is_read_either_way_and_only_when_positive_and_finite():
    """`1 USD = 8 CNY` converts CNY into USD at 1/8 = 0.125; a rate no plan file can hold (a plan built in code)
    is skipped for the next one the text records."""
    from gpuopt.reports.diff import recorded_rate

    assert recorded_rate("1 USD = 8 CNY (2026-01-01)", "CNY", "USD") == 0.125
    assert recorded_rate("1 USD = 1e400 CNY (x); 1 USD = 7 CNY (2026-01-01)", "USD", "CNY") == 7.0
    assert recorded_rate("1 USD = 0 CNY (x)", "USD", "CNY") is None


@pytest.mark.parametrize("fmt", ["focus", "csv", "markdown"])
def test_report_exits_as_the_command_that_made_the_plan(saved, tmp_path, fmt):
    """QA: `report` of an infeasible plan exited 0 with a header-only FOCUS file (a pipeline read a bill of
    0.00), and of a plan over its budget 0 without a word; solve exits 1 and 3 for them."""
    infeasible = run("report", saved["infeasible"], "--format", fmt)
    assert infeasible.exit_code == 1
    assert "infeasible: workload chat: " in infeasible.stderr or fmt == "markdown"  # a document shows its reasons
    over = tmp_path / "over.json"
    made = run("solve", _write(tmp_path, "one.yaml", ONE), "--max-monthly", "1", "--format", "json", "-o", over)
    assert made.exit_code == 3
    result = run("report", over, "--format", fmt)
    assert result.exit_code == 3 and "over budget: " in result.stderr and "exceeds 1.00 USD/month" in result.stderr
    assert run("report", saved["solve"], "--format", fmt).exit_code == 0


@pytest.mark.parametrize(("kind", "field", "value", "how"), [
    ("solve", ("deployments", 0, "instance_price_per_hour"), 100.0, "instance_price_per_hour x instances"),
    ("solve", ("deployments", 0, "cost_per_month"), 1.0, "cost_per_hour x 730"),
    ("solve", ("total_cost_per_month",), 1.0, "the sum of the deployments' cost_per_month"),
    ("solve", ("total_cost_per_hour",), 99.0, "the sum of the deployments' cost_per_hour"),
    ("capacity", ("periods", 0, "cost"), 1.0, "the sum of its cost_by_price_kind"),
    ("capacity", ("periods", 0, "purchases", 0, "hours"), 1.0, "price_per_hour x hours"),
    ("capacity", ("total_cost",), 1.0, "the sum of the periods' cost and committed_after_horizon"),
    ("capacity", ("savings",), 12345.0, "all_on_demand_cost - total_cost"),
    ("capacity", ("committed_after_horizon",), 1.0, "the sum of the commitments' obligation_after_horizon"),
    # review: the Instances table, the charts and deploy's machine count read these lines
    ("solve", ("instances", 0, "price_per_hour"), 100.0, "price_per_hour x instances"),
])
def test_a_figure_the_others_contradict_is_refused(saved, tmp_path, kind, field, value, how):
    """QA: an edited unit price billed 74,400.00 in FOCUS beside 4,956.70 in Markdown, CSV and diff; an edited
    header total printed beside lines that add up to another; diff called an edited period's -3,135.80
    "rounding". Each figure is the one the others make, within gpuopt's rounding, or the file is refused."""
    bad = _edited(saved[kind], tmp_path, field, value)
    for command in (["report", bad, "--format", "focus"], ["diff", saved[kind], bad]):
        result = run(*command)
        assert (result.exit_code, result.stdout) == (2, ""), command
        name = ".".join(map(str, field)) if field[-1] not in ("instance_price_per_hour", "hours", "price_per_hour") \
            else ".".join(map(str, field[:-1])) + (".cost_per_hour" if kind == "solve" else ".cost")
        assert result.stderr.startswith(f"error: {bad}: not a valid gpuopt plan: {name}: "), result.stderr
        assert f" is not {how} (" in result.stderr and "the file contradicts itself" in result.stderr


def test_capacity_plan_fields_have_their_domain(saved, tmp_path):
    """QA: `charge: "whatever"`, a negative purchase's hours and a headroom of 5 were read and printed; a
    commitment's `term_months: 0` rendered "term 0 months" beside its whole charge, and `start_month` 10^12 was
    read."""
    for field, value, message in ((("charge",), "whatever", "Input should be 'full-term' or 'inside-horizon'"),
                                  (("headroom",), 5, "Input should be less than or equal to 1"),
                                  (("headroom",), -1, "Input should be greater than 0")):
        bad = _edited(saved["capacity"], tmp_path, field, value)
        result = run("report", bad)
        assert result.exit_code == 2 and f"not a valid gpuopt plan: {field[0]}: {message}" in result.stderr
    plan = json.loads(saved["capacity"].read_text())
    assert plan["commitments"], "the saved capacity plan commits to something"
    first = plan["commitments"][0]
    for field, value, message in (
            ("term_months", 0, f"commitments.0: term_months 0: a {first['price_kind']} runs "),
            ("months_after", first["months_after"] + 1, f"commitments.0: months_inside {first['months_inside']} + "
                                                        f"months_after {first['months_after'] + 1} are not its "),
            ("start_month", 10**12, "commitments.0.start_month: Input should be less than or equal to 180")):
        bad = _edited(saved["capacity"], tmp_path, ("commitments", 0, field), value)
        result = run("report", bad)
        assert result.exit_code == 2 and f"not a valid gpuopt plan: {message}" in result.stderr, result.stderr


def test_instance_lines_and_the_budget_agree_with_the_deployments(saved, tmp_path):
    """Review: an edited instances line (7 machines) printed beside the deployments' 1, and deploy launches that
    count; an edited `over: false` beside a negative margin made `report` exit 0."""
    plan = json.loads(saved["solve"].read_text())
    plan["instances"][0]["instances"] = 0
    plan["instances"][0]["cost_per_hour"] = 0.0
    few = _write(tmp_path, "few.json", json.dumps(plan))
    result = run("report", few)
    assert result.exit_code == 2
    assert "not a valid gpuopt plan: instances.0.instances: 0 machines, where its deployments run on" in result.stderr
    over = tmp_path / "over.json"
    assert run("solve", _write(tmp_path, "one.yaml", ONE), "--max-monthly", "1", "--format", "json",
               "-o", over).exit_code == 3
    edited = json.loads(over.read_text())
    edited["budget"]["over"] = False
    hidden = _write(tmp_path, "hidden.json", json.dumps(edited))
    result = run("report", hidden)
    assert result.exit_code == 2 and "not a valid gpuopt plan: budget.over: False with a margin of -" in result.stderr



@pytest.mark.parametrize(("field", "value", "problem"), [
    ("gpus_per_replica", 7, "gpus_per_replica: 7, where tensor_parallel x pipeline_parallel is"),
    ("tensor_parallel", 3, "gpus_per_replica: "),
    ("replicas", 10_000, "replicas: 10000 of "),
    ("vllm_command", "vllm serve x --tensor-parallel-size 8", "vllm_command: --tensor-parallel-size 8, where the "
                                                              "deployment's is"),
    ("vllm_command", "vllm serve x --tensor-parallel-size 1\n--max-num-seqs 9", "vllm_command: not the one `vllm "
                                                                               "serve` line"),
    ("provider", "azure", "provider: unknown provider 'azure' (known: alibaba, aws,"),
])
def test_a_deployment_whose_shape_contradicts_itself_is_refused(saved, tmp_path, field, value, problem):
    """QA: an edited `gpus_per_replica: 7` deployed as a Ray LeaderWorkerSet of 3 GPUs a pod running
    --tensor-parallel-size 2; `replicas: 10` on one 4-GPU machine at the same cost; a command's
    --tensor-parallel-size 8 beside `tensor_parallel: 2`, emitted as is; a line break that dropped its last
    flags. deploy and report refuse such a file."""
    plan = json.loads(saved["solve"].read_text())
    d = plan["deployments"][0]
    if field == "vllm_command" and "--tensor-parallel-size 1" in value:
        value = value.replace("1", str(d["tensor_parallel"]), 1)
    d[field] = value
    bad = _write(tmp_path, "bad.json", json.dumps(plan))
    for command in (["report", bad], ["deploy", bad, "--target", "skypilot", "-o", tmp_path / "out"]):
        result = run(*command)
        assert (result.exit_code, result.stdout) == (2, ""), command
        assert f"not a valid gpuopt plan: deployments.0: {problem}" in result.stderr \
            or f"not a valid gpuopt plan: deployments.0.{problem}" in result.stderr, result.stderr


def test_a_headroom_outside_its_range_is_refused(saved, tmp_path):
    """QA: `headroom: -5` was read, and the report said "planned for at most -500% of the load"."""
    result = run("report", _edited(saved["solve"], tmp_path, ("headroom",), -5))
    assert result.exit_code == 2 and "not a valid gpuopt plan: headroom: Input should be greater than 0" in \
        result.stderr


@pytest.mark.parametrize(("field", "value", "how"), [
    (("commitment_summary", "savings_cash"), 999.0,
     "all_on_demand_cost - cost_inside_horizon - obligation_after_horizon"),
    (("commitment_summary", "savings_amortised"), 999.0, "all_on_demand_cost - cost_inside_horizon"),
    (("commitment_summary", "cost_inside_horizon"), 1.0, "the sum of the periods' cost"),
    (("commitment_summary", "obligation_after_horizon"), 2.0, "committed_after_horizon"),
    (("commitments", 0, "price_per_hour"), 0.1, "price_per_hour x count x 730 x term_months"),
])
def test_a_capacity_plans_commitment_figures_must_add_up(saved, tmp_path, field, value, how):
    """QA: an edited commitment summary (savings_cash 999, cost_inside_horizon 1, obligation 2) or a commitment's
    price printed as the lines finance reads, exit 0; every other total was cross-checked."""
    bad = _edited(saved["capacity"], tmp_path, field, value)
    result = run("report", bad)
    assert (result.exit_code, result.stdout) == (2, ""), result.output
    assert f" is not {how}" in result.stderr and "the file contradicts itself" in result.stderr
