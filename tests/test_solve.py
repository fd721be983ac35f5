import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from gpuopt.cli.main import cli
from tests.conftest import check_golden, run

EXAMPLES = Path(__file__).parent.parent / "examples"
CN = str(EXAMPLES / "cn-chat-70b.yaml")


pytestmark = pytest.mark.usefixtures("fixed_day")


@pytest.fixture(scope="module")
def cn_plan_text():
    import os

    os.environ["GPUOPT_TODAY"] = "2026-11-29"
    result = CliRunner().invoke(cli, ["solve", CN, "--region", "cn", "--format", "json", "--candidates", "all"])
    assert result.exit_code == 0, result.output
    return result.stdout


def test_cn_plan_keeps_everything_in_mainland_china(cn_plan_text):
    plan = json.loads(cn_plan_text)
    assert plan["status"] == "optimal" and plan["currency"] == "CNY"
    assert plan["deployments"]
    assert all(d["country"] == "CN" for d in plan["deployments"])
    feasible = [c for c in plan["candidates"] if c["feasible"]]
    assert feasible and all(c["country"] == "CN" for c in feasible)
    assert any(c["reason_kind"] == "residency" and c["country"] != "CN" for c in plan["candidates"])
    premium = plan["residency_premium"]
    assert premium["selector"] == "cn"
    assert premium["cost_per_hour_with_policy"] == plan["total_cost_per_hour"]
    assert premium["cost_per_hour_without_policy"] <= premium["cost_per_hour_with_policy"]


def test_plan_json_contract_keys(cn_plan_text):
    plan = json.loads(cn_plan_text)
    for key in ("status", "currency", "total_cost_per_hour", "total_cost_per_month", "deployments", "alternatives",
                "candidates", "residency_premium", "catalog_as_of"):
        assert key in plan
    d = plan["deployments"][0]
    for key in ("workload", "provider", "service", "sku", "region", "country", "gpu", "gpus_per_instance",
                "instances", "replicas", "tensor_parallel", "pipeline_parallel", "weight_precision", "kv_cache_dtype",
                "price_kind", "cost_per_hour", "predicted", "vllm_command"):
        assert key in d
    assert set(d["predicted"]) >= {"ttft_ms", "tpot_ms", "replica_requests_per_second", "kv_cache_tokens"}
    words = d["vllm_command"].split()
    # the model's repository, or a quantized checkpoint of it (int4: hugging-quants/Meta-Llama-3.1-70B-...-AWQ-INT4)
    assert words[:2] == ["vllm", "serve"] and "Llama-3.1-70B-Instruct" in words[2]
    assert words[3] == "--tensor-parallel-size"
    c = plan["candidates"][0]
    for key in ("gpus_per_replica", "replica_requests_per_second", "instance_price_per_hour", "feasible", "reason"):
        assert key in c
    total = sum(d["cost_per_hour"] for d in plan["deployments"])
    assert total == pytest.approx(plan["total_cost_per_hour"], abs=1e-3)
    assert plan["total_cost_per_month"] == pytest.approx(plan["total_cost_per_hour"] * 730, abs=0.01)


def test_every_deployment_meets_its_slo_and_the_demand_is_covered(cn_plan_text):
    plan = json.loads(cn_plan_text)
    w = plan["workloads"][0]
    capacity = 0.0
    for d in plan["deployments"]:
        assert d["predicted"]["ttft_ms"] <= w["ttft_slo_ms"]
        assert d["predicted"]["tpot_ms"] <= w["tpot_slo_ms"] + 1e-6
        capacity += d["replicas"] * d["predicted"]["replica_requests_per_second"]
    assert capacity * plan["headroom"] >= w["demand"] - 1e-6
    assert sum(d["replicas"] for d in plan["deployments"]) >= w["min_replicas"]


def test_solving_twice_gives_identical_bytes(cn_plan_text):
    again = run("solve", CN, "--region", "cn", "--format", "json", "--candidates", "all")
    assert again.stdout == cn_plan_text


def test_table_output_golden():
    result = run("solve", CN, "--region", "cn")
    assert result.exit_code == 0
    check_golden("solve_cn_chat.txt", result.stdout)


