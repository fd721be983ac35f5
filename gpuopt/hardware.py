"""GPU specifications as data (gpuopt/data/gpus.csv), looked up by normalised name.

`memory_gib_reported` is what CUDA reports (and what vLLM budgets from), not the marketing figure:
an "80 GB" H100 shows 79.19 GiB. The `memory_reported_basis` column says whether that figure was seen in
a vLLM log or estimated from the H100 ratio; the table keeps each row's datasheet source.
"""

from __future__ import annotations

from functools import cache

from pydantic import BaseModel, ConfigDict, field_validator

from gpuopt.datafiles import data_csv
from gpuopt.errors import UnknownNameError
from gpuopt.vocabulary import LinkKind

GIB = 1024**3  # bytes in a GiB: the unit vLLM logs memory in, and the one gpus.csv's memory is in


class GpuSpec(BaseModel):
    model_config = ConfigDict(frozen=True)

    gpu: str
    architecture: str
    memory_gib: float
    memory_gib_reported: float
    memory_reported_basis: str
    hbm_tb_s: float | None
    bf16_tflops: float | None
    fp8_tflops: float | None
    int8_tops: float | None
    fp8_native: bool
    nvlink_gb_s: float | None
    pcie_gen: int | None
    source: str
    verified_against_source: str
    # PCIe boards whose NVLink is a bridge between a pair of cards (data/nvlink_bridges.csv): None for NVLink
    # through the baseboard (SXM/OAM, NVSwitch) and for GPUs without NVLink
    nvlink_bridge_gpus: int | None = None

    @field_validator("hbm_tb_s", "bf16_tflops", "fp8_tflops", "int8_tops", "nvlink_gb_s", "pcie_gen",
                     mode="before")
    @classmethod
    def _blank_is_none(cls, value: object) -> object:
        return None if value == "" else value

    @field_validator("fp8_native", mode="before")
    @classmethod
    def _yes_no(cls, value: object) -> object:
        return str(value).strip().lower() == "yes" if isinstance(value, str) else value

    def nvlink_joins(self, gpus: int) -> bool:
        """Whether NVLink can join all of `gpus` of these cards: a bridge joins its pair, no more."""
        return bool(self.nvlink_gb_s) and (self.nvlink_bridge_gpus is None or gpus <= self.nvlink_bridge_gpus)

    @property
    def default_link(self) -> LinkKind:
        """The link of a replica's GPUs when nobody says: NVLink through the baseboard; PCIe for a card whose
        NVLink is a bridge (the GPU table's notes: clouds rarely fit one) or that has none."""
        return "nvlink" if self.nvlink_gb_s and self.nvlink_bridge_gpus is None else "pcie"

    @property
    def is_ampere(self) -> bool:
        return self.architecture == "Ampere"

    @property
    def is_rocm(self) -> bool:
        """An AMD Instinct GPU (CDNA), which vLLM runs on ROCm, where some defaults differ from CUDA's."""
        return self.architecture.startswith("CDNA")

    @property
    def has_bf16(self) -> bool:
        """Whether vLLM runs bfloat16 here: CUDA from compute capability 8.0 (platforms/cuda.py supported_dtypes;
        Volta and Turing get float16), and the CDNA GPUs of ROCm."""
        cc = self.compute_capability
        return cc is None or cc >= 80

    @property
    def compute_capability(self) -> int | None:
        """CUDA compute capability as vLLM compares it (major x 10 + minor); None for non-CUDA GPUs.

        Ampere GA10x parts are sm86 and datacenter A100/A30 sm80, but every vLLM kernel rule used here
        draws its line at 80, 89, 90 or 100, so one value per generation is enough -- except Blackwell,
        where GeForce/RTX PRO cards are sm120 (no sm100 tcgen05 kernels) and datacenter parts sm100.
        """
        arch = self.architecture
        if arch.startswith("Blackwell"):
            return 120 if self.gpu.upper().startswith("RTX") else 100
        return _CAPABILITY.get(arch.split(" + ")[0])


_CAPABILITY: dict[str, int] = {"Volta": 70, "Turing": 75, "Ampere": 80, "Ada Lovelace": 89, "Hopper": 90}


@cache
def gpu_table() -> dict[str, GpuSpec]:
    fields = set(GpuSpec.model_fields)
    bridges = {row["gpu"]: int(row["bridge_gpus"]) for row in data_csv("nvlink_bridges.csv")}
    specs = [GpuSpec.model_validate({**{k: v for k, v in row.items() if k in fields},
                                     "nvlink_bridge_gpus": bridges.get(row["gpu"])})
             for row in data_csv("gpus.csv")]
    unknown = set(bridges) - {s.gpu for s in specs}
    if unknown:
        raise ValueError(f"data/nvlink_bridges.csv names GPUs gpus.csv lacks: {sorted(unknown)}")
    return {s.gpu: s for s in specs}


@cache
def _by_lower_name() -> dict[str, GpuSpec]:
    return {k.lower(): v for k, v in gpu_table().items()}


def get_gpu(name: str) -> GpuSpec:
    """Find a GPU by normalised name, case-insensitively (H100-SXM-80GB, h100-sxm-80gb)."""
    key = name.strip().lower()
    lowered = _by_lower_name()
    if key in lowered:
        spec = lowered[key]
        return _calibrated.get(spec.gpu, spec)
    raise UnknownNameError("GPU", name, gpu_table().keys())


# ---- calibration profiles -------------------------------------------------------------------------------
# `--profile FILE` replaces a GPU's specification by its calibrated copy (physics/profile.py) for the whole
# command: every model reads the GPU through get_gpu, so latency, simulation and memory see one correction.
_calibrated: dict[str, GpuSpec] = {}


def use_calibrated(specs: dict[str, GpuSpec]) -> None:
    """Install calibrated specifications (by GPU name) for the rest of the process; {} removes them."""
    _calibrated.clear()
    _calibrated.update(specs)

