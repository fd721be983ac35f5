"""Refreshers replay real provider answers (tests/fixtures, copied from ../shared/data/fixtures; TI-ONE and PAI-EAS
answers are CONSTRUCTED from the SDK models' field names, none being captured) through the same code the live
path uses; SDK clients are replaced at their method boundary (botocore Stubber for AWS, the
Tencent/Alibaba SDK client methods returning the SDK's own response models) and nothing touches the network."""

import copy
import csv
import datetime as dt
import hashlib
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from gpuopt.cli.main import cli
from gpuopt.pricing.catalog import load_catalog, read_csv_rows, shipped_text
from gpuopt.pricing.refresh import RefreshError

FIXTURES = Path(__file__).parent / "fixtures"


def run(*args: str):
    return CliRunner().invoke(cli, [str(a) for a in args])


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch):
    """Tests never read or write the real user cache."""
    folder = tmp_path / "cache"
    monkeypatch.setenv("GPUOPT_CACHE_DIR", str(folder))
    return folder


def shipped_rows():
    return [r.values for r in read_csv_rows(shipped_text())[1]]


def specs(provider):
    return {r["sku"]: r for r in shipped_rows() if r["provider"] == provider}


# ---- AWS ------------------------------------------------------------------------------------------------


def _gpu_element() -> dict:
    """Derived from the real m5.large element: the attributes a GPU product adds (gpu, instanceFamily) and
    p5.48xlarge's catalog price (55.04 USD, Karpenter table 2026-07-20) are substituted; the shape is real."""
    element = json.loads((FIXTURES / "aws_pricing_get_products_ec2.json").read_text())
    gpu = copy.deepcopy(element)
    attrs = gpu["product"]["attributes"]
    attrs.update(instanceType="p5.48xlarge", gpu="8", instanceFamily="GPU instance", vcpu="192", memory="2048 GiB",
                 regionCode="us-east-1", usagetype="BoxUsage:p5.48xlarge")
    for term in gpu["terms"]["OnDemand"].values():
        for dim in term["priceDimensions"].values():
            dim["pricePerUnit"] = {"USD": "55.0400000000"}
    return gpu


def test_aws_refresh_replays_recorded_pages_with_stubber(cache):
    boto3 = pytest.importorskip("boto3")
    from botocore.stub import ANY, Stubber

    from gpuopt.pricing.refresh import aws, write_cache

    real = json.loads((FIXTURES / "aws_pricing_get_products_ec2.json").read_text())
    real["product"]["attributes"]["regionCode"] = "us-east-1"
    envelope = json.loads((FIXTURES / "aws_pricing_get_products_envelope_awscli_example.json").read_text())
    client = boto3.client("pricing", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="y")
    stub = Stubber(client)
    filters = aws.filters_for("us-east-1")
    stub.add_response("get_products", {"FormatVersion": "aws_v1", "NextToken": envelope["NextToken"],
                                       "PriceList": [json.dumps(real)]},
                      {"ServiceCode": "AmazonEC2", "Filters": filters})
    stub.add_response("get_products", {"FormatVersion": "aws_v1", "PriceList": [json.dumps(_gpu_element())]},
                      {"ServiceCode": "AmazonEC2", "Filters": filters, "NextToken": envelope["NextToken"]})
    ec2 = boto3.client("ec2", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="y")
    spot = Stubber(ec2)
    # the documented SpotPriceHistory shape (catalog_notes.md s4); 17.6289 is the catalog's p5.48xlarge spot price
    spot.add_response("describe_spot_price_history", {"SpotPriceHistory": [
        {"AvailabilityZone": "us-east-1a", "InstanceType": "p5.48xlarge", "ProductDescription": "Linux/UNIX",
         "SpotPrice": "19.0000", "Timestamp": dt.datetime(2026, 11, 28, 10, tzinfo=dt.UTC)},
        {"AvailabilityZone": "us-east-1b", "InstanceType": "p5.48xlarge", "ProductDescription": "Linux/UNIX",
         "SpotPrice": "17.6289", "Timestamp": dt.datetime(2026, 11, 28, 9, tzinfo=dt.UTC)}]},
        {"InstanceTypes": ["p5.48xlarge"], "ProductDescriptions": ["Linux/UNIX"], "StartTime": ANY})
    pages = []
    with stub, spot:
        rows = aws.fetch(["us-east-1"], specs("aws"), client=client, ec2_client_for=lambda region: ec2,
                         on_page=lambda r, n: pages.append(n), sagemaker=False)
    assert pages == [1, 2]
    assert {r["sku"] for r in rows} == {"p5.48xlarge"}  # m5.large is not a GPU type
    on_demand = next(r for r in rows if r["price_kind"] == "on-demand")
    assert on_demand["price_per_hour"] == "55.04" and on_demand["gpu"] == "H100-SXM-80GB"
    assert on_demand["as_of"] == "2021-02-01"  # the term's effectiveDate, not the fetch
    assert {r["price_kind"] for r in rows} == {"on-demand", "reserved-1y", "reserved-3y", "spot"}
    spot_row = next(r for r in rows if r["price_kind"] == "spot")
    assert (spot_row["price_per_hour"], spot_row["as_of"]) == ("17.6289", "2026-11-28")  # lowest AZ, its date
    path = write_cache("aws", rows)
    assert path.parent == cache and not list(cache.glob(".catalog-*"))
    refreshed = [o for o in load_catalog().offerings if o.key == ("aws", "ec2", "p5.48xlarge", "us-east-1", "spot")]
    assert refreshed[0].origin == "cache" and refreshed[0].price_per_hour == 17.6289


def test_aws_spot_in_china_is_priced_in_cny_and_only_gpu_types_are_kept():
    """QA: a cn-north-1 spot history was written as USD (2.10 CNY for a g4dn.xlarge became 13.97 CNY, 2.7 x its
    on-demand price), and a saved history's m5.large reached the cache."""
    from gpuopt.pricing.refresh import aws

    history = {"SpotPriceHistory": [
        {"AvailabilityZone": f"{region}a", "InstanceType": sku, "SpotPrice": price, "Timestamp": "2026-11-28T09:00"}
        for region in ("cn-north-1",) for sku, price in (("g4dn.xlarge", "2.10"), ("m5.large", "0.2"))]}
    (row,) = aws.parse_spot(history, "h", specs("aws"), "cn-north-1")
    assert (row["sku"], row["price_per_hour"], row["currency"]) == ("g4dn.xlarge", "2.1", "CNY")
    assert row["gpu"] == "T4-16GB"
    (us,) = aws.parse_spot({"SpotPriceHistory": [dict(history["SpotPriceHistory"][0], AvailabilityZone="us-east-1a")]},
                           "h", specs("aws"), "us-east-1")
    assert us["currency"] == "USD"
    assert [aws.spot_currency(r) for r in ("cn-northwest-1", "us-east-1", "ap-east-1")] == ["CNY", "USD", "USD"]


def test_aws_replays_build_the_cache_up(cache, tmp_path):
    """QA: each AWS replay rewrote the whole cache file, so a spot history replayed after an on-demand page put
    the shipped on-demand price back ("kept"). Replays now update the offerings they price and keep the rest."""
    page = tmp_path / "page.json"
    page.write_text(json.dumps({"PriceList": [json.dumps(_gpu_element())]}))  # p5.48xlarge on-demand 55.04
    spot = tmp_path / "spot.json"
    spot.write_text(json.dumps({"SpotPriceHistory": [{"AvailabilityZone": "us-east-1a", "InstanceType": "p5.48xlarge",
                                                      "SpotPrice": "17.5", "Timestamp": "2026-11-28T09:00:00"}]}))
    assert run("catalog", "refresh", "aws", "--file", page).exit_code == 0
    assert run("catalog", "refresh", "aws", "--file", spot, "--region", "us-east-1").exit_code == 0
    rows = {(r["sku"], r["region"], r["price_kind"]): r["price_per_hour"]
            for r in csv.DictReader((cache / "catalog-aws.csv").read_text().splitlines())}
    assert rows[("p5.48xlarge", "us-east-1", "spot")] == "17.5"
    assert rows[("p5.48xlarge", "us-east-1", "on-demand")] == "55.04"  # the page's, still there


