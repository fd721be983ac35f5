"""`gpuopt plan CAPACITY.yaml`: a purchase schedule for demand that grows over quarters or months."""

from __future__ import annotations

from pathlib import Path

import click

from gpuopt.cli.catalog import catalog_options, check_names, open_catalog
from gpuopt.cli.solve import today, write_output
from gpuopt.errors import EXIT_INFEASIBLE, InputError
from gpuopt.reports.capacity import FORMATS, render_capacity


@click.command("plan")
@click.argument("capacity_file", type=click.Path(path_type=Path))
@click.option("--region", metavar="SEL", help="Residency: cn, global, us, eu, apac, a region id or a comma list.")
@click.option("--provider", "providers", multiple=True, metavar="P", help="Allowed providers (repeatable).")
@click.option("--currency", help="Report currency: USD or CNY.")
@click.option("--headroom", type=float, default=0.8, show_default=True)
@click.option("--vllm-version", metavar="X.Y")
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
    from gpuopt.capacity_file import load_capacity_file
    from gpuopt.optimizer.capacity import CapacityOptions, plan_capacity

    cf = load_capacity_file(capacity_file)
    currency = currency.upper() if currency else None
    check_names(providers, (), currency)
    if not 0 < headroom <= 1:
        raise InputError(f"--headroom must be in (0, 1] (got {headroom})")
    catalog = open_catalog(overlays, discounts, fx_rates)
    opts = CapacityOptions(region=region, providers=providers, currency=currency, headroom=headroom,
                           vllm_version=vllm_version, sensitivity=sensitivity)
    result = plan_capacity(cf, catalog, opts, today().isoformat())
    write_output(render_capacity(result, fmt), output)
    if result.status != "optimal":
        for line in result.explanation:
            click.echo(f"infeasible: {line}", err=True)
        raise SystemExit(EXIT_INFEASIBLE)
