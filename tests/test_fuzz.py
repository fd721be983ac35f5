"""Fuzz the input boundary: generated and mutated workload files, capacity files, overlays and flag
combinations must each end in exit 0, 1, 2 or 3 with no traceback (tests/fuzzing.py has the generators and the
oracle). A few hundred examples here; benchmarks/fuzz.py runs tens of thousands and prints the count and time.

Most examples stop at the boundary (fast); only a handful reach a full solve, which takes about a second.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpuopt.errors import GpuoptError
from gpuopt.inputs.capacity import CapacityFile, load_capacity_file
from gpuopt.inputs.workload import WorkloadFile, load_workload
from tests.fuzzing import (
    capacity_schema,
    check_contract,
    documents,
    flag_combination,
    has_non_finite_price,
    invoke,
    mutated_text,
    overlay_csv,
    prepare_folder,
    run_file_case,
    to_yaml,
    workload_schema,
)

FUZZ = settings(deadline=None, database=None, derandomize=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much])

SMALL_WORKLOAD = """schema_version: 1
workloads:
  - name: a
    model: meta-llama/Llama-3.1-8B-Instruct
    requests_per_second: 1
    input_tokens: 500
    output_tokens: 100
"""


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    path = tmp_path_factory.mktemp("fuzz")
    prepare_folder(path)
    (path / "small.yaml").write_text(SMALL_WORKLOAD, encoding="utf-8")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("GPUOPT_TODAY", "2026-11-29")
        patch.setenv("GPUOPT_CACHE_DIR", str(path / "cache"))
        patch.delenv("GPUOPT_DEBUG", raising=False)
        yield path


def _load_or_fail(loader: object, path: Path, model: type) -> None:
    """The loader returns the model or raises a GpuoptError whose problems are single non-empty lines."""
    try:
        result = loader(path)  # type: ignore[operator]
    except GpuoptError as exc:
        assert exc.problems and all(p.strip() for p in exc.problems), exc.problems
        return
    assert isinstance(result, model)


# ---- files at the boundary (fast: no solve) ------------------------------------------------------------


@settings(FUZZ, max_examples=150)
@given(raw=mutated_text(documents(workload_schema())))
def test_workload_files_load_or_fail_with_a_message(folder: Path, raw: bytes) -> None:
    path = folder / "w.yaml"
    path.write_bytes(raw)
    _load_or_fail(load_workload, path, WorkloadFile)


@settings(FUZZ, max_examples=100)
@given(raw=mutated_text(documents(capacity_schema())))
def test_capacity_files_load_or_fail_with_a_message(folder: Path, raw: bytes) -> None:
    path = folder / "c.yaml"
    path.write_bytes(raw)
    _load_or_fail(load_capacity_file, path, CapacityFile)


@settings(FUZZ, max_examples=60)
@given(raw=mutated_text(documents(workload_schema())))
def test_workload_files_through_the_cli_stop_at_the_boundary(folder: Path, raw: bytes) -> None:
    """`solve` on mutated files; --headroom 0 makes a file that loads stop at the flag check, so the run stays
    fast (full solves are below)."""
    run_file_case(folder, "w.yaml", raw, lambda p: ["solve", str(p), "--headroom", "0"])


@settings(FUZZ, max_examples=80)
@given(raw=overlay_csv())
def test_overlays_validate_or_fail_with_a_message(folder: Path, raw: bytes) -> None:
    run_file_case(folder, "overlay.csv", raw, lambda p: ["catalog", "validate", "--overlay", str(p)])


# ---- flags ------------------------------------------------------------------------------------------------


FIT_TARGETS = st.tuples(st.sampled_from(["H100-SXM-80GB", "L4-24GB", "A100-SXM-40GB", "T4-16GB", "B200-180GB"]),
                        st.sampled_from(["meta-llama/Llama-3.1-8B-Instruct", "Qwen/Qwen2.5-32B-Instruct", "CONFIG"]))


@settings(FUZZ, max_examples=40)
@given(target=FIT_TARGETS, flags=flag_combination("fit", max_flags=6))
def test_fit_flag_combinations(folder: Path, target: tuple[str, str], flags: list[str]) -> None:
    """fit with a real GPU and model (or config.json) and up to six other flags, so most runs reach the
    memory and latency models."""
    gpu, model = target
    chosen = ["--model-config", str(folder / "config.json")] if model == "CONFIG" else ["--model", model]
    args = [*flags, "--gpu", gpu, *([] if "--model" in flags or "--model-config" in flags else chosen)]
    check_contract(invoke(args), args)


SIMULATE_FIXED = ["--num-prompts", "12"]
SIMULATE_NOT_FUZZED = ("num_prompts", "save_result", "lengths_file", "profile_path")
"""A dozen prompts keep every case short; the file flags have tests of their own."""


@settings(FUZZ, max_examples=30)
@given(target=FIT_TARGETS, flags=flag_combination("simulate", fixed=SIMULATE_FIXED, max_flags=6,
                                                  exclude=SIMULATE_NOT_FUZZED))
def test_simulate_flag_combinations(folder: Path, target: tuple[str, str], flags: list[str]) -> None:
    """simulate with a real GPU and model (or config.json), a dozen prompts and up to six other flags,
    `--server-args` among them."""
    gpu, model = target
    chosen = ["--model-config", str(folder / "config.json")] if model == "CONFIG" else ["--model", model]
    args = [*flags, "--gpu", gpu, *([] if "--model" in flags or "--model-config" in flags else chosen)]
    check_contract(invoke(args), args)


@settings(FUZZ, max_examples=40)
@given(args=st.one_of(flag_combination("solve", fixed=["WORKLOAD"], max_flags=4),
                     flag_combination("plan", fixed=["WORKLOAD"], max_flags=4)))
def test_solve_and_plan_flags_stop_at_the_boundary(folder: Path, args: list[str]) -> None:
    """Flag combinations for solve/plan, with a valid file; --headroom 0 added last so valid combinations stop
    at the flag check instead of solving (full solves are below)."""
    target = str(folder / ("small.yaml" if args[0] == "solve" else "capacity.yaml"))
    if args[0] == "plan":
        (folder / "capacity.yaml").write_text(CAPACITY_SMALL, encoding="utf-8")
    args = [target if a == "WORKLOAD" else a for a in args] + ["--headroom", "0"]
    check_contract(invoke(args), args)


CAPACITY_SMALL = """schema_version: 1
horizon: {periods: 2, period: quarter}
workloads:
  - name: a
    model: meta-llama/Llama-3.1-8B-Instruct
    demand: {requests_per_second: [1, 2]}
    input_tokens: 500
    output_tokens: 100
