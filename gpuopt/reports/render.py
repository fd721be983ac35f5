"""From a Plan and a format name to text: the plan row of the format registry (reports/registry.py).

Kept so callers of `render(plan, fmt)` and `FORMATS` need not change; the formats themselves are listed
once, in the registry.
"""

from __future__ import annotations

from gpuopt.reports.registry import formats, render_plan

FORMATS = formats("plan")
render = render_plan
