"""Replayable rows of ../shared/data/vllm_memory_observed.csv, shared by the accuracy and calibration scripts.

A row is replayable when it names a V1-engine release we model (the oldest profile of
gpuopt/data/vllm_versions.yaml or newer), a GPU we can identify, and a model in the registry. Everything else
is listed with the reason it is skipped.
"""

from __future__ import annotations

import csv
import math
import os
import re
from dataclasses import dataclass
from pathlib import Path

from gpuopt.errors import InputError
from gpuopt.physics.serving_config import ServingConfig
from gpuopt.physics.vllm_profile import get_profile, profiles
from gpuopt.vocabulary import WeightFormat

DATA = Path(os.environ.get("GPUOPT_SHARED_DATA", Path(__file__).resolve().parents[2] / "shared" / "data"))

# Quantised checkpoints -> (registry architecture, weight format). The architecture is the base model's.
CHECKPOINTS: dict[str, tuple[str, WeightFormat]] = {
    "RedHatAI/Llama-3.3-70B-Instruct-fp8-dynamic": ("meta-llama/Llama-3.3-70B-Instruct", "fp8"),
    "RedHatAI/Llama-3.3-70B-Instruct-FP8-dynamic": ("meta-llama/Llama-3.3-70B-Instruct", "fp8"),
    "RedHatAI/Meta-Llama-3.1-8B-Instruct-quantized.w4a16": ("meta-llama/Llama-3.1-8B-Instruct", "int4"),
    "RedHatAI/Meta-Llama-3.1-8B-Instruct-quantized.w8a8": ("meta-llama/Llama-3.1-8B-Instruct", "int8"),
    # models.csv checks Mistral-Small-3.1's parameter count against this very 3.2 log (44.76 GiB): same dims
    "mistralai/Mistral-Small-3.2-24B-Instruct-2506": ("mistralai/Mistral-Small-3.1-24B-Instruct-2503", "bf16"),
    # AWQ checkpoints of registry models (4-bit, group 128: the int4 weight format)
    "Qwen3-32B AWQ (exact HF id not quoted; '32B-AWQ', 18.00 GiB on disk, 64 layers)": ("Qwen/Qwen3-32B", "int4"),
    "Qwen3-32B AWQ (exact HF id not quoted)": ("Qwen/Qwen3-32B", "int4"),
    "Qwen/Qwen3-14B-AWQ": ("Qwen/Qwen3-14B", "int4"),
    # the pre-trained checkpoint of the -it row: same Gemma3ForConditionalGeneration architecture (the log's
    # 8.01 GiB checkpoint is the -it row's 4.30 B text + vision parameters x 2 B)
    "google/gemma-3-4b-pt (--language-model-only)": ("google/gemma-3-4b-it", "bf16"),
    # Qwen2-7B-Instruct is not in the registry; its logs match Qwen2.5-7B-Instruct's dimensions exactly: 14.2488
    # GiB of weights (the Qwen2.5-7B H100 logs: 14.25) and 57,355 B of KV per token (24.83 GiB / 464,848
    # tokens) = 28 layers x 4 KV heads x 128 x 2 x 2 B
    "Qwen/Qwen2-7B-Instruct (local dir Qwen2-7B-Instruct)": ("Qwen/Qwen2.5-7B-Instruct", "bf16"),
    "openai/gpt-oss-120b (local dir gpt-oss-120b)": ("openai/gpt-oss-120b", "mxfp4"),
}


LORA_ROW = re.compile(r" \+ LoRA, (\d+) adapter slots? \(rank (\d+)\)")
REVISION = re.compile(r" \(rev [0-9a-f]+\)")


@dataclass(frozen=True)
class ObservedRow:
    line: int
    model: str
    gpu: str
    config: ServingConfig
    weights_gib: float | None
    activation_gib: float | None
    non_torch_gib: float | None
    kv_gib: float | None
    kv_tokens: int | None
    cuda_graph_gib: float | None
    note: str
    total_gib: float | None = None  # the GPU memory the log itself reports, where it states one


def _f(value: str) -> float | None:
    return float(value) if value.strip() not in ("", "nan") else None


# Log GPU labels -> gpus.csv ids. First match wins (labels are free text copied from the sources).
GPU_LABELS: tuple[tuple[str, str], ...] = (
    ("NVIDIA H100 80GB", "H100-SXM-80GB"),
    ("NVIDIA H200", "H200-141GB"),
    ("NVIDIA A100 40GB", "A100-SXM-40GB"),
    ("NVIDIA A100 80GB", "A100-SXM-80GB"),
    ("NVIDIA L40S", "L40S-48GB"),
    ("NVIDIA L4 ", "L4-24GB"),
    ("NVIDIA A10G", "A10G-24GB"),
    ("NVIDIA Tesla T4", "T4-16GB"),
    ("NVIDIA GeForce RTX 4090", "RTX4090-24GB"),
    ("NVIDIA GeForce RTX 5090", "RTX5090-32GB"),
    ("NVIDIA GeForce RTX 3090", "RTX3090-24GB"),
)


def _gpu(label: str, row: dict[str, str]) -> str | None:
    if label.startswith("NVIDIA A100") and "not stated" in label and row["model"] == "openai/gpt-oss-20b":
        # 36.56 GiB of KV at gpu_memory_utilization 0.65 is impossible on a 40 GB card: an 80 GB A100
        return "A100-SXM-80GB"
    if "another vLLM container" in label:
        return None  # budget shared with another process on the card
    for prefix, gpu in GPU_LABELS:
        if label.startswith(prefix):
            return gpu
    return None


