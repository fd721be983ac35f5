"""Renderers of the sizing matrix: a grid (models x precisions by GPUs) for the terminal, Markdown and an
HTML heat map, and one row per cell for CSV and JSON."""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from dataclasses import asdict

from gpuopt.planner.matrix import Cell, MatrixQuery
from gpuopt.reports.formatting import csv_cell, html_text, md

SHORT_LIMIT = {"context": "context too long", "precision": "precision", "memory": "no fit", "kv": "KV short",
               "latency": "SLO missed", "gpu-data": "no GPU data", "no-price": "no price"}


def _tokens(n: int | None) -> str:
    if n is None:
        return "-"
    return f"{n / 1e6:.1f}M" if n >= 1_000_000 else f"{n / 1e3:.0f}k"


def cell_text(c: Cell) -> str:
    """One grid cell: the shape that fits and what it holds, or the binding limit."""
    if c.limit_kind == "context" and c.model_max_len is not None:
        return f"✗ context > {c.model_max_len:,}"  # the model's limit: vLLM refuses a longer --max-model-len
    if not c.fits or c.tensor_parallel is None:
        return f"✗ {SHORT_LIMIT.get(c.limit_kind or '', 'no fit')}"
    text = f"TP{c.tensor_parallel} · {_tokens(c.kv_cache_tokens)} tok · {c.max_concurrency:g}×"
    if c.replicas is not None:
        text = f"{c.replicas}×TP{c.tensor_parallel}"
        if c.cost_per_hour is not None:
            text += f" · {c.cost_per_hour:,.2f}/h"
    if c.limit_kind is not None:
        text += f" ({SHORT_LIMIT[c.limit_kind]})"
    return text


def _grid(cells: list[Cell]) -> tuple[list[str], list[tuple[str, str, list[Cell]]]]:
    gpus = list(dict.fromkeys(c.gpu for c in cells))
    rows: dict[tuple[str, str], list[Cell]] = {}
    for c in cells:
        rows.setdefault((c.label, c.precision), []).append(c)
    return gpus, [(label, precision, row) for (label, precision), row in rows.items()]


def _caption(q: MatrixQuery, cells: list[Cell]) -> str:
    text = (f"context {q.context:,} tokens, {q.concurrency} concurrent requests, KV cache {q.kv_cache_dtype}; "
            "cells: smallest TP that fits, KV tokens, requests of the full context that fit at once")
    if q.requests_per_second is not None:
        currency = q.currency or next((c.currency for c in cells if c.currency), "")
        text = (f"{q.requests_per_second:g} requests/s of {q.input_tokens} in / {q.output_tokens} out tokens, "
                f"TTFT {q.ttft_ms or '-'} ms, TPOT {q.tpot_ms or '-'} ms, headroom {q.headroom:g}, context "
                f"{q.context:,}; cells: replicas x TP and the cheapest on-demand cost per hour ({currency})")
    return text


def _models(cells: list[Cell]) -> list[str]:
    return [f"{label} = {model}" for label, model in dict.fromkeys((c.label, c.model) for c in cells)
            if label != model]


def _limits(cells: list[Cell]) -> list[str]:
    return [f"{c.label} {c.precision} on {c.gpu}: {c.limit}" for c in cells if c.limit]


def render_table(q: MatrixQuery, cells: list[Cell], width: int | None = None) -> str:
    from rich.console import Console
    from rich.table import Table

    gpus, rows = _grid(cells)
    table = Table(title=_caption(q, cells), title_justify="left")
    table.add_column("model")
    table.add_column("weights")
    for g in gpus:
        table.add_column(g)
    for label, precision, row in rows:
        table.add_row(label, precision, *(cell_text(c) for c in row))
    out = io.StringIO()
    console = Console(file=out, width=width, force_terminal=False, color_system=None, markup=False,
                      highlight=False)
    console.print(table)
    for line in _models(cells):
        console.print(line, markup=False, highlight=False)
    return out.getvalue()