def test_impossible_tpot_is_infeasible_with_the_binding_constraint(tmp_path):
    path = tmp_path / "w.yaml"
    path.write_text("""schema_version: 1
residency: us
workloads:
  - name: fast
    model: meta-llama/Llama-3.1-8B-Instruct
    requests_per_second: 1
    input_tokens: 500
    output_tokens: 100
    max_model_len: 4096
    slo: {tpot_ms: 1}
""")
    result = run("solve", str(path), "--format", "json")
    assert result.exit_code == 1
    plan = json.loads(result.stdout)
    assert plan["status"] == "infeasible" and plan["deployments"] == []
    text = "\n".join(plan["explanation"])
    assert "binding constraint: tpot" in text
    assert "nearest latency:" in text and "misses by" in text
    assert "infeasible:" in result.output  # also on stderr


def test_the_binding_constraint_is_the_last_check_candidates_reached(tmp_path):
    """A 70B model at TTFT 100 ms: most GPUs are too small (fit), but every candidate that fits misses the
    target, so TTFT binds (1,500 tokens take 194 ms to prefill on eight A100s); the most frequent reason said
    "fit", which no bigger GPU relieves."""
    path = tmp_path / "w.yaml"
    path.write_text("""schema_version: 1
residency: cn
currency: CNY
workloads:
  - name: chat
    model: meta-llama/Llama-3.1-70B-Instruct
    requests_per_second: 2
    input_tokens: 1500
    output_tokens: 300
    max_model_len: 8192
    slo: {ttft_ms: 100, tpot_ms: 80}
""")
    result = run("solve", str(path), "--format", "json")
    assert result.exit_code == 1
    explanation = json.loads(result.stdout)["explanation"]
    assert "fit: 1247" in explanation[0] and "ttft: 469" in explanation[0]
    assert explanation[1] == ("workload chat: binding constraint: ttft (stopped 469 of 2174 evaluated candidates: "
                              "every one that passed precision and fit)")


def test_policy_that_allows_nothing_says_so(tmp_path):
    path = tmp_path / "w.yaml"
    path.write_text("""schema_version: 1
residency: cn
providers: [digitalocean]
workloads:
  - name: chat
    model: meta-llama/Llama-3.1-8B-Instruct
    requests_per_second: 1
    input_tokens: 500
    output_tokens: 100
""")
    result = run("solve", str(path))
    assert result.exit_code == 1
    assert "binding constraint is policy" in result.output


def test_budget_gate_exits_3_with_the_overrun():
    result = run("solve", CN, "--region", "cn", "--max-monthly", "1000")
    assert result.exit_code == 3
    assert "over budget" in result.output and "exceeds 1,000.00 CNY/month" in result.output


def test_a_budget_that_rounds_to_nothing_is_an_overrun_without_a_share():
    # found by benchmarks/fuzz.py: --max-monthly 0.0039 is 0.00 in the plan's currency; the share divided by it
    result = run("solve", CN, "--region", "cn", "--max-monthly", "0.00390625")
    assert result.exit_code == 3, result.output
    [line] = [x for x in result.stderr.splitlines() if "over budget" in x]
    assert line.endswith("CNY") and "%" not in line and "internal error" not in result.stderr


def test_provider_and_currency_overrides():
    result = run("solve", CN, "--region", "cn", "--provider", "tencent", "--currency", "USD", "--format", "json")
    assert result.exit_code == 0, result.output
    plan = json.loads(result.stdout)
    assert plan["currency"] == "USD"
    assert {d["provider"] for d in plan["deployments"]} == {"tencent"}


USD_CNY = 6.6529  # the shipped rate (gpuopt/pricing/data/fx.csv)


