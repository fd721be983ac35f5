"""One entry point from a Plan and a format name to text (the CLI's `--format`)."""

from __future__ import annotations

from gpuopt.planner.plan import Plan

FORMATS = ("table", "json", "markdown", "html", "csv", "focus")


def render(plan: Plan, fmt: str) -> str:
    if fmt == "json":
        from gpuopt.reports.plan_json import render_json

        return render_json(plan)
    if fmt == "markdown":
        from gpuopt.reports.markdown import render_markdown

        return render_markdown(plan)
    if fmt == "html":
        from gpuopt.reports.html import render_html

        return render_html(plan)
    if fmt == "csv":
        from gpuopt.reports.tabular import render_csv

        return render_csv(plan)
    if fmt == "focus":
        from gpuopt.reports.tabular import render_focus

        return render_focus(plan)
    from gpuopt.reports.plan_table import render_table

    return render_table(plan)
