"""`gpuopt solve WORKLOAD.yaml`: the cheapest deployment that fits and meets the latency targets."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import click

from gpuopt.cli.catalog import catalog_options, check_names, open_catalog
from gpuopt.cli.options import (
    ASCII_INT,
    FINITE_FLOAT,
    JSON_FLAG,
    SafePath,
    output_option,
    placement_options,
    placement_problems,
    with_json_flag,
)
from gpuopt.cli.profile_option import apply_profile, profile_option
from gpuopt.cli.streams import stdout_to_stderr
from gpuopt.cli.terminal import say
from gpuopt.clock import today
from gpuopt.errors import EXIT_INFEASIBLE, EXIT_OVER_BUDGET, InputError
from gpuopt.inputs.loader import write_output_file
from gpuopt.inputs.workload import WorkloadFile, fields_located_in, load_workload
from gpuopt.planner.plan import HOURS_PER_MONTH, Budget, CandidatesForm, Plan
from gpuopt.pricing.fx import FxTable
from gpuopt.reports.registry import formats, render_plan
from gpuopt.text import printable, result_text


def write_output(text: str, output: Path | None) -> None:
    """The result on stdout, or atomically into `output` (checked before the work by output_option)."""
    if output is None:
        click.echo(text, nl=False)
    else:
        # the file gets what stdout gets: a user's control characters escaped (text.result_text), not the raw
        # ESC sequences a `cat` of the file would run (JSON escapes them itself; CSV and tables did not)
        write_output_file(output, result_text(text))
        click.echo(f"wrote {output}", err=True)


HUMAN_FORMATS = ("table", "markdown")
"""Formats a person reads on the terminal; they carry an infeasible plan's explanation in the result itself."""


def deliver(text: str, output: Path | None, warnings: Sequence[str], explanation: Sequence[str] | None,
            fmt: str, already_shown: Sequence[str] = ()) -> None:
    """How `solve` and `plan` end: warnings on stderr, the result, then for an infeasible problem
    (`explanation` given) exit code 1.

    Each message is printed once: warnings already printed (the catalog's `note:` lines, which the plan also
    keeps for its reports) or shown in the result (a Markdown document on stdout) are skipped, and the
    `infeasible:` reasons go to stderr only when the result does
    not already show them on the terminal (a table or markdown on stdout does; JSON, CSV, HTML or a file
    written with -o do not)."""
    shown = set(already_shown)
    if output is None and fmt == "markdown":  # the document on stdout has its own Warnings section
        shown.update(warnings)
    for warning in dict.fromkeys(warnings):
        if warning not in shown:
            say("warning", warning)
    write_output(text, output)
    if explanation is not None:
        if output is not None or fmt not in HUMAN_FORMATS:
            for line in explanation:
                click.echo(f"infeasible: {printable(line)}", err=True)
        raise SystemExit(EXIT_INFEASIBLE)


def check_budget(plan: Plan, wf: WorkloadFile, max_monthly: float | None, fx: FxTable) -> Budget | None:
    """The plan's budget verdict: `--max-monthly` (in the plan currency) wins over the workload file's."""
    if max_monthly is not None:
        return Budget.check(max_monthly, plan.currency, "--max-monthly", 1.0, plan.total_cost_per_month)
    if wf.budget is not None:
        currency = wf.budget.currency or wf.currency or "USD"  # unstated: the file's own currency
        return Budget.check(wf.budget.max_monthly, currency, "workload file", fx.rate(currency, plan.currency),
                            plan.total_cost_per_month)
    return None


def budget_overrun(plan: Plan) -> str | None:
    """The overrun message when the plan costs more per month than its budget (None when within)."""
    b = plan.budget
    if b is None or not b.over or b.monthly_cost is None or b.margin is None:
        return None
    over = -b.margin
    # the share of the limit is undefined when the limit rounds to 0.00 in the plan's currency
    share = f" ({abs(b.margin_fraction):.1%})" if b.margin_fraction is not None else ""  # as the table: no -0.0 %
    return (f"over budget: {b.monthly_cost:,.2f} {plan.currency}/month ({HOURS_PER_MONTH} h) exceeds "
            f"{b.max_monthly:,.2f} {b.currency}/month by {over:,.2f} {plan.currency}{share}")


