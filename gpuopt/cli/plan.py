"""`gpuopt plan CAPACITY.yaml`: a purchase schedule for demand that grows over quarters or months."""

from __future__ import annotations

from pathlib import Path

import click

from gpuopt.cli.catalog import catalog_options, check_names, open_catalog
from gpuopt.cli.options import headroom_problems, placement_options
from gpuopt.cli.solve import deliver, today
from gpuopt.cli.streams import stdout_to_stderr
from gpuopt.errors import InputError
from gpuopt.reports.capacity import FORMATS, render_capacity


@click.command("plan")
@click.argument("capacity_file", type=click.Path(path_type=Path))
@placement_options
@click.option("--sensitivity", is_flag=True,
              help="Also report the traffic multiplier the schedule survives, the next cost and a TPOT sweep.")
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="table", show_default=True)
@click.option("-o", "--output", type=click.Path(path_type=Path), help="Write the result to a file.")
@catalog_options
def plan(capacity_file: Path, region: str | None, providers: tuple[str, ...], currency: str | None,
         headroom: float, vllm_version: str | None, sensitivity: bool, fmt: str, output: Path | None,
         overlays: tuple[Path, ...], discounts: tuple[str, ...], fx_rates: tuple[str, ...]) -> None:
    """What to commit to in which period and what to rent, at the lowest cost over the horizon.

    Exit codes: 0 a schedule, 1 infeasible, 2 bad input.
    """
    from gpuopt.inputs.capacity import load_capacity_file
    from gpuopt.planner.capacity import CapacityOptions, plan_capacity

    cf = load_capacity_file(capacity_file)
    currency = currency.upper() if currency else None
    check_names(providers, (), currency)
    problems = headroom_problems(headroom)
    if problems:
        raise InputError(*problems)
    catalog = open_catalog(overlays, discounts, fx_rates)
    opts = CapacityOptions(region=region, providers=providers, currency=currency, headroom=headroom,
                           vllm_version=vllm_version, sensitivity=sensitivity)
    with stdout_to_stderr():
        result = plan_capacity(cf, catalog, opts, today().isoformat())
    deliver(render_capacity(result, fmt), output, result.warnings,
            None if result.status == "optimal" else result.explanation)
