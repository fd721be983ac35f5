"""Where refreshed prices and rates live: the user's cache folder, never the package."""

from __future__ import annotations

import os
from pathlib import Path


def cache_dir() -> Path:
    """$GPUOPT_CACHE_DIR, else $XDG_CACHE_HOME/gpuopt (default ~/.cache/gpuopt)."""
    if os.environ.get("GPUOPT_CACHE_DIR"):
        return Path(os.environ["GPUOPT_CACHE_DIR"])
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "gpuopt"
