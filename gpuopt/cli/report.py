"""`gpuopt report PLAN.json` (re-render a saved plan) and `gpuopt diff OLD.json NEW.json`."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from gpuopt.cli.options import SafePath, output_option
from gpuopt.cli.solve import budget_overrun, deliver
from gpuopt.errors import EXIT_OVER_BUDGET, InputError
from gpuopt.inputs.loader import read_text
from gpuopt.planner.plan import Plan
from gpuopt.reports.registry import formats, render_capacity_plan, render_diff, render_plan

if TYPE_CHECKING:
    from gpuopt.planner.capacity import CapacityPlan

REPORT_FORMATS = tuple(dict.fromkeys(formats("plan") + formats("capacity")))
"""`report` reads either kind of saved plan: every format of either."""


def read_any_plan(path: Path) -> Plan | CapacityPlan:
    """A saved solve plan or capacity plan."""
    from gpuopt.reports.plan_json import load_any_plan

    return load_any_plan(read_text(path, "plan file"), str(path))


def read_plan(path: Path) -> Plan:
    """A saved solve plan (what `deploy` maps to artifacts); a capacity plan is refused with the reason."""
    plan = read_any_plan(path)
    if not isinstance(plan, Plan):
        raise InputError(f"{path}: a capacity plan (from `gpuopt plan`); this command reads a solve plan "
                         "(`gpuopt solve --format json`)")
    return plan


@click.command()
@click.argument("plan_file", type=SafePath(path_type=Path))
@click.option("--format", "fmt", type=click.Choice(REPORT_FORMATS), default="markdown", show_default=True)
@output_option("Write the report to a file.")
def report(plan_file: Path, fmt: str, output: Path | None) -> None:
    """Render a plan saved with `gpuopt solve --format json` (or `gpuopt plan --format json`) without solving
    again.

    Exit codes as the command that made the plan: 0 a plan, 1 infeasible (the reasons on stderr; its FOCUS or
    CSV has no rows, which is no bill of 0.00), 2 bad input, 3 over its budget.
    """
    plan = read_any_plan(plan_file)
    if isinstance(plan, Plan):
        if fmt not in formats("plan"):
            raise InputError(f"--format {fmt}: not a format of a solve plan ({', '.join(formats('plan'))})")
        text = render_plan(plan, fmt)
    else:
        if fmt not in formats("capacity"):
            raise InputError(f"--format {fmt}: not a format of a capacity plan ({', '.join(formats('capacity'))})")
        text = render_capacity_plan(plan, fmt)
    # a pipeline reading the exit code alone took an infeasible plan's empty FOCUS file for a bill of 0.00 (QA)
    deliver(text, output, (), None if plan.status == "optimal" else plan.explanation, fmt)
    if isinstance(plan, Plan) and (overrun := budget_overrun(plan)):
        click.echo(overrun, err=True)
        raise SystemExit(EXIT_OVER_BUDGET)


@click.command()
@click.argument("old", type=SafePath(path_type=Path))
@click.argument("new", type=SafePath(path_type=Path))
@click.option("--format", "fmt", type=click.Choice(formats("diff")), default="table", show_default=True)
@output_option("Write the diff to a file.")
def diff(old: Path, new: Path, fmt: str, output: Path | None) -> None:
    """Cost before and after, per deployment (solve plans) or period (capacity plans) and in total, of two
    saved plans, in the new plan's currency (the old one converted at its recorded FX, or refused).

    Exit codes: 0 a diff, 1 either plan is infeasible (no delta; the diff says which and why), 2 bad input.
    """
    from gpuopt.reports.diff import diff_any

    d = diff_any(read_any_plan(old), read_any_plan(new), str(old), str(new))
    # a plan without a cost: the diff says which and why, then exit 1 (solve's code for infeasible), the reasons
    # on stderr too unless a table or Markdown on stdout shows them
    reasons = [f"{x.file}: {reason}" for x in d.infeasible for reason in x.explanation]
    deliver(render_diff(d, fmt), output, (), reasons if d.infeasible else None, fmt)
