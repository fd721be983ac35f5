"""Fuzz gpuopt's input boundary at scale and print the count and the time (figures go to docs/inputs.md).

    python benchmarks/fuzz.py            # 10,000 cases
    python benchmarks/fuzz.py --scale 0.1

The same generators and oracle as tests/test_fuzz.py (tests/fuzzing.py), with more examples: every case must
end in exit 0, 1, 2 or 3 with no traceback; the first failure stops the run with the falsifying input.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from gpuopt.errors import GpuoptError  # noqa: E402
from gpuopt.inputs.capacity import load_capacity_file  # noqa: E402
from gpuopt.inputs.workload import load_workload  # noqa: E402
from tests.fuzzing import (  # noqa: E402
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
from tests.test_fuzz import (  # noqa: E402
    CAPACITY_SMALL,
    FIT_TARGETS,
    SIMULATE_FIXED,
    SIMULATE_NOT_FUZZED,
    SMALL_WORKLOAD,
)


def _load(loader: Callable[[Path], Any], path: Path, raw: bytes) -> None:
    path.write_bytes(raw)
    try:
        loader(path)
    except GpuoptError as exc:
        assert exc.problems and all(p.strip() for p in exc.problems), exc.problems


def cases(folder: Path) -> list[tuple[str, int, st.SearchStrategy[Any], Callable[[Any], None]]]:
    """(name, examples at scale 1, strategy, body)."""
    small, capacity = str(folder / "small.yaml"), str(folder / "capacity.yaml")

    def fit(drawn: tuple[tuple[str, str], list[str]]) -> None:
        (gpu, model), flags = drawn
        chosen = ["--model-config", str(folder / "config.json")] if model == "CONFIG" else ["--model", model]
        args = [*flags, "--gpu", gpu, *([] if "--model" in flags or "--model-config" in flags else chosen)]
        check_contract(invoke(args), args)

    def flags_at_boundary(args: list[str]) -> None:
        target = small if args[0] == "solve" else capacity
        args = [target if a == "WORKLOAD" else a for a in args] + ["--headroom", "0"]
        check_contract(invoke(args), args)

    def flags_full(args: list[str]) -> None:
        args = [small if a == "WORKLOAD" else a for a in args]
        check_contract(invoke(args), args)

    return [
        ("workload files (loader)", 3000, mutated_text(documents(workload_schema())),
         lambda raw: _load(load_workload, folder / "w.yaml", raw)),
        ("capacity files (loader)", 2000, mutated_text(documents(capacity_schema())),
         lambda raw: _load(load_capacity_file, folder / "c.yaml", raw)),
        ("workload files (gpuopt solve, stops at flags)", 1500, mutated_text(documents(workload_schema())),
         lambda raw: run_file_case(folder, "w.yaml", raw, lambda p: ["solve", str(p), "--headroom", "0"])),
        ("overlays (gpuopt catalog validate --overlay)", 1500, overlay_csv(),
         lambda raw: run_file_case(folder, "o.csv", raw, lambda p: ["catalog", "validate", "--overlay", str(p)])),
        ("gpuopt fit flag combinations", 1000, st.tuples(FIT_TARGETS, flag_combination("fit", max_flags=6)), fit),
        ("gpuopt simulate flag combinations (12 prompts)", 600,
         st.tuples(FIT_TARGETS, flag_combination("simulate", fixed=SIMULATE_FIXED, max_flags=6,
                                                 exclude=SIMULATE_NOT_FUZZED)), fit),
        ("gpuopt solve/plan flags (stop at flags)", 800,
         st.one_of(flag_combination("solve", fixed=["WORKLOAD"], max_flags=4),
                   flag_combination("plan", fixed=["WORKLOAD"], max_flags=4)), flags_at_boundary),
        ("generated workloads, full solve", 100, documents(workload_schema()),
         lambda doc: run_file_case(folder, "w.yaml", to_yaml(doc).encode(),
                                   lambda p: ["solve", str(p), "--provider", "aws"])),
        ("gpuopt solve flag combinations, full solve", 50, flag_combination("solve", fixed=["WORKLOAD"], max_flags=3),
         flags_full),
        ("finite-price overlays, full solve", 50, overlay_csv().filter(lambda raw: not has_non_finite_price(raw)),
         lambda raw: run_file_case(folder, "o.csv", raw,
                                   lambda p: ["solve", small, "--catalog", str(p), "--provider", "aws"])),
    ]


def run_case(strategy: st.SearchStrategy[Any], body: Callable[[Any], None], examples: int, seed: int) -> int:
    count = 0

    @settings(max_examples=examples, deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much])
    @given(strategy)
    def fuzz(value: Any) -> None:
        nonlocal count
        count += 1
        body(value)

    from hypothesis import seed as fixed_seed

    fixed_seed(seed)(fuzz)()
    return count


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=1.0, help="Multiply every example count (default 1).")
    parser.add_argument("--seed", type=int, default=12)
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="gpuopt-fuzz-"))
    prepare_folder(folder)
    (folder / "small.yaml").write_text(SMALL_WORKLOAD, encoding="utf-8")
    (folder / "capacity.yaml").write_text(CAPACITY_SMALL, encoding="utf-8")
    os.environ.update(GPUOPT_TODAY="2026-11-29", GPUOPT_CACHE_DIR=str(folder / "cache"), GPUOPT_SOLVER="cbc")
    os.environ.pop("GPUOPT_DEBUG", None)
    total, started = 0, time.perf_counter()
    print(f"{'target':<50} {'cases':>7} {'seconds':>8} {'ms/case':>8}")
    for name, examples, strategy, body in cases(folder):
        wanted = max(1, round(examples * args.scale))
        t0 = time.perf_counter()
        count = run_case(strategy, body, wanted, args.seed)
        elapsed = time.perf_counter() - t0
        total += count
        print(f"{name:<50} {count:>7} {elapsed:>8.1f} {1000 * elapsed / max(count, 1):>8.1f}", flush=True)
    elapsed = time.perf_counter() - started
    print(f"{'total (every case exit 0-3, no traceback)':<50} {total:>7} {elapsed:>8.1f} "
          f"{1000 * elapsed / max(total, 1):>8.1f}")


if __name__ == "__main__":
    main()
