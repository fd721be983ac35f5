"""Shared test helpers. Golden files are regenerated with: GPUOPT_UPDATE_GOLDEN=1 pytest (review the diff)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

GOLDEN = Path(__file__).parent / "golden"


def check_golden(name: str, actual: str) -> None:
    path = GOLDEN / name
    if os.environ.get("GPUOPT_UPDATE_GOLDEN"):
        path.write_text(actual, encoding="utf-8")
    if not path.exists():
        pytest.fail(f"golden file {path} missing: run GPUOPT_UPDATE_GOLDEN=1 pytest and review it")
    assert actual == path.read_text(encoding="utf-8")
