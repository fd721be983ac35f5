import datetime as dt
import hashlib
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from gpuopt.cli.main import cli
from gpuopt.errors import InputError, UnknownNameError
from gpuopt.pricing.catalog import load_catalog, shipped_text
from gpuopt.pricing.columns import PROVIDERS
from gpuopt.pricing.regions import Residency
from gpuopt.pricing.staleness import staleness

FIXTURES = Path(__file__).parent / "fixtures"


def run(*args: str):
    return CliRunner().invoke(cli, list(args))


@pytest.fixture(autouse=True)
def empty_cache(tmp_path, monkeypatch):
    """Tests never read or write the real user cache."""
    monkeypatch.setenv("GPUOPT_CACHE_DIR", str(tmp_path / "cache"))


def test_shipped_catalog_validates_and_covers_every_provider():
    result = run("catalog", "validate", "gpuopt/pricing/data/catalog.csv")
    assert result.exit_code == 0, result.output
    data = json.loads(run("catalog", "list", "--format", "json").stdout)
    assert {r["provider"] for r in data} == set(PROVIDERS)
    assert sum(1 for r in data if r["price_per_hour"] is not None) >= 300
    assert all(r["source"] and r["as_of"] for r in data)


def test_region_cn_lists_only_mainland_rows_mostly_in_cny():
    data = json.loads(run("catalog", "list", "--region", "cn", "--format", "json").stdout)
    assert data
    assert {r["country"] for r in data} == {"CN"}
    assert {r["provider"] for r in data} <= {"alibaba", "tencent", "aws"}
    assert {"alibaba", "tencent"} <= {r["provider"] for r in data}
    assert not any(r["region"] in ("cn-hongkong", "ap-hongkong", "ap-east-1") for r in data)
    priced = [r for r in data if r["price_per_hour"] is not None]
    assert sum(1 for r in priced if r["currency"] == "CNY") > len(priced) / 2


def test_listing_is_stable_and_prices_are_plain_floats():
    first = run("catalog", "list", "--region", "us", "--format", "json", "--currency", "CNY").stdout
    second = run("catalog", "list", "--region", "us", "--format", "json", "--currency", "CNY").stdout
    assert first == second
    data = json.loads(first)
    keys = [(r["provider"], r["service"], r["sku"], r["region"], r["price_kind"]) for r in data]
    assert keys == sorted(keys)
    assert all(isinstance(r["price_per_hour"], float) for r in data if r["price_per_hour"] is not None)
    csv_out = run("catalog", "list", "--region", "us-east-1", "--gpu", "h100-sxm-80gb", "--format", "csv").stdout
    header = csv_out.splitlines()[0].split(",")
    assert "country" in header and "jurisdiction" in header and "price_per_hour" in header


def test_currency_conversion_uses_the_dated_rate():
    data = json.loads(run("catalog", "show", "ecs.gn7i-c8g1.2xlarge", "--currency", "USD").stdout)
    hz = next(r for r in data if r["region"] == "cn-hangzhou" and r["price_kind"] == "on-demand")
    assert hz["price_per_hour"] == 9.5326 and hz["currency"] == "CNY"
    assert hz["converted_price_per_hour"] == pytest.approx(9.5326 / 6.6529, rel=1e-6)
    override = json.loads(run("catalog", "show", "ecs.gn7i-c8g1.2xlarge", "--currency", "USD",
                              "--fx-rate", "USD:CNY=7.0").stdout)
    hz2 = next(r for r in override if r["region"] == "cn-hangzhou" and r["price_kind"] == "on-demand")
    assert hz2["converted_price_per_hour"] == pytest.approx(9.5326 / 7.0, rel=1e-6)


@pytest.mark.parametrize("selector, allowed, denied", [
    ("cn", ["cn-hangzhou", "ap-guangzhou", "cn-north-1", "cn-mainland"], ["cn-hongkong", "ap-hongkong", "us-east-1"]),
    ("eu", ["eu-central-1", "eu-north-1"], ["eu-west-2", "us-east-1"]),
    ("us", ["us-east-1", "na-siliconvalley", "nyc2"], ["tor1", "global"]),
    ("apac", ["ap-northeast-1", "cn-hangzhou"], ["eu-central-1"]),
    ("global", ["global", "unknown", "us-east-1"], []),
    ("us-east-1,cn-hangzhou", ["us-east-1", "cn-hangzhou"], ["us-west-2"]),
])
def test_residency_selectors(selector, allowed, denied):
    residency = Residency(selector)
    assert all(residency.allows(r) for r in allowed)
    assert not any(residency.allows(r) for r in denied)