"""


# ---- a few full solves ---------------------------------------------------------------------------------------


@settings(FUZZ, max_examples=8)
@given(doc=documents(workload_schema()))
def test_generated_workloads_solve_or_fail_cleanly(folder: Path, doc: object) -> None:
    run_file_case(folder, "w.yaml", to_yaml(doc).encode(), lambda p: ["solve", str(p), "--provider", "aws"])


@settings(FUZZ, max_examples=8)
@given(args=flag_combination("solve", fixed=["WORKLOAD"], max_flags=3))
def test_solve_flag_combinations_full(folder: Path, args: list[str]) -> None:
    args = [str(folder / "small.yaml") if a == "WORKLOAD" else a for a in args]
    check_contract(invoke(args), args)


@settings(FUZZ, max_examples=6)
@given(raw=overlay_csv().filter(lambda raw: not has_non_finite_price(raw)))
def test_finite_overlays_through_solve(folder: Path, raw: bytes) -> None:
    run_file_case(folder, "overlay.csv", raw,
                  lambda p: ["solve", str(folder / "small.yaml"), "--catalog", str(p), "--provider", "aws"])


# ---- prices: every entry point refuses a non-finite price ----------------------------------------------------


@pytest.mark.parametrize("price", ["nan", "inf", "1e400"])
def test_non_finite_overlay_prices_are_refused(folder: Path, price: str) -> None:
    overlay = folder / f"overlay-{price}.csv"
    overlay.write_text("provider,sku,region,price_kind,price_per_hour,currency\n"
                       f"aws,g6e.xlarge,us-east-1,on-demand,{price},USD\n", encoding="utf-8")
    validate = ["catalog", "validate", "--overlay", str(overlay)]
    assert invoke(validate).exit_code == 2, "catalog validate --overlay calls a non-finite price valid"
    args = ["solve", str(folder / "small.yaml"), "--catalog", str(overlay), "--provider", "aws"]
    check_contract(invoke(args), args)
