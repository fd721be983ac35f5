"""Refreshers: fetch current prices and write catalog rows (the pinned columns) to the user's cache folder."""

from __future__ import annotations

import csv
import os
import tempfile
from collections.abc import Iterable
from pathlib import Path

from gpuopt.pricing.catalog import cache_dir
from gpuopt.pricing.columns import CATALOG_COLUMNS


def write_cache(provider: str, rows: Iterable[dict[str, str]], folder: Path | None = None) -> Path:
    """Write rows atomically (temp file + rename) to <cache>/catalog-<provider>.csv; never into the package."""
    target_dir = folder or cache_dir()
    target_dir.mkdir(parents=True, exist_ok=True)
    target = target_dir / f"catalog-{provider}.csv"
    ordered = sorted(rows, key=lambda r: tuple(r.get(c, "") for c in ("service", "sku", "region", "price_kind")))
    fd, tmp = tempfile.mkstemp(prefix=f".catalog-{provider}-", suffix=".csv", dir=target_dir)
    try:
        with os.fdopen(fd, "w", newline="", encoding="utf-8") as fh:
            writer = csv.DictWriter(fh, fieldnames=CATALOG_COLUMNS, extrasaction="ignore", lineterminator="\n")
            writer.writeheader()
            writer.writerows(ordered)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return target