@pytest.mark.parametrize("selector", ["us,,eu", "us,", ",cn"])
def test_a_selector_with_an_empty_element_is_refused(selector):
    """QA: 'us,,eu' was read as 'us,eu' (an element left out, or a typo, is no selector)."""
    with pytest.raises(InputError, match=f"region selector '{selector}': an empty element"):
        Residency(selector)


def test_unknown_selector_suggests_close_matches():
    with pytest.raises(UnknownNameError) as info:
        Residency("cn-hangzou")
    assert "cn-hangzhou" in info.value.suggestions
    result = run("catalog", "list", "--region", "cn-hangzou")
    assert result.exit_code == 2 and "did you mean cn-hangzhou" in result.output


def _overlay(tmp_path, text: str) -> Path:
    path = tmp_path / "overlay.csv"
    path.write_text(text)
    return path


def test_overlay_overrides_a_price_and_adds_an_offering(tmp_path):
    path = _overlay(tmp_path, "provider,sku,region,price_kind,price_per_hour,currency\n"
                              "aws,p5.48xlarge,us-east-1,on-demand,40.0,USD\n"
                              "alibaba,ecs.gn7i-c8g1.2xlarge,cn-hangzhou,spot,3.1,CNY\n")
    cat = load_catalog(overlays=[path])
    p5 = [o for o in cat.offerings if o.key == ("aws", "ec2", "p5.48xlarge", "us-east-1", "on-demand")][0]
    assert p5.price_per_hour == 40.0 and p5.origin == "overlay" and "overlay" in p5.source
    added = [o for o in cat.offerings if o.key == ("alibaba", "ecs", "ecs.gn7i-c8g1.2xlarge", "cn-hangzhou", "spot")]
    assert added and added[0].gpu == "A10-24GB" and added[0].gpu_count == 1
    # undated, both are of unknown date: the replacing quote no longer takes the replaced row's (QA: it passed
    # --max-price-age with the catalog's 2026 date), and the added one has none to take
    assert (p5.as_of, added[0].as_of) == ("", "")
    dated = _overlay(tmp_path, "provider,sku,region,price_kind,price_per_hour,currency,as_of\n"
                               "aws,p5.48xlarge,us-east-1,on-demand,40.0,USD,2026-11-02\n")
    assert [o.as_of for o in load_catalog(overlays=[dated]).offerings
            if o.key == ("aws", "ec2", "p5.48xlarge", "us-east-1", "on-demand")] == ["2026-11-02"]


def test_discounts_apply_to_list_prices():
    base = load_catalog()
    disc = load_catalog(discounts={"aws": 0.25})
    key = ("aws", "ec2", "p5.48xlarge", "us-east-1", "on-demand")
    price = {o.key: o.price_per_hour for o in base.offerings}[key]
    assert {o.key: o.price_per_hour for o in disc.offerings}[key] == pytest.approx(price * 0.75)
    with pytest.raises(InputError):
        load_catalog(discounts={"aws": 1.5})


def test_malformed_overlay_names_file_row_and_column_and_leaves_shipped_untouched(tmp_path):
    before = hashlib.sha256(shipped_text().encode()).hexdigest()
    path = _overlay(tmp_path, "provider,sku,region,price_kind,price_per_hour,currency,gpu\n"
                              "aws,p5.48xlarge,us-east-1,on-demand,-3,USD,\n"
                              "oracle,bm.gpu,us-east-1,on-demand,3,USD,\n"
                              "aws,p5.48xlarge,us-east-1,spot,3,EUR,\n"
                              "aws,x.large,us-east-1,on-demand,3,USD,H900\n")
    result = run("catalog", "list", "--catalog", str(path))
    assert result.exit_code == 2
    errors = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert any("row 2: column 'price_per_hour': expected a finite positive number (got '-3')" in e for e in errors)
    assert any("row 3: column 'provider': unknown provider 'oracle'" in e for e in errors)
    assert any("row 4: column 'currency': unknown currency 'EUR'" in e for e in errors)
    assert any("row 5: column 'gpu': unknown GPU 'H900'" in e for e in errors)
    assert all(str(path) in e for e in errors)
    assert hashlib.sha256(shipped_text().encode()).hexdigest() == before


