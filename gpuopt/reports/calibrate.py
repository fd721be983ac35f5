"""Evidence before and after calibration: one row per observed figure."""

from __future__ import annotations

import io
import json
from dataclasses import asdict

from gpuopt.physics.profile import Profile
from gpuopt.planner.calibrate import Comparison

LABELS = {"mean_ttft_ms": "TTFT ms", "mean_tpot_ms": "TPOT ms", "mean_itl_ms": "ITL ms",
          "output_throughput": "out tok/s", "kv_cache_gib": "KV GiB", "kv_cache_tokens": "KV tokens"}
BY = {"steady state": "steady", "replayed": "replay"}  # how the run was predicted


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f} %"


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:,.2f}"


def render_comparisons(rows: list[Comparison], title: str, after_label: str = "after",
                       width: int | None = None) -> str:
    """The table: each observed figure, predicted before and after (or by the profile, for --check), and
    left out of the fit; `by` says whether the run was predicted at steady state or replayed step by step."""
    from rich.console import Console
    from rich.table import Table

    table = Table(title=title, title_justify="left")
    for name in ("observation", "by", "metric", "observed", "before", "error", after_label, "error", "left out"):
        table.add_column(name, justify="left" if name in ("observation", "by", "metric") else "right")
    for r in rows:
        table.add_row(r.observation, BY[r.method], LABELS.get(r.metric, r.metric), _num(r.observed), _num(r.before),
                      _pct(Comparison.error(r.before, r.observed)), _num(r.after),
                      _pct(Comparison.error(r.after, r.observed)), _pct(Comparison.error(r.leave_one_out, r.observed)))
    out = io.StringIO()
    Console(file=out, width=width, force_terminal=False, color_system=None, markup=False,
            highlight=False).print(table)
    return out.getvalue()


def render_profile_summary(profile: Profile) -> str:
    lines = []
    for e in profile.entries:
        scope = e.gpu + (f", vLLM {e.vllm_version}" if e.vllm_version else "")
        for name in ("decode_bandwidth", "prefill_compute", "memory_offset_gib"):
            fit = getattr(e, name)
            if fit is None:
                continue
            loo = "-" if fit.leave_one_out_error_pct is None else f"{fit.leave_one_out_error_pct:.1f} %"
            lines.append(f"{scope}: {name} = {fit.value:g} (median error {fit.median_error_before_pct:.1f} % -> "
                         f"{fit.median_error_after_pct:.1f} %, left out {loo}; {len(fit.observations)} observations)")
    return "\n".join(lines) + "\n"


def render_json(profile: Profile | None, rows: list[Comparison], skipped: list[str]) -> str:
    return json.dumps({"kind": "gpuopt-calibration",
                       "profile": None if profile is None else profile.model_dump(mode="json"),
                       "comparisons": [asdict(r) for r in rows], "skipped": skipped}, indent=2) + "\n"