@pytest.mark.parametrize("solver", ["cbc", "highs"])
@pytest.mark.parametrize(("example", "args", "usd_per_hour"), [
    # RunPod's B200 at 6.79 USD/h and H100 PCIe at 2.89 (three H100 NVLs at 3.19 each until 2026-12-04, when a
    # 12,000-token prompt's decode window behind the prompts queued after it lowered their capacity)
    pytest.param("rag-long-context.yaml", (), 6.79 + 2.89, id="rag"),
    # Alibaba's 4 x A100-40GB at 113.7 CNY/h and 1 x A100-80GB at 31.267 CNY/h (CBC ran its 4 GPUs as two TP=2
    # replicas in CNY, one TP=4 replica in USD)
    pytest.param("cn-chat-70b.yaml", ("--region", "cn"), (113.7 + 31.267) / USD_CNY, id="cn-chat"),
])
def test_the_plan_is_the_same_in_every_currency(solver, example, args, usd_per_hour, monkeypatch):
    """The program compares prices in USD whatever the currency shown (program.py's docstring): the same
    deployments in USD and CNY, each costing the USD plan at the shipped rate."""
    if solver == "highs":
        pytest.importorskip("highspy")
    monkeypatch.setenv("GPUOPT_SOLVER", solver)
    layouts = {}
    for currency, rate in (("USD", 1.0), ("CNY", USD_CNY)):
        result = run("solve", EXAMPLES / example, *args, "--currency", currency, "--top", "0", "--format", "json",
                     "--candidates", "none")
        assert result.exit_code == 0, result.output
        plan = json.loads(result.stdout)
        assert plan["currency"] == currency
        assert plan["total_cost_per_hour"] == pytest.approx(usd_per_hour * rate, abs=1e-4)
        layouts[currency] = sorted((d["provider"], d["service"], d["sku"], d["region"], d["price_kind"], d["instances"],
                                    d["replicas"], d["tensor_parallel"], d["pipeline_parallel"], d["weight_precision"],
                                    d["kv_cache_dtype"]) for d in plan["deployments"])
    assert layouts["USD"] == layouts["CNY"]


def test_solve_sensitivity(tmp_path):
    result = run("solve", CN, "--region", "cn", "--sensitivity", "--format", "json")
    assert result.exit_code == 0, result.output
    plan = json.loads(result.stdout)
    sens = plan["sensitivity"]
    assert sens["traffic_multiplier_limit"] >= 1 / plan["headroom"] - 1e-3  # headroom leaves at least 1/0.8
    assert sens["next_plan_cost"] >= plan["total_cost_per_hour"]
    costs = {p["tpot_factor"]: p["cost"] for p in sens["tpot_sweep"] if p["cost"] is not None}
    factors = sorted(costs)
    assert all(costs[a] >= costs[b] - 1e-6 for a, b in zip(factors, factors[1:], strict=False))


def test_alternatives_stopped_by_the_lower_bound_equal_the_exhaustive_search(monkeypatch):
    """Alternatives are solved cheapest bound first and the search stops early; with a zero bound every
    GPU type and provider is solved. Both must list the same plans."""
    import datetime as dt

    import gpuopt.planner.solve as solve_module
    from gpuopt.inputs.workload import load_workload
    from gpuopt.planner.solve import SolveOptions, plan_workloads
    from gpuopt.pricing.catalog import load_catalog

    wf = load_workload(EXAMPLES / "two-models.yaml")
    catalog = load_catalog(use_cache=False)
    opts = SolveOptions(top=3, today=dt.date(2026, 11, 29), premium=False)
    calls = []
    real_solve = solve_module.solve

    def counted(*args, **kwargs):
        calls.append(1)
        return real_solve(*args, **kwargs)

    monkeypatch.setattr(solve_module, "solve", counted)
    bounded, _ = plan_workloads(wf, catalog, opts)
    bounded_calls = len(calls)
    monkeypatch.setattr(solve_module, "lower_bound", lambda *args: 0.0)
    calls.clear()
    exhaustive, _ = plan_workloads(wf, catalog, opts)
    assert len(bounded.alternatives) == 5  # V100s (alibaba us-east-1) left with vLLM 0.20's sm75 floor
    assert bounded.alternatives == exhaustive.alternatives
    assert bounded_calls < len(calls)  # the bound saved programs


def test_each_provider_alternative_costs_what_solving_with_only_that_provider_costs():
    """Pruning must not empty a provider's subset: a cheaper twin elsewhere is no help to that provider."""
    import datetime as dt

    from gpuopt.inputs.workload import load_workload
    from gpuopt.planner.solve import SolveOptions, plan_workloads
    from gpuopt.pricing.catalog import load_catalog

    wf = load_workload(EXAMPLES / "two-models.yaml")
    catalog = load_catalog(use_cache=False)
    plan, _ = plan_workloads(wf, catalog, SolveOptions(top=3, today=dt.date(2026, 11, 29), premium=False))
    by_provider = [a for a in plan.alternatives if a.label.startswith("provider ")]
    assert by_provider
    for alt in by_provider:
        alone, _ = plan_workloads(wf, catalog, SolveOptions(providers=(alt.label.split()[1],), top=0,
                                                            today=dt.date(2026, 11, 29), premium=False))
        assert alone.total_cost_per_hour == alt.total_cost_per_hour


