"""`gpuopt plan CAPACITY.yaml`: a purchase schedule for demand that grows over quarters or months."""

from __future__ import annotations

from pathlib import Path

import click

from gpuopt.cli.catalog import catalog_options, check_names, open_catalog
from gpuopt.cli.options import (
    ASCII_INT,
    JSON_FLAG,
    SafePath,
    output_option,
    placement_options,
    placement_problems,
    with_json_flag,
)
from gpuopt.cli.profile_option import apply_profile, profile_option
from gpuopt.cli.solve import deliver
from gpuopt.cli.streams import stdout_to_stderr
from gpuopt.clock import today
from gpuopt.errors import InputError
from gpuopt.reports.registry import formats, render_capacity_plan


@click.command("plan")
@click.argument("capacity_file", type=SafePath(path_type=Path))
@placement_options
@click.option("--sensitivity", is_flag=True,
              help="Also report the traffic multiplier the schedule survives, the next cost and a TPOT sweep.")
@click.option("--max-price-age", type=ASCII_INT, metavar="DAYS", help="Fail when a chosen price is older than this.")
@click.option("--format", "fmt", type=click.Choice(formats("capacity")), default="table", show_default=True)
@JSON_FLAG
@output_option("Write the result to a file.")
@profile_option
@catalog_options
def plan(capacity_file: Path, region: str | None, providers: tuple[str, ...], currency: str | None,
         headroom: float, vllm_version: str | None, sensitivity: bool, max_price_age: int | None, fmt: str,
         as_json: bool,
         output: Path | None, profile_path: Path | None,
         overlays: tuple[Path, ...], discounts: tuple[str, ...], fx_rates: tuple[str, ...]) -> None:
    """What to commit to in which period and what to rent, at the lowest cost over the horizon.

    Exit codes: 0 a schedule, 1 infeasible, 2 bad input.
    """
    from gpuopt.inputs.capacity import load_capacity_file
    from gpuopt.inputs.workload import fields_located_in
    from gpuopt.planner.capacity import CapacityOptions, describe, schedule

    fmt = with_json_flag(fmt, as_json)
    cf = load_capacity_file(capacity_file)
    currency = currency.upper() if currency else None
    check_names(providers, (), currency)
    problems = placement_problems(overlays, headroom)
    if max_price_age is not None and max_price_age < 0:
        problems.append(f"--max-price-age must be >= 0 (got {max_price_age})")
    if problems:
        raise InputError(*problems)
    profile = apply_profile(profile_path, vllm_version)
    catalog = open_catalog(overlays, discounts, fx_rates)
    opts = CapacityOptions(region=region, providers=providers, currency=currency, headroom=headroom,
                           vllm_version=vllm_version, max_price_age=max_price_age)
    # solvers may print to descriptor 1 (HiGHS' banner): keep stdout for results
    with stdout_to_stderr(), fields_located_in(capacity_file):
        solved = schedule(cf, catalog, opts)
        result = describe(solved, today().isoformat()).model_copy(update={"profile": profile})
        if result.price_age_errors:
            raise InputError(*result.price_age_errors)
        if sensitivity and result.status == "optimal":
            from gpuopt.planner.sensitivity import analyse_capacity

            result = result.model_copy(update={"sensitivity": analyse_capacity(solved, catalog, result)})
    deliver(render_capacity_plan(result, fmt), output, result.warnings,
            None if result.status == "optimal" else result.explanation, fmt, already_shown=catalog.notes)
