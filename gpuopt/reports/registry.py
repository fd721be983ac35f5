"""The one registry of report formats: for each kind of document, format name -> renderer.

`solve` and `report` render a Plan, `plan` a CapacityPlan, `diff` a PlanDiff; each command takes its
`--format` choices from `formats(kind)` and renders through `render_*` below, so a format is added in one
place (a row here and its function) and every command that shows that document offers it.

A renderer is named by module and function, not imported: the CLI builds its `--format` choices at import
time, and importing rich, pandas or matplotlib for that would slow `gpuopt --help` and every command that
never renders that format. The module is imported on first use.

This module imports nothing of gpuopt at run time (the document types are for the type checker only).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from importlib import import_module
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from gpuopt.planner.capacity import CapacityPlan
    from gpuopt.planner.plan import Plan
    from gpuopt.reports.diff import PlanDiff

DocumentKind = Literal["plan", "capacity", "diff"]
"""plan: a solved Plan (solve, report); capacity: a CapacityPlan (plan); diff: a PlanDiff (diff)."""


@dataclass(frozen=True)
class Renderer:
    """Where a renderer lives: `module.function(document) -> str`."""

    module: str
    function: str

    def load(self) -> Callable[[Any], str]:
        renderer: Callable[[Any], str] = getattr(import_module(self.module), self.function)
        return renderer


_PKG = "gpuopt.reports."
REGISTRY: Mapping[DocumentKind, Mapping[str, Renderer]] = {
    # the order is the order of the `--format` choices in --help
    "plan": {
        "table": Renderer(_PKG + "plan_table", "render_table"),
        "json": Renderer(_PKG + "plan_json", "render_json"),
        "markdown": Renderer(_PKG + "markdown", "render_markdown"),
        "html": Renderer(_PKG + "html", "render_html"),
        "csv": Renderer(_PKG + "tabular", "render_csv"),
        "focus": Renderer(_PKG + "tabular", "render_focus"),
    },
    "capacity": {
        "table": Renderer(_PKG + "capacity", "render_capacity_table"),
        "json": Renderer(_PKG + "capacity", "render_capacity_json"),
        "markdown": Renderer(_PKG + "capacity", "render_capacity_markdown"),
        "html": Renderer(_PKG + "capacity", "render_capacity_html"),
        "csv": Renderer(_PKG + "capacity", "render_capacity_csv"),
        "focus": Renderer(_PKG + "capacity", "render_capacity_focus"),
    },
    "diff": {
        "table": Renderer(_PKG + "diff", "diff_table"),
        "markdown": Renderer(_PKG + "diff", "diff_markdown"),
        "json": Renderer(_PKG + "diff", "diff_json"),
    },
}


def formats(kind: DocumentKind) -> tuple[str, ...]:
    """The `--format` choices of a document kind."""
    return tuple(REGISTRY[kind])


def renderer(kind: DocumentKind, fmt: str) -> Callable[[Any], str]:
    """The renderer of `fmt` for a document kind (KeyError naming the kind's formats when there is none;
    the CLI's click.Choice keeps users from reaching it)."""
    try:
        entry = REGISTRY[kind][fmt]
    except KeyError:
        raise KeyError(f"no {fmt!r} renderer for a {kind} (formats: {', '.join(formats(kind))})") from None
    return entry.load()


def render_plan(plan: Plan, fmt: str) -> str:
    return renderer("plan", fmt)(plan)


def render_capacity_plan(plan: CapacityPlan, fmt: str) -> str:
    return renderer("capacity", fmt)(plan)


def render_diff(diff: PlanDiff, fmt: str) -> str:
    return renderer("diff", fmt)(diff)