def render_markdown(q: MatrixQuery, cells: list[Cell]) -> str:
    gpus, rows = _grid(cells)
    lines = ["# GPU sizing matrix", "", md(_caption(q, cells)), "",
             "| model | weights | " + " | ".join(md(g) for g in gpus) + " |",
             "|---|---|" + "---|" * len(gpus)]
    for label, precision, row in rows:
        lines.append(f"| {md(label)} | {md(precision)} | " + " | ".join(md(cell_text(c)) for c in row) + " |")
    models, limits = _models(cells), _limits(cells)
    if models:
        lines += ["", "Sizes stand for: " + "; ".join(md(m) for m in models) + "."]
    if limits:
        lines += ["", "## Limits", ""] + [f"- {md(line)}" for line in limits]
    return "\n".join(lines) + "\n"


def render_csv(q: MatrixQuery, cells: list[Cell]) -> str:
    import pandas as pd

    # a list (pinned_countries) as the catalog writes one: "US;CA"
    frame = pd.DataFrame([{k: csv_cell(";".join(v) if isinstance(v, list) else v) for k, v in asdict(c).items()}
                          for c in cells], dtype=object)
    return str(frame.to_csv(index=False, lineterminator="\n"))


def render_json(q: MatrixQuery, cells: list[Cell]) -> str:
    query = {k: (list(v) if isinstance(v, tuple) else v) for k, v in asdict(q).items()}
    return json.dumps({"kind": "gpuopt-matrix", "query": query, "cells": [asdict(c) for c in cells]},
                      indent=2, ensure_ascii=False) + "\n"


def _heat(c: Cell, lo: float, hi: float, key: Callable[[Cell], float | None]) -> str:
    """Green (cheapest / most room) to amber; grey where it does not fit."""
    value = key(c)
    if not c.fits or value is None:
        return "#e5e7eb"
    share = 0.0 if hi <= lo else (value - lo) / (hi - lo)
    red, green = int(120 + 130 * share), int(200 - 60 * share)
    return f"rgb({red},{green},120)"


def render_html(q: MatrixQuery, cells: list[Cell]) -> str:
    gpus, rows = _grid(cells)
    loaded = any(c.cost_per_million_output_tokens is not None for c in cells)

    def key(c: Cell) -> float | None:
        if loaded:
            return c.cost_per_million_output_tokens
        return -(c.max_concurrency or 0.0) if c.fits else None

    values = [v for c in cells if (v := key(c)) is not None]
    lo, hi = (min(values), max(values)) if values else (0.0, 0.0)
    e = html_text
    head = "".join(f"<th>{e(g)}</th>" for g in gpus)
    body = []
    for label, precision, row in rows:
        tds = "".join(f'<td style="background:{_heat(c, lo, hi, key)}" title="{e(c.limit or c.model)}">'
                      f"{e(cell_text(c))}</td>" for c in row)
        body.append(f"<tr><th>{e(label)}</th><td>{e(precision)}</td>{tds}</tr>")
    notes = "".join(f"<li>{e(line)}</li>" for line in _models(cells) + _limits(cells))
    legend = ("colour: cost per million output tokens, green = cheapest" if loaded
              else "colour: requests of the full context that fit, green = most")
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>gpuopt sizing matrix</title>"
        "<style>body{font-family:system-ui,sans-serif;margin:2em}table{border-collapse:collapse}"
        "td,th{border:1px solid #9ca3af;padding:4px 8px;font-size:13px;text-align:left}</style></head><body>"
        f"<h1>GPU sizing matrix</h1><p>{e(_caption(q, cells))}</p><p>{e(legend)}</p>"
        f"<table><thead><tr><th>model</th><th>weights</th>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"
        f"<ul>{notes}</ul></body></html>\n"
    )


FORMATS: dict[str, Callable[[MatrixQuery, list[Cell]], str]] = {
    "table": render_table, "markdown": render_markdown, "csv": render_csv, "json": render_json, "html": render_html,
}


def render_matrix(q: MatrixQuery, cells: list[Cell], fmt: str) -> str:
    return FORMATS[fmt](q, cells)


__all__ = ["FORMATS", "cell_text", "render_matrix"]