def test_a_region_id_places_only_its_own_providers_rows():
    """QA: Alibaba's ap-southeast-3 (Kuala Lumpur) was read as Indonesia, AWS's ap-southeast-3: region ids are
    reused across providers. A region is placed for the providers whose rows established it."""
    from gpuopt.pricing.refresh import foreign_regions
    from gpuopt.pricing.regions import Residency, region_info

    assert region_info("ap-southeast-3", "aws").country == "ID"
    assert region_info("ap-southeast-3", "alibaba").country == ""
    assert region_info("us-east-1", "alibaba").country == "US"  # Alibaba's own rows place it
    assert region_info("cn-mainland", "tencent").country == region_info("cn-mainland", "alibaba").country == "CN"
    assert region_info("eu-west-1").country == "IE"  # no provider named: the table's row
    apac, exact, anywhere = Residency("apac"), Residency("ap-southeast-3"), Residency("global")
    assert apac.allows("ap-southeast-3", "", "aws") and not apac.allows("ap-southeast-3", "", "alibaba")
    assert exact.allows("ap-southeast-3", "", "alibaba") and anywhere.allows("ap-southeast-3", "", "alibaba")
    assert not Residency("eu").allows("eu-west-1", "", "alibaba")  # Alibaba's eu-west-1 is London
    assert foreign_regions([{"provider": "alibaba", "region": "ap-southeast-3"},
                            {"provider": "alibaba", "region": "cn-hangzhou"},
                            {"provider": "aws", "region": "ap-southeast-3"}]) == ["ap-southeast-3"]


def test_aws_refresh_without_credentials_is_one_clear_line():
    pytest.importorskip("boto3")
    from botocore.exceptions import NoCredentialsError

    from gpuopt.pricing.refresh import aws

    class NoCreds:
        def get_paginator(self, name):
            raise NoCredentialsError()

    with pytest.raises(RefreshError) as info:
        aws.fetch(["us-east-1"], {}, client=NoCreds())
    assert "credentials not found" in str(info.value) and len(info.value.problems) == 1


def test_aws_replay_of_the_cli_example_page_has_no_gpu_offering(cache):
    page = FIXTURES / "aws_pricing_get_products_envelope_awscli_example.json"
    result = run("catalog", "refresh", "aws", "--file", page)
    assert result.exit_code == 2
    assert "no GPU offering in the answer; nothing written" in result.output and not cache.exists()


# ---- Alibaba ---------------------------------------------------------------------------------------------


def test_alibaba_price_file_is_dated_by_its_publication_date():
    from gpuopt.pricing.refresh import alibaba

    data, label = alibaba.load_price_file(FIXTURES / "alibaba_instance_price_excerpt.json", None)
    result = alibaba.parse(data, specs("alibaba"), label)
    got = {(r["sku"], r["region"]): float(r["price_per_hour"]) for r in result.rows}
    assert got == {("ecs.gn7i-c8g1.2xlarge", "cn-hangzhou"): 9.5326,
                   ("ecs.gn7i-c8g1.2xlarge", "cn-wulanchabu"): 8.5794,
                   ("ecs.gn7e-c16g1.4xlarge", "cn-hangzhou"): 34.742}
    assert {r["as_of"] for r in result.rows} == {"2024-12-30"}
    assert all(r["currency"] == "CNY" and r["gpu"] for r in result.rows)


def test_alibaba_price_page_gives_the_current_file_url():
    from gpuopt.pricing.refresh import alibaba

    page = '<script src="//g.alicdn.com/aliyun/ecs-price-info/2.0.123/price/app.js"></script>'
    assert alibaba.price_file_url(page) == ("https://g.alicdn.com/aliyun/ecs-price-info/2.0.123/price/download/"
                                            "instancePrice.json")
    with pytest.raises(RefreshError):
        alibaba.price_file_url("<html></html>")


def _bad_alibaba(tmp_path, mutate) -> Path:
    data = json.loads((FIXTURES / "alibaba_instance_price_excerpt.json").read_text())
    mutate(data)
    path = tmp_path / "instancePrice.json"
    path.write_text(json.dumps(data))
    return path


KEY = "cn-hangzhou::ecs.gn7i-c8g1.2xlarge::vpc::linux::optimized"


@pytest.mark.parametrize("mutate, message", [
    (lambda d: d["pricingInfo"][KEY]["hours"][0].update(price="abc"), "hours[0].price: price 'abc' is not a finite"),
    (lambda d: d["pricingInfo"][KEY]["hours"][0].update(price="NaN"), "hours[0].price: price 'NaN' is not a finite"),
    (lambda d: d["pricingInfo"][KEY]["hours"][0].update(price="-3"), "price '-3' is not a finite positive number"),
    (lambda d: d["pricingInfo"][KEY]["hours"][0].update(price=None), "price None is not a number"),
    (lambda d: d["pricingInfo"].update({KEY: ["9.53"]}), f"pricingInfo['{KEY}']: expected an object, got a list"),
    (lambda d: d["pricingInfo"].update({KEY: {"hours": ["9.53"]}}), "hours[0]: expected an object, got a string"),
    (lambda d: d.update(currency="EUR"), "currency 'EUR' is not one the catalog prices in (USD, CNY)"),
    (lambda d: d.update(pricingInfo=[]), "pricingInfo: expected an object, got a list"),
    (lambda d: d.pop("pricingInfo"), "pricingInfo: expected an object, got nothing (the key is missing or null)"),
])
def test_bad_alibaba_entries_are_exit_2_naming_file_and_entry_and_leave_the_cache(tmp_path, cache, mutate, message):
    good = run("catalog", "refresh", "alibaba", "--file", FIXTURES / "alibaba_instance_price_excerpt.json")
    assert good.exit_code == 0, good.output
    before = (cache / "catalog-alibaba.csv").read_bytes()
    path = _bad_alibaba(tmp_path, mutate)
    result = run("catalog", "refresh", "alibaba", "--file", path)
    assert result.exit_code == 2, result.output
    errors = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and str(path) in errors[0] and message in errors[0], errors
    assert "Traceback" not in result.output
    assert (cache / "catalog-alibaba.csv").read_bytes() == before


def test_truncated_answer_is_exit_2(tmp_path, cache):
    path = tmp_path / "cut.json"
    path.write_text((FIXTURES / "runpod_gpu_types.json").read_text()[:200])
    result = run("catalog", "refresh", "runpod", "--file", path)
    assert result.exit_code == 2 and f"{path}: RunPod gpuTypes answer is not valid JSON" in result.output
    assert not cache.exists()


def test_alibaba_describe_price_through_the_sdk_model():
    pytest.importorskip("alibabacloud_ecs20140526")
    from alibabacloud_ecs20140526 import models

    from gpuopt.pricing.refresh import alibaba

    body = models.DescribePriceResponseBody().from_map(
        json.loads((FIXTURES / "alibaba_ecs_describe_price_current_doc.json").read_text()))

    class Client:
        def describe_price(self, request):
            self.request = request
            return models.DescribePriceResponse(body=body)

    client = Client()
    spec = specs("alibaba")["ecs.gn7i-c8g1.2xlarge"]
    row = alibaba.describe_price(client, "ecs.gn7i-c8g1.2xlarge", "cn-hangzhou", spec,
                                 now=dt.datetime(2026, 11, 30, 8, tzinfo=dt.UTC))
    assert (client.request.instance_type, client.request.region_id, client.request.price_unit) == (
        "ecs.gn7i-c8g1.2xlarge", "cn-hangzhou", "Hour")
    assert (row["price_per_hour"], row["currency"], row["as_of"]) == ("4368", "CNY", "2026-11-30")
    assert "live answer fetched 2026-11-30T08:00:00+00:00" in row["source"] and row["gpu"] == "A10-24GB"


# ---- Tencent ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("fixture, charge, kind, price", [
    ("tencent_inquiry_price_run_instances.json", "POSTPAID_BY_HOUR", "on-demand", 16.09),
    ("tencent_inquiry_price_run_instances_prepaid.json", "PREPAID", "subscription-monthly", 8884.5 / 730),
])
def test_tencent_inquiry_through_the_sdk_client(fixture, charge, kind, price):
    pytest.importorskip("tencentcloud.cvm.v20170312")
    from tencentcloud.cvm.v20170312 import models

    from gpuopt.pricing.refresh import tencent

    answer = json.loads((FIXTURES / fixture).read_text())["Response"]

    class Client:
        def InquiryPriceRunInstances(self, request):  # noqa: N802 - the SDK's method name
            self.params = json.loads(request.to_json_string())
            response = models.InquiryPriceRunInstancesResponse()
            response._deserialize(answer)
            return response

    client = Client()
    data = tencent.inquire(client, "S5.16XLARGE256", "ap-shanghai-2", charge)
    assert client.params["InstanceType"] == "S5.16XLARGE256" and client.params["Placement"]["Zone"] == "ap-shanghai-2"
    result = tencent.parse_inquiry(data, "InquiryPriceRunInstances", "S5.16XLARGE256", "ap-shanghai-2", charge, "CNY",
                                   "2026-08-04", "example", {})
    (row,) = result.rows
    assert row["price_kind"] == kind and row["region"] == "ap-shanghai"
    assert float(row["price_per_hour"]) == pytest.approx(price, rel=1e-6)