def test_validate_reports_duplicates_by_row(tmp_path):
    header = shipped_text().splitlines()[0]
    row = shipped_text().splitlines()[1]
    path = tmp_path / "dup.csv"
    path.write_text("\n".join([header, row, row]) + "\n")
    result = run("catalog", "validate", str(path))
    assert result.exit_code == 2
    assert "row 3: duplicate of row 2" in result.output


def test_staleness_warns_after_120_days_and_max_age_makes_it_an_error():
    cat = load_catalog()
    p5 = [o for o in cat.offerings if o.key == ("aws", "ec2", "p5.48xlarge", "us-east-1", "on-demand")][0]
    assert p5.as_of == "2026-07-20"
    warnings, errors = staleness([p5], dt.date(2026, 8, 1), None)
    assert warnings == [] and errors == []
    warnings, errors = staleness([p5], dt.date(2026, 11, 29), None)
    assert len(warnings) == 1 and "132 days old" in warnings[0] and errors == []
    warnings, errors = staleness([p5], dt.date(2026, 11, 29), 30)
    assert len(errors) == 1 and "--max-price-age 30" in errors[0]
    # a price dated after today is no quote: a warning, and an error under --max-price-age (QA: 2099 passed 30)
    warnings, errors = staleness([p5], dt.date(2026, 7, 1), None)
    assert warnings == ["price of aws p5.48xlarge us-east-1 on-demand is dated 2026-07-20, after today (2026-07-01): "
                        "a price is dated when it was quoted"] and errors == []
    warnings, errors = staleness([p5], dt.date(2026, 7, 1), 30)
    assert warnings == [] and errors == [
        "price of aws p5.48xlarge us-east-1 on-demand is dated 2026-07-20, after today (2026-07-01): a price is dated "
        "when it was quoted; --max-price-age 30 cannot vouch for it"]


# ---- catalog truth (issue 15 item 4) ------------------------------------------------------------------

SXM_OR_OAM = {"A100-SXM-40GB", "A100-SXM-80GB", "H100-SXM-80GB", "H200-141GB", "H20-96GB", "H800-80GB", "A800-80GB",
              "B200-180GB", "B300-288GB", "MI300X-192GB", "MI325X-256GB"}


def test_every_sxm_or_oam_offering_has_an_interconnect_and_says_why():
    cat = load_catalog(use_cache=False)
    boards = [o for o in cat.offerings if o.gpu in SXM_OR_OAM]
    assert boards and all(o.interconnect == "nvlink" for o in boards)
    assert all(o.interconnect_basis == "source" or o.interconnect_basis.startswith(("inferred:", "source:"))
               for o in boards)
    # the cases the issue names: RunPod 8x H100 SXM, Modal H200 x8, Alibaba gn7e (A100 SXM), DigitalOcean MI300X x8
    by_sku = {(o.provider, o.sku): o for o in boards}
    for key in [("runpod", "8x H100 SXM"), ("modal", "H200 x8"), ("alibaba", "ecs.gn7e-c16g1.32xlarge"),
                ("digitalocean", "gpu-mi300x8-1536gb")]:
        assert key in by_sku, key
        assert by_sku[key].interconnect_basis.startswith("inferred:")
    assert "Infinity Fabric" in by_sku[("digitalocean", "gpu-mi300x8-1536gb")].interconnect_basis


def test_an_undated_twin_never_undercuts_a_dated_one():
    """RunPod's undated SkyPilot A100 PCIe price (1.39) went to history; the dated 1.59 (2026-09-25) is the price."""
    cat = load_catalog(use_cache=False)
    secure = [o for o in cat.offerings if o.provider == "runpod" and o.service == "pod-secure"
              and o.gpu == "A100-PCIE-80GB" and o.gpu_count == 1 and o.price_kind == "on-demand"]
    assert [(o.sku, o.price_per_hour, o.as_of) for o in secure] == [("1x A100 PCIe", 1.59, "2026-09-25")]
    groups: dict[tuple[object, ...], list[object]] = {}
    for o in cat.offerings:
        if o.price_per_hour is not None and o.gpu:
            groups.setdefault((o.provider, o.service, o.region, o.price_kind, o.gpu, o.gpu_count, o.vcpus,
                               o.ram_gib), []).append(o)
    for twins in groups.values():
        dated = [o for o in twins if o.as_of_date is not None]  # type: ignore[attr-defined]
        assert not dated or len(dated) == len(twins), twins


