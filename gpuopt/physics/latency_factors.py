"""The fitted factors of the latency model, read from the package data: the step cost's shares of each GPU
architecture's bandwidth and compute with its fixed overheads (latency_calibration.yaml), and what the load
runs add to it -- host work per sequence, the API server's, MoE kernel paths (serving_calibration.yaml).

Each factor set carries the rows it was fitted on; an architecture with none of its own borrows another's and
says why (BorrowedCalibration, which plans print as a warning).
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import cache

from pydantic import BaseModel, ConfigDict, model_validator

from gpuopt.datafiles import data_yaml
from gpuopt.hardware import GpuSpec, get_gpu


class ArchCalibration(BaseModel):
    model_config = ConfigDict(frozen=True)

    eff_bw: float  # fraction of HBM bandwidth a decode step achieves
    eff_compute: float  # fraction of peak tensor FLOPs in mixed decode/prefill steps
    eff_prefill: float  # fraction of peak tensor FLOPs in prefill


class Borrowing(BaseModel):
    """An architecture with no fitted factors of its own uses another's; `why` says why that one."""

    model_config = ConfigDict(frozen=True)

    uses: str  # a key of `architectures`
    why: str


class BorrowedCalibration(BaseModel):
    """What a plan or `gpuopt fit` reports when a GPU's latency uses another architecture's calibration."""

    model_config = ConfigDict(frozen=True)

    gpu: str
    architecture: str
    borrowed_from: str
    why: str

    @property
    def note(self) -> str:
        return (f"{self.gpu} ({self.architecture}): latency predicted with the {self.borrowed_from} calibration "
                f"({self.why})")


class LatencyCalibration(BaseModel):
    model_config = ConfigDict(frozen=True)

    step_overhead_ms: float  # scheduler + sampler + launch per engine step
    server_overhead_ms: float  # API server, tokenisation, first scheduling: added to TTFT
    allreduce_latency_us: dict[str, float]  # per all-reduce call, by link (nvlink / pcie)
    pcie_gb_s: dict[str, float]  # x16 link bandwidth per direction, by PCIe generation
    architectures: dict[str, ArchCalibration]  # fitted: by architecture, or by GPU where its rows differ
    borrowed: dict[str, Borrowing] = {}  # architecture -> whose fitted factors it uses, and why
    default_architecture: str  # for an architecture in neither map (a GPU row added without a rule)
    fitted_on: str
    source: str

    @model_validator(mode="after")
    def _borrow_only_fitted(self) -> LatencyCalibration:
        """A borrowing names a fitted entry, and no architecture is both fitted and borrowing."""
        lenders = {b.uses for b in self.borrowed.values()} | {self.default_architecture}
        unknown = sorted(lenders - set(self.architectures))
        both = sorted(set(self.borrowed) & set(self.architectures))
        if unknown or both:
            raise ValueError(f"latency calibration: borrows from unfitted {unknown}; both fitted and borrowing {both}")
        return self

    def lookup(self, gpu: GpuSpec) -> tuple[ArchCalibration, BorrowedCalibration | None]:
        """A GPU's own entry where the evidence supports one (H200), else its architecture's, else the one its
        architecture borrows (data: `borrowed`), else the default; the second value says when it is borrowed."""
        if gpu.gpu in self.architectures:
            return self.architectures[gpu.gpu], None
        if gpu.architecture in self.architectures:
            return self.architectures[gpu.architecture], None
        rule = self.borrowed.get(gpu.architecture)
        if rule is None:
            rule = Borrowing(uses=self.default_architecture,
                             why=f"no calibration and no borrowing rule for {gpu.architecture}: the default")
        return self.architectures[rule.uses], BorrowedCalibration(
            gpu=gpu.gpu, architecture=gpu.architecture, borrowed_from=rule.uses, why=rule.why)

    def for_gpu(self, gpu: GpuSpec) -> ArchCalibration:
        return self.lookup(gpu)[0]