def test_tencent_replay_needs_type_and_zone_then_writes_the_row(cache):
    path = FIXTURES / "tencent_inquiry_price_run_instances.json"
    missing = run("catalog", "refresh", "tencent", "--file", path)
    assert missing.exit_code == 2 and "give --sku TYPE and --zone ZONE" in missing.output
    result = run("catalog", "refresh", "tencent", "--file", path, "--sku", "S5.16XLARGE256", "--zone", "ap-shanghai-2",
                 "--as-of", "2026-08-04")
    assert result.exit_code == 0, result.output
    assert "tencent: 1 rows against the shipped snapshot" in result.stdout
    future = run("catalog", "refresh", "tencent", "--file", path, "--sku", "S5.16XLARGE256", "--zone", "ap-shanghai-2",
                 "--as-of", "2099-01-01")
    assert future.exit_code == 2 and "--as-of 2099-01-01: after today" in future.output
    for compact in ("20260804", "2026-W32-2"):  # dates fromisoformat takes but no catalog row is written as
        bad = run("catalog", "refresh", "tencent", "--file", path, "--sku", "S5.16XLARGE256", "--zone",
                  "ap-shanghai-2", "--as-of", compact)
        assert bad.exit_code == 2 and f"--as-of '{compact}': expected a date YYYY-MM-DD" in bad.output


def test_tencent_replays_build_the_cache_up(cache):
    """One inquiry prices one SKU, zone and charge: a second (the monthly price) adds its row and keeps the first
    (each replay used to replace the whole cache, dropping the on-demand row for the 2023 shipped price)."""
    common = ("--sku", "GN7.2XLARGE32", "--zone", "ap-guangzhou-3", "--as-of", "2026-08-04")
    hourly = run("catalog", "refresh", "tencent", "--file", FIXTURES / "tencent_inquiry_price_run_instances.json",
                 *common)
    monthly = run("catalog", "refresh", "tencent", "--file",
                  FIXTURES / "tencent_inquiry_price_run_instances_prepaid.json", *common, "--charge", "PREPAID")
    assert hourly.exit_code == monthly.exit_code == 0, monthly.output
    assert "1 new, 0 removed, 0 changed, 1 unchanged" in monthly.stdout
    rows = list(csv.DictReader((cache / "catalog-tencent.csv").read_text().splitlines()))
    assert sorted(r["price_kind"] for r in rows) == ["on-demand", "subscription-monthly"]


@pytest.mark.parametrize("value", [-5, "nan", "abc", True, [], {}])
def test_tencents_account_price_is_checked_like_a_price(tmp_path, cache, value):
    """QA: DiscountPrice -5 (and nan, "abc", true) went into the row's notes as the account's price."""
    data = json.loads((FIXTURES / "tencent_inquiry_price_run_instances_prepaid.json").read_text())
    data["Response"]["Price"]["InstancePrice"]["DiscountPrice"] = value
    bad = tmp_path / "prepaid.json"
    bad.write_text(json.dumps(data))
    result = run("catalog", "refresh", "tencent", "--file", bad, "--sku", "GN7.2XLARGE32", "--zone", "ap-guangzhou-3",
                 "--as-of", "2026-08-04", "--charge", "PREPAID")
    assert result.exit_code == 2 and "Response.Price.InstancePrice.DiscountPrice: price" in result.output
    assert not (cache / "catalog-tencent.csv").exists()


# ---- TI-ONE (Tencent) --------------------------------------------------------------------------------------
# No real TI-ONE price answer exists: the fixtures are CONSTRUCTED from the SDK's response model fields
# (tests/fixtures/README.md); their costs are made up, so the expected rows are computed from them by hand.

TIONE_PRICE = FIXTURES / "tione_describe_billing_specs_price_constructed.json"
TIONE_SPECS = FIXTURES / "tione_describe_billing_specs_constructed.json"


def test_tione_replay_turns_fen_per_spec_count_into_cny_per_hour(cache):
    result = run("catalog", "refresh", "ti-one", "--file", TIONE_PRICE, "--region", "ap-guangzhou",
                 "--as-of", "2026-11-01")
    assert result.exit_code == 0, result.output
    rows = {r.values["sku"]: r.values for r in read_csv_rows((cache / "catalog-ti-one.csv").read_text())[1]}
    # TotalCost fen / SpecCount / 100: 1000/1/100 = 10, 3000/2/100 = 15, 2500/1/100 = 25; TotalCost 0 not written
    assert {k: (v["price_per_hour"], v["currency"], v["region"], v["price_kind"], v["as_of"])
            for k, v in rows.items()} == {
        "TI.GN7.8XLARGE128.POST": ("10", "CNY", "ap-guangzhou", "on-demand", "2026-11-01"),
        "TI.GN10.2XLARGE40.POST": ("15", "CNY", "ap-guangzhou", "on-demand", "2026-11-01"),
        "TI.CONSTRUCTED.1A800.POST": ("25", "CNY", "ap-guangzhou", "on-demand", "2026-11-01")}
    # hardware from the shipped row of the same spec; the unknown spec has none
    assert [rows["TI.GN7.8XLARGE128.POST"][c] for c in ("gpu", "gpu_count", "vcpus", "ram_gib")] == \
        ["T4-16GB", "1", "32", "128"]
    assert rows["TI.CONSTRUCTED.1A800.POST"]["gpu"] == ""
    assert "account price RealTotalCost 900 fen" in rows["TI.GN7.8XLARGE128.POST"]["notes"]
    assert "note: ti-one: TI.GN7.2XLARGE32.POST in ap-guangzhou: TotalCost 0" in result.output
    # compared with the shipped TI-ONE rows only (not Tencent's CVM rows): all three are new keys
    assert result.stdout.startswith("ti-one: 3 rows against the shipped snapshot: 3 new, 35 kept (not in the "
                                    "answer: their shipped price stays), 0 removed")
    assert "removed tencent/cvm" not in result.stdout
    chosen = [o for o in load_catalog().offerings if o.sku == "TI.GN7.8XLARGE128.POST" and o.region == "ap-guangzhou"]
    assert [(o.price_per_hour, o.origin) for o in chosen] == [(10.0, "cache")]


def test_tione_replay_needs_a_region_and_is_china_site_only():
    missing = run("catalog", "refresh", "ti-one", "--file", TIONE_PRICE)
    assert missing.exit_code == 2 and "does not name its region: give --region R" in missing.output
    usd = run("catalog", "refresh", "ti-one", "--file", TIONE_PRICE, "--region", "ap-singapore", "--currency", "USD")
    assert usd.exit_code == 2 and "--currency USD is not offered for ti-one" in usd.output


@pytest.mark.parametrize(("field", "value", "why"), [
    ("TotalCost", -1000, "price -1000 is not a finite positive number"),
    ("TotalCost", "NaN", "price 'NaN' is not a finite positive number"),
    ("TotalCost", "ten", "price 'ten' is not a finite positive number"),
    ("TotalCost", None, "price None is not a number"),
    ("RealTotalCost", "Infinity", "price 'Infinity' is not a finite positive number"),
    ("SpecCount", 0, "expected a positive whole number, got 0"),
    ("SpecName", 7, "expected a spec name, got 7")])
def test_tione_bad_entry_fails_naming_file_and_entry_and_keeps_the_cache(tmp_path, cache, field, value, why):
    assert run("catalog", "refresh", "ti-one", "--file", TIONE_PRICE, "--region", "ap-guangzhou").exit_code == 0
    before = (cache / "catalog-ti-one.csv").read_bytes()
    data = json.loads(TIONE_PRICE.read_text())
    data["Response"]["SpecsPrice"][1][field] = value
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    result = run("catalog", "refresh", "ti-one", "--file", path, "--region", "ap-guangzhou")
    name = "?" if field == "SpecName" else "TI.GN10.2XLARGE40.POST"
    assert result.exit_code == 2
    assert result.output == (f"error: refresh ti-one: {path}: Response.SpecsPrice[1] ({name}).{field}: {why}\n")
    assert (cache / "catalog-ti-one.csv").read_bytes() == before