def test_cache_rows_older_or_undated_do_not_replace_newer_shipped_prices(tmp_path, monkeypatch):
    from gpuopt.pricing.columns import CATALOG_COLUMNS
    from gpuopt.pricing.refresh import write_cache

    monkeypatch.setenv("GPUOPT_CACHE_DIR", str(tmp_path))
    base = {c: "" for c in CATALOG_COLUMNS}
    p5 = dict(base, provider="aws", service="ec2", sku="p5.48xlarge", region="us-east-1", gpu="H100-SXM-80GB",
              gpu_count="8", price_per_hour="99", currency="USD", price_kind="on-demand", source="s",
              as_of="2024-01-01")
    g5 = dict(p5, sku="g5.xlarge", gpu="A10G-24GB", gpu_count="1", price_per_hour="0.5", as_of="2027-01-01")
    write_cache("aws", [p5, g5], tmp_path)
    cat = load_catalog()
    prices = {o.key: (o.price_per_hour, o.origin) for o in cat.offerings}
    assert prices[("aws", "ec2", "p5.48xlarge", "us-east-1", "on-demand")] == (55.04, "shipped")
    assert prices[("aws", "ec2", "g5.xlarge", "us-east-1", "on-demand")] == (0.5, "cache")
    assert any("1 older or undated ones do not" in n for n in cat.notes)


def test_global_rows_with_data_centre_countries_join_us_eu_apac():
    us, eu, apac, cn = Residency("us"), Residency("eu"), Residency("apac"), Residency("cn")
    runpod = "US;CA;NL;SE;NO;IS;CZ;DK;FR;RO;IN;JP;SG;AU"
    assert us.allows("global", runpod) and eu.allows("global", runpod) and apac.allows("global", runpod)
    assert not cn.allows("global", runpod)
    assert not eu.allows("global", "NO;IS")  # EEA, not EU
    assert not Residency("us-east-1").allows("global", runpod)  # an exact region id never matches a global row
    assert not us.allows("global") and not us.allows("eu-central-1", "US")
    data = json.loads(run("catalog", "list", "--region", "eu", "--provider", "runpod", "--format", "json").stdout)
    assert data and all(r["region"] == "global" for r in data)
    assert not json.loads(run("catalog", "list", "--region", "eu", "--provider", "modal", "--format", "json").stdout)


def test_china_rows_for_h20_l20_and_pai_eas_are_listed_priced_or_marked_unpriced():
    cat = load_catalog(use_cache=False)
    cn = cat.select(Residency("cn"))
    h20 = {o.sku: o.price_per_hour for o in cn if o.gpu == "H20-96GB"}
    assert h20["ecs.gn8v.4xlarge"] == 36.39 and h20["ecs.gn8v-2x.8xlarge"] == 71.58
    assert h20["ecs.gn8v-8x.48xlarge"] is None
    l20 = {(o.service, o.sku): o for o in cn if o.gpu == "L20-48GB"}
    assert l20[("pai-dsw", "ecs.gn8is.4xlarge")].price_per_hour == 15.84
    assert l20[("cvm", "PNV5b.8XLARGE96")].unusable_reason == "no known price (spec-only row)"
    eas = [o for o in cn if o.service == "pai-eas"]
    assert len(eas) == 5 and all(o.price_per_hour is None and "overlay it" in o.notes for o in eas)


@pytest.mark.parametrize("price", ["nan", "1e400", "inf", "-inf", "NaN", "0", "abc"])
def test_non_finite_or_non_positive_overlay_prices_are_exit_2_naming_the_row(tmp_path, price):
    path = _overlay(tmp_path, "provider,sku,region,price_kind,price_per_hour,currency\n"
                              f"aws,p5.48xlarge,us-east-1,on-demand,{price},USD\n")
    for args in (["catalog", "validate", "--overlay", str(path)], ["catalog", "list", "--catalog", str(path)]):
        result = run(*args)
        assert result.exit_code == 2, result.output
        errors = [line for line in result.output.splitlines() if line.startswith("error:")]
        assert errors == [f"error: {path}: row 2: column 'price_per_hour': expected a finite positive number "
                          f"(got '{price}')"]


