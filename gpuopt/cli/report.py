"""`gpuopt report PLAN.json` (re-render a saved plan) and `gpuopt diff OLD.json NEW.json`."""

from __future__ import annotations

from pathlib import Path

import click

from gpuopt.cli.solve import write_output
from gpuopt.errors import InputError
from gpuopt.planner.plan import Plan
from gpuopt.reports.registry import formats, render_diff, render_plan


def read_plan(path: Path) -> Plan:
    from gpuopt.reports.plan_json import load_plan

    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(f"{path}: file not found") from None
    except UnicodeDecodeError:
        raise InputError(f"{path}: not a text file") from None
    return load_plan(text, str(path))


@click.command()
@click.argument("plan_file", type=click.Path(path_type=Path))
@click.option("--format", "fmt", type=click.Choice(formats("plan")), default="markdown", show_default=True)
@click.option("-o", "--output", type=click.Path(path_type=Path), help="Write the report to a file.")
def report(plan_file: Path, fmt: str, output: Path | None) -> None:
    """Render a plan saved with `gpuopt solve --format json` without solving again."""
    write_output(render_plan(read_plan(plan_file), fmt), output)


@click.command()
@click.argument("old", type=click.Path(path_type=Path))
@click.argument("new", type=click.Path(path_type=Path))
@click.option("--format", "fmt", type=click.Choice(formats("diff")), default="table", show_default=True)
@click.option("-o", "--output", type=click.Path(path_type=Path), help="Write the diff to a file.")
def diff(old: Path, new: Path, fmt: str, output: Path | None) -> None:
    """Monthly cost before and after, per deployment and in total, of two saved plans."""
    from gpuopt.reports.diff import diff_plans

    write_output(render_diff(diff_plans(read_plan(old), read_plan(new)), fmt), output)
