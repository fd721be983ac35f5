"""Workload presets and the commented workload file `gpuopt init` writes.

A preset is a starting point (data in gpuopt/data/presets.yaml, each value with the reason it was chosen);
the answers of the questionnaire override it; the result is rendered as YAML text with those reasons as
comments, then parsed back through the workload schema before it is written, so `init` never writes a file
that `solve` would reject.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from gpuopt.datafiles import data_yaml
from gpuopt.errors import InputError

QUALITY_PRECISIONS: dict[str, tuple[str, ...]] = {
    "high": ("bf16", "fp8"),
    "medium": ("bf16", "fp8"),
    "low": ("bf16", "fp8", "int4"),
}
"""Quality sensitivity -> weight formats allowed (the guides: quality-sensitive work avoids INT4)."""


@cache
def presets() -> dict[str, dict[str, Any]]:
    data: dict[str, dict[str, Any]] = data_yaml("presets.yaml")
    return data


@dataclass
class Answers:
    """What the user told `init` (None: keep the preset's value)."""

    preset: str
    model: str
    name: str | None = None
    requests_per_second: float | None = None
    concurrency: int | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    max_model_len: int | None = None
    ttft_ms: float | None = None
    tpot_ms: float | None = None
    quality: str | None = None
    residency: str = "global"
    currency: str | None = None
    budget_monthly: float | None = None
    notes: list[str] = field(default_factory=list)
    # the model's context limit and what it comes from (context_limit.model_max_len, limit_basis), when the
    # model is known: a preset's longer context is capped there, or the file would be one `solve` refuses
    model_limit: int | None = None
    limit_basis: str = "max_position_embeddings"


def _value(preset: dict[str, Any], key: str) -> Any:
    entry = preset.get(key)
    return entry["value"] if isinstance(entry, dict) and "value" in entry else entry


def _why(preset: dict[str, Any], key: str, override: object | None, what: str = "you answered") -> str:
    if override is not None:
        return what
    entry = preset.get(key)
    return str(entry["why"]) if isinstance(entry, dict) and "why" in entry else "preset default"


def _scalar(value: object) -> str:
    """One YAML scalar, quoted when needed (JSON strings are valid YAML and escape everything)."""
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    return json.dumps(value)


def render_workload(a: Answers) -> str:
    """The commented workload file for these answers (schema_version 1)."""
    if a.preset not in presets():
        raise InputError(f"--preset {a.preset}: unknown (known: {', '.join(presets())})")
    p = presets()[a.preset]
    name = a.name or a.preset
    load = p["load"]
    if a.requests_per_second is not None or a.concurrency is not None:
        load = ({"requests_per_second": a.requests_per_second} if a.requests_per_second is not None
                else {"concurrency": a.concurrency})
    (load_key, load_value), = load.items()
    precisions = list(QUALITY_PRECISIONS[a.quality]) if a.quality else list(_value(p, "precisions"))
    precision_why = (f"quality sensitivity {a.quality}" if a.quality else _why(p, "precisions", None))
    currency = a.currency or ("CNY" if a.residency.strip().lower() == "cn" else "USD")
    lines = [
        f"# {p['summary']} — written by `gpuopt init --preset {a.preset}`.",
        "# Check it with: gpuopt solve THIS_FILE" + (" --region cn" if a.residency == "cn" else ""),
        "schema_version: 1",
        f"residency: {_scalar(a.residency)}  # where the data may live: global, us, eu, apac, cn or region ids",
        f"currency: {currency}",
    ]
    price_kinds = _value(p, "price_kinds")
    if price_kinds:
        lines.append(f"price_kinds: {_scalar(price_kinds)}  # {_why(p, 'price_kinds', None)}")
    if a.budget_monthly is not None:
        lines += ["budget:  # a plan above this monthly cost (730-hour months) is printed, then exit 3",
                  f"  max_monthly: {_scalar(a.budget_monthly)}", f"  currency: {currency}"]
    fields = [
        ("input_tokens", a.input_tokens), ("output_tokens", a.output_tokens), ("max_model_len", a.max_model_len),
    ]
    lines += ["workloads:", f"  - name: {_scalar(name)}", f"    model: {_scalar(a.model)}",
              f"    {load_key}: {_scalar(load_value)}  # {'you answered' if load is not p['load'] else 'preset'}"]
    for key, override in fields:
        value = override if override is not None else _value(p, key)
        why = _why(p, key, override)
        if key == "max_model_len" and override is None and a.model_limit is not None and value > a.model_limit:
            why = f"the preset's {value:,} capped at the model's limit ({a.limit_basis})"
            value = a.model_limit
        lines.append(f"    {key}: {_scalar(value)}  # {why}")
    ttft = a.ttft_ms if a.ttft_ms is not None else _value(p, "ttft_ms")
    tpot = a.tpot_ms if a.tpot_ms is not None else _value(p, "tpot_ms")
    lines += ["    slo:",
              f"      ttft_ms: {_scalar(ttft)}  # time to first token: {_why(p, 'ttft_ms', a.ttft_ms)}",
              f"      tpot_ms: {_scalar(tpot)}  # time per output token: {_why(p, 'tpot_ms', a.tpot_ms)}",
              f"    precisions: {_scalar(precisions)}  # {precision_why}",
              "    kv_cache_dtypes: [\"auto\", \"fp8\"]  # an FP8 KV cache doubles the tokens that fit",
              f"    tags: {{preset: {_scalar(a.preset)}}}"]
    return "\n".join(lines) + "\n"