def _tione_client(fail: bool = False):
    """A TI-ONE client replaced at its method boundary: it answers with the SDK's own response models built from
    the constructed answers, and records each request as the SDK serialises it."""
    from tencentcloud.common.exception.tencent_cloud_sdk_exception import TencentCloudSDKException
    from tencentcloud.tione.v20211111 import models

    class Client:
        requests: list = []

        def _answer(self, action, request, fixture):
            if fail:
                raise TencentCloudSDKException("UnsupportedRegion", "constructed refusal")
            sent = json.loads(request.to_json_string())
            self.requests.append((action, {k: v for k, v in sent.items() if v is not None}))
            response = getattr(models, f"{action}Response")()
            response._deserialize(json.loads(fixture.read_text())["Response"])
            return response

        def DescribeBillingSpecs(self, request):  # noqa: N802 - the SDK's method name
            return self._answer("DescribeBillingSpecs", request, TIONE_SPECS)

        def DescribeBillingSpecsPrice(self, request):  # noqa: N802 - the SDK's method name
            return self._answer("DescribeBillingSpecsPrice", request, TIONE_PRICE)

    return Client()


def test_tione_live_path_asks_for_gpu_specs_then_prices_them():
    from gpuopt.pricing.refresh import tione

    client = _tione_client()
    result = tione.fetch(tione.specs_by_name(shipped_rows()), ["ap-shanghai"], client_for=lambda region: client,
                         now=dt.datetime(2026, 12, 1, 8, 30, tzinfo=dt.UTC))
    assert client.requests == [
        ("DescribeBillingSpecs", {"ChargeType": "POSTPAID_BY_HOUR", "TaskType": "INFERENCE", "ResourceType": "GPU"}),
        ("DescribeBillingSpecsPrice", {"SpecsParam": [
            {"SpecName": n, "SpecCount": 1} for n in ("TI.CONSTRUCTED.1A800.POST", "TI.GN10.2XLARGE40.POST",
                                                       "TI.GN7.2XLARGE32.POST", "TI.GN7.8XLARGE128.POST")]})]
    rows = {r["sku"]: r for r in result.rows}
    assert {k: float(r["price_per_hour"]) for k, r in rows.items()} == {
        "TI.GN7.8XLARGE128.POST": 10.0, "TI.GN10.2XLARGE40.POST": 15.0, "TI.CONSTRUCTED.1A800.POST": 25.0}
    # a spec the catalog does not know keeps the spec list's GpuType: unplannable, and named as such
    assert rows["TI.CONSTRUCTED.1A800.POST"]["gpu"] == "A800"
    from gpuopt.pricing.refresh import check_rows, unknown_gpus
    assert check_rows("live", result.rows) == [] and unknown_gpus(result.rows) == ["A800"]
    assert {r["as_of"] for r in result.rows} == {"2026-12-01"}
    assert all("live answer fetched 2026-12-01T08:30:00+00:00" in r["source"] for r in result.rows)


def test_tione_a_refused_region_is_skipped_unless_every_region_is():
    from gpuopt.pricing.refresh import tione

    good, bad = _tione_client(), _tione_client(fail=True)
    result = tione.fetch({}, ["ap-guangzhou", "ap-beijing"],
                         client_for=lambda region: good if region == "ap-guangzhou" else bad)
    assert {r["region"] for r in result.rows} == {"ap-guangzhou"}
    assert "Tencent Cloud refused TI-ONE DescribeBillingSpecs in ap-beijing (UnsupportedRegion); that region is " \
           "skipped" in result.notes
    with pytest.raises(RefreshError) as failed:
        tione.fetch({}, ["ap-beijing"], client_for=lambda region: bad)
    assert failed.value.problems == ("Tencent Cloud refused TI-ONE DescribeBillingSpecs in ap-beijing "
                                     "(UnsupportedRegion)",)


def test_tione_live_without_credentials_is_one_line(monkeypatch):
    from tencentcloud.common import credential
    from tencentcloud.common.exception.tencent_cloud_sdk_exception import TencentCloudSDKException

    def nothing(self):
        raise TencentCloudSDKException("ClientSideError", "no credential found in the chain")

    monkeypatch.setattr(credential.DefaultCredentialProvider, "get_credentials", nothing)
    result = run("catalog", "refresh", "ti-one", "--region", "ap-guangzhou")
    assert result.exit_code == 2
    assert result.output == ("error: refresh ti-one: Tencent Cloud credentials not found (TENCENTCLOUD_SECRET_ID/KEY "
                             "or a profile); replay a saved answer with --file\n")


# ---- PAI-EAS spot discounts (Alibaba) ----------------------------------------------------------------------
# CONSTRUCTED answer (tests/fixtures/README.md): the SDK's body fields, made-up discounts.

EAS_DISCOUNTS = FIXTURES / "pai_eas_describe_spot_discount_history_constructed.json"


def test_pai_eas_replay_writes_unpriced_spot_rows_with_the_latest_lowest_zone_discount(cache):
    result = run("catalog", "refresh", "pai-eas", "--file", EAS_DISCOUNTS, "--region", "cn-hangzhou")
    assert result.exit_code == 0, result.output
    rows = {r.values["sku"]: r.values for r in read_csv_rows((cache / "catalog-pai-eas.csv").read_text())[1]}
    # gn7i: zone h's latest is 0.15 (06:00 beats 00:00's 0.2), zone i 0.3 -> 0.15 in h; gn6i: 0.1 in j (the
    # cn-shanghai-a zone is not cn-hangzhou's and is skipped)
    assert {k: (v["price_per_hour"], v["price_kind"], v["region"], v["as_of"], v["gpu"]) for k, v in rows.items()} \
        == {"ecs.gn7i-c16g1.4xlarge": ("", "spot", "cn-hangzhou", "2026-11-30", "A10-24GB"),
            "ecs.gn6i-c4g1.xlarge": ("", "spot", "cn-hangzhou", "2026-11-29", "T4-16GB")}
    assert rows["ecs.gn7i-c16g1.4xlarge"]["notes"].startswith(
        "unpriced: SpotDiscount 0.15 (x0.15 of the pay-as-you-go price) in zone cn-hangzhou-h at 2026-11-30T06:00:00Z")
    assert "note: pai-eas: cn-hangzhou: zones of other regions skipped: cn-shanghai-a" in result.output
    assert result.stdout.startswith("pai-eas: 2 rows against the shipped snapshot")
    assert "removed alibaba/ecs" not in result.stdout  # compared with the shipped PAI-EAS rows only


def test_pai_eas_discount_prices_a_row_only_from_a_pai_eas_base_price():
    from gpuopt.pricing.refresh import pai_eas

    data = json.loads(EAS_DISCOUNTS.read_text())
    base = {"provider": "alibaba", "service": "pai-eas", "sku": "ecs.gn7i-c16g1.4xlarge", "region": "cn-hangzhou",
            "price_kind": "on-demand", "price_per_hour": "10", "currency": "CNY", "as_of": "2026-11-01"}
    ecs = dict(base, service="ecs", sku="ecs.gn6i-c4g1.xlarge", price_per_hour="8")  # an ECS price is no base
    result = pai_eas.parse(data, "answer", "cn-hangzhou", {}, pai_eas.base_prices([base, ecs]))
    rows = {r["sku"]: r for r in result.rows}
    assert (rows["ecs.gn7i-c16g1.4xlarge"]["price_per_hour"], rows["ecs.gn7i-c16g1.4xlarge"]["currency"]) == \
        ("1.5", "CNY")  # 0.15 x 10
    assert "DERIVED: 0.15 x the PAI-EAS pay-as-you-go price 10 CNY (2026-11-01)" in \
        rows["ecs.gn7i-c16g1.4xlarge"]["notes"]
    assert rows["ecs.gn6i-c4g1.xlarge"]["price_per_hour"] == ""


@pytest.mark.parametrize(("field", "value", "why"), [
    ("SpotDiscount", "1.5", "'1.5' is not a fraction of the price (0 < discount <= 1; 0.1 means 90 % off)"),
    ("SpotDiscount", "-0.1", "price '-0.1' is not a finite positive number"),
    ("SpotDiscount", "NaN", "price 'NaN' is not a finite positive number"),
    ("SpotDiscount", "cheap", "price 'cheap' is not a finite positive number"),
    ("SpotDiscount", None, "price None is not a number"),
    ("Timestamp", "yesterday", "'yesterday' is not a date"),
    ("InstanceType", None, "expected an instance type, got None")])