@pytest.mark.parametrize("rate", ["nan", "inf", "-1", "0", "1e400", "7_1", "٧"])
def test_non_finite_fx_override_is_exit_2(rate):
    result = run("catalog", "list", "--provider", "aws", "--fx-rate", f"USD:CNY={rate}")
    assert result.exit_code == 2
    assert result.output.strip().splitlines()[-1] == (
        f"error: --fx-rate 'USD:CNY={rate}': the rate must be a finite positive number (got {rate})")


@pytest.mark.parametrize("discount", ["aws=.0_5", "aws=٠.٥", "aws=nan"])
def test_a_discount_is_an_ascii_decimal(discount):
    """Review: `--discount runpod=.0_5` and Arabic-Indic digits were read by float()."""
    result = run("catalog", "list", "--provider", "aws", "--discount", discount)
    assert result.exit_code == 2 and f"--discount '{discount}': expected PROVIDER=FRACTION" in result.output


def test_an_overlay_price_dated_after_today_is_refused(tmp_path):
    """QA: an overlay dated 2099 passed `catalog validate` and `solve` ("oldest chosen price 2099-01-01"), where
    `catalog refresh --as-of` refuses a date after today. conftest pins today to 2026-11-29."""
    path = _overlay(tmp_path, "provider,sku,region,price_kind,price_per_hour,currency,as_of\n"
                              "aws,p5.4xlarge,us-east-1,on-demand,5.0,USD,2026-11-30\n"
                              "aws,p5.4xlarge,us-east-2,on-demand,5.0,USD,2026-11-29\n")
    result = run("catalog", "validate", "--overlay", str(path))
    assert result.exit_code == 2 and result.stderr == (
        f"error: {path}: row 2: column 'as_of': 2026-11-30 is after today (2026-11-29); a price is dated when it "
        "was quoted\n")


def test_a_discount_given_twice_for_one_provider_is_refused():
    """QA: `--discount aws=0.1 --discount aws=0.2` applied 20 % silently, where two rates for one FX pair are
    refused."""
    result = run("catalog", "list", "--provider", "aws", "--discount", "aws=0.1", "--discount", " aws=0.2")
    assert result.exit_code == 2 and result.stderr == "error: --discount aws: given twice (0.1 and 0.2); give one\n"


def test_an_overlay_count_is_an_ascii_whole_number(tmp_path):
    """Review: `gpu_count=٨` and `vcpus=1_92` were valid (8 GPUs listed), where prices were already refused so."""
    path = _overlay(tmp_path, "provider,sku,region,price_kind,price_per_hour,currency,gpu,gpu_count,vcpus\n"
                              "aws,newbox,us-east-1,on-demand,1.0,USD,H100-SXM-80GB,٨,1_92\n")
    result = run("catalog", "validate", "--overlay", str(path))
    assert result.exit_code == 2
    assert result.output.splitlines() == [
        f"error: {path}: row 2: column 'gpu_count': expected a positive whole number ('٨')",
        f"error: {path}: row 2: column 'vcpus': expected a positive whole number ('1_92')"]
    whole = _overlay(tmp_path, "provider,sku,region,price_kind,price_per_hour,currency,gpu,gpu_count,vcpus\n"
                               "aws,newbox,us-east-1,on-demand,1.0,USD,H100-SXM-80GB,8.0,192\n")
    assert run("catalog", "validate", "--overlay", str(whole)).exit_code == 0  # 8.0 is a whole number, as before


@pytest.mark.parametrize(("second", "contradicts"), [("CNY:USD=0.15", True), ("USD:CNY=6.9", True),
                                                    ("usd:cny=7", False)])
def test_two_rates_for_one_pair_are_refused(second, contradicts):
    """QA: `--fx-rate USD:CNY=7 --fx-rate CNY:USD=0.15` priced the plan at 7, recorded both, and `diff` converted
    at 0.15 (a -353.31 USD/month change between identical plans). The same rate repeated is one rate."""
    result = run("catalog", "list", "--provider", "aws", "--format", "csv", "--currency", "CNY",
                 "--fx-rate", "USD:CNY=7", "--fx-rate", second)
    if contradicts:
        assert result.exit_code == 2 and result.stdout == ""
        assert result.stderr == (f"error: --fx-rate 'USD:CNY=7' and --fx-rate '{second}': two rates for one pair of "
                                 "currencies; give one\n")
    else:
        assert result.exit_code == 0


