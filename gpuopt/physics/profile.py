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

import datetime as dt
from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from gpuopt.errors import InputError, UnknownNameError
from gpuopt.hardware import GpuSpec

PROFILE_KIND = "gpuopt-profile"
FACTORS = ("decode_bandwidth", "prefill_compute", "memory_offset_gib")


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
        """The entry of this GPU for this release (an entry without a release applies to any)."""
        for e in self.entries:
            if e.gpu == gpu and (e.vllm_version is None or vllm_version is None or e.vllm_version == vllm_version):
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


SPEC_FACTOR_RANGE = (0.05, 2.0)
"""A fitted bandwidth or compute factor outside this range is not a correction of the GPU's datasheet but of
some other GPU or a broken measurement: half the datasheet's speed is common, twice it is not physics."""


def profile_problems(profile: Profile) -> list[str]:
    """What no GPU could be: a speed factor outside SPEC_FACTOR_RANGE, or a memory offset that leaves the GPU
    reporting no memory or more than its datasheet (calibrate on logs of another GPU, or a hand edit: a 1,000 GiB
    KV cache on an H100 made it hold a 405B model in BF16)."""
    from gpuopt.hardware import get_gpu

    problems = []
    for i, e in enumerate(profile.entries):
        where = f"entries.{i}"
        for name in ("decode_bandwidth", "prefill_compute"):
            fit = getattr(e, name)
            if fit is not None and not SPEC_FACTOR_RANGE[0] <= fit.value <= SPEC_FACTOR_RANGE[1]:
                problems.append(f"{where}.{name}.value: {fit.value:g} is outside {SPEC_FACTOR_RANGE[0]:g}-"
                                f"{SPEC_FACTOR_RANGE[1]:g} x the datasheet")
        if e.memory_offset_gib is not None:
            try:
                gpu = get_gpu(e.gpu)
            except UnknownNameError:  # reported by whoever looks the entry up
                continue
            reported = gpu.memory_gib_reported + e.memory_offset_gib.value
            if not 0 < reported <= gpu.memory_gib * 1.02:
                problems.append(f"{where}.memory_offset_gib.value: {e.memory_offset_gib.value:g} GiB would make the "
                                f"{gpu.gpu} report {reported:,.2f} GiB (its memory: {gpu.memory_gib:g})")
    return problems


def load_profile(path: Path) -> Profile:
    from gpuopt.inputs.loader import parse_yaml

    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(f"--profile {path}: file not found") from None
    except (IsADirectoryError, UnicodeDecodeError):
        raise InputError(f"--profile {path}: not a readable text file") from None
    except OSError as exc:
        raise InputError(f"--profile {path}: cannot read it ({exc.strerror or exc})") from None
    try:
        data, _ = parse_yaml(text, path)
    except InputError as exc:
        raise InputError(*(f"--profile {p}" for p in exc.problems)) from None
    if not isinstance(data, dict) or data.get("kind") != PROFILE_KIND:
        raise InputError(f"--profile {path}: not a gpuopt profile (no `kind: {PROFILE_KIND}`)")
    try:
        profile = Profile.model_validate(data)
    except ValidationError as exc:
        raise InputError(*(f"--profile {path}: {'.'.join(str(p) for p in e['loc'])}: {e['msg']}"
                           for e in exc.errors())) from None
    problems = profile_problems(profile)
    if problems:
        raise InputError(*(f"--profile {path}: {p}" for p in problems))
    return profile


def dump_profile(profile: Profile) -> str:
    header = (f"# gpuopt calibration profile, written {dt.date.today().isoformat()} by `gpuopt calibrate`.\n"
              "# Use it with --profile on fit, simulate, solve and plan.\n")
    return header + yaml.safe_dump(profile.model_dump(mode="json"), sort_keys=False)