def test_pai_eas_bad_entry_fails_naming_file_and_entry_and_keeps_the_cache(tmp_path, cache, field, value, why):
    assert run("catalog", "refresh", "pai-eas", "--file", EAS_DISCOUNTS, "--region", "cn-hangzhou").exit_code == 0
    before = (cache / "catalog-pai-eas.csv").read_bytes()
    data = json.loads(EAS_DISCOUNTS.read_text())
    data["SpotDiscounts"][2][field] = value
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    result = run("catalog", "refresh", "pai-eas", "--file", path, "--region", "cn-hangzhou")
    assert result.exit_code == 2
    assert result.output == f"error: refresh pai-eas: {path}: SpotDiscounts[2].{field}: {why}\n"
    assert (cache / "catalog-pai-eas.csv").read_bytes() == before


def test_pai_eas_live_path_asks_per_spec_through_the_sdk_models():
    from alibabacloud_eas20210701 import models

    from gpuopt.pricing.refresh import pai_eas

    body = json.loads(EAS_DISCOUNTS.read_text())
    asked = []

    class Client:
        def describe_spot_discount_history(self, request):
            asked.append(request.instance_type)
            mine = [d for d in body["SpotDiscounts"] if d["InstanceType"] == request.instance_type]
            return models.DescribeSpotDiscountHistoryResponse().from_map(
                {"statusCode": 200, "body": {"RequestId": body["RequestId"], "SpotDiscounts": mine}})

    specs = pai_eas.specs_by_name(shipped_rows())
    result = pai_eas.fetch(specs, {}, ["cn-hangzhou"], client_for=lambda region: Client())
    assert asked == sorted(specs) and len(asked) == 5  # the five PAI-EAS specs the catalog ships
    assert sorted((r["sku"], r["as_of"]) for r in result.rows) == [
        ("ecs.gn6i-c4g1.xlarge", "2026-11-29"), ("ecs.gn7i-c16g1.4xlarge", "2026-11-30")]


def test_pai_eas_live_without_credentials_is_one_line(monkeypatch, tmp_path):
    from gpuopt.pricing.refresh import alibaba

    monkeypatch.setattr(alibaba, "credentials_configured", lambda: False)
    result = run("catalog", "refresh", "pai-eas", "--region", "cn-hangzhou")
    assert result.exit_code == 2
    assert result.output == ("error: refresh pai-eas: Alibaba Cloud credentials not configured "
                             "(ALIBABA_CLOUD_ACCESS_KEY_ID/SECRET or a profile): PAI-EAS spot discounts need "
                             "DescribeSpotDiscountHistory\n")


# ---- RunPod ------------------------------------------------------------------------------------------------


def test_runpod_replay_writes_per_gpu_prices_and_names_the_unknown_gpu(cache):
    result = run("catalog", "refresh", "runpod", "--file", FIXTURES / "runpod_gpu_types.json", "--as-of", "2025-10-10")
    assert result.exit_code == 0, result.output
    assert "unplannable (GPU not in the GPU table; add its datasheet row): RTX A4000" in result.stdout
    # the commitment prices are reported, never written: their unit is documented nowhere (docs/catalog.md)
    assert ("note: runpod: RTX A4000: oneWeekPrice 60, oneMonthPrice 200, threeMonthPrice 500, sixMonthPrice 900 "
            "not written (RunPod documents no unit for its commitment prices; docs/catalog.md)") in result.output
    rows = {(r.values["service"], r.values["sku"], r.values["price_kind"]): r.values
            for r in read_csv_rows((cache / "catalog-runpod.csv").read_text())[1]}
    # availableGpuCounts [1, 2, 4]: secure 0.35, community 0.2, secure spot 0.18 per GPU
    assert {k: float(v["price_per_hour"]) for k, v in rows.items()} == pytest.approx({
        ("pod-secure", "1x RTX A4000", "on-demand"): 0.35, ("pod-secure", "2x RTX A4000", "on-demand"): 0.70,
        ("pod-secure", "4x RTX A4000", "on-demand"): 1.40, ("pod-community", "1x RTX A4000", "community"): 0.20,
        ("pod-community", "2x RTX A4000", "community"): 0.40, ("pod-community", "4x RTX A4000", "community"): 0.80,
        ("pod-secure", "1x RTX A4000", "spot"): 0.18, ("pod-secure", "2x RTX A4000", "spot"): 0.36,
        ("pod-secure", "4x RTX A4000", "spot"): 0.72})
    assert {v["as_of"] for v in rows.values()} == {"2025-10-10"}
    a4000 = [o for o in load_catalog().offerings if o.sku == "1x RTX A4000"]
    assert a4000 and all("not in the GPU table" in (o.unusable_reason or "") for o in a4000)


def test_runpod_low_stock_commitment_prices_are_reported_not_invented():
    from gpuopt.pricing.refresh import runpod

    data = json.loads((FIXTURES / "runpod_gpu_types_low_stock.json").read_text())
    result = runpod.parse(data, "low", "2025-10-10", "example", {})
    # availableGpuCounts [1..7] -> the 1/2/4 pods; secure 0.24, community 0.17, secure spot 0.16 per GPU
    assert {(r["service"], r["sku"], r["price_kind"]): float(r["price_per_hour"]) for r in result.rows} == \
        pytest.approx({
            ("pod-secure", "1x RTX A4000", "on-demand"): 0.24, ("pod-secure", "2x RTX A4000", "on-demand"): 0.48,
            ("pod-secure", "4x RTX A4000", "on-demand"): 0.96, ("pod-community", "1x RTX A4000", "community"): 0.17,
            ("pod-community", "2x RTX A4000", "community"): 0.34,
            ("pod-community", "4x RTX A4000", "community"): 0.68, ("pod-secure", "1x RTX A4000", "spot"): 0.16,
            ("pod-secure", "2x RTX A4000", "spot"): 0.32, ("pod-secure", "4x RTX A4000", "spot"): 0.64})
    assert len(result.rows) == 9
    # oneWeekPrice and oneMonthPrice are null (not offered): not mentioned; the two others are reported
    assert result.notes == ["RTX A4000: threeMonthPrice 0.204, sixMonthPrice 0.192 not written (RunPod documents "
                            "no unit for its commitment prices; docs/catalog.md)"]


def test_runpod_pod_sizes_out_of_stock_take_the_new_per_gpu_price():
    """QA: availableGpuCounts is stock, not price: a refresh wrote only the sizes in stock and kept the 8x pod the
    catalog sells at the superseded per-GPU rate. Every size the catalog sells is priced from the new rate."""
    from gpuopt.pricing.refresh import runpod

    data = json.loads((FIXTURES / "runpod_gpu_types_low_stock.json").read_text())
    shipped = [{"provider": "runpod", "sku": f"{n}x RTX A4000"} for n in (1, 2, 4, 8)]
    sold = runpod.pod_sizes([*shipped, {"provider": "runpod", "sku": "1x_A100-80GB_SECURE"},
                             {"provider": "aws", "sku": "8x X"}])
    assert sold == {"RTX A4000": {1, 2, 4, 8}}
    result = runpod.parse(data, "low", "2025-10-10", "example", {}, sold)
    prices = {(r["sku"], r["price_kind"]): float(r["price_per_hour"]) for r in result.rows}
    assert prices[("8x RTX A4000", "on-demand")] == pytest.approx(8 * 0.24)  # was kept at the shipped rate
    assert prices[("8x RTX A4000", "community")] == pytest.approx(8 * 0.17)
    assert prices[("8x RTX A4000", "spot")] == pytest.approx(8 * 0.16)
    assert len(result.rows) == 12
    assert result.notes[0] == ("RTX A4000: 8x not in stock in this answer; priced at that many times the new "
                               "per-GPU price, as RunPod bills")


@pytest.mark.parametrize("field", ["oneWeekPrice", "oneMonthPrice", "threeMonthPrice", "sixMonthPrice"])
@pytest.mark.parametrize(("value", "why"), [
    (-200, "price -200 is not a finite positive number"), ("NaN", "price 'NaN' is not a finite positive number"),
    ("Infinity", "price 'Infinity' is not a finite positive number"),
    ("two hundred", "price 'two hundred' is not a finite positive number"),
    ([200], "price [200] is not a number"), (True, "price True is not a number")])
