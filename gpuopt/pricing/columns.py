"""The catalog's pinned column list, shared by the loader, the validator and every refresher.

A refresher that writes rows writes exactly these columns, in this order; the loader rejects files
that lack any of the required ones.
"""

from __future__ import annotations

from collections.abc import Mapping

from gpuopt.vocabulary import CURRENCIES, PRICE_KINDS, PROVIDERS

CATALOG_COLUMNS: tuple[str, ...] = (
    "provider", "service", "sku", "region", "gpu", "gpu_count", "gpu_mem_gib", "vcpus", "ram_gib",
    "interconnect", "price_per_hour", "currency", "price_kind", "source", "as_of",
    # extensions: commitment term, billing granularity, free-text provenance notes
    "term_months", "billing", "notes",
    # why `interconnect` holds what it holds ("source", or "inferred: ..."); data-centre countries ("US;CA")
    # of a row sold as global or without a stated region (see pricing/regions.py)
    "interconnect_basis", "countries",
)
HISTORY_COLUMNS: tuple[str, ...] = (*CATALOG_COLUMNS, "superseded_by_as_of")
OFFERING_KEY: tuple[str, ...] = ("provider", "service", "sku", "region", "price_kind")


def offering_key(row: Mapping[str, str]) -> tuple[str, ...]:
    """The offering a catalog row prices (OFFERING_KEY's values; a missing one is "")."""
    return tuple(row.get(c, "") for c in OFFERING_KEY)

OVERLAY_MIN_COLUMNS: tuple[str, ...] = ("provider", "sku", "region", "price_kind", "price_per_hour", "currency")


__all__ = ["CATALOG_COLUMNS", "CURRENCIES", "HISTORY_COLUMNS", "OFFERING_KEY", "OVERLAY_MIN_COLUMNS", "PRICE_KINDS",
           "PROVIDERS", "offering_key"]