@cache
def calibration() -> LatencyCalibration:
    return LatencyCalibration.model_validate(data_yaml("latency_calibration.yaml"))


def borrowed_calibration(gpu: GpuSpec) -> BorrowedCalibration | None:
    """Whether `gpu`'s latency uses another architecture's calibration (None: its own)."""
    return calibration().lookup(gpu)[1]


def borrowed_notes(gpu_names: Iterable[str]) -> list[str]:
    """One sorted note per distinct GPU (by table name) whose latency uses a borrowed calibration: what a plan
    warns about for the GPUs it chose."""
    return sorted({b.note for name in set(gpu_names) if name and (b := borrowed_calibration(get_gpu(name)))})


class MoePath(BaseModel):
    """One MoE kernel path: the share of its peak the expert GEMMs reach, and of HBM bandwidth their reads."""

    model_config = ConfigDict(frozen=True)

    eff_compute: float  # of the path's tensor peak (16-bit for Marlin/Triton, FP8 for block-FP8)
    eff_bw: float  # multiplies the architecture's eff_bw for expert weight reads
    fitted_on: str
    # a path with no rows of its own runs at this fitted path's factors (ServingCalibration.moe_path), so a
    # kernel nobody measured is not priced above the measured ones on a faster GPU
    borrows: str | None = None


class ServingCalibration(BaseModel):
    """What the load data adds to the step cost (gpuopt/data/serving_calibration.yaml)."""

    model_config = ConfigDict(frozen=True)

    cpu_per_seq_us: float  # host work per scheduled request per step (input prep, sampling, output)
    frontend_ms_per_request: float  # API server work per request, one request at a time (parse, template)
    # work per prompt token before the scheduler sees a request, one request at a time: the API server
    # tokenises in one thread (AsyncMicrobatchTokenizer) and the engine core hashes the prompt's blocks for
    # the prefix cache in its one input thread (SHA-256 by default; both read in the 0.11.0 wheel), so long
    # prompts reach the engine later and a burst of them queues
    frontend_us_per_prompt_token: float = 0.0
    layer_fixed_us: float  # GPU time floor per decoder layer per step (kernel gaps and small-kernel tails)
    v0_host_factor: float  # host work of the V0 engine (vLLM < 0.8: synchronous Python loop) over V1's
    gemm_tile_tokens: float  # a step's GEMMs cost as if they had this many more tokens (under-filled tiles)
    moe_tile_tokens: float  # each touched expert's GEMM costs at least this many rows
    moe_paths: dict[str, MoePath]
    source: str
    fitted_on: str
    # DeepSeek sparse attention's per-token pipeline around the FLOPs step_parts_s prices: the indexer's
    # projections, FP8 quantisation of its queries, key insertion, top-k selection and the sparse gather run
    # as a chain of small kernels in every layer, a GPU time per token per layer (0: no DSA rows to fit)
    dsa_token_layer_us: float = 0.0
    dsa_fitted_on: str = ""
    # Triton attention (attention_backend): its attention FLOPs take this many times as long as the
    # FlashAttention kernels the architectures' efficiencies were fitted on (1: no rows to fit)
    triton_attention_factor: float = 1.0
    triton_attention_fitted_on: str = ""
    # GPU time per decoding sequence per attention layer of a stage: the paged-attention decode kernels'
    # per-sequence work that does not scale with its context (block-table walk, split-KV partial results and
    # their combine, the per-sequence KV-cache write and rotary), serial with the step on the GPU -- unlike
    # cpu_per_seq_us, async scheduling does not hide it. Linear-attention and Mamba layers have no paged
    # context to walk (their state traffic is priced by bandwidth). 0: not fitted
    seq_layer_us: float = 0.0


    def moe_path(self, name: str) -> MoePath:
        """The factors `name` runs at: its own, or those of the path it borrows."""
        path = self.moe_paths[name]
        return self.moe_paths[path.borrows] if path.borrows else path


@cache
def serving_calibration() -> ServingCalibration:
    return ServingCalibration.model_validate(data_yaml("serving_calibration.yaml"))