@click.command()
@click.argument("workload_file", type=SafePath(path_type=Path))
@placement_options
@click.option("--top", type=ASCII_INT, default=3, show_default=True, help="Alternatives per GPU type and per provider.")
@click.option("--max-price-age", type=ASCII_INT, metavar="DAYS", help="Fail when a chosen price is older than this.")
@click.option("--max-monthly", type=FINITE_FLOAT, metavar="N", help="Budget per 730-hour month in the report currency.")
@click.option("--sensitivity", is_flag=True,
              help="Also report the traffic multiplier the plan survives, the next plan's cost and a TPOT sweep.")
@click.option("--format", "fmt", type=click.Choice(formats("plan")), default="table", show_default=True)
@JSON_FLAG
@click.option("--candidates", "candidates", type=click.Choice(["none", "summary", "all"]), default="summary",
              show_default=True,
              help="Considered candidates in the JSON: none, a summary (counts and the cheapest few per rejection "
                   "reason and per GPU type) or all of them.")
@output_option("Write the result to a file.")
@profile_option
@catalog_options
def solve(workload_file: Path, region: str | None, providers: tuple[str, ...], currency: str | None,
          headroom: float, top: int, vllm_version: str | None, max_price_age: int | None,
          max_monthly: float | None, sensitivity: bool, fmt: str, as_json: bool, candidates: str,
          output: Path | None,
          profile_path: Path | None,
          overlays: tuple[Path, ...], discounts: tuple[str, ...], fx_rates: tuple[str, ...]) -> None:
    """Find the cheapest deployment of the workloads in WORKLOAD_FILE.

    Exit codes: 0 a plan, 1 infeasible (with the binding constraint), 2 bad input, 3 over budget.
    """
    from gpuopt.planner.candidate_summary import with_candidates
    from gpuopt.planner.solve import SolveOptions, plan_workloads  # PuLP loads only when a solve runs

    fmt = with_json_flag(fmt, as_json)
    wf = load_workload(workload_file)
    currency = currency.upper() if currency else None
    check_names(providers, (), currency)
    problems = placement_problems(overlays, headroom)
    if top < 0:
        problems.append(f"--top must be >= 0 (got {top})")
    if max_price_age is not None and max_price_age < 0:
        problems.append(f"--max-price-age must be >= 0 (got {max_price_age})")
    if max_monthly is not None and max_monthly <= 0:
        problems.append(f"--max-monthly must be positive (got {max_monthly})")
    if problems:
        raise InputError(*problems)
    profile = apply_profile(profile_path, vllm_version)
    catalog = open_catalog(overlays, discounts, fx_rates, extra_discounts=dict(wf.discounts))
    opts = SolveOptions(region=region, providers=providers, currency=currency, headroom=headroom, top=top,
                        vllm_version=vllm_version, today=today(), max_price_age=max_price_age,
                        candidate_records=fmt == "json" and candidates != "none")
    with stdout_to_stderr(), fields_located_in(workload_file):
        plan, age_errors = plan_workloads(wf, catalog, opts)
        if age_errors:
            raise InputError(*age_errors)
        if sensitivity and plan.status == "optimal":
            from gpuopt.planner.sensitivity import analyse

            plan = plan.model_copy(update={"sensitivity": analyse(wf, catalog, opts, plan)})
    form: CandidatesForm = "none" if not opts.candidate_records else "all" if candidates == "all" else "summary"
    plan = with_candidates(plan, form).model_copy(update={"budget": check_budget(plan, wf, max_monthly, catalog.fx),
                                                          "profile": profile})
    deliver(render_plan(plan, fmt), output, plan.warnings, None if plan.status == "optimal" else plan.explanation, fmt,
            already_shown=catalog.notes)
    overrun = budget_overrun(plan)
    if overrun:
        click.echo(overrun, err=True)
        raise SystemExit(EXIT_OVER_BUDGET)
