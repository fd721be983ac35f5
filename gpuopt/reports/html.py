"""One self-contained HTML file: the Markdown report's content plus three inline SVG charts (no network at
view time: no external CSS, fonts or scripts)."""

from __future__ import annotations

import html

from gpuopt.planner.plan import Plan
from gpuopt.reports import charts
from gpuopt.reports.formatting import html_text, markdown_to_html
from gpuopt.reports.markdown import render_markdown

STYLE = """
body { font-family: system-ui, sans-serif; margin: 2rem auto; max-width: 70rem; color: #222; }
table { border-collapse: collapse; margin: 0.5rem 0 1rem; font-size: 0.9rem; }
th, td { border: 1px solid #ccc; padding: 0.25rem 0.5rem; text-align: left; }
pre { background: #f5f5f5; padding: 0.5rem; overflow-x: auto; }
.total { font-size: 1.6rem; font-weight: 600; }
.charts figure { display: inline-block; margin: 0 1rem 1rem 0; vertical-align: top; }
"""


def render_html(plan: Plan) -> str:
    body = markdown_to_html(render_markdown(plan))
    parts = ["<!DOCTYPE html>", '<html lang="en">', "<head>", '<meta charset="utf-8">',
             f"<title>gpuopt plan: {html.escape(plan.status)}</title>", f"<style>{STYLE}</style>", "</head>", "<body>"]
    if plan.status == "optimal" and plan.total_cost_per_hour is not None:
        c = html_text(plan.currency)
        parts.append(f'<p class="total" id="total-cost">Total: {plan.total_cost_per_hour:,.2f} {c}/h, '
                     f"{plan.total_cost_per_month or 0:,.2f} {c}/month</p>")
        parts.append('<section class="charts">')
        for chart_id, title, svg in (("chart-cost", "Cost by provider and GPU", charts.cost_by_provider_gpu(plan)),
                                     ("chart-memory", "Memory per GPU", charts.memory_per_gpu(plan)),
                                     ("chart-tpot", "Cost vs predicted TPOT", charts.cost_vs_tpot(plan))):
            parts.append(f'<figure class="chart" id="{chart_id}" aria-label="{html.escape(title)}">{svg}</figure>')
        parts.append("</section>")
    parts += [body, "</body>", "</html>", ""]
    return "\n".join(parts)
