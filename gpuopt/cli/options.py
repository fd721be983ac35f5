"""Option types shared by several commands."""

from __future__ import annotations

from pathlib import Path

from gpuopt.errors import InputError
from gpuopt.optimizer.architecture import ModelArchitecture, from_hf_config, get_model


def load_architecture(model: str | None, model_config: Path | None) -> ModelArchitecture:
    """--model ID or --model-config PATH (exactly one)."""
    if model and model_config:
        raise InputError("give either --model or --model-config, not both")
    if model_config:
        return from_hf_config(model_config, name=model)
    if not model:
        raise InputError("missing --model ID (or --model-config PATH)")
    return get_model(model)
