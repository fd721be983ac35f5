"""Charts of a plan as inline SVG (matplotlib's SVG backend, text kept as text, no timestamps: the same plan
gives the same bytes)."""

from __future__ import annotations

import io
from collections import defaultdict

from gpuopt.planner.plan import Plan

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
    matplotlib.rcParams.update({"svg.fonttype": "none", "svg.hashsalt": "gpuopt", "font.size": 9})


def cost_by_provider_gpu(plan: Plan) -> str:
    _setup()
    import matplotlib.pyplot as plt

    totals: dict[str, float] = defaultdict(float)
    for line in plan.instances:
        totals[f"{line.provider} {line.gpu}"] += line.cost_per_hour
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

    labels = [f"{d.workload}\n{d.sku} TP{d.tensor_parallel}" for d in plan.deployments]
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
            ax.annotate(a.label, (a.max_tpot_ms or 0.0, a.total_cost_per_hour or 0.0), fontsize=7,
                        xytext=(4, 2), textcoords="offset points")
    ax.set_xlabel("predicted TPOT at planned load, ms (worst deployment)")
    ax.set_ylabel(f"{plan.currency} per hour")
    ax.set_title("Cost vs predicted TPOT")
    ax.legend(fontsize=7)
    return _svg(fig)