def test_runpod_bad_commitment_price_fails_naming_file_and_entry_and_keeps_the_cache(tmp_path, cache, field, value,
                                                                                    why):
    first = run("catalog", "refresh", "runpod", "--file", FIXTURES / "runpod_gpu_types.json", "--as-of", "2025-10-10")
    assert first.exit_code == 0, first.output
    before = (cache / "catalog-runpod.csv").read_bytes()
    data = json.loads((FIXTURES / "runpod_gpu_types.json").read_text())
    data["data"]["gpuTypes"][0][field] = value
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    result = run("catalog", "refresh", "runpod", "--file", path, "--as-of", "2025-10-11")
    assert result.exit_code == 2
    assert result.output == f"error: refresh runpod: {path}: data.gpuTypes[0] (RTX A4000).{field}: {why}\n"
    assert (cache / "catalog-runpod.csv").read_bytes() == before


def test_runpod_live_without_a_key_is_one_line(monkeypatch):
    monkeypatch.delenv("RUNPOD_API_KEY", raising=False)
    result = run("catalog", "refresh", "runpod")
    assert result.exit_code == 2 and "set RUNPOD_API_KEY" in result.output


# ---- DigitalOcean ------------------------------------------------------------------------------------------


def test_digitalocean_sizes_through_pydo_method_and_replay(cache):
    from gpuopt.pricing.refresh import digitalocean

    answer = json.loads((FIXTURES / "digitalocean_sizes.json").read_text())

    class Sizes:
        def list(self, **params):
            self.params = params
            return answer

    class Client:
        sizes = Sizes()

    result = digitalocean.fetch(digitalocean.gpu_by_slug(shipped_rows()), client=Client(),
                                now=dt.datetime(2026, 11, 30, tzinfo=dt.UTC))
    got = {(r["sku"], r["region"]): (r["gpu"], r["gpu_count"], float(r["price_per_hour"]), r["interconnect"])
           for r in result.rows}
    assert got == {("gpu-h100x8-640gb", "nyc1"): ("H100-SXM-80GB", "8", 23.92, "nvlink"),
                   ("gpu-mi300x8-1536gb", "nyc1"): ("MI300X-192GB", "8", 15.92, "nvlink")}
    assert all("live answer fetched 2026-11-30" in r["source"] for r in result.rows)
    replay = run("catalog", "refresh", "digitalocean", "--file", FIXTURES / "digitalocean_sizes.json",
                 "--as-of", "2025-08-29")
    assert replay.exit_code == 0, replay.output
    assert "new digitalocean/droplet/gpu-h100x8-640gb/nyc1/on-demand: 23.92 USD" in replay.stdout


# ---- the cache, the summary, catalog diff ------------------------------------------------------------------


def test_a_failure_mid_write_leaves_the_previous_cache_byte_identical(cache, monkeypatch):
    import gpuopt.pricing.refresh as refresh

    first = run("catalog", "refresh", "runpod", "--file", FIXTURES / "runpod_gpu_types.json", "--as-of", "2025-10-10")
    assert first.exit_code == 0
    before = hashlib.sha256((cache / "catalog-runpod.csv").read_bytes()).hexdigest()

    def disk_fails(fd):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(refresh.os, "fsync", disk_fails)  # the temp file is written, then the disk fails
    with pytest.raises(OSError):
        refresh.write_cache("runpod", [{"provider": "runpod", "sku": "x"}])
    assert hashlib.sha256((cache / "catalog-runpod.csv").read_bytes()).hexdigest() == before
    assert sorted(p.name for p in cache.iterdir()) == ["catalog-runpod.csv"]  # no temp file left behind


def test_a_first_refresh_says_the_shipped_rows_the_answer_omits_are_kept_not_removed(tmp_path, cache):
    """The cache replaces shipped rows key by key, so a shipped row the answer does not mention stays listed at
    its shipped price: 72 RunPod rows were called removed and went on being planned."""
    result = run("catalog", "refresh", "runpod", "--file", FIXTURES / "runpod_gpu_types.json", "--as-of",
                 "2025-10-10")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    kept = [line for line in lines if line.startswith("  kept ")]
    assert lines[0] == (f"runpod: 9 rows against the shipped snapshot: 9 new, {len(kept)} kept (not in the answer: "
                        "their shipped price stays), 0 removed, 0 changed, 0 unchanged")
    assert "  kept runpod/pod-community/1x A100 PCIe/global/community: 1.19 USD" in kept
    listed = run("catalog", "list", "--provider", "runpod", "--format", "csv").stdout
    assert "runpod,pod-community,1x A100 PCIe,global" in listed and ",1.19," in listed


def test_second_refresh_summarises_changes_against_the_previous_cache(tmp_path, cache):
    run("catalog", "refresh", "runpod", "--file", FIXTURES / "runpod_gpu_types.json", "--as-of", "2025-10-10")
    result = run("catalog", "refresh", "runpod", "--file", FIXTURES / "runpod_gpu_types_low_stock.json",
                 "--as-of", "2025-10-11")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0] == ("runpod: 9 rows against the previous cache catalog-runpod.csv: 0 new, 0 removed, 9 changed, "
                        "0 unchanged")
    # 0.35 -> 0.24 is -31.4 %; 0.2 -> 0.17 is -15.0 %
    assert "  changed runpod/pod-secure/1x RTX A4000/global/on-demand: 0.35 USD -> 0.24 USD (-31.4 %)" in lines
    assert "  changed runpod/pod-community/1x RTX A4000/global/community: 0.2 USD -> 0.17 USD (-15.0 %)" in lines


def test_catalog_diff_of_two_files(tmp_path):
    old = tmp_path / "old.csv"
    new = tmp_path / "new.csv"
    text = shipped_text()
    old.write_text(text)
    line = next(row for row in text.splitlines() if row.startswith("aws,ec2,p5.48xlarge,us-east-1,H100-SXM-80GB,8")
                and ",on-demand," in row)
    new.write_text(text.replace(line, line.replace(",55.04,", ",60,")))
    result = run("catalog", "diff", old, new)
    assert result.exit_code == 0, result.output
    # 60 / 55.04 - 1 = +9.01 %
    assert result.stdout == "changed aws/ec2/p5.48xlarge/us-east-1/on-demand: 55.04 USD -> 60 USD (+9.0 %)\n"
    bad = tmp_path / "bad.csv"
    bad.write_text(text.replace(line, line.replace(",55.04,", ",nan,")))
    broken = run("catalog", "diff", old, bad)
    assert broken.exit_code == 2 and "column 'price_per_hour': expected a finite positive number (got 'nan')" in \
        broken.output


def test_refresh_targets_and_flags_are_checked():
    assert "did you mean runpod" in run("catalog", "refresh", "runpd").output
    many = run("catalog", "refresh", "aws", "runpod", "--file", FIXTURES / "runpod_gpu_types.json")
    assert many.exit_code == 2 and "name exactly one provider" in many.output
    region = run("catalog", "refresh", "aws", "--region", "us-east-9")
    assert region.exit_code == 2 and "unknown --region 'us-east-9'; did you mean" in region.output
    modal = run("catalog", "refresh", "modal")
    assert modal.exit_code == 2 and "no price API" in modal.output


# ---- FX ----------------------------------------------------------------------------------------------------