def test_truncated_overlay_line_is_named(tmp_path):
    path = _overlay(tmp_path, "provider,sku,region,price_kind,price_per_hour,currency\naws,p5.48xlarge,us-east-1\n")
    result = run("catalog", "validate", "--overlay", str(path))
    assert result.exit_code == 2 and f"error: {path}: row 2: too few fields" in result.output


def test_validate_overlay_says_what_solve_would_refuse(tmp_path):
    """QA: a column named twice was "valid" (the CSV reader kept the last region, silently), and so was a new SKU
    without gpu and gpu_count, which `solve --catalog` then refused."""
    twice = _overlay(tmp_path, "provider,sku,region,price_kind,price_per_hour,currency,region\n"
                               "aws,g6.xlarge,us-east-1,on-demand,0.5,USD,eu-west-1\n")
    result = run("catalog", "validate", "--overlay", str(twice))
    assert result.exit_code == 2 and result.output == f"error: {twice}: column 'region' appears 2 times in the header\n"
    new = tmp_path / "new.csv"
    new.write_text("provider,sku,region,price_kind,price_per_hour,currency,gpu\n"
                   "aws,newbox,us-east-1,on-demand,1.0,USD,H100-SXM-80GB\n", encoding="utf-8")
    result = run("catalog", "validate", "--overlay", str(new))
    assert result.exit_code == 2 and result.output == (
        f"error: {new}: row 2: no catalog offering aws newbox: give columns gpu and gpu_count to add it\n")


# ---- staleness (issue 15 item 5) ---------------------------------------------------------------------------


def test_oldest_chosen_price_and_stale_commitments():
    from dataclasses import replace

    from gpuopt.pricing.staleness import oldest_price_date, stale_commitments

    cat = load_catalog(use_cache=False)
    by_key = {o.key: o for o in cat.offerings}
    p5 = by_key[("aws", "ec2", "p5.48xlarge", "us-east-1", "on-demand")]  # 2026-07-20
    gn10x = by_key[("tencent", "cvm", "GN10X.2XLARGE40", "cn-mainland", "subscription-monthly")]  # 2021-05-25
    assert oldest_price_date([p5, gn10x]) == "2021-05-25"
    assert oldest_price_date([p5]) == "2026-07-20"
    assert oldest_price_date([p5, replace(p5, as_of="unknown (catalog commit x)")]) == "unknown"
    assert oldest_price_date([]) == ""
    today = dt.date(2026, 11, 30)
    flagged = stale_commitments([gn10x], today)
    # 2021-05-25 -> 2026-11-30 is 2015 days
    assert [w for _, w in flagged] == ["commitment tencent GN10X.2XLARGE40 cn-mainland subscription-monthly is priced "
                                       "from a source 2015 days old (as_of 2021-05-25): re-quote it before committing"]
    young = replace(gn10x, as_of="2026-01-01")
    assert stale_commitments([young], today) == []  # 333 days: under a year
    # an overlay quote is dated like any price: a 2021 quote is as stale as a 2021 catalog row
    assert [w for _, w in stale_commitments([replace(gn10x, origin="overlay")], today)] == [
        "commitment tencent GN10X.2XLARGE40 cn-mainland subscription-monthly (overlay) is priced from a source 2015 "
        "days old (as_of 2021-05-25): re-quote it before committing"]
    assert stale_commitments([replace(young, origin="overlay")], today) == []


def test_overlay_prices_are_held_to_the_staleness_rules_and_the_max_price_age_gate():
    from dataclasses import replace

    from gpuopt.pricing.staleness import staleness

    p5 = next(o for o in load_catalog(use_cache=False).offerings
              if o.key == ("aws", "ec2", "p5.48xlarge", "us-east-1", "on-demand"))
    today = dt.date(2026, 12, 3)
    old = replace(p5, origin="overlay", as_of="2019-01-01")  # 2019-01-01 -> 2026-12-03: 2893 days
    label = "aws p5.48xlarge us-east-1 on-demand (overlay)"
    assert staleness([old], today, None) == (
        [f"price of {label} is 2893 days old (as_of 2019-01-01); refresh or overlay it"], [])
    assert staleness([old], today, 30) == (
        [], [f"price of {label} is 2893 days old (as_of 2019-01-01), older than --max-price-age 30"])
    undated = replace(p5, origin="overlay", as_of="")
    assert staleness([undated], today, None) == (
        [f"price of {label} has no date (as_of ''); give the quote's date in the overlay's as_of column"], [])
    assert staleness([undated], today, 30)[1] == [
        f"price of {label} is of unknown date (as_of ?), older than --max-price-age 30"]
    assert staleness([replace(p5, origin="overlay", as_of="2026-11-20")], today, 30) == ([], [])


