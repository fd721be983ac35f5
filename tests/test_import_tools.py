"""The package data is the source of truth: tools/import_*.py merge ../shared/data into it by key and never
drop a row added to the package by hand. Everything here runs on small files in tmp_path."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import pytest

from gpuopt.pricing.columns import CATALOG_COLUMNS, HISTORY_COLUMNS
from tools import import_catalog, import_gpus
from tools.merge import merge_rows, read_csv, write_csv

KEY = ("id",)


def test_merge_adds_updates_and_keeps_package_only_rows() -> None:
    package = [{"id": "a", "x": "1", "note": "hand"}, {"id": "b", "x": "2", "note": ""}]
    imported = [{"id": "b", "x": "3"}, {"id": "c", "x": "4"}]
    m = merge_rows("t.csv", ["id", "x", "note"], package, imported, KEY)
    assert m.rows == [{"id": "a", "x": "1", "note": "hand"}, {"id": "b", "x": "3", "note": ""},
                      {"id": "c", "x": "4", "note": ""}]
    assert (m.added, m.package_only, m.unchanged) == ([("c",)], [("a",)], [])
    assert m.changed == [(("b",), {"x": ("2", "3")})]
    assert m.replaced == [{"id": "b", "x": "2", "note": ""}]


def test_a_blank_imported_value_does_not_erase_a_package_value() -> None:
    m = merge_rows("t.csv", ["id", "x"], [{"id": "a", "x": "7"}], [{"id": "a", "x": ""}], KEY)
    assert m.rows == [{"id": "a", "x": "7"}]
    assert m.unchanged == [("a",)] and m.changed == []


def test_keep_package_prefers_the_package_row_and_says_so() -> None:
    m = merge_rows("t.csv", ["id", "x"], [{"id": "a", "x": "new"}], [{"id": "a", "x": "old"}], KEY,
                   keep_package=lambda old, new: True)
    assert m.rows == [{"id": "a", "x": "new"}]
    assert m.package_wins == [("a",)]
    assert "keep 0 package-only and 1 newer in the package" in m.report()


def test_new_imported_columns_are_appended_and_package_columns_keep_their_order() -> None:
    m = merge_rows("t.csv", ["x", "id"], [{"x": "1", "id": "a"}], [{"id": "a", "x": "1", "y": "2"}], KEY)
    assert m.columns == ["x", "id", "y"]
    assert m.rows == [{"x": "1", "id": "a", "y": "2"}]


def test_owned_columns_keep_the_package_value_on_a_row_it_has() -> None:
    package = [{"id": "a", "mem": "79.19", "x": "1"}]
    imported = [{"id": "a", "mem": "79.20", "x": "2"}, {"id": "b", "mem": "23.99", "x": "3"}]
    m = merge_rows("t.csv", ["id", "mem", "x"], package, imported, KEY, owned=("mem",))
    assert m.rows == [{"id": "a", "mem": "79.19", "x": "2"}, {"id": "b", "mem": "23.99", "x": "3"}]
    # a blank owned value is still filled from the import
    m = merge_rows("t.csv", ["id", "mem"], [{"id": "a", "mem": ""}], [{"id": "a", "mem": "9"}], KEY, owned=("mem",))
    assert m.rows == [{"id": "a", "mem": "9"}]


def test_a_package_annotation_survives_while_the_imported_text_is_the_same() -> None:
    annotated = {"id": "a", "notes": "from the config | gpuopt: derived on top"}
    m = merge_rows("t.csv", ["id", "notes"], [annotated], [{"id": "a", "notes": "from the config"}], KEY)
    assert m.rows == [annotated] and m.unchanged == [("a",)]
    # the source's text changed: the import wins (the annotation is written again by hand or by the importer)
    m = merge_rows("t.csv", ["id", "notes"], [annotated], [{"id": "a", "notes": "from the new config"}], KEY)
    assert m.rows == [{"id": "a", "notes": "from the new config"}]


def test_two_rows_with_one_key_are_refused() -> None:
    with pytest.raises(ValueError, match="t.csv \\(import\\): two rows with key a"):
        merge_rows("t.csv", ["id"], [], [{"id": "a"}, {"id": "a"}], KEY)


def _write_csv(path: Path, rows: list[dict[str, str]], columns: list[str] | None = None) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    write_csv(path, columns or list(rows[0]), rows)


SHARED_GPU = {
    "gpu_model": "H100-SXM-80GB", "architecture": "Hopper", "memory_gib": "80", "memory_type": "HBM3",
    "mem_bw_tbs": "3.35", "bf16_fp16_dense_tflops": "989.5", "fp8_dense_tflops": "1979", "int8_dense_tops": "1979",
    "int4_tensor_core": "no", "fp8_native": "yes", "nvlink_gbs_per_gpu": "900 (NVLink 4)", "pcie_gen": "5 x16",
    "tdp_w": "700", "vllm_notes": "sm90", "source": "datasheet", "verified_against_source": "no", "notes": "",
}


def test_a_gpu_added_by_hand_survives_an_import(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    shared, package = tmp_path / "shared", tmp_path / "gpuopt"
    _write_csv(shared / "gpus.csv", [SHARED_GPU])
    hand = {c: "" for c in import_gpus.COLUMNS} | {"gpu": "MY-GPU-64GB", "architecture": "Hopper", "source": "mine"}
    old_h100 = {c: "" for c in import_gpus.COLUMNS} | {"gpu": "H100-SXM-80GB", "architecture": "Hopper",
                                                       "hbm_tb_s": "3.0", "source": "datasheet"}
    _write_csv(package / "data" / "gpus.csv", [hand, old_h100], import_gpus.COLUMNS)
    before = (package / "data" / "gpus.csv").read_bytes()

    import_gpus.main(["--shared", str(shared), "--package", str(package)])  # a dry run writes nothing
    assert (package / "data" / "gpus.csv").read_bytes() == before
    report = capsys.readouterr().out
    assert "gpuopt/data/gpus.csv: add 0, change 1, unchanged 0, keep 1 package-only" in report
    assert "  keep (package only) MY-GPU-64GB" in report
    assert "hbm_tb_s '3.0' -> '3.35'" in report

    import_gpus.main(["--shared", str(shared), "--package", str(package), "--write"])
    _, rows = read_csv(package / "data" / "gpus.csv")
    assert [r["gpu"] for r in rows] == ["MY-GPU-64GB", "H100-SXM-80GB"]
    assert rows[0] == hand
    # the import derives what the package needs: CUDA-reported memory, the first figure of NVLink and PCIe
    assert (rows[1]["hbm_tb_s"], rows[1]["memory_gib_reported"], rows[1]["nvlink_gb_s"], rows[1]["pcie_gen"]) == \
        ("3.35", "79.19", "900", "5")


def test_an_import_without_the_shared_folder_stops_with_one_line(tmp_path: Path) -> None:
    with pytest.raises(SystemExit, match="no shared data folder"):
        import_gpus.main(["--shared", str(tmp_path / "absent")])


SKU_HEADER = ["provider", "service", "sku", "region", "country", "gpu_model", "gpu_count", "gpu_mem_gib_each", "vcpus",
              "ram_gib", "interconnect", "price_per_hour", "currency", "price_kind", "source", "as_of", "notes"]


def _catalog_row(**values: str) -> dict[str, str]:
    return {c: "" for c in CATALOG_COLUMNS} | {"service": "ec2", "region": "us-east-1", "gpu": "H100-SXM-80GB",
                                               "gpu_count": "8", "currency": "USD", "price_kind": "on-demand",
                                               "billing": "per-hour", "source": "s"} | values


def test_catalog_import_keeps_hand_rows_newer_prices_and_moves_replaced_prices_to_history(tmp_path: Path) -> None:
    shared, package = tmp_path / "shared", tmp_path / "gpuopt"
    sku = dict.fromkeys(SKU_HEADER, "") | {"provider": "aws", "service": "ec2", "region": "us-east-1",
                                           "country": "US", "gpu_model": "H100-SXM-80GB", "gpu_count": "8",
                                           "currency": "USD", "price_kind": "on-demand", "source": "s"}
    _write_csv(shared / "skus.csv", [sku | {"sku": "p5.48xlarge", "price_per_hour": "98.32", "as_of": "2026-06-01"},
                                     sku | {"sku": "p5e.48xlarge", "price_per_hour": "120", "as_of": "2026-01-01"}])
    for name in ("cn_prices.csv", "serverless_prices.csv", "commit_prices.csv"):
        (shared / name).write_text("provider,price_kind\n", encoding="utf-8")
    _write_csv(package / "data" / "gpus.csv", [{"gpu": "H100-SXM-80GB"}])
    data = package / "pricing" / "data"
    hand = _catalog_row(provider="aws", sku="p5.mine", price_per_hour="1", as_of="2026-11-01", source="my quote")
    old = _catalog_row(provider="aws", sku="p5.48xlarge", price_per_hour="90", as_of="2026-01-01")
    refreshed = _catalog_row(provider="aws", sku="p5e.48xlarge", price_per_hour="110", as_of="2026-11-30")
    _write_csv(data / "catalog.csv", [old, refreshed, hand], list(CATALOG_COLUMNS))
    (data / "catalog_history.csv").write_text(",".join(HISTORY_COLUMNS) + "\n", encoding="utf-8")
    _write_csv(data / "regions.csv", [{"region": "my-dc", "country": "DE", "jurisdiction": "EU", "geo": "europe",
                                       "source": "mine"}])

    import_catalog.main(["--shared", str(shared), "--package", str(package), "--write", "--summary"])
    _, catalog = read_csv(data / "catalog.csv")
    by_sku = {r["sku"]: r for r in catalog}
    assert sorted(by_sku) == ["p5.48xlarge", "p5.mine", "p5e.48xlarge"]
    assert by_sku["p5.mine"] == hand  # added by hand: kept
    assert by_sku["p5e.48xlarge"]["price_per_hour"] == "110"  # refreshed after the import's date: kept
    assert (by_sku["p5.48xlarge"]["price_per_hour"], by_sku["p5.48xlarge"]["as_of"]) == ("98.32", "2026-06-01")
    _, history = read_csv(data / "catalog_history.csv")
    assert [(r["sku"], r["price_per_hour"], r["as_of"], r["superseded_by_as_of"]) for r in history] == \
        [("p5.48xlarge", "90", "2026-01-01", "2026-06-01")]
    _, regions = read_csv(data / "regions.csv")
    assert [r["region"] for r in regions] == ["my-dc", "us-east-1"]


def test_a_row_without_region_is_not_imported_where_the_package_states_the_region() -> None:
    placed = _catalog_row(provider="digitalocean", service="droplet", sku="gpu-mi300x8-1536gb", region="nyc1")
    unknown = dict(placed, region="unknown")
    other = dict(unknown, sku="gpu-l40sx1-48gb")
    assert import_catalog.without_resolved_regions([unknown, other], [placed]) == [other]
    assert import_catalog.without_resolved_regions([unknown], [unknown]) == [unknown]
    # the package still has its own unknown row next to a stated one: the import keeps updating it
    assert import_catalog.without_resolved_regions([unknown], [placed, unknown]) == [unknown]


def test_an_offering_the_package_retired_is_not_added_back() -> None:
    dated = _catalog_row(provider="runpod", service="pod-secure", sku="1x A100 PCIe", region="global",
                         as_of="2026-09-25")
    twin = dict(dated, sku="1x_A100-80GB_SECURE", as_of="unknown (catalog commit 01acdfd)")
    retired = dict(twin, superseded_by_as_of="")
    assert import_catalog.without_retired([dated, twin], [dated], [retired]) == [dated]
    # a history row of an offering still sold is a past price, not a retirement
    assert import_catalog.without_retired([dated, twin], [dated], [dict(dated, price_per_hour="9")]) == [dated, twin]


def test_region_strings_of_the_china_sources_normalise_to_ids() -> None:
    assert import_catalog.norm_region("cn (region not stated in source)", "CN")[0] == "cn-mainland"
    assert import_catalog.norm_region("cn-* (unverified)", "")[:2] == ("cn-mainland", "CN")
    assert import_catalog.norm_region("ap-beijing", "CN") == ("ap-beijing", "CN", "")


def test_a_superseded_price_is_one_history_row_and_an_added_offering_states_its_link_basis(tmp_path: Path) -> None:
    shared, package = tmp_path / "shared", tmp_path / "gpuopt"
    sku = dict.fromkeys(SKU_HEADER, "") | {"provider": "tencent", "service": "cvm", "sku": "GT4.4XLARGE96",
                                           "region": "cn-mainland", "country": "CN", "gpu_model": "A100-SXM-40GB",
                                           "gpu_count": "1", "interconnect": "nvlink", "currency": "CNY",
                                           "price_kind": "subscription-monthly", "source": "s"}
    _write_csv(shared / "skus.csv", [sku | {"sku": "GN7.2XLARGE32", "region": "ap-beijing",
                                            "interconnect": "pcie", "price_per_hour": "1.26", "currency": "USD",
                                            "price_kind": "on-demand", "as_of": "2023-06-12"}])
    for name in ("serverless_prices.csv", "commit_prices.csv"):
        (shared / name).write_text("provider,price_kind\n", encoding="utf-8")
    _write_csv(package / "data" / "gpus.csv", [{"gpu": "A100-SXM-40GB"}])
    data = package / "pricing" / "data"
    _write_csv(data / "catalog.csv", [], list(CATALOG_COLUMNS))
    (data / "catalog_history.csv").write_text(",".join(HISTORY_COLUMNS) + "\n", encoding="utf-8")
    _write_csv(data / "regions.csv", [], ["region", "country", "jurisdiction", "geo", "source"])
    args = ["--shared", str(shared), "--package", str(package), "--write", "--summary"]
    old = sku | {"price_per_hour": "18.83", "as_of": "2021-05-25"}
    _write_csv(shared / "cn_prices.csv", [old])
    import_catalog.main(args)  # the 2021 price, then a newer one of the same offering
    _write_csv(shared / "cn_prices.csv", [old, sku | {"price_per_hour": "17.74", "as_of": "2026-06-15"}])
    import_catalog.main(args)
    _, catalog = read_csv(data / "catalog.csv")
    by_sku = {r["sku"]: r for r in catalog}
    assert (by_sku["GT4.4XLARGE96"]["price_per_hour"], by_sku["GT4.4XLARGE96"]["as_of"]) == ("17.74", "2026-06-15")
    assert (by_sku["GN7.2XLARGE32"]["interconnect"], by_sku["GN7.2XLARGE32"]["interconnect_basis"]) == \
        ("pcie", "source")
    _, history = read_csv(data / "catalog_history.csv")
    # the package's old row and the import's older member of the offering are one past price, kept with the
    # package's derived column
    assert [(r["price_per_hour"], r["as_of"], r["superseded_by_as_of"], r["interconnect_basis"]) for r in history] \
        == [("18.83", "2021-05-25", "2026-06-15", "source")]


def test_read_then_write_of_every_package_file_is_byte_identical(tmp_path: Path) -> None:
    """So an import that changes nothing leaves the package files as they are."""
    import gpuopt

    root = Path(gpuopt.__file__).parent
    written = ("data/gpus.csv", "data/models.csv", "pricing/data/catalog.csv", "pricing/data/catalog_history.csv",
               "pricing/data/regions.csv")
    for path in (root / name for name in written):
        columns, rows = read_csv(path)
        copy = tmp_path / path.name
        write_csv(copy, columns, rows)
        assert copy.read_bytes() == path.read_bytes(), path.name
        assert list(csv.DictReader(io.StringIO(copy.read_text(encoding="utf-8")))) == rows


def test_no_gpuopt_code_names_the_shared_data_folder() -> None:
    """Build, test and run need only the package: no string in gpuopt's code (docstrings aside) points at
    ../shared (benchmarks and tools may)."""
    import ast

    import gpuopt

    found = []
    for path in sorted(Path(gpuopt.__file__).parent.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        docstrings = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Expr)}
        found += [f"{path.name}:{n.lineno}" for n in ast.walk(tree)
                  if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docstrings
                  and (n.value == "shared" or "shared/" in n.value or "SHARED" in n.value)]
    assert found == []


def test_the_fat_binary_reader_counts_each_entry_by_kind_and_sm() -> None:
    """A container (magic, version, header 16, size) of three entries -- cubin sm75, cubin sm75, PTX sm80 -- each
    a 64-byte header (kind, _, header size, payload size, ..., SM at offset 28) and a payload, after unrelated
    bytes that happen to hold the magic."""
    import struct

    from tools.extract_vllm_gpu_archs import MAGIC, architectures

    def entry(kind: int, sm: int, payload: bytes) -> bytes:
        header = bytearray(64)
        struct.pack_into("<HHIQ", header, 0, kind, 0, 64, len(payload))
        struct.pack_into("<I", header, 28, sm)
        return bytes(header) + payload

    body = entry(2, 75, b"a" * 8) + entry(2, 75, b"b" * 16) + entry(1, 80, b".target sm_80")
    container = MAGIC + struct.pack("<HHQ", 1, 16, len(body)) + body
    stray = MAGIC + struct.pack("<HHQ", 1, 99, 10**12)  # not a container header: skipped
    assert architectures(b"\0" * 7 + stray + container) == {("cubin", 75): 2, ("ptx", 80): 1}
