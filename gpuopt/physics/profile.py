"""Calibration profiles: factors fitted on a user's own vLLM runs, applied to the GPU they were fitted on.

gpuopt's latency and memory models are roofline physics with a few efficiencies fitted on published runs;
a user's own GPUs, drivers, kernels and release may differ. `gpuopt calibrate` fits three corrections from
the user's evidence, each scoped to one GPU (and the vLLM release it was observed on):

    decode_bandwidth    x the GPU's HBM bandwidth   (decode steps: TPOT, ITL, output throughput)
    prefill_compute     x the GPU's tensor FLOP/s   (prefill: TTFT, and compute-bound mixed steps)
    memory_offset_gib   + the memory CUDA reports   (what vLLM leaves for the KV cache: start-up logs)

They act on the GPU's specification (`GpuSpec`), which every model reads, so the analytic latency model, the
serving simulator and the memory model all see the same correction with no second code path. Each entry
keeps the observations it was fitted on, its error before and after, and its leave-one-out error.
"""

from __future__ import annotations

from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field

from gpuopt import clock
from gpuopt.hardware import GpuSpec
from gpuopt.physics.vllm_profile import release_key

PROFILE_KIND = "gpuopt-profile"
FACTORS = ("decode_bandwidth", "prefill_compute", "memory_offset_gib")
SPEC_FACTOR_RANGE = (0.05, 2.0)
"""A fitted bandwidth or compute factor outside this range is not a correction of the GPU's datasheet but of
some other GPU or a broken measurement: half the datasheet's speed is common, twice it is not physics. A profile
holding one is refused (inputs/profile_file.py), and `calibrate` keeps none (planner/calibrate.py)."""


def memory_offset_possible(gpu: GpuSpec, offset_gib: float) -> bool:
    """Whether the GPU, reporting `offset_gib` more than gpus.csv says, still reports some memory and no more
    than it has: a KV cache past that is a start-up of another GPU or a hand edit (a 1,000 GiB KV cache "on an
    H100" had it hold a 405B model in BF16). Shared by the profile reader and calibrate's fit."""
    return 0 < gpu.memory_gib_reported + offset_gib <= gpu.memory_gib * 1.02


class Fit(BaseModel):
    """One fitted factor with its evidence. Strict: a hand-edited "5" or `true` is not a number, and NaN or an
    infinity is refused (they reached the GPU's specification: exit 70, or every estimate NaN)."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True, allow_inf_nan=False)

    value: float
    observations: list[str]  # ids of the observations it was fitted on
    median_error_before_pct: float
    median_error_after_pct: float
    leave_one_out_error_pct: float | None  # None with fewer than 3 observations


class ProfileEntry(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    gpu: str
    vllm_version: str | None = None  # None: any release
    models: list[str] = Field(default_factory=list)  # models the evidence came from (information)
    decode_bandwidth: Fit | None = None
    prefill_compute: Fit | None = None
    memory_offset_gib: Fit | None = None
    fitted: str  # ISO date

    def factors(self) -> tuple[float, float, float]:
        """(decode_bandwidth, prefill_compute, memory_offset_gib), neutral (1, 1, 0) where not fitted."""
        return (1.0 if self.decode_bandwidth is None else self.decode_bandwidth.value,
                1.0 if self.prefill_compute is None else self.prefill_compute.value,
                0.0 if self.memory_offset_gib is None else self.memory_offset_gib.value)


class Profile(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: str = PROFILE_KIND
    schema_version: Literal[1] = 1
    entries: list[ProfileEntry]

    def entry_for(self, gpu: str, vllm_version: str | None) -> ProfileEntry | None:
        """The entry of this GPU for this release (an entry without a release applies to any). Releases match by
        their minor series: calibrate writes the version a log prints (`0.33.0`, `0.10.1.1`), a plan names `0.33`
        or `0.10.1` -- compared as strings, an entry fitted on logs applied to no plan that named its release."""
        for e in self.entries:
            if e.gpu == gpu and (e.vllm_version is None or vllm_version is None
                                 or release_key(e.vllm_version)[:2] == release_key(vllm_version)[:2]):
                return e
        return None


def adjust_gpu(gpu: GpuSpec, entry: ProfileEntry | None) -> GpuSpec:
    """The GPU as the profile sees it."""
    return gpu if entry is None else scale(gpu, *entry.factors())


def scale(gpu: GpuSpec, decode_bandwidth: float = 1.0, prefill_compute: float = 1.0,
          memory_offset_gib: float = 0.0) -> GpuSpec:
    """The GPU with raw factors (what the fitting searches over)."""
    update: dict[str, float] = {"memory_gib_reported": gpu.memory_gib_reported + memory_offset_gib}
    if gpu.hbm_tb_s:
        update["hbm_tb_s"] = gpu.hbm_tb_s * decode_bandwidth
    for name in ("bf16_tflops", "fp8_tflops", "int8_tops"):
        value = getattr(gpu, name)
        if value:
            update[name] = value * prefill_compute
    return gpu.model_copy(update=update)


def dump_profile(profile: Profile) -> str:
    header = (f"# gpuopt calibration profile, written {clock.today().isoformat()} by `gpuopt calibrate`.\n"
              "# Use it with --profile on fit, simulate, solve and plan.\n")
    return header + yaml.safe_dump(profile.model_dump(mode="json"), sort_keys=False)