def test_capacity_plan_flags_old_commitments_states_dates_and_honours_max_price_age(monkeypatch):
    monkeypatch.setenv("GPUOPT_TODAY", "2026-11-30")
    result = run("plan", "examples/capacity-cn.yaml", "--format", "json")
    assert result.exit_code == 0, result.output
    plan = json.loads(result.stdout)
    assert plan["oldest_price_as_of"] == "2021-05-25"
    assert plan["fx_as_of"] == "2026-10-30" and "6.6529" in plan["fx"]
    assert any(w.startswith("commitment tencent") and "re-quote" in w for w in plan["warnings"])
    strict = run("plan", "examples/capacity-cn.yaml", "--max-price-age", "365")
    assert strict.exit_code == 2
    errors = [line for line in strict.output.splitlines() if line.startswith("error:")]
    assert errors and all(line.startswith("error: price of ") and "older than --max-price-age 365" in line
                          for line in errors)
    assert any("tencent" in line and "2021-05-25" in line for line in errors)


def test_a_damaged_cache_is_ignored_with_one_note_and_never_reaches_the_solver(tmp_path):
    cache = tmp_path / "cache"
    cache.mkdir()
    shipped = shipped_text().splitlines()
    row = next(line for line in shipped if line.startswith("aws,ec2,p5.48xlarge,us-east-1,") and ",on-demand," in line)
    (cache / "catalog-aws.csv").write_text(shipped[0] + "\n" + row.replace(",55.04,", ",nan,") + "\n")
    cat = load_catalog()
    p5 = next(o for o in cat.offerings if o.key == ("aws", "ec2", "p5.48xlarge", "us-east-1", "on-demand"))
    assert p5.price_per_hour == 55.04 and p5.origin == "shipped"
    assert [n for n in cat.notes if "ignored refreshed prices" in n] == [
        f"ignored refreshed prices in {cache / 'catalog-aws.csv'}: {cache / 'catalog-aws.csv'}: row 2: column "
        "'price_per_hour': expected a finite positive number (got 'nan')"]


def test_an_overlay_that_is_a_directory_or_binary_gets_its_own_message(tmp_path):
    folder = run("catalog", "list", "--catalog", str(tmp_path))
    assert folder.exit_code == 2 and f"error: {tmp_path}: is a directory, expected a file" in folder.output
    binary = tmp_path / "prices.csv"
    binary.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00")
    result = run("catalog", "validate", str(binary))
    assert result.exit_code == 2 and f"error: {binary}: is a binary file (contains NUL bytes), not a text file" in \
        result.output
    latin = tmp_path / "latin.csv"
    latin.write_bytes("provider,sku\naws,caf\xe9\n".encode("latin-1"))
    result = run("catalog", "validate", str(latin))
    assert result.exit_code == 2 and f"error: {latin}: not a UTF-8 text file (binary?)" in result.output


def test_a_global_row_admitted_through_its_data_centres_must_be_pinned_there():
    from gpuopt.pricing.regions import Residency

    assert Residency("us").pinned_countries("global", "US;CA;NL") == ["US"]
    assert Residency("eu").pinned_countries("global", "US;NL;NO;FR") == ["NL", "FR"]  # Norway is EEA, not EU
    assert Residency("us").pinned_countries("us-east-1", "") == []  # its own region satisfies the selector
    assert Residency("cn").pinned_countries("global", "US;CA") == []  # not admitted at all


def test_solve_warns_to_pin_a_global_offering_the_residency_admits_through_its_data_centres():
    from click.testing import CliRunner

    from gpuopt.cli.main import cli

    result = CliRunner().invoke(cli, ["solve", "examples/two-models.yaml", "--format", "json"])
    assert result.exit_code == 0, result.stderr
    import json

    plan = json.loads(result.stdout)
    global_ones = {(d["provider"], d["sku"]) for d in plan["deployments"] if d["region"] == "global"}
    assert global_ones  # RunPod is cheapest under `us` once pinned to a US data centre
    for provider, sku in global_ones:
        assert any(w.startswith(f"{provider} {sku} (global) meets residency 'us' only if pinned to a data centre "
                                "in US") for w in plan["warnings"])


