"""`gpuopt report PLAN.json` (re-render a saved plan) and `gpuopt diff OLD.json NEW.json`."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from gpuopt.cli.solve import write_output
from gpuopt.errors import InputError
from gpuopt.planner.plan import Plan

if TYPE_CHECKING:
    from gpuopt.planner.capacity import CapacityPlan
from gpuopt.reports.render import FORMATS, render


def read_any_plan(path: Path) -> Plan | CapacityPlan:
    """A saved solve plan or capacity plan."""
    from gpuopt.reports.plan_json import load_any_plan

    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(f"{path}: file not found") from None
    except UnicodeDecodeError:
        raise InputError(f"{path}: not a text file") from None
    return load_any_plan(text, str(path))


@click.command()
@click.argument("plan_file", type=click.Path(path_type=Path))
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="markdown", show_default=True)
@click.option("-o", "--output", type=click.Path(path_type=Path), help="Write the report to a file.")
def report(plan_file: Path, fmt: str, output: Path | None) -> None:
    """Render a plan saved with `gpuopt solve --format json` (or `gpuopt plan --format json`) without solving
    again."""
    plan = read_any_plan(plan_file)
    if isinstance(plan, Plan):
        write_output(render(plan, fmt), output)
    else:
        from gpuopt.reports.capacity import render_capacity

        write_output(render_capacity(plan, fmt), output)


@click.command()
@click.argument("old", type=click.Path(path_type=Path))
@click.argument("new", type=click.Path(path_type=Path))
@click.option("--format", "fmt", type=click.Choice(["table", "markdown", "json"]), default="table",
              show_default=True)
@click.option("-o", "--output", type=click.Path(path_type=Path), help="Write the diff to a file.")
def diff(old: Path, new: Path, fmt: str, output: Path | None) -> None:
    """Cost before and after, per deployment (solve plans) or period (capacity plans) and in total, of two
    saved plans, in the new plan's currency (the old one converted at its recorded FX, or refused)."""
    from gpuopt.reports.diff import diff_any, diff_json, diff_markdown, diff_table

    result = diff_any(read_any_plan(old), read_any_plan(new))
    text = {"json": diff_json, "markdown": diff_markdown}.get(fmt, diff_table)(result)
    write_output(text, output)