def test_fx_refresh_reads_the_ecb_file_and_the_loader_prefers_a_newer_rate(tmp_path, cache):
    from gpuopt.pricing.fx import load_fx
    from gpuopt.pricing.refresh import fx

    rate = fx.replay(FIXTURES / "ecb_eurofxref_daily_excerpt.xml")
    assert (rate.rate, rate.as_of) == (round(7.4326 / 1.1172, 6), "2026-10-30")  # 6.652882
    result = run("catalog", "refresh", "fx", "--file", FIXTURES / "ecb_eurofxref_daily_excerpt.xml")
    assert result.exit_code == 0 and result.stdout == "fx: 1 USD = 6.652882 CNY as of 2026-10-30 (was 6.6529 as of " \
        "2026-10-30)\n"
    assert load_fx().rate("USD", "CNY") == 6.6529  # same date: the shipped rate stays
    later = tmp_path / "later.xml"  # the same file one working day later, to test precedence only
    later.write_text((FIXTURES / "ecb_eurofxref_daily_excerpt.xml").read_text().replace("2026-10-30", "2026-11-02"))
    run("catalog", "refresh", "fx", "--file", later)
    table = load_fx()
    assert table.rate("USD", "CNY") == 6.652882 and table.as_of == "2026-11-02"
    # an older file no longer replaces the newer refreshed rate in the cache (QA: it was written, then ignored)
    cached = (cache / "fx.csv").read_bytes()
    older = run("catalog", "refresh", "fx", "--file", FIXTURES / "ecb_eurofxref_daily_excerpt.xml")
    assert older.exit_code == 0 and older.stdout == ("fx: 1 USD = 6.652882 CNY as of 2026-11-02 kept: the answer's "
                                                     "rate (6.652882 as of 2026-10-30) is older; nothing written\n")
    assert (cache / "fx.csv").read_bytes() == cached
    bad = tmp_path / "bad.xml"
    bad.write_text((FIXTURES / "ecb_eurofxref_daily_excerpt.xml").read_text().replace("7.4326", "NaN"))
    failed = run("catalog", "refresh", "fx", "--file", bad)
    assert failed.exit_code == 2 and "currency=CNY: rate 'NaN' is not a finite positive number" in failed.output
    # QA: time='zzz' was written as the rate's date and beat the shipped one as text; '7_4326' read as 74326
    for old, new, message in (("2026-10-30", "zzz", "Cube time='zzz' is not a date YYYY-MM-DD"),
                              ("7.4326", "7_4326", "rate '7_4326' is not a finite positive number")):
        bad.write_text((FIXTURES / "ecb_eurofxref_daily_excerpt.xml").read_text().replace(old, new))
        failed = run("catalog", "refresh", "fx", "--file", bad)
        assert failed.exit_code == 2 and message in failed.output
        assert (cache / "fx.csv").read_bytes() == cached
    # review: a rate dated after today would beat every later real one
    bad.write_text((FIXTURES / "ecb_eurofxref_daily_excerpt.xml").read_text().replace("2026-10-30", "2099-01-02"))
    failed = run("catalog", "refresh", "fx", "--file", bad)
    assert failed.exit_code == 2 and "Cube time=2099-01-02 is after today" in failed.output
    # a cache written by hand (or by an older release) with such a row is ignored: the shipped rate stays
    (cache / "fx.csv").write_text("base,quote,rate,source,as_of\nUSD,CNY,66528.8,x,zzz\n", encoding="utf-8")
    assert load_fx().rate("USD", "CNY") == 6.6529


# ---- laws and fuzzing --------------------------------------------------------------------------------------

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=8) | st.sampled_from(["9.53", "nan", "-1", "1e400", "inf", "0", "HOUR"]),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
        st.sampled_from(["data", "gpuTypes", "displayName", "securePrice", "communityPrice", "lowestPrice",
                         "availableGpuCounts", "sizes", "gpu_info", "count", "price_hourly", "regions", "slug",
                         "pricingInfo", "hours", "price", "currency", "publicationDate", "Response", "Price",
                         "InstancePrice", "UnitPrice", "ChargeUnit", "InstanceTypeQuotaSet", "GpuCount",
                         "PriceList", "oneMonthPrice", "SpecsPrice", "SpecName", "TotalCost", "SpecCount",
                         "SpotDiscounts", "SpotDiscount", "ZoneId", "Timestamp"]), inner, max_size=5),
    max_leaves=20)


def _mutations():
    """Real fixtures with one value replaced by an arbitrary JSON value (wrong types, non-finite numbers ...)."""
    names = ["runpod_gpu_types.json", "digitalocean_sizes.json", "alibaba_instance_price_excerpt.json",
             "tencent_inquiry_price_run_instances.json", TIONE_PRICE.name, EAS_DISCOUNTS.name]
    return st.tuples(st.sampled_from(names), st.integers(min_value=0, max_value=200), JSON)


def _replace_nth(node, n, value):
    """Replace the n-th value met in a depth-first walk (n modulo the count), returning the new tree."""
    counter = [0]

    def walk(x):
        if counter[0] == n:
            counter[0] += 1
            return value
        counter[0] += 1
        if isinstance(x, dict):
            return {k: walk(v) for k, v in x.items()}
        if isinstance(x, list):
            return [walk(v) for v in x]
        return x

    return walk(node)


def _parse_any(name, data):
    from gpuopt.pricing.refresh import alibaba, check_rows, digitalocean, pai_eas, runpod, tencent, tione

    if name.startswith("runpod"):
        rows = runpod.parse(data, name, "2025-10-10", "s", {}).rows
    elif name.startswith("digitalocean"):
        rows = digitalocean.parse(data, name, "2025-08-29", "s", {}).rows
    elif name.startswith("alibaba"):
        rows = alibaba.parse(data, {}, name).rows if isinstance(data, dict) else []
    elif name.startswith("tione"):
        rows = tione.parse_specs_price(data, name, "ap-guangzhou", "2026-12-01", "s", {}).rows
    elif name.startswith("pai_eas"):  # the two specs have a base price; a row of another spec is unpriced
        bases = {(sku, "cn-hangzhou"): {"price_per_hour": "10", "currency": "CNY", "as_of": "2026-11-01"}
                 for sku in ("ecs.gn7i-c16g1.4xlarge", "ecs.gn6i-c4g1.xlarge")}
        rows = [r for r in pai_eas.parse(data, name, "cn-hangzhou", {}, bases).rows if r["price_per_hour"]]
    else:
        rows = tencent.parse_inquiry(data, name, "GN7.2XLARGE32", "ap-guangzhou-3", "POSTPAID_BY_HOUR", "CNY",
                                     "2026-08-04", "s", {}).rows
    return rows, check_rows(name, rows)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_mutations())
def test_mutated_answers_end_in_rows_that_validate_or_one_refresh_error(case):
    name, n, value = case
    data = _replace_nth(json.loads((FIXTURES / name).read_text()), n, value)
    try:
        rows, problems = _parse_any(name, data)
    except RefreshError as exc:
        assert exc.problems and all(p.startswith(name) for p in exc.problems)
        return
    # whatever the parser accepted is a catalog row with a finite positive price, or a problem check_rows names
    for row in rows:
        price = float(row["price_per_hour"])
        assert price > 0 and price != float("inf")
    assert all(p.startswith(name) for p in problems)


@given(st.text(max_size=12) | st.floats(allow_nan=True, allow_infinity=True).map(repr))
def test_parse_price_accepts_exactly_the_finite_positive_numbers(text):
    import math

    from gpuopt.pricing.catalog import parse_price

    try:
        expected = float(text)
    except ValueError:
        expected = None
    # float()'s finite positive numbers, written in ASCII digits without digit groups (`1_000`, `٠.١` are not)
    written = set(text.strip()) <= set("0123456789.eE+-")
    ok = expected is not None and math.isfinite(expected) and expected > 0 and written
    assert (parse_price(text) is not None) == ok


@pytest.mark.parametrize(("text", "value"), [
    ("1", 1.0), ("2.5", 2.5), (".5", 0.5), ("5.", 5.0), ("1e-3", 0.001), ("1E+2", 100.0), (" 2 ", 2.0),
    ("1_000", None), ("٠.١", None), ("０.１", None), ("nan", None), ("inf", None), ("-1", None), ("0", None),
    ("1e400", None), ("0x10", None), ("", None)])
def test_a_price_is_an_ascii_decimal(text, value):
    """QA: float() read `1_000` as 1000 and Arabic-Indic or full-width digits as numbers, in overlays, refresh
    answers and ECB rates alike."""
    from gpuopt.pricing.catalog import parse_price

    assert parse_price(text) == value


ROW = st.fixed_dictionaries({"provider": st.sampled_from(["aws", "runpod"]), "service": st.just("s"),
                             "sku": st.sampled_from(["a", "b", "c"]), "region": st.just("global"),
                             "price_kind": st.sampled_from(["on-demand", "spot"]),
                             "price_per_hour": st.sampled_from(["", "1", "2.5", "3"]), "currency": st.just("USD")})


@given(st.lists(ROW, max_size=6), st.lists(ROW, max_size=6))
def test_compare_laws(old, new):
    from gpuopt.pricing.refresh import compare

    assert compare(old, old) == []
    forward, backward = compare(old, new), compare(new, old)
    assert {c.key for c in forward if c.kind == "new"} == {c.key for c in backward if c.kind == "removed"}
    assert {c.key for c in forward if c.kind == "changed"} == {c.key for c in backward if c.kind == "changed"}