def test_json_flag_is_format_json_and_refuses_another_format():
    """`--json`, as fit and simulate take it, is `--format json`; beside another --format it is one error."""
    example = str(EXAMPLES / "two-models.yaml")
    assert run("solve", example, "--json").stdout == run("solve", example, "--format", "json").stdout
    both = run("solve", example, "--json", "--format", "csv")
    assert both.exit_code == 2 and both.stderr == "error: --json and --format csv: give one\n"
    table = run("solve", example, "--format", "table", "--json")  # the default, but said
    assert table.exit_code == 2 and table.stderr == "error: --json and --format table: give one\n"


def test_a_release_typed_with_leading_zeros_is_planned_and_reported_as_its_numbers():
    """"0.019" selects 0.19 and the plan says 0.19 -- deploy turns it into `vllm==0.19.0` and an image tag."""
    result = run("solve", str(EXAMPLES / "two-models.yaml"), "--vllm-version", "0.019", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["vllm_version"] == "0.19"


@pytest.mark.parametrize(("name", "warned"), [("my-model", True), ("org/evil$(touch x)", True),
                                              ("acme/llama-8b-ft", False), ("/data/ckpt/llama", False)])
def test_a_config_models_name_that_no_command_can_serve_is_said(tmp_path, name, warned):
    """QA: `model: {config, name}` serves NAME, which was never checked: shell text was quoted safely and
    planned, exit 0, for a command that cannot start. A name that is neither a repository id nor a path is
    said in the plan's warnings (not refused: schema 1 files with a display name keep planning)."""
    config = {"architectures": ["LlamaForCausalLM"], "hidden_size": 4096, "intermediate_size": 14336,
              "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8, "vocab_size": 128256,
              "max_position_embeddings": 131072, "tie_word_embeddings": False, "torch_dtype": "bfloat16"}
    (tmp_path / "config.json").write_text(json.dumps(config))
    (tmp_path / "w.yaml").write_text(
        "schema_version: 1\nresidency: us\ncurrency: USD\nproviders: [aws]\nworkloads:\n  - name: a\n"
        f"    model: {{config: config.json, name: {json.dumps(name)}}}\n    requests_per_second: 1\n"
        "    input_tokens: 500\n    output_tokens: 200\n    max_model_len: 4096\n"
        "    slo: {ttft_ms: 2000, tpot_ms: 60}\n")
    result = run("solve", tmp_path / "w.yaml", "--json")
    assert result.exit_code == 0, result.output
    warning = (f"workload a: model name {name!r} is neither a Hugging Face repository id (organisation/name) nor "
               "a local path, so its vllm serve command cannot start as printed; name the repository or directory "
               "that holds the weights")
    assert (warning in json.loads(result.stdout)["warnings"]) is warned


def test_a_workload_on_replicas_of_unequal_load_is_told_to_route_by_weight():
    """QA: an L40S replica planned at 0.38 requests/s beside an MI300X one at 5.62 needs 6 % of the traffic; a
    round-robin balancer gave it half (p90 TTFT 422 s). The plan says each deployment's share."""
    plan = json.loads(run("solve", EXAMPLES / "two-models.yaml", "--json").stdout)
    chat = [d for d in plan["deployments"] if d["workload"] == "chat"]
    loads = [d["at_planned_load"]["requests_per_second"] for d in chat]
    assert len(chat) == 2 and max(loads) > 1.1 * min(loads)
    total = sum(d["replicas"] * load for d, load in zip(chat, loads, strict=True))
    shares = ", ".join(f"{d['replicas'] * load / total:.0%} to {d['provider']} {d['sku']} ({d['replicas']} "
                       f"replica(s) at {load:,.3g} requests/s each)" for d, load in zip(chat, loads, strict=True))
    assert (f"workload chat: its replicas carry unequal loads; route its requests by weight -- {shares} -- not "
            "evenly (round-robin or a plain Kubernetes Service would give every replica the same share and overload "
            "the smaller ones)") in plan["warnings"]
    assert sum(float(part.split("%")[0].split()[-1]) for part in shares.split(", ")) == pytest.approx(100, abs=1)
    assert not any(w.startswith("workload code: its replicas") for w in plan["warnings"])  # one kind of replica


def test_a_one_length_concurrency_workload_says_how_to_benchmark_it():
    """QA: `vllm bench serve --max-concurrency 32` of one length measured a p99 TTFT of 3,301 ms for a plan of 279:
    its clients start together and stay in lockstep. The plan says how to benchmark the traffic it planned."""
    plan = json.loads(run("solve", EXAMPLES / "batch-summarisation.yaml", "--json").stdout)
    assert ("workload summarise: planned for 64 clients whose requests interleave; benchmark it with varied lengths "
            "(`vllm bench serve --max-concurrency 64 --random-range-ratio 0.2`, or a --request-rate ramp): with one "
            "length the clients run in lockstep and measure a TTFT many times the plan's") in plan["warnings"]
    rate = json.loads(run("solve", EXAMPLES / "two-models.yaml", "--json").stdout)
    assert not any("lockstep" in w for w in rate["warnings"])  # requests_per_second workloads: nothing to say


def test_a_one_bin_histogram_is_one_length(tmp_path):
    """Review: a histogram of one kind of request is one length, and its closed loop runs in lockstep as well."""
    from gpuopt.inputs.workload import load_workload
    from gpuopt.planner.solve import convoy_notes, one_length

    head = ("schema_version: 1\nworkloads:\n  - name: a\n    model: meta-llama/Llama-3.1-8B-Instruct\n"
            "    concurrency: 8\n    input_tokens: 500\n    output_tokens: 100\n")
    bins = {"one": "[{input_tokens: 500, output_tokens: 100, share: 1.0}]",
            "two": "[{input_tokens: 500, output_tokens: 100, share: 0.5}, {input_tokens: 500, output_tokens: 100, "
                   "share: 0.5}]",
            "mix": "[{input_tokens: 200, output_tokens: 100, share: 0.5}, {input_tokens: 800, output_tokens: 100, "
                   "share: 0.5}]"}
    found = {}
    for name, histogram in bins.items():
        path = tmp_path / f"{name}.yaml"
        path.write_text(head + f"    lengths: {{histogram: {histogram}}}\n")
        w = load_workload(path).workloads[0]
        found[name] = (one_length(w), len(convoy_notes([w])))
    assert found == {"one": (True, 1), "two": (True, 1), "mix": (False, 0)}


def test_a_reservation_the_plan_chooses_says_what_it_owes_over_its_term(tmp_path):
    """QA: a 3-year reservation read as "0.80 USD/h, 586.88 USD/month" in every format. The plan says the
    term and the obligation: aws g6e.xlarge reserved-3y at 0.80395 USD/h (the shipped catalog's row) x 36 x 730
    = 26,280 h = 21,127.81 USD."""
    path = tmp_path / "w.yaml"
    path.write_text("schema_version: 1\nresidency: us\ncurrency: USD\nproviders: [aws]\n"
                    "price_kinds: [reserved-1y, reserved-3y]\nworkloads:\n"
                    "  - {name: assistant, model: meta-llama/Llama-3.1-8B-Instruct, requests_per_second: 4,"
                    " input_tokens: 1000, output_tokens: 250, max_model_len: 8192,"
                    " slo: {ttft_ms: 1500, tpot_ms: 40}}\n")
    result = run("solve", str(path), "--format", "json")
    assert result.exit_code == 0, result.output
    plan = json.loads(result.stdout)
    (d,) = plan["deployments"]
    assert (d["sku"], d["price_kind"], d["cost_per_hour"]) == ("g6e.xlarge", "reserved-3y", 0.804)  # 4 decimals
    note = ("aws g6e.xlarge (us-east-1) reserved-3y: a 36-month commitment, owed whether used or not: 1 instance x "
            "0.80395 USD/h x 26,280 h = 21,127.81 USD over the term (gpuopt plan schedules commitments by period)")
    assert note in plan["warnings"]
    assert f"warning: {note}" in run("solve", str(path)).stderr


def test_deployments_sharing_a_machine_add_up_to_its_monthly_bill(tmp_path):
    """QA: three workloads on one 3-GPU machine at 1.36986301/h were each 333.33 a month, 999.99 in all where the
    machine bills 1,000.00 (1.36986301 x 730). The shares are apportioned to the cent: 333.34 + 333.33 + 333.33."""
    overlay = tmp_path / "o.csv"
    overlay.write_text("provider,service,sku,region,gpu,gpu_count,price_per_hour,currency,price_kind,source,as_of\n"
                       "aws,ec2,trio,us-east-1,L40S-48GB,3,1.36986301,USD,on-demand,quote,2026-11-28\n")
    rows = "".join(f"  - {{name: {n}, model: {m}, requests_per_second: 1, input_tokens: 500, output_tokens: 200, "
                   "max_model_len: 4096, slo: {ttft_ms: 3000, tpot_ms: 80}}\n"
                   for n, m in (("a", "meta-llama/Llama-3.1-8B-Instruct"), ("b", "Qwen/Qwen2.5-7B-Instruct"),
                                ("c", "Qwen/Qwen2.5-Coder-7B-Instruct")))
    path = tmp_path / "w.yaml"
    path.write_text(f"schema_version: 1\nresidency: us\ncurrency: USD\nproviders: [aws]\nworkloads:\n{rows}")
    result = run("solve", str(path), "--catalog", str(overlay), "--format", "json")
    assert result.exit_code == 0, result.output
    plan = json.loads(result.stdout)
    assert [(d["sku"], d["cost_per_month"]) for d in plan["deployments"]] == [
        ("trio", 333.34), ("trio", 333.33), ("trio", 333.33)]
    assert plan["total_cost_per_month"] == 1000.0


@pytest.mark.parametrize("amounts", [[333.333333] * 3, [0.1, 0.2, 0.3004, 7.77777], [1e-9, 2.5, 2.5], [5.0]])
def test_split_exactly_keeps_the_total_and_each_share_within_a_unit(amounts):
    from gpuopt.planner.plan import split_exactly
    parts = split_exactly(amounts, 2)
    assert round(sum(parts) * 100) == round(sum(amounts) * 100)
    assert all(abs(p - a) < 0.01 + 1e-9 for p, a in zip(parts, amounts, strict=True))


def test_the_fx_rate_a_plan_converts_with_is_held_to_max_price_age(tmp_path):
    """QA: a CNY plan on a USD quote from the day before passed --max-price-age 10, converted at a rate 35 days
    old. The rate ages with the prices it converts (conftest: today 2026-11-29; the shipped ECB rate 2026-10-30,
    30 days old); a rate given with --fx-rate has no date and is not aged."""
    overlay = tmp_path / "o.csv"
    overlay.write_text("provider,service,sku,region,gpu,gpu_count,price_per_hour,currency,price_kind,source,as_of\n"
                       "aws,ec2,cheap,us-east-1,L40S-48GB,1,0.01,USD,on-demand,quote,2026-11-28\n")
    path = tmp_path / "w.yaml"
    path.write_text("schema_version: 1\nresidency: us\ncurrency: CNY\nproviders: [aws]\nworkloads:\n"
                    "  - {name: a, model: meta-llama/Llama-3.1-8B-Instruct, requests_per_second: 1, input_tokens: 500,"
                    " output_tokens: 200, max_model_len: 4096}\n")
    result = run("solve", str(path), "--catalog", str(overlay), "--max-price-age", "20")
    assert result.exit_code == 2
    assert ("error: FX rate 1 USD = 6.6529 CNY, which converts the chosen USD prices to CNY, is 30 days old (as_of "
            "2026-10-30), older than --max-price-age 20; `gpuopt catalog refresh fx` or --fx-rate gives a current "
            "one") in result.stderr.splitlines()
    assert run("solve", str(path), "--catalog", str(overlay), "--max-price-age", "40").exit_code == 0
    assert run("solve", str(path), "--catalog", str(overlay), "--max-price-age", "20", "--fx-rate",
               "USD:CNY=7.1").exit_code == 0


def test_a_spot_offering_the_plan_chooses_is_said_to_be_reclaimable(tmp_path):
    """QA: listing spot in price_kinds was enough for an interactive workload to be planned on spot silently (a
    capacity file takes spot only with `interruptible: true`)."""
    path = tmp_path / "w.yaml"
    path.write_text("schema_version: 1\nresidency: us\ncurrency: USD\nproviders: [aws]\nprice_kinds: [spot]\n"
                    "workloads:\n  - {name: a, model: meta-llama/Llama-3.1-8B-Instruct, requests_per_second: 1,"
                    " input_tokens: 500, output_tokens: 200, max_model_len: 4096}\n")
    result = run("solve", str(path), "--format", "json")
    assert result.exit_code == 0, result.output
    plan = json.loads(result.stdout)
    d = plan["deployments"][0]
    assert d["price_kind"] == "spot"
    assert (f"{d['provider']} {d['sku']} ({d['region']}) spot: the provider can reclaim it at short notice; a service "
            "on it needs capacity to fail over to (or list spot only for interruptible work)") in plan["warnings"]


def test_a_deployment_whose_batch_settles_slowly_says_how_to_benchmark_it(tmp_path):
    """At its planned load a replica holding hundreds of long-output requests takes ~1,000 requests to fill and
    settle, so `vllm bench serve`'s default 1,000 prompts from an idle server read its TPOT 10-15 % light (the
    simulator agrees: benchmarks/bench_warmup.py). The plan says how many prompts a run needs; deployments whose
    default run is within 5 % say nothing."""
    from gpuopt.physics.bench_run import BenchFluid, LengthClass

    (tmp_path / "w.yaml").write_text(
        "schema_version: 1\nproviders: [aws]\nworkloads:\n  - name: longout\n"
        "    model: meta-llama/Llama-3.1-8B-Instruct\n    requests_per_second: 40\n"
        "    input_tokens: 200\n    output_tokens: 800\n    max_model_len: 8192\n"
        "    slo: {ttft_ms: 2000, tpot_ms: 40}\n")
    plan = json.loads(run("solve", tmp_path / "w.yaml", "--json").stdout)
    notes = [w for w in plan["warnings"] if "`vllm bench serve` starts from an idle server" in w]
    rates = {(d["provider"], d["sku"]): d["predicted"]["planned_requests_per_second_per_replica"]
             for d in plan["deployments"]}
    assert len(rates) == 2 and len(notes) == 1  # the larger replica's batch; the smaller ones' runs are within 5 %
    busy = max(rates, key=lambda k: rates[k])
    rate = rates[busy]
    note = notes[0]
    assert note.startswith(f"workload longout on {busy[0]} {busy[1]} (")
    prompts = int(note.split("benchmark one replica with at least ")[1].split(" prompts")[0].replace(",", ""))
    skip = int(note.split("takes about ")[1].split(" requests")[0].replace(",", ""))
    light = int(note.split("read a mean TPOT about ")[1].split("%")[0])
    assert f"`--request-rate {rate:.3g} --num-prompts {prompts}`" in note
    assert 5 <= light <= 20 and 300 < skip < prompts / 4
    # the recommended run is within 2 % of the steady state, the default one `light` % below it
    from gpuopt.hardware import get_gpu
    from gpuopt.physics import latency
    from gpuopt.physics.architecture import get_model
    from gpuopt.physics.memory import estimate
    from gpuopt.physics.serving_config import ServingConfig

    d = next(d for d in plan["deployments"] if (d["provider"], d["sku"]) == busy)
    arch, gpu = get_model(d["model"]), get_gpu(d["gpu"])
    mem = estimate(arch, gpu, ServingConfig(precision=d["weight_precision"], kv_cache_dtype=d["kv_cache_dtype"],
                                            max_model_len=8192, tensor_parallel=d["tensor_parallel"]))
    fluid = BenchFluid(latency.build_replica(arch, gpu, mem, None), [LengthClass(200, 800, 1.0)], rate)
    default, enough = fluid.run(1000), fluid.run(prompts)
    assert default is not None and enough is not None
    assert round((1 - default.ratio) * 100) == light and enough.ratio >= 0.98
