"""Option types shared by several commands."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from gpuopt.errors import InputError
from gpuopt.physics.architecture import ModelArchitecture
from gpuopt.physics.resolution import from_local_path, resolve_model
from gpuopt.planner.plan import DEFAULT_HEADROOM

F = TypeVar("F", bound=Callable[..., Any])


def placement_options(func: F) -> F:
    """--region, --provider, --currency, --headroom, --vllm-version: where and how `solve` and `plan` place
    replicas."""
    options = [
        click.option("--region", metavar="SEL",
                     help="Residency: cn, global, us, eu, apac, a region id or a comma list."),
        click.option("--provider", "providers", multiple=True, metavar="P", help="Allowed providers (repeatable)."),
        click.option("--currency", help="Report currency: USD or CNY."),
        click.option("--headroom", type=float, default=DEFAULT_HEADROOM, show_default=True,
                     help="Plan each replica for at most this fraction of its sustainable load."),
        click.option("--vllm-version", metavar="X.Y",
                     help="vLLM release whose defaults apply (default: newest known)."),
    ]
    for option in reversed(options):
        func = option(func)
    return func


def headroom_problems(headroom: float) -> list[str]:
    return [] if 0 < headroom <= 1 else [f"--headroom must be in (0, 1] (got {headroom})"]


def load_architecture(model: str | None, model_config: Path | None) -> ModelArchitecture:
    """--model ID or --model-config PATH (exactly one). An ID is a registry id, a local checkpoint path, or a
    Hugging Face repo id (cache, then Hub: see physics/resolution.py)."""
    if model and model_config:
        raise InputError("give either --model or --model-config, not both")
    if model_config:
        return from_local_path(model_config, name=model)  # with the quantization files beside it
    if not model:
        raise InputError("missing --model ID (or --model-config PATH)")
    return resolve_model(model)