def test_compare_reports_a_change_of_gpus_at_the_same_price_per_gpu():
    """8 -> 16 GPUs at 10.00 USD/h halves the price per GPU: a change of -50 %, not "unchanged"."""
    from gpuopt.pricing.refresh import compare

    row = {"provider": "aws", "service": "ec2", "sku": "p", "region": "us-east-1", "price_kind": "on-demand",
           "price_per_hour": "10", "currency": "USD", "gpu_count": "8"}
    (change,) = compare([row], [{**row, "gpu_count": "16"}])
    assert (change.kind, change.old, change.new, change.percent) == ("changed", "10 USD for 8 GPUs",
                                                                      "10 USD for 16 GPUs", -50.0)
    assert compare([row], [{**row, "as_of": "2026-12-01"}]) == []  # a date alone is no change of offering


def test_alibaba_spot_history_through_the_sdk_model(monkeypatch):
    """The SpotPrices.SpotPriceType layout is the SDK's own model (alibabacloud_ecs20140526 to_map/from_map); no
    captured answer exists, so the prices here are test values, not catalog prices."""
    pytest.importorskip("alibabacloud_ecs20140526")
    from alibabacloud_ecs20140526 import models

    from gpuopt.pricing.refresh import alibaba

    def entry(zone, price, stamp):
        return {"InstanceType": "ecs.gn7i-c8g1.2xlarge", "ZoneId": zone, "SpotPrice": price, "OriginPrice": 9.5326,
                "Timestamp": stamp, "NetworkType": "vpc", "IoOptimized": "optimized"}

    body = models.DescribeSpotPriceHistoryResponseBody().from_map({"Currency": "CNY", "RequestId": "r", "SpotPrices": {
        "SpotPriceType": [entry("cn-hangzhou-h", 2.0, "2026-11-29T10:00:00Z"),
                          entry("cn-hangzhou-h", 1.0, "2026-11-28T10:00:00Z"),
                          entry("cn-hangzhou-i", 3.0, "2026-11-29T11:00:00Z")]}})

    class Client:
        def describe_spot_price_history(self, request):
            self.request = request
            return models.DescribeSpotPriceHistoryResponse(body=body)

    client = Client()
    answer = alibaba.spot_history(client, "cn-hangzhou", "ecs.gn7i-c8g1.2xlarge",
                                  now=dt.datetime(2026, 11, 30, tzinfo=dt.UTC))
    assert (client.request.region_id, client.request.ostype, client.request.start_time) == (
        "cn-hangzhou", "linux", "2026-11-29T00:00:00Z")
    (row,) = alibaba.parse_spot_history(answer, "spot", "cn-hangzhou", specs("alibaba"))
    # latest per zone: h -> 2.0 (11-29), i -> 3.0; the lowest of those is 2.0, dated by its own Timestamp
    assert (row["price_per_hour"], row["price_kind"], row["as_of"], row["gpu"]) == ("2", "spot", "2026-11-29",
                                                                                     "A10-24GB")
    for key in alibaba.CREDENTIAL_HINTS:
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("HOME", "/nonexistent")
    with pytest.raises(RefreshError, match="credentials not configured"):
        alibaba.sdk_client_for("cn-hangzhou")


def test_the_cache_note_names_its_newest_date_and_what_it_adds(cache):
    """QA: a cache with one undated row was noted "as of unknown" ("unknown" sorts after every date), and a row
    that added an offering was counted as replacing the shipped snapshot."""
    from gpuopt.pricing.refresh import write_cache

    shipped = {(r["sku"], r["price_kind"]): r for r in shipped_rows() if r["provider"] == "runpod"}
    newer = dict(shipped[("1x H100 SXM", "on-demand")], price_per_hour="3.99", as_of="2026-11-30")
    undated = dict(shipped[("2x H100 SXM", "on-demand")], price_per_hour="1.00", as_of="")  # never beats a date
    added = dict(newer, sku="1x H100 SXM (new pod)", as_of="2026-11-29")
    path = write_cache("runpod", [newer, undated, added])
    assert [n for n in load_catalog().notes if "refreshed rows" in n] == [
        f"refreshed rows from {path} (newest as of 2026-11-30): 1 replace the shipped snapshot; 1 add offerings it "
        "lacks; 1 older or undated ones do not"]


def test_a_digitalocean_size_costs_its_newest_price_in_every_region(cache):
    """QA: the 2025-08 /v2/sizes answer replayed added gpu-h100x8-640gb in nyc1 at 23.92 beside the 2026-10
    35.28 of nyc2 and tor1; a `--region us` plan chose the stale one. DigitalOcean prices a size the same in
    every region, so the newest dated price of a size applies to all its regions, with a note."""
    assert run("catalog", "refresh", "digitalocean", "--file", FIXTURES / "digitalocean_sizes.json",
               "--as-of", "2025-08-29").exit_code == 0
    catalog = load_catalog()
    h100x8 = {o.region: o for o in catalog.offerings
              if (o.provider, o.sku, o.price_kind) == ("digitalocean", "gpu-h100x8-640gb", "on-demand")}
    assert {"nyc1", "nyc2", "tor1"} <= set(h100x8)
    assert {h100x8[r].price_per_hour for r in ("nyc1", "nyc2", "tor1")} == {35.28}
    assert {h100x8[r].list_price_per_hour for r in ("nyc1", "nyc2", "tor1")} == {35.28}  # review: was 23.92
    assert h100x8["nyc1"].as_of == h100x8["nyc2"].as_of and "23.92" in h100x8["nyc1"].notes
    assert any(n.startswith("digitalocean gpu-h100x8-640gb on-demand: ") and "nyc1" in n for n in catalog.notes)



def test_a_region_regions_csv_does_not_know_is_kept_of_unknown_country(cache, tmp_path):
    """QA: one Alibaba price-file key in a region gpuopt lacks (Dubai's me-east-1) failed the whole refresh, so a
    live refresh over every region could never succeed. The row is kept, of unknown country (`--region global`
    admits it, `apac` does not), and named; an overlay naming an unknown region is still refused (a typo)."""
    data = json.loads((FIXTURES / "alibaba_instance_price_excerpt.json").read_text())
    key = next(iter(data["pricingInfo"]))
    data["pricingInfo"]["me-east-1::" + key.split("::", 1)[1]] = data["pricingInfo"][key]
    path = tmp_path / "dubai.json"
    path.write_text(json.dumps(data))
    result = run("catalog", "refresh", "alibaba", "--file", path)
    assert result.exit_code == 0, result.output
    assert ("  of unknown country (regions.csv has no row for these ids; add one to place them): me-east-1"
            in result.stdout.splitlines())
    from gpuopt.pricing.regions import Residency

    catalog = load_catalog()

    def dubai(selector: str) -> list[object]:
        return [o for o in catalog.select(Residency(selector), providers=["alibaba"]) if o.region == "me-east-1"]

    assert dubai("global") and not dubai("apac")
    overlay = tmp_path / "o.csv"
    overlay.write_text("provider,sku,region,price_kind,price_per_hour,currency,gpu,gpu_count\n"
                       "alibaba,ecs.gn7i-c8g1.2xlarge,me-east-9,on-demand,1.0,CNY,A10-24GB,1\n")
    refused = run("catalog", "list", "--catalog", overlay)
    assert refused.exit_code == 2 and "column 'region': unknown region 'me-east-9'" in refused.stderr


@pytest.mark.parametrize(("fixture", "path", "value", "message"), [
    ("digitalocean_sizes.json", ("sizes", 1, "slug"), None, "sizes[1].slug: expected a non-empty string"),
    ("digitalocean_sizes.json", ("sizes", 1, "regions"), {}, "expected a list"),
    ("digitalocean_sizes.json", ("sizes", 1, "memory"), "abc", ".memory: expected a positive number"),
    ("runpod_gpu_types.json", ("data", "gpuTypes", 0, "displayName"), float("nan"),
     "gpuTypes[0].displayName: expected a non-empty string"),
    ("runpod_gpu_types.json", ("data", "gpuTypes", 0, "memoryInGb"), [], ".memoryInGb: expected a positive number"),
])
def test_a_wrong_typed_identifier_or_size_is_a_bad_answer(tmp_path, cache, fixture, path, value, message):
    """QA: `slug: null` wrote a priced 8 x H100 row with an empty SKU, `displayName: NaN` the SKU `1x nan`, and a
    wrong-typed size was taken as missing. Each is now the answer's error, the cache untouched."""
    data = json.loads((FIXTURES / fixture).read_text())
    node = data
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    bad = tmp_path / fixture
    bad.write_text(json.dumps(data))
    provider = fixture.split("_")[0]
    result = run("catalog", "refresh", provider, "--file", bad, "--as-of", "2026-11-01")
    assert result.exit_code == 2 and message in result.output, result.output
    assert not (cache / f"catalog-{provider}.csv").exists()
