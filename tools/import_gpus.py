"""Import GPU rows from ../shared/data/gpus.csv into gpuopt/data/gpus.csv, adding memory as CUDA reports it.

The package file is the source of truth: rows are merged by `gpu` (tools/merge.py), so a GPU added to the
package by hand stays. The memory CUDA reports (`memory_gib_reported` and its basis) is the package's own for
a GPU it already has: it is worked out there from vLLM logs and nvidia-smi figures (docs/memory.md), and the
rules below only give a first estimate for a GPU the package does not have yet. Run from the repository
root: `python -m tools.import_gpus [--write]`.
"""

from __future__ import annotations

import csv
from collections.abc import Sequence
from pathlib import Path

from tools.cli import arguments, finish
from tools.merge import Merge, Row, merge_rows, read_csv

H100_RATIO = 79.19 / 80.0
observed = {  # CUDA-reported totals seen in vLLM logs (vllm_memory_observed.csv / vllm_memory_algorithm.md)
    "H100-SXM-80GB": (79.19, "observed: vLLM logs, vllm_memory_observed.csv (33 rows at 79.19 GiB)"),
    "A100-SXM-40GB": (39.50, "observed: vLLM log, vllm_memory_observed.csv (A100 40GB, 39.50 GiB reported)"),
    "GH200-96GB": (94.50, "observed: GH200 log quoted in vllm_memory_algorithm.md section 10"),
    "RTX4090-24GB": (round(24564 / 1024, 2), "observed: 24564 MiB in a vLLM log row of vllm_memory_observed.csv"),
}
aws_mib = {
    "L40S-48GB": 45776,
    "L4-24GB": 22888,
    "A10G-24GB": 22888,
    "H200-141GB": 144384,
    "B200-180GB": 183359,
    "B300-288GB": 275040,
    "RTX-PRO-6000-96GB": 98304,
    "RTX-PRO-4500-32GB": 32768,
    "A100-SXM-80GB": 81920,
    "H100-SXM-80GB": 81920,
}
guide80 = {"A100-SXM-80GB", "A100-PCIE-80GB", "H100-PCIE-80GB", "H800-80GB", "A800-80GB"}
COLUMNS = [
    "gpu",
    "architecture",
    "memory_gib",
    "memory_gib_reported",
    "memory_reported_basis",
    "memory_type",
    "hbm_tb_s",
    "bf16_tflops",
    "fp8_tflops",
    "int8_tops",
    "int4_tensor_core",
    "fp8_native",
    "nvlink_gb_s",
    "pcie_gen",
    "tdp_w",
    "vllm_notes",
    "source",
    "verified_against_source",
    "as_of",
    "notes",
]
PACKAGE_OWNED = ("memory_gib_reported", "memory_reported_basis")
"""Columns a GPU row already in the package keeps through an import (see the module docstring)."""


def shared_rows(shared: Path) -> list[Row]:
    """The shared GPU table, shaped like the package's, with memory as CUDA reports it."""
    rows: list[Row] = []
    for r in csv.DictReader((shared / "gpus.csv").read_text(encoding="utf-8").splitlines()):
        g = r["gpu_model"]
        if g in observed:
            rep, basis = observed[g]
        elif g in guide80:
            rep, basis = 79.19, "GUIDE.md: a nominal 80 GB H100/A100 shows about 79.2 GiB to CUDA (H100 logs: 79.19)"
        elif g == "A10-24GB":
            rep = round(22888 / 1024 * H100_RATIO, 2)
            basis = "estimated: as A10G (same 24 GB GA102 board; AWS GpuInfo 22888 MiB) x (79.19/80)"
        elif g in aws_mib:
            rep = round(aws_mib[g] / 1024 * H100_RATIO, 2)
            basis = (
                f"estimated: AWS GpuInfo {aws_mib[g]} MiB x (79.19/80), "
                "the H100 ratio of CUDA-reported to AWS-listed memory"
            )
        else:
            rep = round(float(r["memory_gib"]) * H100_RATIO, 2)
            basis = "estimated: nominal memory x (79.19/80), the H100 ratio of CUDA-reported to nominal"
        nv = r["nvlink_gbs_per_gpu"].split(" ")[0]
        rows.append(
            dict(
                gpu=g,
                architecture=r["architecture"],
                memory_gib=r["memory_gib"],
                memory_gib_reported=f"{rep:.2f}",
                memory_reported_basis=basis,
                memory_type=r["memory_type"],
                hbm_tb_s=r["mem_bw_tbs"],
                bf16_tflops=r["bf16_fp16_dense_tflops"],
                fp8_tflops=r["fp8_dense_tflops"],
                int8_tops=r["int8_dense_tops"],
                int4_tensor_core=r["int4_tensor_core"],
                fp8_native=r["fp8_native"],
                nvlink_gb_s=nv,
                pcie_gen=r["pcie_gen"].split(" ")[0],
                tdp_w=r["tdp_w"],
                vllm_notes=r["vllm_notes"],
                source=r["source"],
                verified_against_source=r["verified_against_source"],
                as_of="",
                notes=r["notes"],
            )
        )
    return rows


def main(argv: Sequence[str] | None = None) -> Merge:
    args = arguments(__doc__, argv)
    columns, rows = read_csv(args.package / "data" / "gpus.csv")
    merge = merge_rows("gpuopt/data/gpus.csv", columns or COLUMNS, rows, shared_rows(args.shared), key=("gpu",),
                       owned=PACKAGE_OWNED)
    finish([merge], args)
    return merge


if __name__ == "__main__":
    main()
