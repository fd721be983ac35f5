"""Charts of a plan as inline SVG (matplotlib's SVG backend, text kept as text, no timestamps: the same plan
gives the same bytes)."""

from __future__ import annotations

import io
from collections import defaultdict
from typing import TYPE_CHECKING

from gpuopt.planner.plan import Plan
from gpuopt.text import printable

if TYPE_CHECKING:
    from gpuopt.planner.capacity import CapacityPlan

KIND_COLORS = {"on-demand": "#3b6ea5", "spot": "#e39b3b", "community": "#8c8c8c"}
COMMITMENT_COLORS = ("#4f9e5b", "#b55d9e", "#2a9d8f", "#9c6644", "#6d597a")

MEMORY_PARTS = (("weights_gib", "weights"), ("activation_gib", "activation"), ("non_torch_gib", "non-torch"),
                ("cuda_graph_gib", "CUDA graphs"), ("kv_cache_gib", "KV cache"), ("free_gib", "outside budget"))


def _svg(fig: object) -> str:
    import matplotlib.pyplot as plt

    buf = io.StringIO()
    fig.savefig(buf, format="svg", metadata={"Date": None}, bbox_inches="tight")  # type: ignore[attr-defined]
    plt.close(fig)  # type: ignore[arg-type]
    text = buf.getvalue()
    return text[text.index("<svg"):]


def _setup() -> None:
    import matplotlib

    matplotlib.use("Agg")
    # text.parse_math off: a `$` in a user's label (a SKU, a workload name) is text, not mathtext to parse
    matplotlib.rcParams.update({"svg.fonttype": "none", "svg.hashsalt": "gpuopt", "font.size": 9,
                                "text.parse_math": False})


def cost_by_provider_gpu(plan: Plan) -> str:
    _setup()
    import matplotlib.pyplot as plt

    totals: dict[str, float] = defaultdict(float)
    for line in plan.instances:
        totals[printable(f"{line.provider} {line.gpu}")] += line.cost_per_hour
    labels = sorted(totals)
    fig, ax = plt.subplots(figsize=(6.4, 0.5 + 0.45 * max(len(labels), 1)))
    ax.barh(labels, [totals[k] for k in labels], color="#3b6ea5")
    ax.set_xlabel(f"{plan.currency} per hour")
    ax.set_title("Cost by provider and GPU")
    ax.invert_yaxis()
    return _svg(fig)


def memory_per_gpu(plan: Plan) -> str:
    _setup()
    import matplotlib.pyplot as plt

    labels = [f"{printable(d.workload)}\n{printable(d.sku)} TP{d.tensor_parallel}" for d in plan.deployments]
    fig, ax = plt.subplots(figsize=(6.4, 0.6 + 0.6 * max(len(labels), 1)))
    left = [0.0] * len(labels)
    colors = ("#3b6ea5", "#e39b3b", "#8c8c8c", "#b55d9e", "#4f9e5b", "#d9d9d9")
    for (field, name), color in zip(MEMORY_PARTS, colors, strict=True):
        values = [max(0.0, getattr(d.memory, field)) for d in plan.deployments]
        ax.barh(labels, values, left=left, label=name, color=color)
        left = [a + b for a, b in zip(left, values, strict=True)]
    ax.set_xlabel("GiB per GPU (most loaded GPU of a replica)")
    ax.set_title("Memory per GPU")
    ax.invert_yaxis()
    ax.legend(loc="lower right", fontsize=7)
    return _svg(fig)


def cost_vs_tpot(plan: Plan) -> str:
    _setup()
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 3.6))
    worst = max(((d.at_planned_load or d.predicted).tpot_ms for d in plan.deployments), default=None)
    if plan.total_cost_per_hour is not None and worst is not None:
        ax.scatter([worst], [plan.total_cost_per_hour], s=80, color="#c0392b", label="plan", zorder=3)
    alts = [a for a in plan.alternatives if a.total_cost_per_hour is not None and a.max_tpot_ms is not None]
    if alts:
        ax.scatter([a.max_tpot_ms or 0.0 for a in alts], [a.total_cost_per_hour or 0.0 for a in alts],
                   color="#3b6ea5", label="alternatives")
        for a in alts:
            ax.annotate(printable(a.label), (a.max_tpot_ms or 0.0, a.total_cost_per_hour or 0.0), fontsize=7,
                        xytext=(4, 2), textcoords="offset points")
    ax.set_xlabel("predicted TPOT at planned load, ms (worst deployment)")
    ax.set_ylabel(f"{plan.currency} per hour")
    ax.set_title("Cost vs predicted TPOT")
    ax.legend(fontsize=7)
    return _svg(fig)


def capacity_cost(plan: CapacityPlan) -> str:
    """Cost per period stacked by price kind (commitments amortised over the periods they run)."""
    _setup()
    import matplotlib.pyplot as plt

    labels = [printable(p.period) for p in plan.periods]
    kinds = sorted({k for p in plan.periods for k in p.cost_by_price_kind})
    fig, ax = plt.subplots(figsize=(6.4, 3.6))
    bottom = [0.0] * len(labels)
    others = iter(COMMITMENT_COLORS * 4)
    for kind in kinds:
        values = [p.cost_by_price_kind.get(kind, 0.0) for p in plan.periods]
        ax.bar(labels, values, bottom=bottom, label=printable(kind), color=KIND_COLORS.get(kind) or next(others))
        bottom = [a + b for a, b in zip(bottom, values, strict=True)]
    ax.set_ylabel(f"{plan.currency} per period")
    ax.set_title("Cost per period by price kind")
    ax.legend(fontsize=7)
    return _svg(fig)


def capacity_vs_demand(plan: CapacityPlan) -> str:
    """Per workload: the planned replicas' capacity (before headroom) against the demand, per period."""
    _setup()
    import matplotlib.pyplot as plt

    labels = [printable(p.period) for p in plan.periods]
    workloads = sorted({w for p in plan.periods for w in p.demand})
    fig, axes = plt.subplots(len(workloads) or 1, 1, figsize=(6.4, 0.8 + 2.2 * max(len(workloads), 1)),
                             squeeze=False)
    for ax, w in zip(axes[:, 0], workloads, strict=False):
        ax.plot(labels, [p.demand.get(w, 0.0) for p in plan.periods], marker="o", color="#c0392b", label="demand")
        ax.step(labels, [p.capacity.get(w, 0.0) for p in plan.periods], where="mid", color="#3b6ea5",
                label="capacity")
        ax.set_title(printable(w))
        ax.set_ylabel(plan.demand_units.get(w, "load").replace("_", " "))
        ax.legend(fontsize=7)
    fig.tight_layout()
    return _svg(fig)
