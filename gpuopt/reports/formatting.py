"""Number formatting shared by the renderers."""

from __future__ import annotations


def money(value: float | None, currency: str, digits: int = 2) -> str:
    """`1,234.50 USD`; `-` when there is no value."""
    return "-" if value is None else f"{value:,.{digits}f} {currency}"
