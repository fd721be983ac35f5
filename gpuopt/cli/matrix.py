"""`gpuopt matrix`: the sizing table a reviewer can glance at — models x GPUs x precisions."""

from __future__ import annotations

import math
from pathlib import Path

import click

from gpuopt.cli.options import (
    ASCII_INT,
    FINITE_FLOAT,
    GIVEN,
    VLLM_VERSION,
    VLLM_VERSION_HELP,
    headroom_problems,
    output_option,
)
from gpuopt.cli.terminal import say
from gpuopt.errors import InputError

FORMAT_NAMES = ("table", "markdown", "csv", "json", "html")


def _split(values: tuple[str, ...]) -> list[str]:
    return [v.strip() for value in values for v in value.split(",") if v.strip()]


@click.command()
@click.argument("models", nargs=-1, required=True)
@click.option("--gpus", multiple=True, help="GPUs (comma-separated or repeated; default: the common ones).")
@click.option("--precisions", multiple=True, help="Weight formats (default: bf16,fp8,int4).")
@click.option("--context", type=ASCII_INT, default=8192, show_default=True, help="Context length per request (tokens).")
@click.option("--concurrency", type=ASCII_INT, default=16, show_default=True,
              help="Requests of that context the KV cache must hold at once.")
@click.option("--kv-cache-dtype", type=click.Choice(["auto", "fp8"]), default="auto", show_default=True)
@click.option("--requests-per-second", type=FINITE_FLOAT, help="A load: adds replicas and cost from the catalog.")
@click.option("--input-tokens", type=ASCII_INT, default=1500, show_default=True,
              help="Mean prompt tokens (with a load).")
@click.option("--output-tokens", type=ASCII_INT, default=300, show_default=True,
              help="Mean output tokens (with a load).")
@click.option("--ttft-ms", type=FINITE_FLOAT, help="TTFT target (with a load).")
@click.option("--tpot-ms", type=FINITE_FLOAT, help="TPOT target (with a load).")
@click.option("--region", type=GIVEN, default="global", show_default=True, help="Where the data may live (prices).")
@click.option("--currency", type=click.Choice(["USD", "CNY"]), help="Currency (default: CNY for cn, else USD).")
@click.option("--headroom", type=FINITE_FLOAT, default=0.8, show_default=True,
              help="Plan each replica for this share of the load it sustains.")
@click.option("--vllm-version", type=VLLM_VERSION, help=VLLM_VERSION_HELP)
@click.option("--format", "fmt", type=click.Choice(FORMAT_NAMES), default="table", show_default=True)
@output_option("Write to a file.")
def matrix(models: tuple[str, ...], gpus: tuple[str, ...], precisions: tuple[str, ...], context: int,
           concurrency: int, kv_cache_dtype: str, requests_per_second: float | None, input_tokens: int,
           output_tokens: int, ttft_ms: float | None, tpot_ms: float | None, region: str, currency: str | None,
           headroom: float, vllm_version: str | None, fmt: str, output: Path | None) -> None:
    """Models (ids, or sizes such as 7B 14B 32B 70B 405B) x GPUs x precisions: what fits, on how many GPUs,
    with how much KV cache; with --requests-per-second, the replicas and their cost."""
    from gpuopt.cli.solve import write_output
    from gpuopt.inputs.workload import MAX_REQUESTS_PER_SECOND
    from gpuopt.planner.matrix import DEFAULT_GPUS, MatrixQuery, build_matrix
    from gpuopt.pricing.catalog import load_catalog
    from gpuopt.pricing.regions import Residency
    from gpuopt.reports.matrix import render_matrix
    from gpuopt.vocabulary import WEIGHT_FORMATS

    # a flag given with nothing in it (`--gpus ''`, `--precisions ,`) is a mistake, not a request for the default
    problems = [f"{flag}: an empty list (leave the flag out for the default)"
                for flag, given in (("--gpus", gpus), ("--precisions", precisions)) if given and not _split(given)]
    wanted = _split(precisions) or ["bf16", "fp8", "int4"]
    problems += [f"--precisions: unknown '{p}' (known: {', '.join(WEIGHT_FORMATS)})" for p in wanted
                 if p not in WEIGHT_FORMATS]
    for value, flag in ((context, "--context"), (concurrency, "--concurrency"), (input_tokens, "--input-tokens"),
                        (output_tokens, "--output-tokens"), (requests_per_second, "--requests-per-second"),
                        (ttft_ms, "--ttft-ms"), (tpot_ms, "--tpot-ms")):
        if value is not None and not (value > 0 and math.isfinite(value)):
            problems.append(f"{flag} must be a positive finite number (got {value})")
    if requests_per_second is not None and requests_per_second > MAX_REQUESTS_PER_SECOND:
        problems.append(f"--requests-per-second must be at most {MAX_REQUESTS_PER_SECOND:g}, as in a workload file "
                        f"(got {requests_per_second:g})")
    problems += headroom_problems(headroom)
    if requests_per_second is not None and input_tokens + output_tokens > context:
        problems.append(f"--input-tokens + --output-tokens ({input_tokens + output_tokens}) exceed --context "
                        f"({context})")
    if problems:
        raise InputError(*problems)
    loaded = requests_per_second is not None
    if not loaded:  # these shape only a load's cells: given without one they would change nothing, silently
        ctx = click.get_current_context()
        idle = [f"--{name.replace('_', '-')}" for name in ("input_tokens", "output_tokens", "ttft_ms", "tpot_ms",
                                                           "region", "currency", "headroom")
                if ctx.get_parameter_source(name) is click.core.ParameterSource.COMMANDLINE]
        if idle:
            say("warning", f"{', '.join(idle)} without --requests-per-second {'has' if len(idle) == 1 else 'have'} "
                           "no effect: the matrix sizes memory only until a load is given")
    residency = Residency(region)
    chosen = currency or ("CNY" if region.strip().lower() == "cn" else "USD")
    query = MatrixQuery(
        models=models, gpus=tuple(_split(gpus)) or DEFAULT_GPUS, precisions=tuple(wanted),  # type: ignore[arg-type]
        context=context, concurrency=concurrency, kv_cache_dtype=kv_cache_dtype,  # type: ignore[arg-type]
        requests_per_second=requests_per_second,
        input_tokens=input_tokens if requests_per_second is not None else None,
        output_tokens=output_tokens if requests_per_second is not None else None,
        ttft_ms=ttft_ms, tpot_ms=tpot_ms, headroom=headroom, vllm_version=vllm_version,
        region=region if loaded else None, currency=chosen if loaded else None)
    catalog = load_catalog() if loaded else None
    cells = build_matrix(query, catalog, residency, chosen)
    # as solve says of its chosen offerings (solve.pin_notes): a priced cell keeps the residency only there
    for offering, where in dict.fromkeys((c.offering, tuple(c.pinned_countries)) for c in cells
                                         if c.offering and c.pinned_countries):
        say("warning", f"{offering} meets residency '{region}' only if pinned to a data centre in {', '.join(where)}: "
                       "choose one there when creating it")
    write_output(render_matrix(query, cells, fmt), output)