@pytest.mark.parametrize("as_of", ["2026-13-45", "2026-02-30", "2026-00-10"])
def test_an_as_of_that_names_no_calendar_day_is_refused_everywhere_a_catalog_is_read(tmp_path, monkeypatch, as_of):
    """The date pattern matched 2026-13-45, then every plan that chose the row failed building the date (exit 70):
    validate, an overlay and the refresh cache now read it as the calendar does."""
    row = ("digitalocean,droplet,gpu-h100x8-640gb,nyc1,H100-SXM-80GB,8,80,160,1920,nvlink,23.92,USD,on-demand,"
           f"a quote,{as_of},,per-hour,,inferred: SXM5 board (NVLink),\n")
    csv = tmp_path / "o.csv"
    csv.write_text(shipped_text().splitlines()[0] + "\n" + row)
    error = f"error: {csv}: row 2: column 'as_of': expected a date YYYY-MM-DD ('{as_of}')\n"
    result = run("catalog", "validate", str(csv))
    assert (result.exit_code, result.stderr) == (2, error)
    workload = Path(__file__).parent.parent / "examples" / "batch-summarisation.yaml"
    result = run("solve", str(workload), "--catalog", str(csv))
    assert (result.exit_code, result.stderr) == (2, error)
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / "catalog-digitalocean.csv").write_text(csv.read_text())
    monkeypatch.setenv("GPUOPT_CACHE_DIR", str(cache))
    result = run("solve", str(workload), "--top", "0")  # a bad cache file is ignored, and said so
    assert result.exit_code == 0 and "note: ignored refreshed prices in" in result.stderr


def test_a_csv_saved_with_a_byte_order_mark_reads_as_without_one(tmp_path):
    """Excel's "CSV UTF-8" writes a BOM: the header's first column was '\ufeffprovider', "missing column(s)
    provider"."""
    row = ("digitalocean,droplet,gpu-h100x8-640gb,nyc1,H100-SXM-80GB,8,80,160,1920,nvlink,23.92,USD,on-demand,"
           "a quote,2026-11-29,,per-hour,,inferred: SXM5 board (NVLink),\n")
    csv = tmp_path / "o.csv"
    csv.write_text("\ufeff" + shipped_text().splitlines()[0] + "\n" + row, encoding="utf-8")
    result = run("catalog", "validate", str(csv))
    assert result.exit_code == 0, result.stderr


@pytest.mark.parametrize(("count", "needle"), [
    ("100000000000000000000",
     "column 'gpu_count': 100000000000000000000 is more than any offering has (at most 1,024)"),
    ("2.5", "column 'gpu_count': expected a positive whole number ('2.5')"),
])
def test_an_overlay_count_no_offering_has_is_refused(tmp_path, count, needle):
    """QA: 10^20 GPUs passed `catalog validate --overlay` and ended `solve --catalog` in an IndexError."""
    overlay = tmp_path / "overlay.csv"
    overlay.write_text("provider,sku,region,gpu,gpu_count,price_per_hour,currency,price_kind,source,as_of\n"
                       f"aws,g6.xlarge,us-east-1,L4-24GB,{count},0.01,USD,on-demand,quote,2026-11-01\n")
    result = CliRunner().invoke(cli, ["catalog", "validate", "--overlay", str(overlay)])
    assert result.exit_code == 2 and result.stderr == f"error: {overlay}: row 2: {needle}\n"


def test_an_fx_override_replaces_its_pair_both_ways_and_the_header_says_only_it():
    """`--fx-rate CNY:USD=0.14` converts USD to CNY at 1 / 0.14 too; the header also printed the shipped
    1 USD = 6.6529 CNY, a rate no figure was converted at."""
    from gpuopt.pricing.fx import load_fx

    fx = load_fx({("CNY", "USD"): 0.14}, use_cache=False)
    assert fx.rate("USD", "CNY") == pytest.approx(1 / 0.14)
    assert fx.describe() == "1 CNY = 0.14 USD (user override)"
