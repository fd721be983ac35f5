"""`gpuopt report PLAN.json` (re-render a saved plan) and `gpuopt diff OLD.json NEW.json`."""

from __future__ import annotations

from pathlib import Path

import click

from gpuopt.cli.options import output_option
from gpuopt.cli.solve import write_output
from gpuopt.inputs.loader import read_text
from gpuopt.planner.plan import Plan
from gpuopt.reports.registry import formats, render_diff, render_plan


def read_plan(path: Path) -> Plan:
    from gpuopt.reports.plan_json import load_plan

    return load_plan(read_text(path, "plan file"), str(path))


@click.command()
@click.argument("plan_file", type=click.Path(path_type=Path))
@click.option("--format", "fmt", type=click.Choice(formats("plan")), default="markdown", show_default=True)
@output_option("Write the report to a file.")
def report(plan_file: Path, fmt: str, output: Path | None) -> None:
    """Render a plan saved with `gpuopt solve --format json` without solving again."""
    write_output(render_plan(read_plan(plan_file), fmt), output)


@click.command()
@click.argument("old", type=click.Path(path_type=Path))
@click.argument("new", type=click.Path(path_type=Path))
@click.option("--format", "fmt", type=click.Choice(formats("diff")), default="table", show_default=True)
@output_option("Write the diff to a file.")
def diff(old: Path, new: Path, fmt: str, output: Path | None) -> None:
    """Monthly cost before and after, per deployment and in total, of two saved plans."""
    from gpuopt.reports.diff import diff_plans

    write_output(render_diff(diff_plans(read_plan(old), read_plan(new)), fmt), output)
