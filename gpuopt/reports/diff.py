"""Compare two saved plans: per deployment and in total, monthly cost before and after, what was added,
removed or changed (GPU, precision, TP, replicas). A deployment is identified by (workload, provider, SKU,
region, price kind); the shapes it runs (replicas x GPU, TP/PP, formats) are what "changed" compares."""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, ConfigDict

from gpuopt.planner.plan import Deployment, Plan


class DiffLine(BaseModel):
    model_config = ConfigDict(frozen=True)

    workload: str
    deployment: str
    change: str  # added | removed | changed | unchanged
    monthly_before: float
    monthly_after: float
    delta: float
    details: list[str]


class PlanDiff(BaseModel):
    model_config = ConfigDict(frozen=True)

    currency_before: str
    currency_after: str
    total_monthly_before: float
    total_monthly_after: float
    total_delta: float
    lines: list[DiffLine]


def _key(d: Deployment) -> tuple[str, str, str, str, str]:
    return (d.workload, d.provider, d.sku, d.region, d.price_kind)


def _shape(d: Deployment) -> str:
    return (f"{d.replicas} x {d.gpu} TP={d.tensor_parallel}" + (f" PP={d.pipeline_parallel}" if d.pipeline_parallel > 1
                                                                   else "")
            + f" {d.weight_precision}/KV {d.kv_cache_dtype}")


def _group(plan: Plan) -> dict[tuple[str, ...], list[Deployment]]:
    """Deployments by identity; one offering may host several shapes of a workload (e.g. fp8 and int4)."""
    groups: dict[tuple[str, ...], list[Deployment]] = {}
    for d in plan.deployments:
        groups.setdefault(_key(d), []).append(d)
    return groups


def diff_plans(old: Plan, new: Plan) -> PlanDiff:
    before, after = _group(old), _group(new)
    lines = []
    for key in sorted(set(before) | set(after)):
        a, b = before.get(key, []), after.get(key, [])
        label = f"{key[1]} {key[2]} ({key[3]}, {key[4]})"
        mb = sum(d.cost_per_month for d in a)
        ma = sum(d.cost_per_month for d in b)
        shapes_a, shapes_b = sorted(_shape(d) for d in a), sorted(_shape(d) for d in b)
        if not a:
            change, details = "added", shapes_b
        elif not b:
            change, details = "removed", shapes_a
        elif shapes_a != shapes_b:
            change, details = "changed", [f"{'; '.join(shapes_a)} -> {'; '.join(shapes_b)}"]
        else:
            change, details = ("changed" if abs(ma - mb) > 0.005 else "unchanged"), []
        lines.append(DiffLine(workload=key[0], deployment=label, change=change, monthly_before=round(mb, 2),
                              monthly_after=round(ma, 2), delta=round(ma - mb, 2), details=details))
    tb, ta = old.total_cost_per_month or 0.0, new.total_cost_per_month or 0.0
    return PlanDiff(currency_before=old.currency, currency_after=new.currency, total_monthly_before=round(tb, 2),
                    total_monthly_after=round(ta, 2), total_delta=round(ta - tb, 2), lines=lines)


def diff_json(d: PlanDiff) -> str:
    data: dict[str, Any] = d.model_dump(mode="json")
    return json.dumps(data, indent=2) + "\n"


def diff_markdown(d: PlanDiff) -> str:
    c = d.currency_after
    note = "" if d.currency_before == d.currency_after else \
        f" (before in {d.currency_before}, after in {d.currency_after}: convert before comparing)"
    out = [f"### gpuopt plan diff: {d.total_delta:+,.2f} {c}/month{note}", "",
           f"Total per month: {d.total_monthly_before:,.2f} -> {d.total_monthly_after:,.2f} {c} "
           f"({d.total_delta:+,.2f})", "",
           "| workload | deployment | change | before/month | after/month | delta | details |",
           "|---|---|---|---|---|---|---|"]
    for line in d.lines:
        out.append(f"| {line.workload} | {line.deployment} | {line.change} | {line.monthly_before:,.2f} | "
                   f"{line.monthly_after:,.2f} | {line.delta:+,.2f} | {'; '.join(line.details)} |")
    return "\n".join(out) + "\n"


def diff_table(d: PlanDiff) -> str:
    import io

    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"Plan diff: {d.total_monthly_before:,.2f} -> {d.total_monthly_after:,.2f} "
                        f"{d.currency_after}/month ({d.total_delta:+,.2f})", title_justify="left")
    for col in ("workload", "deployment", "change", "before/month", "after/month", "delta", "details"):
        table.add_column(col, justify="right" if col in ("before/month", "after/month", "delta") else "left")
    for line in d.lines:
        table.add_row(line.workload, line.deployment, line.change, f"{line.monthly_before:,.2f}",
                      f"{line.monthly_after:,.2f}", f"{line.delta:+,.2f}", "; ".join(line.details))
    buf = io.StringIO()
    Console(file=buf, width=160, color_system=None, markup=False).print(table)
    return buf.getvalue()
