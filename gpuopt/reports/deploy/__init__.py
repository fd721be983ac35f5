"""Deployment artifacts from a plan: one ready-to-apply file per deployment, for the target a team runs.

A plan ends at a `vllm serve` line; nobody deploys from that. These renderers turn each planned deployment
into the artifact of one target (Kubernetes, SkyPilot, Alibaba PAI-EAS, Docker Compose; deployments that share
the plan's machines go on those machines together), carrying the plan's id, cost and the SLO it was sized for
as labels, so a FinOps review can trace a running service back to its plan. They read the typed Plan only
(reports layer); a target that cannot express a deployment refuses it with the reason (exit 2) instead of
writing something that would not run.
"""

from __future__ import annotations

from collections.abc import Callable

from gpuopt.planner.plan import Plan
from gpuopt.reports.deploy.common import Artifact, DeployOptions

Renderer = Callable[[Plan, DeployOptions], list[Artifact]]


def _k8s(plan: Plan, opts: DeployOptions) -> list[Artifact]:
    from gpuopt.reports.deploy.k8s import render_k8s

    return render_k8s(plan, opts)


def _skypilot(plan: Plan, opts: DeployOptions) -> list[Artifact]:
    from gpuopt.reports.deploy.skypilot import render_skypilot

    return render_skypilot(plan, opts)


def _pai_eas(plan: Plan, opts: DeployOptions) -> list[Artifact]:
    from gpuopt.reports.deploy.pai_eas import render_pai_eas

    return render_pai_eas(plan, opts)


def _compose(plan: Plan, opts: DeployOptions) -> list[Artifact]:
    from gpuopt.reports.deploy.compose import render_compose

    return render_compose(plan, opts)


TARGETS: dict[str, Renderer] = {"k8s": _k8s, "skypilot": _skypilot, "pai-eas": _pai_eas, "compose": _compose}


def render_deploy(plan: Plan, target: str, opts: DeployOptions) -> list[Artifact]:
    return TARGETS[target](plan, opts)


__all__ = ["TARGETS", "Artifact", "DeployOptions", "render_deploy"]