def _precision(row: dict[str, str], model: str) -> tuple[str, WeightFormat | None]:
    if row["model"] in CHECKPOINTS:
        return CHECKPOINTS[row["model"]]
    quant = row["quantization"].strip().lower()
    dtype = row["dtype"].strip().lower()
    if quant == "fp8":
        return model, "fp8"
    if quant == "mxfp4":
        return model, "mxfp4"
    if dtype == "float32":
        return model, "fp32"
    if dtype == "float16":
        return model, "fp16"
    if dtype == "bfloat16":
        return model, "bf16"
    return model, None  # checkpoint default


def _modelled(release: str) -> bool:
    """Whether a vLLM profile covers `release` (get_profile refuses releases older than the oldest one)."""
    try:
        get_profile(release)
    except InputError:
        return False
    return True


def load_rows() -> tuple[list[ObservedRow], list[tuple[int, str, str]]]:
    from gpuopt.physics.architecture import registry

    rows: list[ObservedRow] = []
    skipped: list[tuple[int, str, str]] = []
    with open(DATA / "vllm_memory_observed.csv", encoding="utf-8") as fh:
        for line, raw in enumerate(csv.DictReader(fh), start=2):
            version = raw["vllm_version"].strip()
            digits = version.split(" ")[0]
            if not digits or not digits[0].isdigit():
                v0 = raw["notes"].startswith("V0") or " V0 " in raw["notes"][:40]
                skipped.append((line, raw["model"], "V0-engine log (release not stated; V0 is not modelled)" if v0
                                else "vLLM release not stated"))
                continue
            if "V0" in version:  # e.g. "0.8.3 (V0 engine)": a V1 release run on its V0 engine
                skipped.append((line, raw["model"], f"V0-engine log ({version}; V0 is not modelled)"))
                continue
            release = ".".join(p for p in digits.split(".")[:3] if p.isdigit())
            minor = ".".join(release.split(".")[:2])
            if not _modelled(release):
                skipped.append((line, raw["model"],
                                f"release {version} is older than the oldest modelled ({profiles()[0].version})"))
                continue
            if "--runner pooling" in raw["model"]:
                skipped.append((line, raw["model"], "pooling (embedding) runner: no sampler, not modelled"))
                continue
            gpu = _gpu(raw["gpu"], raw)
            if gpu is None:
                skipped.append((line, raw["model"], f"GPU not identifiable: {raw['gpu']}"))
                continue
            # "<id> (rev <sha>) + LoRA, N adapter slot(s) (rank R)": served with --enable-lora --max-loras N
            # --max-lora-rank R (physics/lora.py)
            lora = LORA_ROW.search(raw["model"])
            name = REVISION.sub("", raw["model"][:lora.start()]) if lora else raw["model"]
            model, precision = _precision(raw, name)
            if model not in registry():
                skipped.append((line, raw["model"], "model not in the registry"))
                continue
            mml = _f(raw["max_model_len"])
            mns = _f(raw["max_num_seqs"])
            bs = _f(raw["block_size"])
            gmu = _f(raw["gpu_memory_utilization"])
            kv_dtype = "fp8" if raw["kv_cache_dtype"].strip() == "fp8" else "auto"
            cfg = ServingConfig(
                tensor_parallel=int(raw["tensor_parallel"]), pipeline_parallel=int(raw["pipeline_parallel"] or 1),
                precision=precision, kv_cache_dtype=kv_dtype,  # type: ignore[arg-type]
                max_model_len=int(mml) if mml else None, gpu_memory_utilization=gmu,
                max_num_seqs=int(mns) if mns else None, block_size=int(bs) if bs else None,
                # major.minor (the eras calibrate_memory.py fits by), unless that predates the oldest profile
                vllm_version=minor if _modelled(minor) else release,
                # tensor parallelism across nodes (Ray) has no custom all-reduce buffers, as over PCIe
                interconnect="pcie" if "across" in raw["notes"] and "nodes" in raw["notes"] else None,
                enforce_eager="--enforce-eager" in raw["notes"],
                language_model_only="--language-model-only" in raw["model"] + raw["notes"],
                max_loras=int(lora.group(1)) if lora else 0, max_lora_rank=int(lora.group(2)) if lora else 16)
            tokens = _f(raw["logged_kv_tokens"])
            rows.append(ObservedRow(
                line=line, model=model, gpu=gpu, config=cfg, weights_gib=_f(raw["logged_weights_gib"]),
                activation_gib=_f(raw["logged_activation_peak_gib"]), non_torch_gib=_f(raw["logged_non_torch_gib"]),
                kv_gib=_f(raw["logged_kv_cache_gib"]), kv_tokens=int(tokens) if tokens else None,
                cuda_graph_gib=_f(raw["logged_cuda_graph_gib"]), note=raw["model"],
                total_gib=_f(raw["logged_total_gpu_mem_gib"])))
    return rows, skipped


def print_skipped(skipped: list[tuple[int, str, str]]) -> None:
    """The rows a replay left out, with the reason (every benchmark prints them, so no row vanishes)."""
    print(f"skipped {len(skipped)} rows:")
    for line, model, why in skipped:
        print(f"  line {line}: {model} -- {why}")


def ape(predicted: float, observed: float) -> float:
    """Absolute percentage error."""
    return abs(predicted - observed) / abs(observed) * 100 if observed else math.nan
